// Verbs objects: PDs, MRs, completion channels, CQs, SRQs, QPs and AHs,
// each an RPC to the engine; queue memory arrives as a memfd to map.
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "nic/verbs/provider/provider.h"

using namespace rocemu;
using namespace rocemu::provider;

namespace {

template <typename T>
T* fail(int err) {
  errno = err;
  return nullptr;
}

Context& ctx_of(ibv_pd* pd) { return *Context::of(pd->context); }

int simple(Context& c, verbs::Op op, uint32_t handle) {
  verbs::Request req;
  req.op = op;
  req.u.handle.handle = handle;
  verbs::Reply rep;
  return call(c, req, rep);
}

ibv_mr* reg(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (pd == nullptr || length == 0) return fail<ibv_mr>(EINVAL);
  Context& c = ctx_of(pd);
  verbs::Request req;
  req.op = verbs::Op::kRegMr;
  req.u.reg_mr.pd = reinterpret_cast<Pd*>(pd)->handle;
  req.u.reg_mr.access = access;
  req.u.reg_mr.addr = reinterpret_cast<uint64_t>(addr);
  req.u.reg_mr.length = length;
  req.u.reg_mr.iova = iova;
  // An ODP MR (the engine refuses it: no on-demand paging) is not moved
  // meanwhile: an implicit one names the whole address space.
  const SharedPages pages = share_pages(req.u.reg_mr.addr, length, !(access & IBV_ACCESS_ON_DEMAND));
  std::vector<int> fds;
  if (pages.fd >= 0) {
    req.u.reg_mr.map_offset = pages.offset;
    req.u.reg_mr.map_bytes = pages.last - pages.first;
    fds.push_back(pages.fd);
  }
  verbs::Reply rep;
  if (int e = call(c, req, rep, fds); e != 0) {
    unshare_pages(pages);
    return fail<ibv_mr>(e);
  }
  hold_domain(pd);
  auto* m = new Mr();
  m->pages = pages;
  std::memset(&m->mr, 0, sizeof m->mr);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = rep.u.mr.key;
  m->mr.lkey = m->mr.rkey = rep.u.mr.key;
  {
    std::lock_guard lock(c.mrs_lock);
    c.mrs.insert(m);
  }
  return &m->mr;
}

}  // namespace

namespace rocemu::provider {

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  if (pd == nullptr || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) return fail<ibv_mw>(EINVAL);
  Context& c = ctx_of(pd);
  verbs::Request req;
  req.op = verbs::Op::kAllocMw;
  req.u.alloc_mw.pd = reinterpret_cast<Pd*>(pd)->handle;
  req.u.alloc_mw.type = uint32_t(type);
  verbs::Reply rep;
  if (int e = call(c, req, rep); e != 0) return fail<ibv_mw>(e);
  hold_domain(pd);
  auto* mw = new ibv_mw();
  mw->context = pd->context;
  mw->pd = pd;
  mw->handle = rep.u.mw.handle;
  mw->rkey = rep.u.mw.rkey;
  mw->type = type;
  return mw;
}

int dealloc_mw(ibv_mw* mw) {
  if (mw == nullptr) return EINVAL;
  if (int e = simple(*Context::of(mw->context), verbs::Op::kDeallocMw, mw->handle); e != 0) return e;
  release_domain(mw->pd);
  delete mw;
  return 0;
}

}  // namespace rocemu::provider

// ------------------------------------------------ completion events ----
//
// With ROCEMU_EVENT_POLL_US set (off by default: on 2 cores it cost more
// bandwidth than it saved), ibv_get_cq_event first polls the channel's
// CQs' event counts for a while, with the CQs marked `polling` so that the
// engine raises events without writing the fd; only then does it sleep on
// the fd. On this emulation the NIC pays for the application's wake-up (a
// cross-core wake costs the engine thread 8-16 us on a VM, a fifth of its
// time at ib_send_bw -e rates), where a real NIC's interrupt costs the
// host's CPU; an application that takes events back to back is never
// woken that way.

