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
// The table of channels by descriptor is this process's: a child made by
// vfork() runs in the parent's memory (CPython's subprocess closes every
// descriptor from 3 there, then dup2s its stdio), so calls made by another
// process id leave the table alone (its descriptors are its own); a fork()
// child gets its own copy (a pthread_atfork handler makes it the child's,
// with the lock taken across the fork so no thread holds it in the child).
// close_range(CLOSE_RANGE_UNSHARE) closes in a table of the calling
// thread's own: the process's channels stay known (a limitation: that
// thread no longer has them, and a write there goes to whatever it opens
// under the number next).
// Every other path and descriptor goes to the C library untouched.
#include <dlfcn.h>
#include <pthread.h>
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

// The C library's calls, resolved once when this library loads: a first
// dlsym() inside an interposed call would take the loader's locks, in a
// fork() or vfork() child too. Called earlier (another library's
// constructor), they are resolved then.
struct LibcCalls {
  int (*open)(const char*, int, ...);
  int (*openat)(int, const char*, int, ...);
  ssize_t (*write)(int, const void*, size_t);
  ssize_t (*read)(int, void*, size_t);
  int (*close)(int);
  int (*dup)(int);
  int (*dup2)(int, int);
  int (*dup3)(int, int, int);
  int (*close_range)(unsigned int, unsigned int, int);  // null before glibc 2.34
  void (*closefrom)(int);                                // null before glibc 2.34
  int (*fstat)(int, struct stat*);
  int (*fstat64)(int, struct stat64*);
};

