#include "nic/verbs/server.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/generic/seq_packet_protocol.hpp>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <future>
#include <list>
#include <optional>

#include "common/log.h"
#include "nic/verbs/pinning.h"
#include "nic/verbs/sysfs.h"
#include "nic/verbs/sysfs_fuse.h"
#include "nic/verbs/ucma.h"

namespace rocemu::verbs {

namespace asio = boost::asio;
using SeqPacket = asio::generic::seq_packet_protocol;  // AF_UNIX (Boost 1.74 has no local:: one)

// --------------------------------------------------------- shared memory ----

Result<SharedRegion> SharedRegion::create(const char* name, size_t bytes) {
  SharedRegion r;
  r.bytes = (bytes + 4095) & ~size_t(4095);
  r.fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (r.fd < 0) return Status::error(std::string("memfd_create: ") + std::strerror(errno));
  // Sealed at its size: the application maps the same memfd, and one it
  // could shrink would make the engine's next access a SIGBUS.
  if (ftruncate(r.fd, off_t(r.bytes)) != 0 ||
      fcntl(r.fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int e = errno;
    close(r.fd);
    return Status::error(std::string("memfd: ") + std::strerror(e));
  }
  r.addr = mmap(nullptr, r.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
  if (r.addr == MAP_FAILED) {
    const int e = errno;
    close(r.fd);
    return Status::error(std::string("mmap: ") + std::strerror(e));
  }
  return r;
}

void SharedRegion::release() {
  if (addr != nullptr && addr != MAP_FAILED) munmap(addr, bytes);
  if (fd >= 0) close(fd);
  addr = nullptr;
  fd = -1;
}

// ------------------------------------------------------------- HostAgent ----

HostAgent::HostAgent() : Node("verbs-host-agent", 0), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

HostAgent::~HostAgent() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void HostAgent::attach(Session* s) {
  sessions_.push_back(s);
  engine().watch_fd(s->wake);
}

void HostAgent::detach(Session* s) {
  std::erase(sessions_, s);
  engine().unwatch_fd(s->wake);
}

bool HostAgent::drain(Session& s, Time now) {
  auto* page = static_cast<DoorbellPage*>(s.doorbell.addr);
  bool busy = false;
  if (page->engine_sleeping.load(std::memory_order_relaxed) != 0)
    page->engine_sleeping.store(0, std::memory_order_relaxed);
  const uint32_t producer = page->producer.v.load(std::memory_order_acquire);
  const uint32_t consumed = s.db_consumed;
  // An application can write anything here: every entry is checked.
  if (producer - s.db_consumed > DoorbellPage::kEntries) {
    s.db_consumed = producer;
    page->rescan.store(1, std::memory_order_relaxed);
  }
  for (; s.db_consumed != producer; s.db_consumed++) {
    const uint32_t entry = page->entries[s.db_consumed % DoorbellPage::kEntries];
    nic::Qp* qp = s.nic->find_qp(entry & 0xffffff);
    if (qp != nullptr && qp->ctx == s.ctx) s.nic->sq_doorbell(*qp, now);
    busy = true;
  }
  // The application's lines are written only when there is news: this
  // runs on every turn of the engine's loop, most of them idle for this
  // session, and a store (or a locked exchange) would take the line from
  // the application's core each time.
  if (s.db_consumed != consumed) page->consumer.v.store(s.db_consumed, std::memory_order_release);
  if (page->rescan.load(std::memory_order_acquire) != 0 && page->rescan.exchange(0, std::memory_order_acq_rel) != 0) {
    for (uint32_t qpn : s.qpns)
      if (nic::Qp* qp = s.nic->find_qp(qpn); qp != nullptr && qp->ctx == s.ctx) s.nic->sq_doorbell(*qp, now);
    busy = true;
  }
  return busy;
}

bool HostAgent::poll(Time now) {
  bool busy = false;
  for (Session* s : sessions_) busy |= drain(*s, now);
  return busy;
}

bool HostAgent::prepare_sleep(Time) {
  // Old wake-ups go first: one written from here on must wake the sleep.
  for (Session* s : sessions_) drain_eventfd(s->wake);
  drain_eventfd(wake_fd_);
  // virtio-style: say we sleep, then look once more. An application that
  // rings after this sees the flag and writes its eventfd.
  for (Session* s : sessions_) {
    auto* page = static_cast<DoorbellPage*>(s->doorbell.addr);
    page->engine_sleeping.store(1, std::memory_order_seq_cst);
    if (page->producer.v.load(std::memory_order_seq_cst) != s->db_consumed ||
        page->rescan.load(std::memory_order_seq_cst) != 0) {
      page->engine_sleeping.store(0, std::memory_order_relaxed);
      return false;
    }
  }
  return true;
}

// ------------------------------------------------------------ the server ----

namespace {

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; Debian 12's headers predate it
#endif

// The /proc directory of the process at the other end of `sock`, whose
// PID the kernel reported as `pid`. A PID can be reused once its process
// has exited and been reaped, so the directory is opened between two
// facts that pin it: a pidfd of the peer, and that pidfd still naming a
// process that has not been reaped after the open. The pidfd comes from
// the socket itself (SO_PEERPIDFD, Linux 6.5); only on a kernel without
// it, from the PID -- which can race: the process that connected may have
// gone and its PID been reused while a child holds the socket. The directory then belongs to the peer for good:
// once the peer is gone, nothing can be opened through it. The pidfd is
// kept in `*pidfd` (DMA is guarded by it, process_memory.h).
int open_peer_proc_dir(int sock, pid_t pid, int* pidfd_out) {
  int pidfd = -1;
  socklen_t len = sizeof pidfd;
  if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) != 0) {
    if (errno != ENOPROTOOPT) return -1;  // e.g. the peer is gone: refused
    pidfd = int(syscall(SYS_pidfd_open, pid, 0));
  }
  if (pidfd < 0) return -1;
  const std::string proc = "/proc/" + std::to_string(pid);
  int dir = open(proc.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0) != 0) {
    close(dir);
    dir = -1;
    errno = ESRCH;
  }
  if (dir < 0) {
    const int saved = errno;
    close(pidfd);
    errno = saved;
    return -1;
  }
  *pidfd_out = pidfd;
  return dir;
}

// One number for a process, that another process given its PID later
// does not share: the PID and the process's start time (in clock ticks
// since boot, field 22 of /proc/<pid>/stat). An application's contexts
// share one quota by it.
uint64_t process_identity(int proc_dir, pid_t pid) {
  uint64_t start = 0;
  const int fd = openat(proc_dir, "stat", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char buf[1024];
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
      buf[n] = 0;
      // After the name in parentheses (which may hold anything): state is
      // field 3, start time field 22.
      const char* p = std::strrchr(buf, ')');
      for (int field = 2; p != nullptr && field < 22; field++) p = std::strchr(p + 1, ' ');
      if (p != nullptr) start = std::strtoull(p + 1, nullptr, 10);
    }
  }
  return start << 22 | uint64_t(pid);  // PIDs are below 2^22 (pid_max)
}

}  // namespace