namespace {

int64_t event_poll_ns() {
  static const int64_t ns = [] {
    int64_t us = verbs::kEventPollUs;
    if (const char* v = std::getenv(verbs::kEventPollEnv); v != nullptr && *v != 0) {
      char* end = nullptr;
      const long x = std::strtol(v, &end, 10);
      if (*end == 0 && x >= 0 && x <= 1000000) us = x;
    }
    return us * 1000;
  }();
  return ns;
}

// One event raised on a CQ of the channel and not yet taken.
bool take_event_locked(Channel& ch, ibv_cq** cq, void** cq_context) {
  for (Cq* q : ch.cqs) {
    const uint32_t raised = q->shadow.ring.header()->events.load(std::memory_order_acquire);
    if (raised != q->events_seen) {
      q->events_seen++;
      *cq = &q->cq;
      if (cq_context != nullptr) *cq_context = q->cq.cq_context;
      return true;
    }
  }
  return false;
}

bool take_event(Channel& ch, ibv_cq** cq, void** cq_context) {
  std::lock_guard lock(ch.lock);
  return take_event_locked(ch, cq, cq_context);
}

bool raised_untaken(const Channel& ch) {
  for (const Cq* q : ch.cqs)
    if (q->shadow.ring.header()->events.load(std::memory_order_acquire) != q->events_seen) return true;
  return false;
}

// The fd is readable while an event is raised and not taken (`lock` held):
// a wake-up of our own if the engine did not write one (it raised the
// event while the CQ was polled) or one was drained with other events'.
void keep_readable(Channel& ch) {
  if (ch.wake_fd < 0 || !raised_untaken(ch)) return;
  int queued = 0;
  if (ioctl(ch.ch.fd, FIONREAD, &queued) == 0 && queued > 0) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(ch.wake_fd, &one, sizeof one);
}

// Reads the wake-ups waiting in the channel's pipe without blocking on a
// blocking fd (RWF_NOWAIT; a kernel without it for pipes: as many bytes as
// FIONREAD counts, `lock` held so no thread of ours takes them first).
void drain_wakeups(int fd) {
  uint64_t v[64];
  iovec iov{v, sizeof v};
  if (preadv2(fd, &iov, 1, -1, RWF_NOWAIT) >= 0 || (errno != EOPNOTSUPP && errno != EINVAL)) return;
  int queued = 0;
  if (ioctl(fd, FIONREAD, &queued) != 0 || queued <= 0) return;
  [[maybe_unused]] ssize_t n = read(fd, v, std::min<size_t>(size_t(queued), sizeof v));
}

// The wake-up of an event just taken, if it is there (without blocking:
// one raised while polled has none; one not written yet is read later as
// an old one).
void take_wakeup(int fd) {
  uint64_t v;
  iovec iov{&v, sizeof v};
  [[maybe_unused]] ssize_t n = preadv2(fd, &iov, 1, -1, RWF_NOWAIT);
}

// Polls for an event for up to event_poll_ns(), unless a thread sleeps on
// the fd (it needs the engine's writes) or starts to.
bool poll_for_event(Channel& ch, ibv_cq** cq, void** cq_context) {
  const int64_t budget = event_poll_ns();
  if (budget == 0 || ch.wake_fd < 0) return false;
  {
    std::lock_guard lock(ch.lock);
    if (ch.sleepers > 0) return false;
    if (ch.pollers++ == 0)
      for (Cq* q : ch.cqs) nic::begin_event_poll(q->shadow);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(budget);
  bool got = false;
  for (;;) {
    {
      std::lock_guard lock(ch.lock);
      got = take_event_locked(ch, cq, cq_context);
      if (got || ch.sleepers > 0) break;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    // Another thread of this core (the peer of a ping-pong on a 2-core
    // machine) runs first: one that spun here instead would hold the core
    // for a whole time slice, and the event it waits for with it.
    sched_yield();
  }
  std::lock_guard lock(ch.lock);
  if (--ch.pollers == 0) {
    for (Cq* q : ch.cqs) nic::end_event_poll(q->shadow);
    // Events raised meanwhile and not taken had no write: the fd must say
    // so to an application that waits on it with poll/epoll.
    keep_readable(ch);
  }
  return got;
}

// Before sleeping on the fd: counted as a sleeper, the CQs no longer
// marked `polling` (another thread's poll must not keep the wake-up
// away), then a last look, after the barrier, for an event raised
// meanwhile. True: one was taken (and the caller does not sleep).
bool prepare_to_sleep(Channel& ch, ibv_cq** cq, void** cq_context) {
  std::lock_guard lock(ch.lock);
  ch.sleepers++;
  for (Cq* q : ch.cqs) nic::end_event_poll(q->shadow);
  if (!take_event_locked(ch, cq, cq_context)) return false;
  ch.sleepers--;
  return true;
}

}  // namespace

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  if (context == nullptr) return fail<ibv_pd>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kAllocPd;
  verbs::Reply rep;
  if (int e = call(*Context::of(context), req, rep); e != 0) return fail<ibv_pd>(e);
  auto* p = new Pd();
  p->pd.context = context;
  p->pd.handle = p->handle = rep.u.handle.handle;
  return &p->pd;
}

// A PD that parent domains stand on is busy (mlx5's refcount); a parent
// domain goes without the engine (domains.cc).
int ibv_dealloc_pd(ibv_pd* pd) {
  if (pd == nullptr) return EINVAL;
  auto* p = reinterpret_cast<Pd*>(pd);
  if (p->protection != nullptr) return dealloc_parent_domain(p);
  if (p->users.load() != 0) return EBUSY;
  const int e = simple(ctx_of(pd), verbs::Op::kDeallocPd, p->handle);
  if (e == 0) delete p;
  return e;
}

// ibv_import_pd(3): the PD `pd_handle` of the context (which another
// process shares with ibv_import_device), ENOENT if it has none, as the
// kernel's lookup of an unknown handle. Unimport frees only this process's
// object; ibv_dealloc_pd of an imported PD destroys the PD for all.
ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  if (context == nullptr) return fail<ibv_pd>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kImportPd;
  req.u.handle.handle = pd_handle;
  verbs::Reply rep;
  if (int e = call(*Context::of(context), req, rep); e != 0) return fail<ibv_pd>(e);
  auto* p = new Pd();
  p->pd.context = context;
  p->pd.handle = p->handle = pd_handle;
  return &p->pd;
}

