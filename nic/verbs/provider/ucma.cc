// /dev/infiniband/rdma_cm for Debian's unmodified librdmacm. There is no
// kernel ucma here, and no user-space character device, so the calls
// librdmacm makes on the device are answered in this library:
//  - open() of exactly /dev/infiniband/rdma_cm connects to the engine (a
//    connection per open, the channel) and returns an eventfd on which the
//    engine counts the channel's events: poll, epoll, fcntl(O_NONBLOCK)
//    and close-on-exec work on it as on the kernel's file;
//  - write() of a command (struct rdma_ucm_cmd_hdr + command) on such a
//    descriptor goes to the engine (nic/verbs/ucma.h), which answers it;
//    the response is copied where the command points, as copy_to_user;
//    GET_EVENT waits on the eventfd unless it is non-blocking;
//  - fstat() says it is a character device (librdmacm checks), read()
//    fails as on the kernel's file;
//  - dup(), dup2() and dup3() of the descriptor give another one on the
//    same channel, as on the kernel's file; close() of the last one ends
//    the channel, and so does closing it under dup2(), dup3(),
//    close_range() or closefrom(), after which the number is forgotten
//    (whatever the program opens there next is its own).
// Every other path and descriptor goes to the C library untouched.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>  // before the kernel header: glibc owns the in6 structs
#include <rdma/rdma_user_cm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "nic/verbs/provider/provider.h"
#include "nic/verbs/ucma_abi.h"

using namespace rocemu;