struct VerbsServer::Impl {
  Engine& engine;
  HostAgent& agent;
  std::string path;
  asio::io_context io;
  std::unique_ptr<asio::basic_socket_acceptor<SeqPacket>> acceptor;
  std::thread thread;
  mutable std::mutex mutex;
  // MR pages mapped here (before the sessions: they count in it).
  std::shared_ptr<ProcessMemory::WindowTotals> windows = std::make_shared<ProcessMemory::WindowTotals>();
  std::atomic<uint64_t> max_window_bytes{VerbsServer::WindowLimits{}.bytes};
  std::atomic<uint64_t> max_windows{VerbsServer::WindowLimits{}.count};
  std::map<int, std::unique_ptr<Session>> sessions;
  std::map<int, std::unique_ptr<SeqPacket::socket>> sockets;
  std::shared_ptr<spdlog::logger> log = logger("verbs");
  VerbsServer::CliHandler cli;

  Impl(Engine& e, HostAgent& a, std::string p) : engine(e), agent(a), path(std::move(p)) {}

  std::atomic<bool> engine_stopped{false};

  // Runs `fn` on the engine thread and waits for it. Once the engine loop
  // has returned nothing else touches the fabric, so the task runs here.
  template <typename F>
  auto on_engine(F&& fn) {
    using R = decltype(fn());
    struct Job {
      std::packaged_task<R()> task;
      std::atomic<bool> taken{false};
      void run() {
        if (!taken.exchange(true)) task();
      }
    };
    auto job = std::make_shared<Job>();
    job->task = std::packaged_task<R()>(std::forward<F>(fn));
    auto fut = job->task.get_future();
    if (engine_stopped.load()) {
      job->run();
      return fut.get();
    }
    engine.post([job](Engine&) { job->run(); });
    while (fut.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
      if (engine_stopped.load()) job->run();
    }
    return fut.get();
  }

  // Accepts for as long as the server runs: an error (out of file
  // descriptors, a connection reset before it was taken) is logged and
  // accepting goes on -- after a pause when descriptors ran out, since the
  // connection waiting would fail again at once.
  asio::steady_timer accept_retry{io};
  std::atomic<uint64_t> accept_errors{0};