// The PD stays the context's. As mlx5 (_mlx5_free_pd with unimport),
// refused, here doing nothing (the call returns nothing): a parent domain
// (not imported: ibv_dealloc_pd frees it) and a PD parent domains stand on.
void ibv_unimport_pd(ibv_pd* pd) {
  if (pd == nullptr) return;
  auto* p = reinterpret_cast<Pd*>(pd);
  if (p->protection != nullptr || p->users.load() != 0) return;
  delete p;
}

#undef ibv_reg_mr
ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return reg(pd, addr, length, reinterpret_cast<uint64_t>(addr), unsigned(access));
}

#undef ibv_reg_mr_iova
ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return reg(pd, addr, length, iova, unsigned(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned int access) {
  return reg(pd, addr, length, iova, access);
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) { return fail<ibv_mr>(EOPNOTSUPP); }

// As libibverbs checks the input before the command: an input error
// leaves the MR as it was; a failed command (the engine's answer) too
// here, but the man page says not to use it then, only to deregister it.
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (mr == nullptr || (flags & ~int(IBV_REREG_MR_FLAGS_SUPPORTED)) != 0 ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (addr == nullptr || length == 0)) ||
      (access != 0 && !(flags & IBV_REREG_MR_CHANGE_ACCESS))) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  verbs::Request req;
  req.op = verbs::Op::kReregMr;
  req.u.rereg_mr.key = mr->lkey;
  req.u.rereg_mr.flags = uint32_t(flags);
  req.u.rereg_mr.pd = (flags & IBV_REREG_MR_CHANGE_PD) && pd != nullptr ? reinterpret_cast<Pd*>(pd)->handle : 0;
  req.u.rereg_mr.access = uint32_t(access);
  req.u.rereg_mr.addr = reinterpret_cast<uint64_t>(addr);
  req.u.rereg_mr.length = length;
  verbs::Reply rep;
  if (int e = call(*Context::of(mr->context), req, rep); e != 0) {
    errno = e;
    return IBV_REREG_MR_ERR_CMD;
  }
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    hold_domain(pd);
    release_domain(mr->pd);
    mr->pd = pd;
  }
  mr->handle = mr->lkey = mr->rkey = rep.u.mr.key;  // a new one where mlx5 would make a new mkey
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    mr->addr = addr;
    mr->length = length;
    // The engine reaches the new pages through the fallback.
    auto* m = reinterpret_cast<Mr*>(mr);
    unshare_pages(m->pages);
    m->pages = share_pages(reinterpret_cast<uint64_t>(addr), length, false);
  }
  return 0;
}

// ibv_import_mr(3): the MR `mr_handle` of the context, with its keys and
// length; addr is NULL (ibv_cmd_query_mr). Its bytes stay the registering
// process's: this process reaches them through the NIC, by their I/O
// addresses, as the owner does.
ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  if (pd == nullptr) return fail<ibv_mr>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kImportMr;
  req.u.handle.handle = mr_handle;
  verbs::Reply rep;
  if (int e = call(ctx_of(pd), req, rep); e != 0) return fail<ibv_mr>(e);
  hold_domain(pd);
  auto* m = new Mr();
  m->imported = true;
  std::memset(&m->mr, 0, sizeof m->mr);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = nullptr;
  m->mr.length = rep.u.imported_mr.length;
  m->mr.handle = mr_handle;
  m->mr.lkey = m->mr.rkey = rep.u.imported_mr.key;
  return &m->mr;
}

// An MR this process registered is not imported: nothing (ibv_dereg_mr
// frees it; freed here it would stay among the context's MRs).
void ibv_unimport_mr(ibv_mr* mr) {
  if (mr == nullptr || !reinterpret_cast<Mr*>(mr)->imported) return;
  release_domain(mr->pd);
  delete reinterpret_cast<Mr*>(mr);
}

// EIO: the engine is gone, and with it the MR (as for the other objects).
int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  Context& c = *Context::of(mr->context);
  const int e = simple(c, verbs::Op::kDeregMr, mr->lkey);
  if (e != 0 && e != EIO) return e;
  auto* m = reinterpret_cast<Mr*>(mr);
  {
    std::lock_guard lock(c.mrs_lock);
    c.mrs.erase(m);
  }
  if (!m->imported) unshare_pages(m->pages);
  release_domain(mr->pd);
  delete m;
  return 0;
}