namespace ucma_interpose {

constexpr const char* kRdmaCmPath = "/dev/infiniband/rdma_cm";

int libc_close(int fd);

struct UcmaChannel {
  int events = -1;  // the eventfd the engine sent (each descriptor of the channel is one of its copies)
  int sock = -1;
  std::mutex rpc;
  std::atomic<bool> dead{false};
  uint32_t engine_id = 0;
  ~UcmaChannel() {
    if (sock >= 0) libc_close(sock);
  }
};

std::mutex g_channels_lock;
std::unordered_map<int, std::shared_ptr<UcmaChannel>> g_channels;  // by descriptor
std::atomic<int> g_channel_count{0};                               // fast path: none open

std::shared_ptr<UcmaChannel> channel_of(int fd) {
  if (g_channel_count.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard lock(g_channels_lock);
  auto it = g_channels.find(fd);
  return it == g_channels.end() ? nullptr : it->second;
}

// The channel descriptors in [first, last] were closed by the C library:
// forget them (a channel's connection closes with its last descriptor).
void forget_channels(int first, int last) {
  if (g_channel_count.load(std::memory_order_acquire) == 0) return;
  std::vector<std::shared_ptr<UcmaChannel>> released;  // let go after the lock
  std::lock_guard lock(g_channels_lock);
  for (auto it = g_channels.begin(); it != g_channels.end();) {
    if (it->first < first || it->first > last) {
      ++it;
      continue;
    }
    released.push_back(std::move(it->second));
    it = g_channels.erase(it);
    g_channel_count.fetch_sub(1, std::memory_order_release);
  }
}

// `copy` now refers to what `original` does (dup, dup2, dup3): whatever
// channel `copy` was is closed, and it is `original`'s channel if that is one.
void descriptor_copied(int original, int copy) {
  if (g_channel_count.load(std::memory_order_acquire) == 0) return;
  std::shared_ptr<UcmaChannel> released;  // let go after the lock
  std::lock_guard lock(g_channels_lock);
  auto from = g_channels.find(original);
  std::shared_ptr<UcmaChannel> ch = from == g_channels.end() ? nullptr : from->second;
  if (auto it = g_channels.find(copy); it != g_channels.end()) {
    released = std::move(it->second);
    g_channels.erase(it);
    g_channel_count.fetch_sub(1, std::memory_order_release);
  }
  if (ch != nullptr) {
    g_channels[copy] = std::move(ch);
    g_channel_count.fetch_add(1, std::memory_order_release);
  }
}

template <typename Fn>
Fn libc(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}
using OpenFn = int (*)(const char*, int, ...);
using OpenatFn = int (*)(int, const char*, int, ...);
using WriteFn = ssize_t (*)(int, const void*, size_t);
using ReadFn = ssize_t (*)(int, void*, size_t);
using CloseFn = int (*)(int);
using FstatFn = int (*)(int, struct stat*);

ssize_t libc_read(int fd, void* buf, size_t n) {
  static const ReadFn f = libc<ReadFn>("read");
  return f(fd, buf, n);
}
int libc_close(int fd) {
  static const CloseFn f = libc<CloseFn>("close");
  return f(fd);
}

bool is_rdma_cm(const char* path) { return path != nullptr && std::strcmp(path, kRdmaCmPath) == 0; }

// A new channel: its connection, the engine's eventfd. -1 and errno on failure.
int open_channel(int flags) {
  const char* node = std::getenv(verbs::kNodeEnv);
  const char* path = std::getenv(verbs::kSocketEnv);
  if (node == nullptr || path == nullptr) {  // not under rocemu exec: the file system's answer
    static const OpenFn f = libc<OpenFn>("open");
    return f(kRdmaCmPath, flags);
  }
  auto ch = std::make_shared<UcmaChannel>();
  ch->sock = provider::connect_engine(path);
  if (ch->sock < 0) {
    errno = ENODEV;
    return -1;
  }
  // Only an engine of this user (or root) answers for this process.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(ch->sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != geteuid() && cred.uid != 0)) {
    errno = EACCES;
    return -1;
  }
  verbs::Request req;
  req.op = verbs::Op::kCmOpen;
  std::snprintf(req.u.cm_open.node, sizeof req.u.cm_open.node, "%s", node);
  verbs::Reply rep;
  std::vector<int> fds;
  const int err = provider::call(ch->sock, ch->rpc, ch->dead, req, rep, {}, &fds);
  if (err != 0 || fds.size() != 1) {
    for (int f : fds) libc_close(f);
    errno = err != 0 ? err : EPROTO;
    return -1;
  }
  ch->events = fds[0];  // received close-on-exec
  if (!(flags & O_CLOEXEC)) fcntl(ch->events, F_SETFD, 0);
  if (flags & O_NONBLOCK) fcntl(ch->events, F_SETFL, O_NONBLOCK);
  ch->engine_id = rep.u.cm_open.channel;
  std::shared_ptr<UcmaChannel> stale;  // a descriptor closed behind our back (close_range, dup2)
  {
    std::lock_guard lock(g_channels_lock);
    auto& slot = g_channels[ch->events];
    stale = std::move(slot);
    slot = ch;
    if (stale == nullptr) g_channel_count.fetch_add(1, std::memory_order_release);
  }
  return ch->events;
}

// One command to the engine; the response lands where it points.
int forward_command(UcmaChannel& ch, const uint8_t* cmd, size_t len) {
  verbs::Request req;
  req.op = verbs::Op::kCmCommand;
  std::memcpy(req.u.ucma.bytes, cmd, len);
  req.u.ucma.length = uint32_t(len);
  verbs::Reply rep;
  if (int err = provider::call(ch.sock, ch.rpc, ch.dead, req, rep); err != 0) return err;
  if (rep.u.ucma.address != 0 && rep.u.ucma.length != 0 && rep.u.ucma.length <= verbs::kUcmaMax)
    std::memcpy(reinterpret_cast<void*>(rep.u.ucma.address), rep.u.ucma.bytes, rep.u.ucma.length);
  return 0;
}

// GET_EVENT written on descriptor `fd` (a copy of the channel's eventfd):
// one count of the eventfd per event. A count whose event went away (its
// id destroyed) finds none and the wait goes on.
int wait_for_event(UcmaChannel& ch, int fd, const uint8_t* cmd, size_t len) {
  for (;;) {
    // A blocking wait also watches the connection: an engine that went
    // away fails the call instead of leaving it blocked for ever.
    if (!(fcntl(fd, F_GETFL) & O_NONBLOCK)) {
      pollfd p[2] = {{fd, POLLIN, 0}, {ch.sock, POLLRDHUP, 0}};
      if (::poll(p, 2, -1) < 0) return errno;  // EINTR
      if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)) return EIO;
      if (!(p[0].revents & POLLIN)) continue;
    }
    uint64_t one;
    if (libc_read(fd, &one, sizeof one) != ssize_t(sizeof one)) {
      if (errno == EAGAIN && !(fcntl(fd, F_GETFL) & O_NONBLOCK)) continue;  // another thread took it
      return errno;  // EAGAIN (non-blocking), EINTR
    }
    const int err = forward_command(ch, cmd, len);
    if (err != EAGAIN) return err;
  }
}

