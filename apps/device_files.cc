#include "apps/device_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nic/verbs/device_attrs.h"

namespace rocemu::app {
namespace {

Status sys_error(const std::string& what) { return Status::error(what + ": " + std::strerror(errno)); }

Status make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + part);
  }
  return {};
}

struct Entry {
  std::string name;
  mode_t mode;
};

// Covers `dir` with a tmpfs holding what it held: each directory, device,
// socket or file bind-mounted from the original (reached through an fd
// opened before the cover), each symlink made again. `added` names the
// entries the caller adds itself (left out if present).
Status shadow_dir(const std::string& dir, const std::vector<std::string>& added, unsigned long mount_flags) {
  const int old = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (old < 0) return sys_error("open " + dir);
  std::vector<Entry> entries;
  {
    const int list_fd = openat(old, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = list_fd >= 0 ? fdopendir(list_fd) : nullptr;
    if (d == nullptr) {
      if (list_fd >= 0) close(list_fd);
      close(old);
      return sys_error("list " + dir);
    }
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      bool skip = false;
      for (const auto& a : added) skip = skip || a == name;
      struct stat st {};
      if (skip || fstatat(old, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      entries.push_back({name, st.st_mode});
    }
    closedir(d);
  }
  if (mount("tmpfs", dir.c_str(), "tmpfs", mount_flags, "mode=0755") != 0) {
    const Status s = sys_error("mount a tmpfs on " + dir);
    close(old);
    return s;
  }
  const std::string from = "/proc/self/fd/" + std::to_string(old) + "/";
  for (const Entry& e : entries) {
    const std::string src = from + e.name;
    const std::string dst = dir + "/" + e.name;
    if (S_ISLNK(e.mode)) {
      char target[4096];
      const ssize_t n = readlinkat(old, e.name.c_str(), target, sizeof target - 1);
      if (n < 0) continue;  // gone meanwhile
      target[n] = '\0';
      if (symlink(target, dst.c_str()) != 0) {
        const Status st = sys_error("symlink " + dst);
        close(old);
        return st;
      }
      continue;
    }
    if (S_ISDIR(e.mode)) {
      if (mkdir(dst.c_str(), e.mode & 07777) != 0) {
        const Status st = sys_error("mkdir " + dst);
        close(old);
        return st;
      }
    } else {
      const int f = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (f < 0) {
        const Status st = sys_error("create " + dst);
        close(old);
        return st;
      }
      close(f);
    }
    if (mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      if (errno == ENOENT) continue;  // gone meanwhile
      const Status s = sys_error("bind " + dir + "/" + e.name);
      close(old);
      return s;
    }
  }
  close(old);
  return {};
}

bool under(const std::string& path, const char* root) {
  const size_t n = std::strlen(root);
  return path.compare(0, n, root) == 0 && path.size() > n && path[n] == '/';
}

Status lay_out(const verbs::SysfsFile& f) {
  if (!under(f.path, verbs::kSysfsIbRoot) && !under(f.path, verbs::kSysfsVerbsRoot) && !under(f.path, verbs::kDevIbRoot))
    return Status::error("refusing a device file outside the device trees: " + f.path);
  const size_t slash = f.path.rfind('/');
  if (Status s = make_dirs(f.path.substr(0, slash)); !s.ok()) return s;
  if (f.kind == verbs::SysfsFile::Kind::kCharDevice) {
    // The node is made here from the fixed uverbs numbers, never from what
    // the engine says: a root exec must not mknod an arbitrary device.
    const std::string want = std::to_string(verbs::kUverbsMajor) + ":" + std::to_string(verbs::kUverbsMinor);
    if (f.path != std::string(verbs::kDevIbRoot) + "/" + verbs::kUverbsName || f.content != want)
      return Status::error("refusing device " + f.path + " " + f.content + " (only " + verbs::kDevIbRoot + "/" +
                           verbs::kUverbsName + " " + want + ")");
    if (mknod(f.path.c_str(), S_IFCHR | 0666, makedev(verbs::kUverbsMajor, verbs::kUverbsMinor)) != 0)
      return sys_error("mknod " + f.path);
    chmod(f.path.c_str(), 0666);  // past the umask, as udev makes uverbs nodes
    return {};
  }
  const int fd = open(f.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return sys_error("create " + f.path);
  const bool ok = write(fd, f.content.data(), f.content.size()) == ssize_t(f.content.size());
  if (under(f.path, verbs::kDevIbRoot)) fchmod(fd, 0666);  // as udev makes the rdma_cm node
  close(fd);
  return ok ? Status{} : sys_error("write " + f.path);
}

// A test knob: the step named by ROCEMU_DEVICE_FILES_FAIL_AT fails (EIO).
struct FailAt {
  std::string step;
  bool operator()(const char* name) const {
    if (step != name) return false;
    errno = EIO;
    return true;
  }
};

enum class Live { kServed, kNoFuse, kRefused };

// /sys/class/infiniband as a FUSE mount the engine serves; nothing mounted
// (kNoFuse, or kRefused with `why`) where FUSE is missing or the engine
// does not take the mount.
Result<Live> mount_live_tree(const ServeSysfs& serve, const FailAt& fail, std::string& why) {
  const int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse < 0) return Live::kNoFuse;
  if (mkdir(verbs::kSysfsIbRoot, 0755) != 0 && errno != EEXIST) {
    const Status s = sys_error(std::string("mkdir ") + verbs::kSysfsIbRoot);
    close(fuse);
    return s;
  }
  const std::string opts = "fd=" + std::to_string(fuse) + ",rootmode=40755,user_id=" + std::to_string(getuid()) +
                           ",group_id=" + std::to_string(getgid()) + ",default_permissions,allow_other";
  if (mount("rocemu", verbs::kSysfsIbRoot, "fuse.rocemu", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
            opts.c_str()) != 0) {
    close(fuse);
    return Live::kNoFuse;
  }
  const Status served = fail("serve") ? sys_error("forced") : serve(fuse);
  close(fuse);  // the engine holds its own copy now
  if (served.ok()) return Live::kServed;
  // The engine did not take it (at its mount limit, gone, a timeout): the
  // static snapshot goes where the mount was.
  why = "the engine does not serve " + std::string(verbs::kSysfsIbRoot) + " (" + served.message() + ")";
  if (umount2(verbs::kSysfsIbRoot, MNT_DETACH) != 0) return sys_error(std::string("umount ") + verbs::kSysfsIbRoot);
  return Live::kRefused;
}

// The steps inside the new namespace.
Result<DeviceFiles> build_namespace(const std::vector<verbs::SysfsFile>& files, const ServeSysfs& serve,
                                    const FailAt& fail, std::string& why) {
  // Nothing done here may reach the rest of the system.
  if (fail("private") || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return sys_error("make / private");
  if (fail("shadow-sys")) return sys_error("shadow /sys/class");
  if (Status s = shadow_dir("/sys/class", {"infiniband", "infiniband_verbs"}, MS_NOSUID | MS_NODEV | MS_NOEXEC);
      !s.ok())
    return s;
  if (fail("shadow-dev")) return sys_error("shadow /dev");
  if (Status s = shadow_dir("/dev", {"infiniband"}, MS_NOSUID); !s.ok()) return s;
  auto live = mount_live_tree(serve, fail, why);
  if (!live.ok()) return live.status();
  const bool served = live.value() == Live::kServed;
  if (fail("lay-out")) return sys_error("lay out the device files");
  for (const verbs::SysfsFile& f : files) {
    if (served && under(f.path, verbs::kSysfsIbRoot)) continue;  // the engine serves those
    if (Status s = lay_out(f); !s.ok()) return s;
  }
  if (live.value() == Live::kNoFuse) why = "no FUSE (/dev/fuse)";
  return served ? DeviceFiles::kLive : DeviceFiles::kSnapshot;
}

}  // namespace

DevicePlacement enter_device_namespace(const std::vector<verbs::SysfsFile>& files, const ServeSysfs& serve) {
  const char* knob = std::getenv("ROCEMU_DEVICE_FILES_FAIL_AT");
  const FailAt fail{knob != nullptr ? knob : ""};
  // Where to come back to if a step fails.
  const int saved_ns = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
  if (saved_ns < 0) return {DeviceFiles::kFailed, std::string("open /proc/self/ns/mnt: ") + std::strerror(errno)};
  const int saved_cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fail("unshare") || unshare(CLONE_NEWNS) != 0) {
    const int e = errno;
    close(saved_ns);
    if (saved_cwd >= 0) close(saved_cwd);
    if (e == EPERM) return {DeviceFiles::kNotPermitted, ""};
    return {DeviceFiles::kFailed, std::string("unshare(CLONE_NEWNS): ") + std::strerror(e)};
  }
  DevicePlacement out;
  auto built = build_namespace(files, serve, fail, out.why);
  if (built.ok()) {
    out.kind = built.value();
  } else {
    // Back to the namespace we came from; the new one ends with us leaving it.
    out.kind = DeviceFiles::kFailed;
    out.why = built.status().message();
    if (setns(saved_ns, CLONE_NEWNS) != 0) {
      std::fprintf(stderr, "rocemu exec: cannot go back to the original mount namespace: %s\n", std::strerror(errno));
      std::_Exit(1);  // never run the program in a half-built namespace
    }
    // setns moved us to its root: back to where we were (or stay at /).
    if (saved_cwd >= 0) [[maybe_unused]] const int r = fchdir(saved_cwd);
  }
  close(saved_ns);
  if (saved_cwd >= 0) close(saved_cwd);
  return out;
}

}  // namespace rocemu::app