// ---------------------------------------------------------- channels ----

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  if (context == nullptr) return fail<ibv_comp_channel>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kCreateChannel;
  verbs::Reply rep;
  Context& c = *Context::of(context);
  std::vector<int> fds;
  if (int e = call(c, req, rep, {}, &fds); e != 0 || fds.empty() || fds.size() > 2) {
    for (int f : fds) close(f);
    return fail<ibv_comp_channel>(e != 0 ? e : EPROTO);
  }
  // The read end of a pipe the engine writes an event into; blocking, as
  // a channel's fd is until the application says otherwise. The write end
  // stays non-blocking (without one, from an engine that could not open
  // it, events are never left without a wake-up: nothing polls).
  const int efd = fds[0];
  fcntl(efd, F_SETFL, fcntl(efd, F_GETFL) & ~O_NONBLOCK);
  auto* ch = new Channel();
  // The write end serves only polling (events raised without a write);
  // without polling only the engine holds one, so that an application
  // waiting on the fd itself sees it hang up when the engine goes.
  ch->wake_fd = fds.size() == 2 ? fds[1] : -1;
  if (ch->wake_fd >= 0 && event_poll_ns() == 0) {
    close(ch->wake_fd);
    ch->wake_fd = -1;
  }
  ch->ch.context = context;
  ch->ch.fd = efd;
  ch->ch.refcnt = 0;
  ch->ctx = &c;
  ch->id = rep.u.handle.handle;
  return &ch->ch;
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  if (channel == nullptr) return EINVAL;
  auto* ch = reinterpret_cast<Channel*>(channel);
  if (channel->refcnt != 0) return EBUSY;
  simple(*ch->ctx, verbs::Op::kDestroyChannel, ch->id);
  close(channel->fd);
  if (ch->wake_fd >= 0) close(ch->wake_fd);
  delete ch;
  return 0;
}

// --------------------------------------------------------------- CQs ----

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
  if (context == nullptr || cqe <= 0 || comp_vector != 0) return fail<ibv_cq>(EINVAL);
  Context& c = *Context::of(context);
  if (uint32_t(cqe) > c.info.max_cqe) return fail<ibv_cq>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kCreateCq;
  req.u.create_cq.entries = uint32_t(cqe);
  req.u.create_cq.channel = channel != nullptr ? reinterpret_cast<Channel*>(channel)->id : 0;
  verbs::Reply rep;
  std::vector<int> fds;
  if (int e = call(c, req, rep, {}, &fds); e != 0 || fds.size() != 1) {
    for (int f : fds) close(f);
    return fail<ibv_cq>(e != 0 ? e : EPROTO);
  }
  auto* q = new Cq();
  q->map_bytes = rep.u.ring.bytes;
  q->map = map_fd(fds[0], q->map_bytes);
  if (q->map == nullptr) {
    delete q;
    return fail<ibv_cq>(ENOMEM);
  }
  q->handle = rep.u.ring.handle;
  q->shadow.ring = nic::Ring(q->map, rep.u.ring.entries, sizeof(nic::Cqe), false);
  q->channel = reinterpret_cast<Channel*>(channel);
  if (channel != nullptr) {
    channel->refcnt++;
    q->events_seen = q->shadow.ring.header()->events.load(std::memory_order_acquire);
    std::lock_guard lock(q->channel->lock);
    q->channel->cqs.push_back(q);
  }
  std::memset(&q->cq, 0, sizeof q->cq);
  q->cq.context = context;
  q->cq.channel = channel;
  q->cq.cq_context = cq_context;
  q->cq.handle = q->handle;
  q->cq.cqe = int(rep.u.ring.entries);
  pthread_mutex_init(&q->cq.mutex, nullptr);
  pthread_cond_init(&q->cq.cond, nullptr);
  return &q->cq;
}

int ibv_resize_cq(ibv_cq*, int) { return EOPNOTSUPP; }

int ibv_destroy_cq(ibv_cq* cq) {
  if (cq == nullptr) return EINVAL;
  auto* q = reinterpret_cast<Cq*>(cq);
  const int e = simple(*Context::of(cq->context), verbs::Op::kDestroyCq, q->handle);
  if (e != 0 && e != EIO) return e;
  if (q->channel != nullptr) {
    q->channel->ch.refcnt--;
    std::lock_guard lock(q->channel->lock);
    std::erase(q->channel->cqs, q);
  }
  munmap(q->map, q->map_bytes);
  delete q;
  return 0;
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  if (channel == nullptr || cq == nullptr) return -1;
  Channel& ch = *reinterpret_cast<Channel*>(channel);
  // Each event taken takes a wake-up with it (the engine writes one per
  // event, after raising it), so the fd stays readable exactly while
  // events are left: for an application that waits on it itself, and for
  // the next thread.
  auto took = [&] {
    take_wakeup(channel->fd);
    if (ch.wake_fd >= 0) {  // polling: the one taken may have been another event's
      std::lock_guard lock(ch.lock);
      keep_readable(ch);
    }
    return 0;
  };
  // After a wake-up through the fd events come slowly (or the wake-up was
  // an old one): this call does not poll again.
  bool woken = false;
  for (;;) {
    if (take_event(ch, cq, cq_context)) return took();
    // A channel the application made non-blocking answers EAGAIN, as
    // libibverbs' read() of the channel does (UCX drains its channels so
    // before arming them); it is never polled.
    const bool nonblocking = (fcntl(channel->fd, F_GETFL) & O_NONBLOCK) != 0;
    if (!nonblocking) {
      if (!woken && poll_for_event(ch, cq, cq_context)) return took();
      if (prepare_to_sleep(ch, cq, cq_context)) return took();
    }
    // Wait for the fd, and notice an engine that went away (killed, or a
    // control call to it timed out: the context is shut down).
    pollfd p[2] = {{channel->fd, POLLIN, 0}, {ch.ctx->sock, POLLRDHUP, 0}};
    const int r = ::poll(p, 2, nonblocking ? 0 : -1);
    const int err = errno;
    std::unique_lock lock(ch.lock);
    if (!nonblocking) ch.sleepers--;
    if (r < 0 && err != EINTR) {
      errno = err;
      return -1;
    }
    if (r > 0 && (p[0].revents & POLLNVAL)) {  // the application closed it
      errno = EBADF;
      return -1;
    }
    const bool gone = r > 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
    const bool readable = r > 0 && (p[0].revents & (POLLIN | POLLHUP));
    if (take_event_locked(ch, cq, cq_context)) {  // raised before the engine went, too
      lock.unlock();
      return took();
    }
    if (gone) {
      ch.ctx->dead = true;
      errno = EIO;
      return -1;
    }
    if (r == 0 && nonblocking) {
      errno = EAGAIN;
      return -1;
    }
    if (readable) {
      // Readable with no event left: old wake-ups (an event taken before
      // its wake-up was written, or one raised while polled). Read them
      // all; an event raised meanwhile is seen at the top, and one left
      // without a wake-up gets one of the provider's (keep_readable).
      drain_wakeups(channel->fd);
      woken = true;
      keep_readable(ch);
    }
  }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (cq == nullptr) return;
  pthread_mutex_lock(&cq->mutex);
  cq->comp_events_completed += nevents;
  pthread_cond_signal(&cq->cond);
  pthread_mutex_unlock(&cq->mutex);
}

}  // extern "C"

