#include "apps/runtime.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/private_files.h"
#include "nic/verbs/protocol.h"

namespace rocemu::app {

RuntimePaths runtime_paths() {
  RuntimePaths p;
  if (const char* d = std::getenv("ROCEMU_RUNTIME_DIR"); d != nullptr && *d != '\0') {
    p.dir = d;
  } else if (geteuid() == 0) {
    p.dir = "/run/rocemu";
  } else if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x != '\0') {
    p.dir = std::string(x) + "/rocemu";
  } else {
    p.dir = "/tmp/rocemu-" + std::to_string(geteuid());
  }
  p.socket = p.dir + "/rocemu.sock";
  p.pid = p.dir + "/rocemu.pid";
  p.log = p.dir + "/rocemu.log";
  return p;
}

Status ensure_runtime_dir(const RuntimePaths& p) { return ensure_private_dir(p.dir); }

bool ensure_dir(const std::string& dir, std::string& err) {
  if (mkdir(dir.c_str(), 0700) == 0 || errno == EEXIST) {
    struct stat st{};
    if (stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
  }
  err = dir + ": " + std::strerror(errno);
  return false;
}

namespace {

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; Debian 12's headers predate it
#endif

int rpc_timeout_ms() {
  const char* v = std::getenv(verbs::kRpcTimeoutEnv);
  const int n = v != nullptr ? std::atoi(v) : 0;
  return n > 0 ? n : verbs::kRpcTimeoutMs;
}

// A connection to the engine's socket, with the kernel's word for who
// listens on it; -1 and an errno value (and `out` says why) if nothing
// does or it is not an engine of this user or root.
int connect_engine(const RuntimePaths& p, std::string& out, ucred* who = nullptr) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  // A hung engine gets the provider's RPC timeout, not a CLI that hangs
  // (connect waits too, once the backlog of a hung engine is full).
  const int ms = rpc_timeout_ms();
  const timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", p.socket.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    if (e == EAGAIN || e == EWOULDBLOCK) {
      out = "the engine at " + p.socket + " takes no connections (hung? its log: " + p.log + ")";
      return -ETIMEDOUT;
    }
    out = "no rocemu engine is running (socket " + p.socket + "); start one with `rocemu up`";
    return -e;
  }
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != geteuid() && cred.uid != 0)) {
    close(fd);
    out = "refusing the process at " + p.socket + ": it runs as uid " + std::to_string(cred.uid) +
          ", not this user or root";
    return -EACCES;
  }
  if (who != nullptr) *who = cred;
  return fd;
}

}  // namespace

EngineProcess::~EngineProcess() {
  if (pidfd_ >= 0) close(pidfd_);
}

bool EngineProcess::wait_exit(int timeout_ms) const {
  pollfd pf{pidfd_, POLLIN, 0};  // a pidfd is readable once its process has exited
  return poll(&pf, 1, timeout_ms) == 1;
}

bool EngineProcess::signal(int sig) const { return syscall(SYS_pidfd_send_signal, pidfd_, sig, nullptr, 0) == 0; }

std::optional<EngineProcess> running_engine(const RuntimePaths& p) {
  std::string out;
  ucred who{};
  const int fd = connect_engine(p, out, &who);
  // Another user's, or one that takes no connections (hung): not ours to
  // clean up.
  if (fd == -EACCES || fd == -ETIMEDOUT) return std::nullopt;
  if (fd >= 0) {
    // The pidfd from the socket itself where the kernel can; else from
    // the PID while the engine is known to be alive (connected).
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0 && errno == ENOPROTOOPT)
      pidfd = int(syscall(SYS_pidfd_open, who.pid, 0));  // a kernel before 6.5
    close(fd);
    // Is it an engine (its socket answers)? One that is alive but hung
    // is still there: its socket is not stale.
    if (const int e = pidfd >= 0 ? engine_command(p, {"ping"}, out) : ESRCH; e == 0 || e == ETIMEDOUT)
      return EngineProcess(who.pid, pidfd);
    if (pidfd >= 0) close(pidfd);
  }
  // Gone: what it left behind goes too.
  unlink(p.pid.c_str());
  unlink(p.socket.c_str());
  return std::nullopt;
}

int engine_command(const RuntimePaths& p, const std::vector<std::string>& words, std::string& out) {
  const int fd = connect_engine(p, out);
  if (fd < 0) return -fd;
  verbs::Request req;
  req.op = verbs::Op::kCli;
  size_t n = 0;
  for (const auto& w : words) {
    if (n + w.size() + 1 > verbs::kCliMax) {
      close(fd);
      out = "command too long";
      return E2BIG;
    }
    std::memcpy(req.u.cli.text + n, w.data(), w.size());
    n += w.size();
    req.u.cli.text[n++] = '\0';
  }
  req.u.cli.length = uint32_t(n);
  verbs::Reply rep;
  if (send(fd, &req, sizeof req, MSG_NOSIGNAL) != ssize_t(sizeof req) ||
      recv(fd, &rep, sizeof rep, 0) != ssize_t(sizeof rep)) {
    const bool hung = errno == EAGAIN || errno == EWOULDBLOCK;
    close(fd);
    if (hung) {
      out = "the engine did not answer within " + std::to_string(rpc_timeout_ms()) + " ms (hung? its log: " + p.log +
            "; " + verbs::kRpcTimeoutEnv + " sets the wait)";
      return ETIMEDOUT;
    }
    out = "the engine did not answer";
    return EIO;
  }
  std::string text(rep.u.cli.length, '\0');
  if (rep.u.cli.length > 0 && recv(fd, text.data(), text.size(), 0) != ssize_t(text.size())) {
    close(fd);
    out = "the engine's answer was cut short";
    return EIO;
  }
  close(fd);
  out = std::move(text);
  return rep.err;
}

int engine_serve_sysfs(const RuntimePaths& p, const std::string& node, int fuse_fd, std::string& out) {
  const int fd = connect_engine(p, out);
  if (fd < 0) return -fd;
  verbs::Request req;
  req.op = verbs::Op::kServeSysfs;
  std::snprintf(req.u.serve_sysfs.node, sizeof req.u.serve_sysfs.node, "%s", node.c_str());
  iovec iov{&req, sizeof req};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char cbuf[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof cbuf;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fuse_fd, sizeof(int));
  verbs::Reply rep;
  if (sendmsg(fd, &msg, MSG_NOSIGNAL) != ssize_t(sizeof req) || recv(fd, &rep, sizeof rep, 0) != ssize_t(sizeof rep)) {
    close(fd);
    out = "the engine did not answer";
    return EIO;
  }
  close(fd);
  if (rep.err != 0) out = std::strerror(rep.err);
  return rep.err;
}

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "rocemu";
  buf[n] = '\0';
  return buf;
}

std::string provider_path() {
  if (const char* p = std::getenv("ROCEMU_PROVIDER"); p != nullptr && *p != '\0') return p;
  std::string self = self_path();
  const std::string dir = self.substr(0, self.rfind('/'));
  // The build tree's layout, the installed one (a private library: not in
  // the linker's path), next to the binary.
  for (const std::string& cand :
       {dir + "/../lib/librocemu-verbs.so", dir + "/../lib/rocemu/librocemu-verbs.so", dir + "/librocemu-verbs.so"}) {
    char real[PATH_MAX];
    if (realpath(cand.c_str(), real) != nullptr && access(real, R_OK) == 0) return real;
  }
  return dir + "/../lib/librocemu-verbs.so";
}

}  // namespace rocemu::app