ssize_t ucma_write(UcmaChannel& ch, int fd, const void* buf, size_t len) {
  rdma_ucm_cmd_hdr hdr;
  if (buf == nullptr || len < sizeof hdr || len > verbs::kUcmaMax) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(&hdr, buf, sizeof hdr);
  if (sizeof hdr + hdr.in > len) {
    errno = EINVAL;
    return -1;
  }
  if (hdr.out < verbs::ucma_min_out(hdr.cmd)) {  // before any wait, as the kernel
    errno = ENOSPC;
    return -1;
  }
  uint8_t cmd[verbs::kUcmaMax];
  std::memcpy(cmd, buf, len);
  size_t cmd_len = len;
  int err;
  if (hdr.cmd == RDMA_USER_CM_CMD_GET_EVENT) {
    err = wait_for_event(ch, fd, cmd, cmd_len);
  } else {
    if (hdr.cmd == RDMA_USER_CM_CMD_SET_OPTION && hdr.in >= sizeof(rdma_ucm_set_option)) {
      // The value is behind a pointer: it travels after the command.
      rdma_ucm_set_option o;
      std::memcpy(&o, cmd + sizeof hdr, sizeof o);
      if (sizeof hdr + hdr.in + o.optlen > sizeof cmd || (o.optlen != 0 && o.optval == 0)) {
        errno = EINVAL;
        return -1;
      }
      std::memcpy(cmd + sizeof hdr + hdr.in, reinterpret_cast<const void*>(o.optval), o.optlen);
      cmd_len = sizeof hdr + hdr.in + o.optlen;
    } else if (hdr.cmd == RDMA_USER_CM_CMD_MIGRATE_ID && hdr.in >= sizeof(rdma_ucm_migrate_id)) {
      // The id's present channel, named by descriptor: the engine knows it by its id.
      rdma_ucm_migrate_id m;
      std::memcpy(&m, cmd + sizeof hdr, sizeof m);
      auto to = channel_of(int(m.fd));
      if (to == nullptr) {
        errno = EBADF;
        return -1;
      }
      m.fd = to->engine_id;
      std::memcpy(cmd + sizeof hdr, &m, sizeof m);
    }
    err = forward_command(ch, cmd, cmd_len);
  }
  if (err != 0) {
    errno = err;
    return -1;
  }
  return ssize_t(len);
}

int open_common(const char* path, int flags, mode_t mode, bool at, int dirfd) {
  if (is_rdma_cm(path)) return open_channel(flags);
  if (at) {
    static const OpenatFn f = libc<OpenatFn>("openat");
    return f(dirfd, path, flags, mode);
  }
  static const OpenFn f = libc<OpenFn>("open");
  return f(path, flags, mode);
}

mode_t mode_arg(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? mode_t(va_arg(ap, int)) : 0;
}

}  // namespace ucma_interpose
using namespace ucma_interpose;