template <typename Fn>
void resolve_libc(Fn& f, const char* name) {
  f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

const LibcCalls& libc_calls() {
  static const LibcCalls calls = [] {
    LibcCalls c{};
    resolve_libc(c.open, "open");
    resolve_libc(c.openat, "openat");
    resolve_libc(c.write, "write");
    resolve_libc(c.read, "read");
    resolve_libc(c.close, "close");
    resolve_libc(c.dup, "dup");
    resolve_libc(c.dup2, "dup2");
    resolve_libc(c.dup3, "dup3");
    resolve_libc(c.close_range, "close_range");
    resolve_libc(c.closefrom, "closefrom");
    resolve_libc(c.fstat, "fstat");
    resolve_libc(c.fstat64, "fstat64");
    return c;
  }();
  return calls;
}

int libc_close(int fd) { return libc_calls().close(fd); }
ssize_t libc_read(int fd, void* buf, size_t n) { return libc_calls().read(fd, buf, n); }

struct UcmaChannel {
  int events = -1;  // the eventfd the engine sent (each descriptor of the channel is one of its copies)
  std::atomic<int> sock{-1};  // -1 once the program closed it (close_range, closefrom, dup2 over it)
  std::mutex rpc;
  std::atomic<bool> dead{false};
  uint32_t engine_id = 0;
  ~UcmaChannel() {
    if (const int s = sock.load(); s >= 0) libc_close(s);
  }
};
using ChannelRef = std::shared_ptr<UcmaChannel>;

std::mutex g_channels_lock;
std::unordered_map<int, ChannelRef> g_channels;  // by descriptor
std::atomic<int> g_channel_count{0};             // fast path: none open
std::atomic<pid_t> g_table_owner{0};             // the process whose descriptors the table names

// Taken across fork(): the child's copy of the table is unlocked and its own.
void channels_before_fork() { g_channels_lock.lock(); }
void channels_after_fork_parent() { g_channels_lock.unlock(); }
void channels_after_fork_child() {
  g_table_owner.store(getpid(), std::memory_order_relaxed);
  g_channels_lock.unlock();
}

__attribute__((constructor)) void ucma_interpose_load() {
  libc_calls();
  g_table_owner.store(getpid(), std::memory_order_relaxed);
  pthread_atfork(channels_before_fork, channels_after_fork_parent, channels_after_fork_child);
}

// True if a descriptor call must keep the table: some channel is open and
// the caller is the table's process (not a vfork() child in its memory,
// which keeps its own process id and runs no atfork handler).
bool table_is_callers() {
  return g_channel_count.load(std::memory_order_acquire) != 0 &&
         getpid() == g_table_owner.load(std::memory_order_relaxed);
}

ChannelRef channel_of(int fd) {
  if (g_channel_count.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard lock(g_channels_lock);
  auto it = g_channels.find(fd);
  return it == g_channels.end() ? nullptr : it->second;
}

// What a call closing descriptors [first, last] may take away, seen before
// the call: the channels there, and the channels whose engine connection
// is there. Applied after the call only to entries still the same (another
// thread may meanwhile have opened a channel under a freed number).
struct ClosingSnapshot {
  int first = 0, last = -1;
  std::vector<std::pair<int, ChannelRef>> entries;
  std::vector<ChannelRef> connections;
};

ClosingSnapshot snapshot_closing(int first, int last) {
  ClosingSnapshot s;
  s.first = first;
  s.last = last;
  std::lock_guard lock(g_channels_lock);
  for (const auto& [fd, ch] : g_channels) {
    if (fd >= first && fd <= last) s.entries.emplace_back(fd, ch);
    const int sock = ch->sock.load();
    if (sock >= first && sock <= last) s.connections.push_back(ch);
  }
  return s;
}

// The C library closed what `s` saw: the channels' numbers are forgotten
// (a channel's connection closes with its last descriptor) and a
// connection closed with them is not closed again when its channel goes.
// Must be called with the lock held; what is let go is returned.
std::vector<ChannelRef> forget_closed_locked(ClosingSnapshot& s) {
  for (const ChannelRef& ch : s.connections)
    if (ch->sock.exchange(-1) >= 0) ch->dead = true;  // its calls fail with EIO from now on
  std::vector<ChannelRef> released;
  for (auto& [fd, ch] : s.entries) {
    auto it = g_channels.find(fd);
    if (it == g_channels.end() || it->second != ch) continue;
    released.push_back(std::move(it->second));
    g_channels.erase(it);
    g_channel_count.fetch_sub(1, std::memory_order_release);
  }
  return released;
}

void forget_closed(ClosingSnapshot& s) {
  std::vector<ChannelRef> released;  // let go after the lock
  std::lock_guard lock(g_channels_lock);
  released = forget_closed_locked(s);
}

// `copy` now refers to what `original` did before the call (dup, dup2,
// dup3): whatever channel `copy` was is closed (`closing`), and it is
// `original`'s channel if that was one.
void descriptor_copied(ClosingSnapshot& closing, const ChannelRef& original, int copy) {
  std::vector<ChannelRef> released;  // let go after the lock
  std::lock_guard lock(g_channels_lock);
  released = forget_closed_locked(closing);
  if (original == nullptr) return;
  auto& slot = g_channels[copy];
  if (slot == nullptr) g_channel_count.fetch_add(1, std::memory_order_release);
  released.push_back(std::move(slot));  // a stale entry (closed behind our back)
  slot = original;
}

bool is_rdma_cm(const char* path) { return path != nullptr && std::strcmp(path, kRdmaCmPath) == 0; }

// A new channel: its connection, the engine's eventfd. -1 and errno on failure.
int open_channel(int flags) {
  const char* node = std::getenv(verbs::kNodeEnv);
  const char* path = std::getenv(verbs::kSocketEnv);
  if (node == nullptr || path == nullptr) {  // not under rocemu exec: the file system's answer
    return libc_calls().open(kRdmaCmPath, flags);
  }
  auto ch = std::make_shared<UcmaChannel>();
  ch->sock = provider::connect_engine(path);
  if (ch->sock.load() < 0) {
    errno = ENODEV;
    return -1;
  }
  // Only an engine of this user (or root) answers for this process.
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(ch->sock.load(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || (cred.uid != geteuid() && cred.uid != 0)) {
    errno = EACCES;
    return -1;
  }
  verbs::Request req;
  req.op = verbs::Op::kCmOpen;
  std::snprintf(req.u.cm_open.node, sizeof req.u.cm_open.node, "%s", node);
  verbs::Reply rep;
  std::vector<int> fds;
  const int err = provider::call(ch->sock.load(), ch->rpc, ch->dead, req, rep, {}, &fds);
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
    g_table_owner.store(getpid(), std::memory_order_relaxed);
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
  if (int err = provider::call(ch.sock.load(), ch.rpc, ch.dead, req, rep); err != 0) return err;
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
      pollfd p[2] = {{fd, POLLIN, 0}, {ch.sock.load(), POLLRDHUP, 0}};
      if (p[1].fd < 0) return EIO;  // the program closed the connection
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
  if (at) return libc_calls().openat(dirfd, path, flags, mode);
  return libc_calls().open(path, flags, mode);
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
  return libc_calls().write(fd, buf, len);
}

ssize_t read(int fd, void* buf, size_t len) {
  if (channel_of(fd) != nullptr) {
    errno = EINVAL;  // the kernel's rdma_cm file has no read
    return -1;
  }
  return libc_read(fd, buf, len);
}

// The connection closes with the last user of the channel: the engine
// then destroys its ids, as the kernel does when the file is released.
int close(int fd) {
  if (!table_is_callers()) return libc_close(fd);
  ClosingSnapshot s = snapshot_closing(fd, fd);
  const int r = libc_close(fd);
  const int err = errno;
  if (r == 0 || err == EINTR) forget_closed(s);  // closed even when interrupted (Linux)
  errno = err;
  return r;
}

int dup(int fd) {
  if (!table_is_callers()) return libc_calls().dup(fd);
  const ChannelRef original = channel_of(fd);
  const int copy = libc_calls().dup(fd);
  if (copy >= 0 && original != nullptr) {
    ClosingSnapshot none;
    descriptor_copied(none, original, copy);
  }
  return copy;
}

int dup2(int fd, int copy) {
  if (!table_is_callers() || fd == copy) return libc_calls().dup2(fd, copy);
  const ChannelRef original = channel_of(fd);
  ClosingSnapshot closing = snapshot_closing(copy, copy);
  const int r = libc_calls().dup2(fd, copy);
  if (r >= 0) descriptor_copied(closing, original, copy);
  return r;
}

int dup3(int fd, int copy, int flags) {
  if (!table_is_callers()) return libc_calls().dup3(fd, copy, flags);
  const ChannelRef original = channel_of(fd);
  ClosingSnapshot closing = snapshot_closing(copy, copy);
  const int r = libc_calls().dup3(fd, copy, flags);
  if (r >= 0) descriptor_copied(closing, original, copy);
  return r;
}

int close_range(unsigned int first, unsigned int last, int flags) {
  const auto f = libc_calls().close_range;
  if (f == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  // CLOEXEC closes nothing now; UNSHARE closes in the calling thread's
  // own new table, the process's channels stay (see the top of the file).
  if (!table_is_callers() || (flags & (CLOSE_RANGE_CLOEXEC | CLOSE_RANGE_UNSHARE)) || first > unsigned(INT_MAX))
    return f(first, last, flags);
  ClosingSnapshot s = snapshot_closing(int(first), int(std::min(last, unsigned(INT_MAX))));
  const int r = f(first, last, flags);
  if (r == 0) forget_closed(s);
  return r;
}

void closefrom(int first) {
  const auto f = libc_calls().closefrom;
  if (!table_is_callers()) {
    if (f != nullptr) f(first);
    return;
  }
  if (f == nullptr) return;
  ClosingSnapshot s = snapshot_closing(std::max(first, 0), INT_MAX);
  f(first);
  forget_closed(s);
}

int ucma_fstat(int fd, struct stat* st) {
  const int r = libc_calls().fstat(fd, st);
  if (r == 0 && channel_of(fd) != nullptr) {
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = 0;  // a dynamic misc minor; librdmacm asks for none without netlink
  }
  return r;
}

int ucma_fstat64(int fd, struct stat64* st) {
  const int r = libc_calls().fstat64(fd, st);
  if (r == 0 && channel_of(fd) != nullptr) {
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = 0;
  }
  return r;
}

}  // extern "C"