  void accept() {
    acceptor->async_accept([this](const boost::system::error_code& ec, SeqPacket::socket sock) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        on_connect(std::move(sock));
        accept();
        return;
      }
      if (accept_errors++ % 1000 == 0) log->warn("accepting an application failed: {} (still accepting)", ec.message());
      if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec.value() == ENOBUFS || ec.value() == ENOMEM) {
        accept_retry.expires_after(std::chrono::milliseconds(50));
        accept_retry.async_wait([this](const boost::system::error_code& e) {
          if (!e) accept();
        });
        return;
      }
      accept();
    });
  }

  void on_connect(SeqPacket::socket sock) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(sock.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid()) {
      log->warn("refused a connection from uid {} (the engine belongs to uid {})", cred.uid, geteuid());
      return;  // the socket closes
    }
    auto s = std::make_unique<Session>();
    s->fd = sock.native_handle();
    s->pid = cred.pid;
    s->proc_dir = open_peer_proc_dir(sock.native_handle(), cred.pid, &s->pidfd);
    if (s->proc_dir < 0) {
      log->warn("refused pid {}: /proc/{}: {}", cred.pid, cred.pid, std::strerror(errno));
      return;
    }
    s->owner = process_identity(s->proc_dir, cred.pid);
    auto owned = std::make_unique<SeqPacket::socket>(std::move(sock));
    SeqPacket::socket* raw = owned.get();
    {
      std::lock_guard lock(mutex);
      sockets[s->fd] = std::move(owned);
      sessions[s->fd] = std::move(s);
    }
    wait_read(raw);
  }

  void wait_read(SeqPacket::socket* sock) {
    sock->async_wait(SeqPacket::socket::wait_read, [this, sock](const boost::system::error_code& ec) {
      if (ec) return;
      if (serve_one(sock->native_handle())) {
        wait_read(sock);
      } else {
        close_session(sock->native_handle());
      }
    });
  }

  bool serve_one(int fd) {
    Request req;
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    iovec iov{&req, sizeof req};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof cbuf;
    const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n <= 0) return false;
    std::vector<int> fds_in;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
          int f;
          std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
          fds_in.push_back(f);
        }
      }
    }
    Session* s;
    {
      std::lock_guard lock(mutex);
      s = sessions.at(fd).get();
    }
    Reply rep;
    std::vector<int> fds_out;
    std::string cli_text;  // the text of a CLI reply, sent after it (only for a CLI request served)
    if (size_t(n) != sizeof req || req.version != kProtocolVersion) {
      rep.err = EPROTO;
    } else if (req.op == Op::kCli) {
      cli_text = serve_cli(req, rep);
    } else if (req.op == Op::kServeSysfs) {
      rep.err = serve_sysfs(req, fds_in);
    } else if (req.op == Op::kCmOpen || req.op == Op::kCmCommand) {
      serve_cm(*s, req, rep, fds_out);
    } else if (req.op != Op::kHello && req.op != Op::kImportContext && s->ctx == nullptr) {
      rep.err = EPROTO;
    } else {
      handle(*s, req, fds_in, rep, fds_out);
    }
    // No descriptor the application sends is kept (kRegMr maps its memfd,
    // kImportContext looks at which file it is).
    for (int f : fds_in) close(f);
    iovec out{&rep, sizeof rep};
    msghdr m2{};
    m2.msg_iov = &out;
    m2.msg_iovlen = 1;
    char cbuf2[CMSG_SPACE(sizeof(int) * 4)];
    if (!fds_out.empty()) {
      m2.msg_control = cbuf2;
      m2.msg_controllen = CMSG_SPACE(sizeof(int) * fds_out.size());
      cmsghdr* c = CMSG_FIRSTHDR(&m2);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds_out.size());
      std::memcpy(CMSG_DATA(c), fds_out.data(), sizeof(int) * fds_out.size());
    }
    // Never waits: a client that does not read its replies (its socket
    // buffer full) is dropped, so it cannot stall the others.
    const bool sent = sendmsg(fd, &m2, MSG_NOSIGNAL | MSG_DONTWAIT) == ssize_t(sizeof rep);
    // Descriptors made only to be handed over (a channel's read end) are
    // the application's now, or nobody's.
    for (int f : s->hand_over) close(f);
    s->hand_over.clear();
    if (!sent) return dropped(s, "its reply");
    if (!cli_text.empty()) {
      // The text follows in its own message (SOCK_SEQPACKET keeps it whole).
      const ssize_t n_text = send(fd, cli_text.data(), cli_text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n_text != ssize_t(cli_text.size())) return dropped(s, "the text of its reply");
    }
    return true;
  }

  bool dropped(const Session* s, const char* what) {
    const int e = errno;
    log->warn("dropped pid {}: could not send it {} at once ({})", s->pid, what, std::strerror(e));
    return false;
  }

  std::string serve_cli(const Request& req, Reply& rep) {
    std::vector<std::string> words;
    const size_t len = std::min<size_t>(req.u.cli.length, kCliMax);
    std::string cur;
    for (size_t i = 0; i < len; i++) {
      if (req.u.cli.text[i] == '\0') {
        words.push_back(cur);
        cur.clear();
      } else {
        cur += req.u.cli.text[i];
      }
    }
    if (!cur.empty()) words.push_back(cur);
    std::string cli_text;
    if (!cli) {
      rep.err = EOPNOTSUPP;
      cli_text = "this engine takes no commands";
    } else {
      std::string out;
      rep.err = on_engine([&] { return cli(words, out); });
      cli_text = std::move(out);
    }
    rep.u.cli.length = cli_text.size();
    return cli_text;
  }

  void handle(Session& s, const Request& req, const std::vector<int>& fds_in, Reply& rep, std::vector<int>& fds_out);

  // ---- /dev/infiniband/rdma_cm (ucma.h): a session that is one channel ----
  void serve_cm(Session& s, const Request& req, Reply& rep, std::vector<int>& fds_out) {
    if (req.op == Op::kCmOpen) {
      rep.err = open_cm_channel(s, req, fds_out);
      rep.u.cm_open.channel = s.cm_channel;
      return;
    }
    if (s.cm_channel == 0 || req.u.ucma.length > kUcmaMax) {
      rep.err = EPROTO;
      return;
    }
    UcmaResponse out;
    rep.err = on_engine([&] {
      return serve_ucma(*s.nic, s.cm_channel, {req.u.ucma.bytes, req.u.ucma.length}, out, engine.now());
    });
    rep.u.ucma.address = out.address;
    rep.u.ucma.length = uint32_t(std::min(out.bytes.size(), kUcmaMax));
    std::memcpy(rep.u.ucma.bytes, out.bytes.data(), rep.u.ucma.length);
  }

  int open_cm_channel(Session& s, const Request& req, std::vector<int>& fds_out) {
    if (!fresh_session(s)) return EEXIST;
    char node[65] = {};
    std::memcpy(node, req.u.cm_open.node, 64);
    // Counts the channel's events: the application polls and reads it.
    // Both hold one open file, so the engine only adds to it (a read here
    // could block or steal the application's wake-up); the provider skips
    // a count whose event went away with its id.
    const int events = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
    if (events < 0) return errno;
    const int err = on_engine([&]() -> int {
      auto* n = dynamic_cast<nic::Nic*>(engine.find_node(node));
      if (n == nullptr) return ENODEV;
      s.nic = n;
      s.cm_channel = n->with_cm(engine.now(), [&](nic::cm::ConnectionManager& cm) {
        return cm.open_channel(s.owner, [events](int added) {
          if (added <= 0) return;
          const uint64_t v = uint64_t(added);
          [[maybe_unused]] ssize_t r = write(events, &v, sizeof v);
        });
      });
      return 0;
    });
    if (err != 0) {
      close(events);
      return err;
    }
    s.cm_events = events;
    fds_out.push_back(events);
    return 0;
  }

  // ---- the /sys/class/infiniband trees of `rocemu exec` (sysfs_fuse.h) ----
  // Control thread only. A mount lives until the kernel says it is gone
  // (its namespace ended) or the server stops.
  struct SysfsMount {
    std::unique_ptr<SysfsFuse> fs;
    std::unique_ptr<asio::posix::stream_descriptor> dev;
    std::vector<uint8_t> buf;
  };
  std::list<std::unique_ptr<SysfsMount>> sysfs_mounts;
  static constexpr size_t kMaxSysfsMounts = 1024;
  static constexpr int kSysfsBatch = 16;  // FUSE requests handled per wakeup

  std::optional<std::vector<SysfsFile>> tree_of(const std::string& node) {
    return on_engine([&]() -> std::optional<std::vector<SysfsFile>> {
      auto* n = dynamic_cast<nic::Nic*>(engine.find_node(node));
      if (n == nullptr) return std::nullopt;
      return nic_sysfs(*n);
    });
  }

  // Takes the /dev/fuse descriptor of the request and serves it.
  int serve_sysfs(const Request& req, std::vector<int>& fds_in) {
    if (fds_in.size() != 1) return EINVAL;
    struct stat st {};
    if (fstat(fds_in[0], &st) != 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(10, 229)) return EINVAL;
    if (sysfs_mounts.size() >= kMaxSysfsMounts) return EBUSY;
    char node_c[sizeof req.u.serve_sysfs.node + 1] = {};
    std::memcpy(node_c, req.u.serve_sysfs.node, sizeof req.u.serve_sysfs.node);
    const std::string node = node_c;
    auto shape = tree_of(node);
    if (!shape) return ENODEV;
    auto m = std::make_unique<SysfsMount>();
    m->fs = std::make_unique<SysfsFuse>(kSysfsIbRoot, *shape, [this, node] {
      return tree_of(node).value_or(std::vector<SysfsFile>{});
    });
    const int fd = fds_in[0];
    fds_in.erase(fds_in.begin());
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    m->dev = std::make_unique<asio::posix::stream_descriptor>(io, fd);
    m->buf.resize(SysfsFuse::kReadBuffer);
    SysfsMount* raw = m.get();
    sysfs_mounts.push_back(std::move(m));
    wait_sysfs(raw);
    return 0;
  }

  void wait_sysfs(SysfsMount* m) {
    m->dev->async_wait(asio::posix::stream_descriptor::wait_read, [this, m](const boost::system::error_code& ec) {
      if (ec) return;  // the server stops
      // A bounded batch per wakeup, then back to the io_context: a program
      // reading sysfs in a loop must not starve other sessions' verbs calls.
      for (int i = 0; i < kSysfsBatch; i++) {
        const ssize_t n = read(m->dev->native_handle(), m->buf.data(), m->buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        if (n <= 0) return drop_sysfs(m);  // ENODEV: unmounted
        const std::vector<uint8_t> reply = m->fs->handle({m->buf.data(), size_t(n)});
        // ENOENT: the request was interrupted meanwhile; nothing to do.
        if (!reply.empty()) [[maybe_unused]] ssize_t w = write(m->dev->native_handle(), reply.data(), reply.size());
        if (m->fs->destroyed()) return drop_sysfs(m);
      }
      wait_sysfs(m);
    });
  }

  void drop_sysfs(SysfsMount* m) {
    sysfs_mounts.remove_if([m](const std::unique_ptr<SysfsMount>& x) { return x.get() == m; });
  }

  void close_session(int fd) {
    std::unique_ptr<Session> s;
    std::unique_ptr<SeqPacket::socket> sock;
    {
      std::lock_guard lock(mutex);
      auto it = sessions.find(fd);
      if (it == sessions.end()) return;
      s = std::move(it->second);
      sessions.erase(it);
      sock = std::move(sockets[fd]);
      sockets.erase(fd);
    }
    if (s->cm_channel != 0) {
      Session* raw = s.get();
      on_engine([this, raw] {
        raw->nic->with_cm(engine.now(), [&](nic::cm::ConnectionManager& cm) { cm.close_channel(raw->cm_channel, engine.now()); });
        return 0;
      });
    }
    if (s->ctx != nullptr) {  // not left with kLeave (the process went away)
      Session* raw = s.get();
      log_left(*s, on_engine([this, raw] { return leave_context(*raw); }));
    }
    release(*s);
  }

  void log_left(const Session& s, bool last) {
    if (last) log->info("application pid {} left {}: freeing its QPs, MRs and queues", s.pid, s.nic->name());
    else log->info("application pid {} left {}: freeing its QPs and queues (its context stays shared)", s.pid, s.nic->name());
  }

  static void release(Session& s) {
    s.doorbell.release();
    for (auto* m : {&s.cq_rings, &s.srq_rings, &s.qp_rings})
      for (auto& [h, r] : *m) r.release();
    for (auto& [id, f] : s.channels) close(f);
    if (s.proc_dir >= 0) close(s.proc_dir);
    s.proc_dir = -1;
    if (s.pidfd >= 0) close(s.pidfd);
    s.pidfd = -1;
    if (s.cm_events >= 0) close(s.cm_events);  // after close_channel(): nothing signals it
    s.cm_events = -1;
    if (s.wake >= 0) close(s.wake);  // after detach(): the engine no longer watches it
    s.wake = -1;
  }

  // ---- contexts shared by ibv_import_device (SharedContext) ----
  // Control thread: the contexts by their command file's inode.
  std::map<std::pair<uint64_t, uint64_t>, std::weak_ptr<SharedContext>> shares;

  // The command file: an empty memfd sealed against any change, a token
  // that says nothing but which file it is.
  static int make_command_file(SharedContext& sc) {
    const int fd = memfd_create("rocemu-uverbs", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return errno;
    struct stat st {};
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0 || fstat(fd, &st) != 0) {
      const int e = errno;
      close(fd);
      return e;
    }
    sc.cmd_file = fd;
    sc.cmd_dev = st.st_dev;
    sc.cmd_ino = st.st_ino;
    return 0;
  }

  // A session takes one context or one rdma_cm channel, once: not one
  // that has a context, had one (kLeave) or is a channel (joining a
  // context would move it to another NIC under its channel).
  static bool fresh_session(const Session& s) { return s.ctx == nullptr && s.shared == nullptr && s.cm_channel == 0; }

  // The live context whose command file `fd` is: the very open file
  // description the engine made (SCM_RIGHTS and dup pass it on), not
  // another open of the same file (/proc/ENGINE/fd/N, which any process
  // of the user could open), or nullptr. The seals first: F_GET_SEALS
  // fails at once on any file that is no memfd, so a FUSE file cannot
  // stall this thread in fstat.
  std::shared_ptr<SharedContext> find_shared(int fd) {
    std::erase_if(shares, [](const auto& kv) { return kv.second.expired(); });
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & F_SEAL_SEAL) == 0) return nullptr;
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
    auto it = shares.find({uint64_t(st.st_dev), uint64_t(st.st_ino)});
    std::shared_ptr<SharedContext> sc = it == shares.end() ? nullptr : it->second.lock();
    return sc != nullptr && same_open_file(fd, sc->cmd_file) ? sc : nullptr;
  }

  // Whether `fd` and `mine` are one open file description: kcmp, else
  // (a kernel without it, or a seccomp filter refusing it: ENOSYS,
  // EPERM) the file status flags, which belong to the description:
  // O_NONBLOCK flipped on `mine` and back must show on `fd` both times
  // (an application flipping its own file's flag in step with both could
  // still pass; without kcmp that is what is left).
  static bool same_open_file(int fd, int mine) {
    const long r = syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, fd, mine);
    if (r >= 0) return r == 0;
    if (errno != ENOSYS && errno != EPERM) return false;
    const int flags = fcntl(mine, F_GETFL);
    if (flags < 0) return false;
    bool same = true;
    for (const int set : {flags ^ O_NONBLOCK, flags}) {
      if (fcntl(mine, F_SETFL, set) != 0) return false;
      const int theirs = fcntl(fd, F_GETFL);
      same = same && theirs >= 0 && (theirs & O_NONBLOCK) == (set & O_NONBLOCK);
    }
    return same;
  }

  // The session's doorbell page and wake-up eventfd (each session rings
  // its own, whatever context it shares).
  static int open_doorbell(Session& s) {
    auto db = SharedRegion::create("rocemu-doorbell", sizeof(DoorbellPage));
    if (!db.ok()) return ENOMEM;
    new (db->addr) DoorbellPage();
    s.wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s.wake < 0) {
      const int e = errno;
      db->release();
      return e;
    }
    s.doorbell = *db;
    return 0;
  }
  static void close_doorbell(Session& s) {
    s.doorbell.release();
    close(s.wake);
    s.wake = -1;
  }

  // Engine thread: the session joins the context and the host agent; the
  // hello reply's device and port.
  void join(Session& s, const std::shared_ptr<SharedContext>& shared, Reply& rep) {
    s.shared = shared;
    s.nic = shared->nic;
    s.ctx = shared->ctx;
    s.memory = shared->memory;
    shared->sessions.push_back(&s);
    agent.attach(&s);
    auto& h = rep.u.hello;
    h.ctx_id = s.ctx->id;
    h.engine_pid = getpid();
    h.doorbell_bytes = s.doorbell.bytes;
    h.device = device_info(*s.nic);
    h.port = port_info(*s.nic);
  }

  // Engine thread (or once it stopped): the session leaves the host agent
  // and its context, which the last session to leave closes (true then).
  bool leave_context(Session& s) {
    agent.detach(&s);
    SharedContext& sc = *s.shared;
    std::erase(sc.sessions, &s);
    if (!sc.sessions.empty()) {
      destroy_queues(s);
      // The opener leaves its MRs' pages on their memfds (kLeave's reply
      // told its provider so) and the windows stay: the others reach
      // those pages as a NIC reaches an MR's pinned pages after its
      // owner's close. Nothing else of its address space is reached any
      // more (it may map anything there now): a WR through an MR on the
      // fallback completes in error.
      if (!s.imported) s.memory->owner_left();
      return false;
    }
    s.nic->close_context(sc.ctx);
    sc.ctx = nullptr;
    // Here, on the engine thread: the frames the windows lent to are
    // filled in while nothing else touches the packet pools, and no
    // dma_write can be copying from a window as it goes. The last
    // references to the memory may be dropped on the control thread.
    if (sc.memory != nullptr) sc.memory->unmap_all();
    return true;
  }

  // Engine thread: the queues of a session leaving a context that others
  // go on sharing (their rings are this session's): QPs, then SRQs and
  // CQs, which only its own QPs use (kCreateQp).
  // A queue the NIC refuses to destroy keeps its ring mapped (it may
  // still touch it) until the context closes; the session releases the
  // others.
  void destroy_queues(Session& s) {
    auto destroy = [&](std::map<uint32_t, SharedRegion>& rings, const char* what, auto&& how) {
      for (auto it = rings.begin(); it != rings.end();) {
        if (const int e = how(it->first); e != 0) {
          log->warn("pid {} left: {} {} not destroyed ({}): its ring stays mapped until the context closes", s.pid,
                    what, it->first, std::strerror(e));
          s.shared->kept_rings.push_back(it->second);
          it = rings.erase(it);
        } else {
          ++it;
        }
      }
    };
    destroy(s.qp_rings, "QP", [&](uint32_t qpn) { return s.nic->destroy_qp(s.ctx, qpn); });
    for (uint32_t qpn : s.xrc_targets) s.nic->destroy_qp(s.ctx, qpn);  // its holds (no ring)
    destroy(s.srq_rings, "SRQ", [&](uint32_t h) { return s.nic->destroy_srq(s.ctx, h); });
    destroy(s.cq_rings, "CQ", [&](uint32_t h) { return s.nic->destroy_cq(s.ctx, h); });
  }

  // Engine thread: an async event of the context, to every session sharing
  // it (the NIC's events name no object; each session fetches its own).
  static void deliver_event(SharedContext& sc, const ibv_async_event& ev) {
    for (Session* s : sc.sessions) {
      if (s->events.size() >= 256) continue;
      Reply e;
      e.u.event.event_type = ev.event_type;
      s->events.push_back(e);
    }
  }
};