namespace {

uint32_t qp_type_of(ibv_qp_type t) { return uint32_t(t); }

// An SRQ; with `xrcd` an XRC SRQ completing to `cq`. `attr.max_wr` comes
// back as granted.
ibv_srq* make_srq(ibv_pd* pd, void* srq_context, ibv_srq_attr& attr, uint32_t xrcd, ibv_cq* cq) {
  Context& c = ctx_of(pd);
  if (attr.max_wr == 0 || attr.max_wr > c.info.max_srq_wr || attr.max_sge == 0 || attr.max_sge > c.info.max_sge)
    return fail<ibv_srq>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kCreateSrq;
  req.u.create_srq = {reinterpret_cast<Pd*>(pd)->handle, attr.max_wr, attr.max_sge, attr.srq_limit, xrcd,
                      cq != nullptr ? reinterpret_cast<Cq*>(cq)->handle : 0};
  verbs::Reply rep;
  std::vector<int> fds;
  if (int e = call(c, req, rep, {}, &fds); e != 0 || fds.size() != 1) {
    for (int f : fds) close(f);
    return fail<ibv_srq>(e != 0 ? e : EPROTO);
  }
  auto* s = new Srq();
  s->map_bytes = rep.u.ring.bytes;
  s->map = map_queue(pd, fds[0], s->map_bytes, kResourceSrqRing, s->map_external);
  if (s->map == nullptr) {
    const int e = errno;
    simple(c, verbs::Op::kDestroySrq, rep.u.ring.handle);
    delete s;
    return fail<ibv_srq>(e);
  }
  hold_domain(pd);
  s->handle = rep.u.ring.handle;
  s->rq.ring = nic::Ring(s->map, rep.u.ring.entries, nic::recv_wqe_stride(attr.max_sge), false);
  s->rq.max_sge = attr.max_sge;
  std::memset(&s->srq, 0, sizeof s->srq);
  s->srq.context = pd->context;
  s->srq.srq_context = srq_context;
  s->srq.pd = pd;
  s->srq.handle = s->handle;
  pthread_mutex_init(&s->srq.mutex, nullptr);
  pthread_cond_init(&s->srq.cond, nullptr);
  attr.max_wr = rep.u.ring.entries;
  return &s->srq;
}

}  // namespace

extern "C" {

// -------------------------------------------------------------- SRQs ----

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  if (pd == nullptr || init == nullptr) return fail<ibv_srq>(EINVAL);
  return make_srq(pd, init->srq_context, init->attr, 0, nullptr);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EINVAL;  // no resizing
  if (!(mask & IBV_SRQ_LIMIT)) return 0;
  verbs::Request req;
  req.op = verbs::Op::kModifySrq;
  req.u.modify_srq = {reinterpret_cast<Srq*>(srq)->handle, attr->srq_limit};
  verbs::Reply rep;
  return call(*Context::of(srq->context), req, rep);
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (srq == nullptr || attr == nullptr) return EINVAL;
  auto* s = reinterpret_cast<Srq*>(srq);
  attr->max_wr = s->rq.ring.entries();
  attr->max_sge = s->rq.max_sge;
  attr->srq_limit = 0;
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  if (srq == nullptr) return EINVAL;
  auto* s = reinterpret_cast<Srq*>(srq);
  const int e = simple(*Context::of(srq->context), verbs::Op::kDestroySrq, s->handle);
  if (e != 0 && e != EIO) return e;
  unmap_queue(srq->pd, s->map, s->map_bytes, kResourceSrqRing, s->map_external);
  release_domain(srq->pd);
  delete s;
  return 0;
}