extern "C" {

// The interposed calls whose names the C library's headers may redirect
// are defined under their symbol names (asm labels): with
// _FILE_OFFSET_BITS=64 (meson's default) <fcntl.h> makes `open` a name
// for open64 and <sys/stat.h> `fstat` one for fstat64, and defining both
// under their C names would define each 64-bit symbol twice.
int ucma_open(const char* path, int flags, ...) __asm__("open");
int ucma_open64(const char* path, int flags, ...) __asm__("open64");
int ucma_openat(int dirfd, const char* path, int flags, ...) __asm__("openat");
int ucma_openat64(int dirfd, const char* path, int flags, ...) __asm__("openat64");
int ucma_fstat(int fd, struct stat* st) __asm__("fstat");
int ucma_fstat64(int fd, struct stat64* st) __asm__("fstat64");

int ucma_open(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(path, flags, mode, false, AT_FDCWD);
}

int ucma_open64(const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(path, flags, mode, false, AT_FDCWD);
}

int ucma_openat(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(path, flags, mode, true, dirfd);
}

int ucma_openat64(int dirfd, const char* path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  const mode_t mode = mode_arg(flags, ap);
  va_end(ap);
  return open_common(path, flags, mode, true, dirfd);
}

ssize_t write(int fd, const void* buf, size_t len) {
  if (auto ch = channel_of(fd)) return ucma_write(*ch, fd, buf, len);
  static const WriteFn f = libc<WriteFn>("write");
  return f(fd, buf, len);
}

ssize_t read(int fd, void* buf, size_t len) {
  if (channel_of(fd) != nullptr) {
    errno = EINVAL;  // the kernel's rdma_cm file has no read
    return -1;
  }
  return libc_read(fd, buf, len);
}

int close(int fd) {
  if (g_channel_count.load(std::memory_order_acquire) != 0) {
    std::shared_ptr<UcmaChannel> ch;
    {
      std::lock_guard lock(g_channels_lock);
      auto it = g_channels.find(fd);
      if (it != g_channels.end()) {
        ch = std::move(it->second);
        g_channels.erase(it);
        g_channel_count.fetch_sub(1, std::memory_order_release);
      }
    }
    // The connection closes with the last user of the channel: the engine
    // then destroys its ids, as the kernel does when the file is released.
  }
  return libc_close(fd);
}

int dup(int fd) {
  static const auto f = libc<int (*)(int)>("dup");
  const int copy = f(fd);
  if (copy >= 0) descriptor_copied(fd, copy);
  return copy;
}

int dup2(int fd, int copy) {
  static const auto f = libc<int (*)(int, int)>("dup2");
  const int r = f(fd, copy);
  if (r >= 0 && fd != copy) descriptor_copied(fd, copy);
  return r;
}

int dup3(int fd, int copy, int flags) {
  static const auto f = libc<int (*)(int, int, int)>("dup3");
  const int r = f(fd, copy, flags);
  if (r >= 0) descriptor_copied(fd, copy);
  return r;
}

int close_range(unsigned int first, unsigned int last, int flags) {
  static const auto f = libc<int (*)(unsigned int, unsigned int, int)>("close_range");
  if (f == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const int r = f(first, last, flags);
  if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC) && first <= unsigned(INT_MAX))
    forget_channels(int(first), int(std::min(last, unsigned(INT_MAX))));
  return r;
}

void closefrom(int first) {
  static const auto f = libc<void (*)(int)>("closefrom");
  if (f != nullptr) f(first);
  forget_channels(std::max(first, 0), INT_MAX);
}

int ucma_fstat(int fd, struct stat* st) {
  static const FstatFn f = libc<FstatFn>("fstat");
  const int r = f(fd, st);
  if (r == 0 && channel_of(fd) != nullptr) {
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = 0;  // a dynamic misc minor; librdmacm asks for none without netlink
  }
  return r;
}

int ucma_fstat64(int fd, struct stat64* st) {
  static const auto f = libc<int (*)(int, struct stat64*)>("fstat64");
  const int r = f(fd, st);
  if (r == 0 && channel_of(fd) != nullptr) {
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = 0;
  }
  return r;
}

}  // extern "C"
