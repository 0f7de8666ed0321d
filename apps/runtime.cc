#include "apps/runtime.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

std::optional<pid_t> running_engine(const RuntimePaths& p) {
  std::ifstream in(p.pid);
  pid_t pid = 0;
  if (in >> pid && pid > 0 && (kill(pid, 0) == 0 || errno == EPERM)) {
    // Alive; is it an engine of ours (its socket answers)?
    std::string out;
    if (engine_command(p, {"ping"}, out) == 0) return pid;
  }
  // Gone: what it left behind goes too.
  unlink(p.pid.c_str());
  unlink(p.socket.c_str());
  return std::nullopt;
}

int engine_command(const RuntimePaths& p, const std::vector<std::string>& words, std::string& out) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", p.socket.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    out = "no rocemu engine is running (socket " + p.socket + "); start one with `rocemu up`";
    return e;
  }
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
    close(fd);
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