// --------------------------------------------------------------- QPs ----

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init) {
  if (pd == nullptr || init == nullptr || init->send_cq == nullptr) return fail<ibv_qp>(EINVAL);
  // An XRC initiator (ibv_create_qp_ex with only a PD comes here): a send
  // queue only. A target needs a domain, which only ibv_create_qp_ex gives.
  if (init->qp_type == IBV_QPT_XRC_SEND) {
    ibv_qp_init_attr ini = *init;
    ini.recv_cq = nullptr;
    ini.srq = nullptr;
    ini.cap.max_recv_wr = ini.cap.max_recv_sge = 0;
    ibv_qp* qp = create_qp(pd->context, pd, &ini, nullptr);
    if (qp != nullptr) init->cap = ini.cap;
    return qp;
  }
  if (init->qp_type == IBV_QPT_XRC_RECV || init->recv_cq == nullptr) return fail<ibv_qp>(EINVAL);
  if (init->qp_type != IBV_QPT_RC && init->qp_type != IBV_QPT_UC && init->qp_type != IBV_QPT_UD)
    return fail<ibv_qp>(EOPNOTSUPP);
  return create_qp(pd->context, pd, init, nullptr);
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  verbs::Request req;
  req.op = verbs::Op::kModifyQp;
  req.u.modify_qp.qpn = qp->qp_num;
  req.u.modify_qp.mask = mask;
  req.u.modify_qp.attr = *attr;
  verbs::Reply rep;
  const int e = call(*Context::of(qp->context), req, rep);
  if (e == 0 && (mask & IBV_QP_STATE)) {
    qp->state = attr->qp_state;
    if (attr->qp_state == IBV_QPS_RESET) {
      // Both sides start their queues again at index 0.
      auto* q = reinterpret_cast<Qp*>(qp);
      std::lock_guard l1(q->send_lock);
      std::lock_guard l2(q->recv_lock);
      q->sq.head = q->sq.tail = 0;
      q->rq.tail = 0;
    }
  }
  return e;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init) {
  if (qp == nullptr || attr == nullptr) return EINVAL;
  verbs::Request req;
  req.op = verbs::Op::kQueryQp;
  req.u.handle.handle = qp->qp_num;
  verbs::Reply rep;
  if (int e = call(*Context::of(qp->context), req, rep); e != 0) return e;
  *attr = rep.u.query_qp.attr;
  if (init != nullptr) {
    *init = rep.u.query_qp.init;
    init->qp_context = qp->qp_context;
    init->send_cq = qp->send_cq;
    init->recv_cq = qp->recv_cq;
    init->srq = qp->srq;
  }
  return 0;
}

int ibv_query_qp_data_in_order(ibv_qp*, ibv_wr_opcode, uint32_t) { return 0; }

int ibv_destroy_qp(ibv_qp* qp) {
  if (qp == nullptr) return EINVAL;
  auto* q = reinterpret_cast<Qp*>(qp);
  Context& c = *Context::of(qp->context);
  const int e = simple(c, verbs::Op::kDestroyQp, qp->qp_num);
  if (e != 0 && e != EIO) return e;
  if (q->map != nullptr) {  // (an XRC target has no queues, no PD, and is not in c.qps)
    {
      std::lock_guard lock(c.qps_lock);
      c.qps.erase(qp->qp_num);
    }
    unmap_queue(qp->pd, q->map, q->map_bytes, kResourceQpRings, q->map_external);
    release_domain(qp->pd);
  }
  delete q;
  return 0;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) { return qp != nullptr ? &reinterpret_cast<Qp*>(qp)->qpx : nullptr; }

// --------------------------------------------------------------- AHs ----

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  if (pd == nullptr || attr == nullptr) return fail<ibv_ah>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kCreateAh;
  req.u.create_ah.pd = reinterpret_cast<Pd*>(pd)->handle;
  req.u.create_ah.attr = *attr;
  verbs::Reply rep;
  if (int e = call(ctx_of(pd), req, rep); e != 0) return fail<ibv_ah>(e);
  hold_domain(pd);
  auto* a = new Ah();
  a->ah.context = pd->context;
  a->ah.pd = pd;
  a->ah.handle = a->handle = rep.u.handle.handle;
  return &a->ah;
}

int ibv_destroy_ah(ibv_ah* ah) {
  if (ah == nullptr) return EINVAL;
  const int e = simple(*Context::of(ah->context), verbs::Op::kDestroyAh, reinterpret_cast<Ah*>(ah)->handle);
  if (e != 0 && e != EIO) return e;
  release_domain(ah->pd);
  delete reinterpret_cast<Ah*>(ah);
  return 0;
}

