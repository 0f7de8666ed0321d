// A raw client of the engine's control protocol (nic/verbs/protocol.h):
// requests exactly as the caller builds them, with no provider in between.
// The control-server tests, the control fuzzer and the hostile-client
// end-to-end test speak through it. No Catch macros: it runs on threads.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "nic/verbs/protocol.h"

namespace rocemu::test {

class ControlClient {
 public:
  ControlClient() : fd_(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) {}
  explicit ControlClient(const std::string& path) : ControlClient() { connect_to(path); }
  ~ControlClient() {
    if (fd_ >= 0) close(fd_);
  }
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  bool connect_to(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    return connected_;
  }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // Sends `bytes` as one message (a whole Request, or not), with an fd.
  bool send_raw(const void* bytes, size_t n, int pass_fd = -1, int flags = 0) {
    iovec iov{const_cast<void*>(bytes), n};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    char cbuf[CMSG_SPACE(sizeof(int))];
    if (pass_fd >= 0) {
      m.msg_control = cbuf;
      m.msg_controllen = sizeof cbuf;
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    return sendmsg(fd_, &m, MSG_NOSIGNAL | flags) == ssize_t(n);
  }
  bool send(const verbs::Request& req, int pass_fd = -1, int flags = 0) {
    return send_raw(&req, sizeof req, pass_fd, flags);
  }
  // The next reply, if one comes within `ms` (the server is another thread
  // or process). Descriptors that come with it go to `fds`, else are closed.
  std::optional<verbs::Reply> reply(int ms = 5000, std::vector<int>* fds = nullptr) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) != 1 || !(p.revents & POLLIN)) return std::nullopt;
    verbs::Reply rep;
    iovec iov{&rep, sizeof rep};
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    if (recvmsg(fd_, &m, MSG_CMSG_CLOEXEC) != ssize_t(sizeof rep)) return std::nullopt;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; i++) {
        int f;
        std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
        if (fds != nullptr) fds->push_back(f);
        else close(f);
      }
    }
    return rep;
  }
  std::optional<verbs::Reply> call(const verbs::Request& req, int pass_fd = -1, std::vector<int>* fds = nullptr) {
    if (!send(req, pass_fd)) return std::nullopt;
    return reply(5000, fds);
  }
  // Attaches to `node`; the reply (err 0 if attached).
  std::optional<verbs::Reply> hello(const std::string& node, std::vector<int>* fds = nullptr) {
    verbs::Request r = request(verbs::Op::kHello);
    std::snprintf(r.u.hello.node, sizeof r.u.hello.node, "%s", node.c_str());
    return call(r, -1, fds);
  }

  static verbs::Request request(verbs::Op op) {
    verbs::Request r;
    r.op = op;
    return r;
  }

 private:
  int fd_;
  bool connected_ = false;
};

}  // namespace rocemu::test
