#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nic/verbs/provider/provider.h"

namespace rocemu::provider {

namespace {

// How long a reply may take before the engine counts as hung: the
// context is then dead (a late reply would answer the wrong request) and
// calls fail with ETIMEDOUT instead of blocking the application forever.
int rpc_timeout_ms() {
  static const int ms = [] {
    const char* v = getenv(verbs::kRpcTimeoutEnv);
    const int n = v != nullptr ? atoi(v) : 0;
    return n > 0 ? n : verbs::kRpcTimeoutMs;
  }();
  return ms;
}

}  // namespace

int connect_engine(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

int call(Context& c, verbs::Request& req, verbs::Reply& rep, const std::vector<int>& fds_in, std::vector<int>* fds_out) {
  return call(c.sock, c.rpc, c.dead, req, rep, fds_in, fds_out);
}

int call(int sock, std::mutex& rpc, std::atomic<bool>& dead, verbs::Request& req, verbs::Reply& rep,
         const std::vector<int>& fds_in, std::vector<int>* fds_out) {
  std::lock_guard lock(rpc);
  // Checked under the lock: a call that timed out while this one waited
  // for the lock left its late reply on the socket, which is not ours.
  if (dead.load(std::memory_order_relaxed)) return EIO;
  req.version = verbs::kProtocolVersion;
  iovec iov{&req, sizeof req};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  char cbuf[CMSG_SPACE(sizeof(int) * 4)];
  if (!fds_in.empty()) {
    msg.msg_control = cbuf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds_in.size());
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * fds_in.size());
    std::memcpy(CMSG_DATA(cm), fds_in.data(), sizeof(int) * fds_in.size());
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != ssize_t(sizeof req)) {
    dead = true;
    return EIO;
  }
  iovec riov{&rep, sizeof rep};
  msghdr rmsg{};
  rmsg.msg_iov = &riov;
  rmsg.msg_iovlen = 1;
  char rbuf[CMSG_SPACE(sizeof(int) * 4)];
  rmsg.msg_control = rbuf;
  rmsg.msg_controllen = sizeof rbuf;
  pollfd p{sock, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&p, 1, rpc_timeout_ms());
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) {
    dead = true;
    shutdown(sock, SHUT_RDWR);  // a late reply goes nowhere; the engine sees us gone
    return ETIMEDOUT;
  }
  do {
    n = recvmsg(sock, &rmsg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n != ssize_t(sizeof rep)) {
    dead = true;
    return EIO;
  }
  for (cmsghdr* cm = CMSG_FIRSTHDR(&rmsg); cm != nullptr; cm = CMSG_NXTHDR(&rmsg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int f;
      std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
      if (fds_out != nullptr) fds_out->push_back(f);
      else close(f);
    }
  }
  return rep.err;
}

void ring_doorbell(Context& c, uint32_t entry) {
  verbs::DoorbellPage* db = c.db;
  while (db->lock.exchange(1, std::memory_order_acquire) != 0) {
    __builtin_ia32_pause();
  }
  const uint32_t p = db->producer.v.load(std::memory_order_relaxed);
  if (p - db->consumer.v.load(std::memory_order_acquire) >= verbs::DoorbellPage::kEntries) {
    db->rescan.store(1, std::memory_order_release);  // the engine looks at every QP
  } else {
    db->entries[p % verbs::DoorbellPage::kEntries] = entry;
    db->producer.v.store(p + 1, std::memory_order_release);
  }
  db->lock.store(0, std::memory_order_release);
  // Pairs with the engine's store of engine_sleeping before its last look.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (db->engine_sleeping.load(std::memory_order_seq_cst) != 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(c.wake_fd, &one, sizeof one);
  }
}

bool engine_gone(Context& c) {
  if (c.dead.load(std::memory_order_relaxed)) return true;
  pollfd p{c.sock, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) c.dead = true;
  return c.dead.load(std::memory_order_relaxed);
}

void* map_fd(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace rocemu::provider