// The address of the sender of a UD message, from its GRH (for RoCEv2 over
// IPv4: 20 zero bytes, then the IPv4 header).
int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh, ibv_ah_attr* ah_attr) {
  if (context == nullptr || wc == nullptr || grh == nullptr || ah_attr == nullptr || port_num != 1) return EINVAL;
  const Context& c = *Context::of(context);
  std::memset(ah_attr, 0, sizeof *ah_attr);
  ah_attr->port_num = port_num;
  ah_attr->sl = wc->sl;
  ah_attr->is_global = 1;
  ibv_gid sgid{}, dgid{};  // the sender's and ours
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  bool v4 = true;
  for (int i = 0; i < 20; i++) v4 = v4 && raw[i] == 0;
  if (v4 && (raw[20] >> 4) == 4) {
    sgid.raw[10] = sgid.raw[11] = 0xff;
    std::memcpy(sgid.raw + 12, raw + 20 + 12, 4);
    dgid.raw[10] = dgid.raw[11] = 0xff;
    std::memcpy(dgid.raw + 12, raw + 20 + 16, 4);
    ah_attr->grh.traffic_class = raw[21];
  } else {
    sgid = grh->sgid;
    dgid = grh->dgid;
    const uint32_t vtf = be32toh(grh->version_tclass_flow);
    ah_attr->grh.traffic_class = uint8_t(vtf >> 20);
    ah_attr->grh.flow_label = vtf & 0xfffff;
  }
  ah_attr->grh.dgid = sgid;
  ah_attr->grh.hop_limit = 0xff;
  for (int i = 0; i < c.info.num_gids; i++) {
    if (c.info.gids[i].type == IBV_GID_TYPE_ROCE_V2 && std::memcmp(c.info.gids[i].raw, dgid.raw, 16) == 0) {
      ah_attr->grh.sgid_index = uint8_t(i);
      return 0;
    }
  }
  return ENOENT;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  ibv_ah_attr attr;
  if (pd == nullptr) return fail<ibv_ah>(EINVAL);
  if (int e = ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr); e != 0) return fail<ibv_ah>(e);
  return ibv_create_ah(pd, &attr);
}

// ----------------------------------------------------- async events ----

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  if (context == nullptr || event == nullptr) return -1;
  Context& c = *Context::of(context);
  for (;;) {
    verbs::Request req;
    req.op = verbs::Op::kGetAsyncEvent;
    verbs::Reply rep;
    const int e = call(c, req, rep);
    if (e == 0) {
      std::memset(event, 0, sizeof *event);
      event->event_type = ibv_event_type(rep.u.event.event_type);
      return 0;
    }
    if (e != EAGAIN) {
      errno = e;
      return -1;
    }
    // Nothing pending: block until the engine goes or a little time passes.
    pollfd p{c.sock, POLLRDHUP, 0};
    ::poll(&p, 1, 100);
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) {
      c.dead = true;
      errno = EIO;
      return -1;
    }
  }
}

void ibv_ack_async_event(ibv_async_event*) {}

int ibv_attach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp*, const ibv_gid*, uint16_t) { return EOPNOTSUPP; }

}  // extern "C"