SharedContext::~SharedContext() {
  if (cmd_file >= 0) close(cmd_file);
  for (auto& r : kept_rings) r.release();  // the context is closed: the NIC has no queue left
}

PortInfo port_info(const nic::Nic& nic) {
  PortInfo p{};
  p.state = nic.link_up() ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
  p.active_mtu = nic.active_mtu();
  p.rate_bps = nic.link_rate_bps();
  p.link_mtu = nic.link_mtu();
  return p;
}

DeviceInfo device_info(const nic::Nic& n) {
  DeviceInfo d{};
  const auto& cfg = n.config();
  std::memcpy(d.mac, cfg.mac.b.data(), 6);
  d.node_guid = n.node_guid();
  const auto& gids = n.gid_table();
  d.num_gids = uint16_t(std::min<size_t>(gids.size(), kMaxGids));
  for (size_t i = 0; i < d.num_gids; i++) {
    std::memcpy(d.gids[i].raw, gids[i].gid.b.data(), 16);
    d.gids[i].type = gids[i].type;
  }
  d.max_qp = cfg.max_qp;
  d.max_qp_wr = cfg.max_qp_wr;
  d.max_sge = cfg.max_sge;
  d.max_cq = cfg.max_cq;
  d.max_srq = cfg.max_srq;
  d.max_cqe = cfg.max_cqe;
  d.max_mr = cfg.max_mr;
  d.max_srq_wr = cfg.max_qp_wr;
  d.max_qp_rd_atom = cfg.max_qp_rd_atom;
  d.max_qp_init_rd_atom = cfg.max_qp_init_rd_atom;
  d.max_inline = nic::kMaxInline;
  d.max_mr_size = ~0ull;
  return d;
}

