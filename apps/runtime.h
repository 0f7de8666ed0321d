// Where a running engine lives (runtime directory, control socket, pid
// file) and how the CLI talks to it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "common/status.h"

namespace rocemu::app {

struct RuntimePaths {
  std::string dir;     // $ROCEMU_RUNTIME_DIR, else /run/rocemu (root) or $XDG_RUNTIME_DIR/rocemu or /tmp/rocemu-UID
  std::string socket;  // dir/rocemu.sock
  std::string pid;     // dir/rocemu.pid
  std::string log;     // dir/rocemu.log (daemon output)
};

RuntimePaths runtime_paths();
// The runtime directory, made or checked as common/private_files.h says.
Status ensure_runtime_dir(const RuntimePaths& p);
bool ensure_dir(const std::string& dir, std::string& err);

// A live engine, as the kernel names the process at the other end of its
// socket (not as the pid file says: a PID can be reused): its PID and a
// pidfd to wait for it or signal it, which no other process can answer.
class EngineProcess {
 public:
  EngineProcess(pid_t pid, int pidfd) : pid_(pid), pidfd_(pidfd) {}
  ~EngineProcess();
  EngineProcess(EngineProcess&& o) noexcept : pid_(o.pid_), pidfd_(std::exchange(o.pidfd_, -1)) {}
  EngineProcess& operator=(EngineProcess&&) = delete;
  pid_t pid() const { return pid_; }
  // True once it has exited, waiting at most `timeout_ms`.
  bool wait_exit(int timeout_ms) const;
  bool signal(int sig) const;

 private:
  pid_t pid_;
  int pidfd_;
};

// The live engine for these paths, if any; removes a stale pid file and
// socket left by an engine that died.
std::optional<EngineProcess> running_engine(const RuntimePaths& p);

// Sends one CLI command to the engine; returns 0 and its text, or an
// errno value (ECONNREFUSED/ENOENT: no engine; EACCES: the process that
// answers runs as another user, not root: the command is not sent) and a
// message.
int engine_command(const RuntimePaths& p, const std::vector<std::string>& words, std::string& out);

// Hands the engine the /dev/fuse descriptor of a mount on which it serves
// NODE's /sys/class/infiniband (nic/verbs/sysfs_fuse.h); 0 or an errno
// value and a message.
int engine_serve_sysfs(const RuntimePaths& p, const std::string& node, int fuse_fd, std::string& out);

// Path of librocemu-verbs.so: $ROCEMU_PROVIDER, else ../lib or (installed)
// ../lib/rocemu from this binary.
std::string provider_path();
std::string self_path();

}  // namespace rocemu::app