namespace rocemu::provider {

// An XRC target as the application sees it (created or opened): a number,
// no queues, no PD or CQs.
ibv_qp* make_target_qp(Context& c, uint32_t qpn, void* qp_context) {
  auto* qp = new Qp();
  qp->ctx = &c;
  std::memset(&qp->qpx, 0, sizeof qp->qpx);
  ibv_qp& b = qp->qpx.qp_base;
  b.context = &c.vctx.context;
  b.qp_context = qp_context;
  b.handle = qpn;
  b.qp_num = qpn;
  b.state = IBV_QPS_RESET;
  b.qp_type = IBV_QPT_XRC_RECV;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  init_qp_ex(*qp);
  return &b;
}

ibv_qp* create_qp(ibv_context* context, ibv_pd* pd, ibv_qp_init_attr* init, Xrcd* xrcd) {
  Context& c = *Context::of(context);
  verbs::Request req;
  req.op = verbs::Op::kCreateQp;
  verbs::QpCreate& q = req.u.create_qp;
  q.type = qp_type_of(init->qp_type);
  q.pd = pd != nullptr ? reinterpret_cast<Pd*>(pd)->handle : 0;
  q.send_cq = init->send_cq != nullptr ? reinterpret_cast<Cq*>(init->send_cq)->handle : 0;
  q.recv_cq = init->recv_cq != nullptr ? reinterpret_cast<Cq*>(init->recv_cq)->handle : 0;
  q.xrcd = xrcd != nullptr ? xrcd->handle : 0;
  q.srq = init->srq != nullptr ? reinterpret_cast<Srq*>(init->srq)->handle : 0;
  q.cap = init->cap;
  q.sq_sig_all = uint32_t(init->sq_sig_all);
  verbs::Reply rep;
  std::vector<int> fds;
  const bool target = init->qp_type == IBV_QPT_XRC_RECV;  // no queues, no memory to map
  if (int e = call(c, req, rep, {}, &fds); e != 0 || fds.size() != (target ? 0u : 1u)) {
    for (int f : fds) close(f);
    return fail<ibv_qp>(e != 0 ? e : EPROTO);
  }
  const verbs::QpCreated& r = rep.u.qp;
  if (target) return make_target_qp(c, r.qpn, init->qp_context);
  auto* qp = new Qp();
  qp->ctx = &c;
  qp->map_bytes = r.map_bytes;
  qp->map = map_queue(pd, fds[0], qp->map_bytes, kResourceQpRings, qp->map_external);
  if (qp->map == nullptr) {
    const int e = errno;
    simple(c, verbs::Op::kDestroyQp, r.qpn);
    delete qp;
    return fail<ibv_qp>(e);
  }
  hold_domain(pd);
  qp->sq.ring = nic::Ring(qp->map, r.sq_entries, r.sq_stride, false);
  qp->sq.max_sge = std::max(r.cap.max_send_sge, 1u);
  qp->sq.max_inline = r.cap.max_inline_data;
  qp->sq.sig_all = init->sq_sig_all != 0;
  // Its own receive queue (not with an SRQ, nor on an XRC QP).
  if (init->srq == nullptr && r.cap.max_recv_wr > 0) {
    qp->rq.ring = nic::Ring(static_cast<uint8_t*>(qp->map) + r.rq_offset, r.rq_entries, r.rq_stride, false);
    qp->rq.max_sge = std::max(r.cap.max_recv_sge, 1u);
  }
  std::memset(&qp->qpx, 0, sizeof qp->qpx);
  ibv_qp& b = qp->qpx.qp_base;
  b.context = context;
  b.qp_context = init->qp_context;
  b.pd = pd;
  b.send_cq = init->send_cq;
  b.recv_cq = init->recv_cq;
  b.srq = init->srq;
  b.handle = r.qpn;
  b.qp_num = r.qpn;
  b.state = IBV_QPS_RESET;
  b.qp_type = init->qp_type;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  init_qp_ex(*qp);
  init->cap = r.cap;
  {
    std::lock_guard lock(c.qps_lock);
    c.qps[r.qpn] = qp;
  }
  return &b;
}

// ---------------------------------------------------------------- XRC ----

ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr) {
  // As libibverbs' ibv_cmd_open_xrcd: no bit it does not know, and both
  // the file and the flags given.
  if (context == nullptr || attr == nullptr) return fail<ibv_xrcd>(EINVAL);
  if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) return fail<ibv_xrcd>(EOPNOTSUPP);
  if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) || !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
    return fail<ibv_xrcd>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kOpenXrcd;
  req.u.open_xrcd.oflags = attr->oflags;
  if (attr->fd != -1) {
    // The kernel keys a shared domain by the file's inode: so does the
    // engine, by what fstat says of it.
    struct stat st {};
    if (fstat(attr->fd, &st) != 0) return fail<ibv_xrcd>(EBADF);
    req.u.open_xrcd.inode_dev = uint64_t(st.st_dev) + 1;  // never both 0 (that is fd -1)
    req.u.open_xrcd.inode = uint64_t(st.st_ino);
  }
  verbs::Reply rep;
  if (int e = call(*Context::of(context), req, rep); e != 0) return fail<ibv_xrcd>(e);
  auto* x = new Xrcd();
  x->xrcd.context = context;
  x->handle = rep.u.handle.handle;
  return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
  if (xrcd == nullptr) return EINVAL;
  auto* x = reinterpret_cast<Xrcd*>(xrcd);
  const int e = simple(*Context::of(xrcd->context), verbs::Op::kCloseXrcd, x->handle);
  if (e != 0 && e != EIO) return e;  // EBUSY: SRQs or target QPs still in it
  delete x;
  return 0;
}

ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr) {
  if (context == nullptr || attr == nullptr) return fail<ibv_srq>(EINVAL);
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                              IBV_SRQ_INIT_ATTR_CQ;
  if (attr->comp_mask & ~kKnown) return fail<ibv_srq>(EOPNOTSUPP);  // tag matching
  const ibv_srq_type type = (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? attr->srq_type : IBV_SRQT_BASIC;
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || attr->pd == nullptr || attr->pd->context != context)
    return fail<ibv_srq>(EINVAL);
  if (type == IBV_SRQT_BASIC) return make_srq(attr->pd, attr->srq_context, attr->attr, 0, nullptr);
  if (type != IBV_SRQT_XRC) return fail<ibv_srq>(EOPNOTSUPP);
  // An XRC SRQ: its domain and the CQ its completions go to.
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
      attr->xrcd == nullptr || attr->cq == nullptr)
    return fail<ibv_srq>(EINVAL);
  return make_srq(attr->pd, attr->srq_context, attr->attr, reinterpret_cast<Xrcd*>(attr->xrcd)->handle, attr->cq);
}

int get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
  if (srq == nullptr || srq_num == nullptr) return EINVAL;
  verbs::Request req;
  req.op = verbs::Op::kGetSrqNum;
  req.u.handle.handle = reinterpret_cast<Srq*>(srq)->handle;
  verbs::Reply rep;
  if (int e = call(*Context::of(srq->context), req, rep); e != 0) return e;  // EINVAL: not an XRC SRQ
  *srq_num = rep.u.handle.handle;
  return 0;
}

ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* attr) {
  // ibv_open_qp(3): the number, the domain and the type are needed; only
  // an XRC target can be opened.
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (context == nullptr || attr == nullptr) return fail<ibv_qp>(EINVAL);
  if (attr->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) return fail<ibv_qp>(EOPNOTSUPP);
  if ((attr->comp_mask & kNeeded) != kNeeded || attr->xrcd == nullptr) return fail<ibv_qp>(EINVAL);
  if (attr->qp_type != IBV_QPT_XRC_RECV) return fail<ibv_qp>(EINVAL);
  verbs::Request req;
  req.op = verbs::Op::kOpenQp;
  req.u.open_qp = {reinterpret_cast<Xrcd*>(attr->xrcd)->handle, attr->qp_num};
  verbs::Reply rep;
  Context& c = *Context::of(context);
  if (int e = call(c, req, rep); e != 0) return fail<ibv_qp>(e);  // EINVAL: no target of that domain
  return make_target_qp(c, attr->qp_num, (attr->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? attr->qp_context : nullptr);
}

}  // namespace rocemu::provider