namespace {

uint64_t page_size() {
  static const uint64_t size = uint64_t(sysconf(_SC_PAGESIZE));
  return size;
}

// Maps the pages of an MR that the provider moved onto a memfd (see
// protocol.h's reg_mr): the pages from the MR's first to its last, shared
// with the application. nullptr with err 0 if they cannot be mapped here
// (the MR then takes system calls); err EINVAL if the request is not one
// the provider makes. The file must be sealed against shrinking: an
// application truncating it would otherwise make the engine's next copy
// fault (SIGBUS). And it must be on tmpfs (an ordinary memfd): there a
// hole punched in it is filled with zeros at the next access, while on
// hugetlbfs that access needs a free huge page, else SIGBUS.
void* map_mr_pages(const Request& req, const std::vector<int>& fds_in, int& err) {
  const auto& r = req.u.reg_mr;
  const uint64_t page = page_size();
  err = EINVAL;
  if (fds_in.size() != 1 || r.addr + r.length < r.addr || r.addr + r.length > UINT64_MAX - page) return nullptr;
  const uint64_t first = r.addr & ~(page - 1);
  const uint64_t last = (r.addr + r.length + page - 1) & ~(page - 1);
  if (r.map_bytes != last - first || r.map_offset % page != 0 || r.map_offset + r.map_bytes < r.map_offset)
    return nullptr;
  const int fd = fds_in[0];
  // The seals first: F_GET_SEALS fails at once on a file that is no
  // memfd (a FUSE file could stall fstat).
  const int seals = fcntl(fd, F_GET_SEALS);
  struct stat st {};
  struct statfs fs {};
  if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      uint64_t(st.st_size) < r.map_offset + r.map_bytes || fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC)
    return nullptr;
  err = 0;
  void* p = mmap(nullptr, r.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(r.map_offset));
  return p == MAP_FAILED ? nullptr : p;
}

// Completion channels one application may hold (each is a pipe).
constexpr size_t kMaxChannels = 256;

// A completion event for an application's channel, from the engine
// thread, which must never wait. The channel is a pipe the engine made:
// the application holds the read end, the engine the write end, a file of
// its own whose O_NONBLOCK no application can clear. A full pipe drops the
// event; the CQ's event count in shared memory still tells the provider
// which CQ fired.
void write_channel(int fd) {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = write(fd, &one, sizeof one);
}

}  // namespace

