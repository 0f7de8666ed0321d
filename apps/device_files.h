// The device files of an emulated NIC for a program run by `rocemu exec`:
// a private mount namespace in which /sys/class and /dev are tmpfs copies
// of themselves (every original entry bind-mounted back, symlinks made
// again) plus the NIC's tree (nic/verbs/sysfs_tree.h): /dev/infiniband
// and /sys/class/infiniband_verbs as files, /sys/class/infiniband as a
// FUSE mount the engine serves, so that reads are live. Nothing changes
// outside the namespace, and inside it only the added entries differ.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "nic/verbs/sysfs_tree.h"

namespace rocemu::app {

enum class DeviceFiles {
  kLive,          // the namespace is built, /sys/class/infiniband served by the engine
  kSnapshot,      // built, but /sys/class/infiniband holds the values at start (no FUSE,
                  // or the engine did not take the mount: `why` says)
  kNotPermitted,  // no CAP_SYS_ADMIN: nothing was changed
  kFailed,        // a step failed (`why`): the process is back in its own mount
                  // namespace, nothing changed; run the program without device files
};

struct DevicePlacement {
  DeviceFiles kind = DeviceFiles::kFailed;
  std::string why;  // for kSnapshot and kFailed
};

// Hands a /dev/fuse descriptor, mounted on /sys/class/infiniband, to the
// engine that serves it.
using ServeSysfs = std::function<Status(int fuse_fd)>;

// Moves the calling process (single-threaded) into a new mount namespace
// holding `files`. Never leaves it half-built: on any failure after the
// unshare the process goes back to the namespace it had (kFailed).
// Test knob: ROCEMU_DEVICE_FILES_FAIL_AT=<step> makes that step fail with
// EIO; the steps are those of kDeviceFileSteps.
DevicePlacement enter_device_namespace(const std::vector<verbs::SysfsFile>& files, const ServeSysfs& serve);

inline constexpr const char* kDeviceFileSteps[] = {"unshare", "private", "shadow-sys", "shadow-dev", "serve", "lay-out"};

}  // namespace rocemu::app