void VerbsServer::Impl::handle(Session& s, const Request& req, const std::vector<int>& fds_in, Reply& rep,
                               std::vector<int>& fds_out) {
  switch (req.op) {
    case Op::kHello: {
      if (!fresh_session(s)) {
        rep.err = EEXIST;
        return;
      }
      char node[65] = {};
      std::memcpy(node, req.u.hello.node, 64);
      auto memory = ProcessMemory::open(s.pidfd, s.pid);
      if (!memory.ok()) {
        const int e = errno;  // of the fcntl that failed (EMFILE, ...)
        log->warn("pid {}: {}", s.pid, memory.status().message());
        rep.err = e != 0 ? e : EIO;
        return;
      }
      auto shared = std::make_shared<SharedContext>();
      shared->memory = std::move(memory.value());
      shared->memory->count_windows_in(windows);
      if (const int e = make_command_file(*shared); e != 0) {
        rep.err = e;
        return;
      }
      if (const int e = open_doorbell(s); e != 0) {
        rep.err = e;
        return;
      }
      rep.err = on_engine([&]() -> int {
        auto* n = dynamic_cast<nic::Nic*>(engine.find_node(node));
        if (n == nullptr) return ENODEV;
        shared->nic = n;
        shared->ctx = n->open_context(shared->memory.get(), s.owner);
        SharedContext* sc = shared.get();
        shared->ctx->on_async_event = [sc](const ibv_async_event& ev) { deliver_event(*sc, ev); };
        join(s, shared, rep);
        return 0;
      });
      if (rep.err != 0) {
        close_doorbell(s);
        return;
      }
      fds_out = {s.doorbell.fd, s.wake, shared->cmd_file};
      shares[{shared->cmd_dev, shared->cmd_ino}] = shared;
      log->info("application pid {} attached to {}", s.pid, node);
      return;
    }
    case Op::kImportContext: {
      if (!fresh_session(s)) {
        rep.err = EEXIST;
        return;
      }
      // Not a command file of a context alive here: EINVAL, as
      // ibv_import_device answers for an fd that is no uverbs device.
      std::shared_ptr<SharedContext> shared = fds_in.size() == 1 ? find_shared(fds_in[0]) : nullptr;
      if (shared == nullptr) {
        rep.err = EINVAL;
        return;
      }
      if (const int e = open_doorbell(s); e != 0) {
        rep.err = e;
        return;
      }
      rep.err = on_engine([&]() -> int {
        if (shared->ctx == nullptr) return EINVAL;  // its last session left meanwhile
        join(s, shared, rep);
        return 0;
      });
      if (rep.err != 0) {
        close_doorbell(s);
        return;
      }
      s.imported = true;
      fds_out = {s.doorbell.fd, s.wake};
      log->info("application pid {} imported context {} of {}", s.pid, s.ctx->id, s.nic->name());
      return;
    }
    case Op::kLeave: {
      // ibv_close_device: left before the reply, so that the provider
      // knows what the engine still reaches once it has it.
      const bool last = on_engine([&] {
        const bool l = leave_context(s);
        s.ctx = nullptr;  // the session only closes now (requests: EPROTO)
        return l;
      });
      log_left(s, last);
      rep.u.left.still_shared = last ? 0 : 1;
      return;
    }
    case Op::kImportPd:
      rep.err = on_engine([&] { return s.nic->query_pd(s.ctx, req.u.handle.handle); });
      return;
    case Op::kImportMr:
      rep.err = on_engine([&] {
        auto& m = rep.u.imported_mr;
        m.key = req.u.handle.handle;
        return s.nic->query_mr(s.ctx, m.key, m.iova, m.length);
      });
      return;
    case Op::kQueryPort:
      rep.u.port = on_engine([&] { return port_info(*s.nic); });
      return;
    case Op::kAllocPd:
      rep.err = on_engine([&] { return s.nic->alloc_pd(s.ctx, rep.u.handle.handle); });
      return;
    case Op::kDeallocPd:
      rep.err = on_engine([&] { return s.nic->dealloc_pd(s.ctx, req.u.handle.handle); });
      return;
    case Op::kRegMr: {
      const auto& r = req.u.reg_mr;
      const int access = int(r.access) & ~IBV_ACCESS_OPTIONAL_RANGE;
      if (s.imported) {
        rep.err = EOPNOTSUPP;  // its pages are not the context's memory (README)
        return;
      }
      // The flags first, as the kernel checks them before it pins
      // (an implicit ODP MR names the whole address space).
      if (const int e = nic::Nic::check_mr_access(access); e != 0) {
        rep.err = e;
        return;
      }
      // Registration pins memory on a real NIC: a page the process does
      // not have (or may not write) fails here with EFAULT, not later on
      // the wire.
      if (const int e = check_pinnable(s.proc_dir, r.addr, r.length, mr_writable(access)); e != 0) {
        rep.err = e == ESRCH ? EFAULT : e;
        return;
      }
      void* window = nullptr;
      if (r.map_bytes != 0) {
        window = map_mr_pages(req, fds_in, rep.err);
        if (rep.err != 0) return;
      }
      rep.err = on_engine([&] {
        const int e = s.nic->reg_mr(s.ctx, r.pd, r.addr, r.length, access, rep.u.mr.key, r.iova);
        if (e != 0) return e;
        const uint64_t first = r.addr & ~(page_size() - 1);
        if (window != nullptr) {
          // Within the budget, else the fallback (engine thread: windows
          // are added only here, so the sums are exact).
          const uint64_t bytes = max_window_bytes.load(), count = max_windows.load();
          const ProcessMemory& m = *s.memory;
          if (m.windows() + 1 > count / 2 || m.window_bytes() + r.map_bytes > bytes / 2 ||
              windows->count.load() + 1 > count || windows->bytes.load() + r.map_bytes > bytes) {
            munmap(window, r.map_bytes);
            window = nullptr;
          }
        }
        if (window != nullptr) {
          s.memory->add_window(rep.u.mr.key, first, r.map_bytes, window);
        } else {
          s.memory->remove_windows(first, ((r.addr + r.length + page_size() - 1) & ~(page_size() - 1)) - first);
        }
        return 0;
      });
      if (rep.err != 0 && window != nullptr) munmap(window, r.map_bytes);
      return;
    }
    case Op::kReregMr: {
      const auto& r = req.u.rereg_mr;
      const int access = int(r.access) & ~IBV_ACCESS_OPTIONAL_RANGE;
      if (r.flags & IBV_REREG_MR_CHANGE_ACCESS) {
        if (const int e = nic::Nic::check_mr_access(access); e != 0) {
          rep.err = e;
          return;
        }
      }
      if ((r.flags & IBV_REREG_MR_CHANGE_TRANSLATION) && s.imported) {
        rep.err = EOPNOTSUPP;  // as for kRegMr
        return;
      }
      if (r.flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
        // The new range is pinned as at registration, with the access it
        // will have.
        const int will_have = (r.flags & IBV_REREG_MR_CHANGE_ACCESS)
                                  ? access
                                  : on_engine([&] { return s.nic->mr_access(s.ctx, r.key); });
        if (will_have < 0) {
          rep.err = EINVAL;
          return;
        }
        if (const int e = check_pinnable(s.proc_dir, r.addr, r.length, mr_writable(will_have)); e != 0) {
          rep.err = e == ESRCH ? EFAULT : e;
          return;
        }
      }
      rep.err = on_engine([&] {
        const int e = s.nic->rereg_mr(s.ctx, r.key, int(r.flags), r.pd, r.addr, r.length, access, &rep.u.mr.key);
        // Other pages now, or another key: reached with system calls.
        if (e == 0 && ((r.flags & IBV_REREG_MR_CHANGE_TRANSLATION) || rep.u.mr.key != r.key))
          s.memory->remove_window(r.key);
        if (e == 0 && (r.flags & IBV_REREG_MR_CHANGE_TRANSLATION)) s.memory->remove_windows(r.addr, r.length);
        return e;
      });
      return;
    }
    case Op::kDeregMr:
      rep.err = on_engine([&] {
        const int e = s.nic->dereg_mr(s.ctx, req.u.handle.handle);
        if (e == 0) s.memory->remove_window(req.u.handle.handle);
        return e;
      });
      return;
    case Op::kAllocMw:
      rep.err = on_engine([&] {
        return s.nic->alloc_mw(s.ctx, req.u.alloc_mw.pd, int(req.u.alloc_mw.type), rep.u.mw.handle, rep.u.mw.rkey);
      });
      return;
    case Op::kDeallocMw:
      rep.err = on_engine([&] { return s.nic->dealloc_mw(s.ctx, req.u.handle.handle); });
      return;
    case Op::kCreateChannel: {
      // The engine makes the channel (see write_channel): an fd of the
      // application's would be written by the engine thread whatever it is.
      if (!fds_in.empty()) {
        rep.err = EINVAL;
        return;
      }
      if (s.channels.size() >= kMaxChannels) {
        rep.err = ENOMEM;
        return;
      }
      int ends[2];
      if (pipe2(ends, O_CLOEXEC | O_NONBLOCK) != 0) {
        rep.err = errno;
        return;
      }
      rep.u.handle.handle = s.next_channel++;
      s.channels[rep.u.handle.handle] = ends[1];
      fds_out.push_back(ends[0]);
      s.hand_over.push_back(ends[0]);
      // A write end for the application too: the provider makes the fd
      // readable itself for events raised without a write while it polled
      // them (see ibv_get_cq_event). Its own pipe: nobody else's is
      // reached. Opened anew, not the engine's end passed on: an open
      // file's flags are shared, and the engine's must stay non-blocking
      // whatever the application sets on its own.
      const std::string self = "/proc/self/fd/" + std::to_string(ends[1]);
      if (const int w = open(self.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC); w >= 0) {
        fds_out.push_back(w);
        s.hand_over.push_back(w);
      }
      return;
    }
    case Op::kDestroyChannel: {
      auto it = s.channels.find(req.u.handle.handle);
      if (it == s.channels.end()) {
        rep.err = EINVAL;
        return;
      }
      // CQs still bound to it keep a copy of the fd number: detach them
      // (theirs only: another channel's CQs go on firing).
      const uint32_t id = it->first;
      const int fd = it->second;
      std::vector<uint32_t> bound;
      for (auto& [h, ch] : s.cq_channel)
        if (ch == id) bound.push_back(h);
      on_engine([&] {
        for (uint32_t h : bound)
          if (nic::Cq* cq = s.nic->find_cq(s.ctx, h)) cq->on_event = nullptr;
        return 0;
      });
      for (uint32_t h : bound) s.cq_channel.erase(h);
      close(fd);
      s.channels.erase(it);
      return;
    }
    case Op::kCreateCq: {
      const uint32_t cqe = std::max(req.u.create_cq.entries, 1u);
      if (cqe > s.nic->config().max_cqe) {  // before anything is sized from it
        rep.err = EINVAL;
        return;
      }
      const uint32_t entries = nic::round_up_pow2(cqe);
      int channel_fd = -1;
      if (req.u.create_cq.channel != 0) {
        auto it = s.channels.find(req.u.create_cq.channel);
        if (it == s.channels.end()) {
          rep.err = EINVAL;
          return;
        }
        channel_fd = it->second;
      }
      auto region = SharedRegion::create("rocemu-cq", nic::ring_bytes(entries, sizeof(nic::Cqe)));
      if (!region.ok()) {
        rep.err = ENOMEM;
        return;
      }
      uint32_t handle = 0;
      rep.err = on_engine([&] {
        const int e = s.nic->create_cq(s.ctx, region->addr, cqe, handle);
        if (e == 0 && channel_fd >= 0) s.nic->find_cq(s.ctx, handle)->on_event = [channel_fd] { write_channel(channel_fd); };
        return e;
      });
      if (rep.err != 0) {
        region->release();
        return;
      }
      s.cq_rings[handle] = *region;
      if (channel_fd >= 0) s.cq_channel[handle] = req.u.create_cq.channel;
      rep.u.ring = {handle, entries, region->bytes};
      fds_out.push_back(region->fd);
      return;
    }
    case Op::kDestroyCq: {
      const uint32_t h = req.u.handle.handle;
      if (!s.cq_rings.contains(h)) {
        rep.err = EINVAL;  // not this session's (its ring is another's)
        return;
      }
      rep.err = on_engine([&] { return s.nic->destroy_cq(s.ctx, h); });
      if (rep.err == 0) {
        s.cq_rings[h].release();
        s.cq_rings.erase(h);
        s.cq_channel.erase(h);
      }
      return;
    }
    case Op::kCreateSrq: {
      const auto& r = req.u.create_srq;
      // An XRC SRQ's CQ is this session's, as a QP's CQs are.
      if (r.max_sge == 0 || r.max_sge > nic::kMaxSge || r.entries > s.nic->config().max_qp_wr ||
          (r.cq != 0 && !s.cq_rings.contains(r.cq))) {
        rep.err = EINVAL;
        return;
      }
      const uint32_t wanted = std::max(r.entries, 1u);
      const uint32_t entries = nic::round_up_pow2(wanted);
      auto region = SharedRegion::create("rocemu-srq", nic::ring_bytes(entries, nic::recv_wqe_stride(r.max_sge)));
      if (!region.ok()) {
        rep.err = ENOMEM;
        return;
      }
      uint32_t handle = 0;
      rep.err = on_engine(
          [&] { return s.nic->create_srq(s.ctx, r.pd, region->addr, wanted, r.max_sge, r.limit, handle, r.xrcd, r.cq); });
      if (rep.err != 0) {
        region->release();
        return;
      }
      s.srq_rings[handle] = *region;
      rep.u.ring = {handle, entries, region->bytes};
      fds_out.push_back(region->fd);
      return;
    }
    case Op::kModifySrq:
      rep.err = on_engine([&] { return s.nic->modify_srq(s.ctx, req.u.modify_srq.handle, req.u.modify_srq.limit); });
      return;
    case Op::kDestroySrq: {
      const uint32_t h = req.u.handle.handle;
      if (!s.srq_rings.contains(h)) {
        rep.err = EINVAL;
        return;
      }
      rep.err = on_engine([&] { return s.nic->destroy_srq(s.ctx, h); });
      if (rep.err == 0) {
        s.srq_rings[h].release();
        s.srq_rings.erase(h);
      }
      return;
    }
    case Op::kCreateQp: {
      const QpCreate& c = req.u.create_qp;
      nic::QpType type;
      switch (c.type) {
        case IBV_QPT_RC: type = nic::QpType::kRc; break;
        case IBV_QPT_UC: type = nic::QpType::kUc; break;
        case IBV_QPT_UD: type = nic::QpType::kUd; break;
        case IBV_QPT_XRC_SEND: type = nic::QpType::kXrcSend; break;
        case IBV_QPT_XRC_RECV: type = nic::QpType::kXrcRecv; break;
        default:
          rep.err = EOPNOTSUPP;
          return;
      }
      // Its CQs and SRQ must be this session's: they go with it, and the
      // QP with them (a context shared by ibv_import_device has CQs of
      // other sessions, which no verb imports).
      // (An XRC initiator has no receive CQ, a target no CQ at all.)
      const bool has_send_cq = type != nic::QpType::kXrcRecv;
      const bool has_recv_cq = has_send_cq && type != nic::QpType::kXrcSend;
      if ((has_send_cq && !s.cq_rings.contains(c.send_cq)) || (has_recv_cq && !s.cq_rings.contains(c.recv_cq)) ||
          (c.srq != 0 && !s.srq_rings.contains(c.srq))) {
        rep.err = EINVAL;
        return;
      }
      ibv_qp_cap cap = c.cap;
      // XRC: an initiator has no receive queue, a target no queue at all
      // (no memory is shared for it).
      const bool own_rq = c.srq == 0 && type != nic::QpType::kXrcSend && type != nic::QpType::kXrcRecv;
      if (!own_rq) cap.max_recv_wr = cap.max_recv_sge = 0;
      if (type == nic::QpType::kXrcRecv) cap = ibv_qp_cap{};
      if (cap.max_send_sge == 0) cap.max_send_sge = 1;
      if (cap.max_recv_sge == 0) cap.max_recv_sge = 1;
      const int e = on_engine([&] { return s.nic->check_qp_caps(cap); });
      if (e != 0) {
        rep.err = e;
        return;
      }
      QpCreated& q = rep.u.qp;
      if (type == nic::QpType::kXrcRecv) {
        nic::Nic::QpInit init;
        init.type = type;
        init.xrcd = c.xrcd;
        rep.err = on_engine([&] { return s.nic->create_qp(s.ctx, init, q.qpn, engine.now()); });
        if (rep.err == 0) s.xrc_targets.insert(q.qpn);
        q.cap = ibv_qp_cap{};
        return;
      }
      nic::Nic::qp_ring_sizes(cap, q.sq_entries, q.sq_stride, q.rq_entries, q.rq_stride);
      const size_t sq_bytes = nic::ring_bytes(q.sq_entries, q.sq_stride);
      q.rq_offset = (sq_bytes + 4095) & ~size_t(4095);
      const size_t total = q.rq_offset + (own_rq ? nic::ring_bytes(q.rq_entries, q.rq_stride) : 0);
      auto region = SharedRegion::create("rocemu-qp", total);
      if (!region.ok()) {
        rep.err = ENOMEM;
        return;
      }
      // What the application asked for, rounded up to what the rings hold.
      cap.max_send_wr = q.sq_entries;
      cap.max_recv_wr = own_rq ? q.rq_entries : 0;
      if (!own_rq) cap.max_recv_sge = 0;
      cap.max_inline_data = std::max(cap.max_inline_data, uint32_t(q.sq_stride - sizeof(nic::SendWqe)));
      cap.max_inline_data = std::min(cap.max_inline_data, nic::kMaxInline);
      nic::Nic::QpInit init;
      init.type = type;
      init.pd = c.pd;
      init.send_cq = c.send_cq;
      init.recv_cq = c.recv_cq;
      init.srq = c.srq;
      init.xrcd = c.xrcd;
      init.cap = cap;
      init.sq_sig_all = c.sq_sig_all != 0;
      init.sq_ring = region->addr;
      init.rq_ring = own_rq ? static_cast<uint8_t*>(region->addr) + q.rq_offset : nullptr;
      rep.err = on_engine([&] {
        const int created = s.nic->create_qp(s.ctx, init, q.qpn, engine.now());
        if (created == 0) s.qpns.push_back(q.qpn);
        return created;
      });
      if (rep.err != 0) {
        region->release();
        return;
      }
      q.cap = cap;
      q.map_bytes = region->bytes;
      s.qp_rings[q.qpn] = *region;
      fds_out.push_back(region->fd);
      return;
    }
    case Op::kModifyQp: {
      const auto& m = req.u.modify_qp;
      rep.err = on_engine([&] { return s.nic->modify_qp(s.ctx, m.qpn, m.attr, m.mask, engine.now()); });
      return;
    }
    case Op::kQueryQp:
      rep.err = on_engine(
          [&] { return s.nic->query_qp(s.ctx, req.u.handle.handle, rep.u.query_qp.attr, rep.u.query_qp.init); });
      return;
    case Op::kDestroyQp: {
      const uint32_t qpn = req.u.handle.handle;
      if (!s.qp_rings.contains(qpn) && !s.xrc_targets.contains(qpn)) {
        rep.err = EINVAL;
        return;
      }
      rep.err = on_engine([&] {
        const int e = s.nic->destroy_qp(s.ctx, qpn);
        if (e == 0) std::erase(s.qpns, qpn);
        return e;
      });
      if (rep.err == 0 && s.qp_rings.count(qpn) != 0) {
        s.qp_rings[qpn].release();
        s.qp_rings.erase(qpn);
      } else if (rep.err == 0) {  // one of its holds of an XRC target
        s.xrc_targets.erase(s.xrc_targets.find(qpn));
      }
      return;
    }
    case Op::kOpenXrcd: {
      const auto& x = req.u.open_xrcd;
      rep.err = on_engine(
          [&] { return s.nic->open_xrcd(s.ctx, x.inode_dev, x.inode, x.oflags, rep.u.handle.handle); });
      return;
    }
    case Op::kCloseXrcd:
      rep.err = on_engine([&] { return s.nic->close_xrcd(s.ctx, req.u.handle.handle); });
      return;
    case Op::kOpenQp:
      rep.err = on_engine([&] { return s.nic->open_qp(s.ctx, req.u.open_qp.xrcd, req.u.open_qp.qpn); });
      if (rep.err == 0) s.xrc_targets.insert(req.u.open_qp.qpn);
      return;
    case Op::kGetSrqNum:
      rep.err = on_engine([&] { return s.nic->srq_number(s.ctx, req.u.handle.handle, rep.u.handle.handle); });
      return;
    case Op::kCreateAh:
      rep.err = on_engine([&] { return s.nic->create_ah(s.ctx, req.u.create_ah.pd, req.u.create_ah.attr, rep.u.handle.handle); });
      return;
    case Op::kDestroyAh:
      rep.err = on_engine([&] { return s.nic->destroy_ah(s.ctx, req.u.handle.handle); });
      return;
    case Op::kCli:  // served before a session is needed
    case Op::kServeSysfs:
    case Op::kCmOpen:  // served by serve_cm
    case Op::kCmCommand:
      rep.err = EPROTO;
      return;
    case Op::kGetAsyncEvent:
      rep.err = on_engine([&] {
        if (s.events.empty()) return EAGAIN;
        const Reply e = s.events.front();
        s.events.pop_front();
        rep.u.event = e.u.event;
        return 0;
      });
      return;
  }
  rep.err = EOPNOTSUPP;
}

namespace {

// Each application holds a socket and a few descriptors per queue: take
// the hard limit, as daemons serving many clients do.
void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

}  // namespace

VerbsServer::VerbsServer(Engine& engine, HostAgent& agent, std::string socket_path)
    : impl_(std::make_unique<Impl>(engine, agent, socket_path)), path_(std::move(socket_path)) {}

VerbsServer::~VerbsServer() { stop(); }

Status VerbsServer::start() {
  // A channel whose application closed its end makes the engine's write
  // fail with EPIPE, not kill the engine.
  signal(SIGPIPE, SIG_IGN);
  ::unlink(path_.c_str());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) return Status::error("control socket path too long: " + path_);
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  try {
    const SeqPacket::endpoint ep(&addr, sizeof addr, 0);
    impl_->acceptor = std::make_unique<asio::basic_socket_acceptor<SeqPacket>>(impl_->io, ep);
  } catch (const boost::system::system_error& e) {
    return Status::error("control socket " + path_ + ": " + e.what());
  }
  // Only the engine's user may connect (SO_PEERCRED is checked as well).
  chmod(path_.c_str(), 0600);
  raise_fd_limit();
  impl_->accept();
  impl_->thread = std::thread([this] { impl_->io.run(); });
  return {};
}

void VerbsServer::stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  impl_->io.stop();
  impl_->thread.join();
  impl_->sysfs_mounts.clear();  // their programs' reads fail with ENOTCONN from now on
  std::vector<int> fds;
  {
    std::lock_guard lock(impl_->mutex);
    for (auto& [fd, s] : impl_->sessions) fds.push_back(fd);
  }
  // The engine thread may be gone by now: tear down without it.
  for (int fd : fds) {
    std::unique_ptr<Session> s;
    {
      std::lock_guard lock(impl_->mutex);
      s = std::move(impl_->sessions[fd]);
      impl_->sessions.erase(fd);
      impl_->sockets.erase(fd);
    }
    if (s && s->ctx != nullptr) impl_->leave_context(*s);
    if (s) Impl::release(*s);
  }
  impl_->acceptor.reset();
  ::unlink(path_.c_str());
}

void VerbsServer::set_cli_handler(CliHandler h) { impl_->cli = std::move(h); }

void VerbsServer::set_window_limits(const WindowLimits& limits) {
  impl_->max_window_bytes = limits.bytes;
  impl_->max_windows = limits.count;
}

void VerbsServer::engine_stopped() { impl_->engine_stopped.store(true); }

uint64_t VerbsServer::accept_errors() const { return impl_->accept_errors.load(); }

size_t VerbsServer::sessions() const {
  std::lock_guard lock(impl_->mutex);
  size_t n = 0;
  for (const auto& [fd, s] : impl_->sessions) n += s->ctx != nullptr;
  return n;
}

}  // namespace rocemu::verbs
