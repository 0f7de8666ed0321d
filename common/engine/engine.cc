#include "common/engine/engine.h"

#include <rte_lcore.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace rocemu {
namespace {

std::atomic<uint32_t> g_pool_counter{0};

// Real time, no external ports: the longest sleep when no timer is armed
// (wakes on the wake fds come at once anyway).
constexpr Duration kMaxIdleSleep = ms(500);
// Real time with external ports: the least busy-polling after the last work
// (a peer's answer often takes longer than the 10 us the engine spins
// without ports, and an empty poll then starts sleeps of 10 us and more).
constexpr Duration kPortSpin = us(100);
constexpr unsigned long kTimerSlackNs = 1000;

uint64_t wall_clock_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count());
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const EngineOptions& opts) {
  if (Status s = dpdk::init_eal(); !s.ok()) return s;
  auto pool = dpdk::PacketPool::create("rocemu" + std::to_string(g_pool_counter++), opts.mbufs);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<Engine>(new Engine(opts, std::unique_ptr<dpdk::PacketPool>(pool.value())));
}

Engine::Engine(const EngineOptions& opts, std::unique_ptr<dpdk::PacketPool> pool)
    : opts_(opts), pool_(std::move(pool)) {
  if (opts_.mode == TimeMode::kVirtual) {
    auto c = std::make_unique<ManualClock>();
    virtual_clock_ = c.get();
    clock_ = std::move(c);
  } else {
    clock_ = std::make_unique<TscClock>();
    wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  }
}

Engine::~Engine() {
  // Links hold packets and timers; nodes hold packets; the pool goes last.
  links_.clear();
  ethdevs_.clear();
  nodes_.clear();
  captures_.clear();
  closing_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

Node& Engine::add_node(std::unique_ptr<Node> node) {
  const uint32_t id = uint32_t(nodes_.size());
  node->bind(this, id, Rng::derive(opts_.seed, 1000 + id));
  nodes_.push_back(std::move(node));
  Node& n = *nodes_.back();
  watch_fd(n.wake_fd());
  return n;
}

void drain_eventfd(int fd) {
  uint64_t v;
  iovec io{&v, sizeof v};
  [[maybe_unused]] ssize_t r = preadv2(fd, &io, 1, -1, RWF_NOWAIT);
}

void Engine::watch_fd(int fd) {
  if (epoll_fd_ < 0 || fd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void Engine::unwatch_fd(int fd) {
  if (epoll_fd_ >= 0 && fd >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
}

Node* Engine::find_node(std::string_view name) const {
  for (const auto& n : nodes_)
    if (n->name() == name) return n.get();
  return nullptr;
}

InternalLink* Engine::find_link(std::string_view name) const {
  for (const auto& l : links_)
    if (l->name() == name) return l.get();
  return nullptr;
}

Result<InternalLink*> Engine::connect(Node& a, uint16_t port_a, Node& b, uint16_t port_b, LinkParams params) {
  auto check = [](Node& n, uint16_t p) -> Status {
    if (p >= n.num_ports())
      return Status::error(n.name() + " has no port " + std::to_string(p) + " (it has " +
                           std::to_string(n.num_ports()) + ")");
    if (n.port(p) != nullptr) return Status::error(n.name() + ":" + std::to_string(p) + " is already connected");
    return {};
  };
  if (Status s = check(a, port_a); !s.ok()) return s;
  if (Status s = check(b, port_b); !s.ok()) return s;
  if (params.rate_bps == 0) return Status::error("link rate must be above 0");
  if (params.tx_slack.count() == 0) params.tx_slack = tx_slack();
  const std::string name = a.name() + ":" + std::to_string(port_a) + "-" + b.name() + ":" + std::to_string(port_b);
  links_.push_back(std::make_unique<InternalLink>(name, &a, port_a, &b, port_b, params, wheel_, *pool_,
                                                  Rng::derive(opts_.seed, 2000 + links_.size())));
  return links_.back().get();
}

Result<EthdevPort*> Engine::attach_ethdev(Node& node, uint16_t port, const EthdevParams& params) {
  if (opts_.mode == TimeMode::kVirtual)
    return Status::error("external port " + params.device + ": DPDK ports run in real time only");
  if (port >= node.num_ports() || node.port(port) != nullptr)
    return Status::error(node.name() + ":" + std::to_string(port) + " is not a free port");
  auto p = EthdevPort::open(&node, port, params, *pool_);
  if (!p.ok()) return p.status();
  node.set_port(port, p.value().get());
  ethdevs_.push_back(std::move(p.value()));
  return ethdevs_.back().get();
}

Result<uint32_t> Engine::add_capture(
    const std::string& point, std::vector<std::pair<const void*, int>> taps, const std::string& path,
    const CaptureOptions& opts,
    const std::function<void(Capture&, std::vector<std::function<void()>>&)>& attach) {
  // Each holds a file and up to CaptureOptions::max_buffer bytes.
  constexpr size_t kMaxCaptures = 256;
  if (captures_.size() >= kMaxCaptures)
    return Status::error(std::to_string(kMaxCaptures) + " captures are running: stop one first");
  for (const ActiveCapture& a : captures_)
    for (const auto& t : taps)
      if (std::find(a.taps.begin(), a.taps.end(), t) != a.taps.end())
        return Status::error(point + ": capture " + std::to_string(a.id) + " (" + a.point +
                             ") already captures there: stop it first");
  // Engine time 0 on the wall clock, so each frame is stamped with when it
  // crossed the point.
  const uint64_t epoch = opts_.mode == TimeMode::kReal ? wall_clock_ns() - uint64_t(to_ns(now())) : 0;
  auto cap = Capture::open(path, epoch, opts);
  if (!cap.ok()) return cap.status();
  ActiveCapture a{next_capture_id_++, point, std::move(cap.value()), kTimeNever, {}, std::move(taps)};
  if (opts.duration.count() > 0) a.deadline = now() + opts.duration;
  attach(*a.capture, a.detach);
  a.capture->flush();  // the headers: a reader can open it at once
  captures_.push_back(std::move(a));
  return captures_.back().id;
}

Result<uint32_t> Engine::capture_link(InternalLink& link, const std::string& path, const CaptureOptions& opts) {
  // A link's taps: 0 and 1 what each side receives, 2 and 3 what it sends.
  return add_capture(link.name(), {{&link, 0}, {&link, 1}}, path, opts,
                     [&](Capture& c, std::vector<std::function<void()>>& detach) {
    for (int side = 0; side < 2; side++) {
      const std::string name = link.end(side).name() + "->" + link.end(1 - side).name();
      link.set_tap(side, Tap{&c, c.add_interface(name, CaptureDirection::kInbound)});
      detach.push_back([&link, side] { link.set_tap(side, Tap{}); });
    }
  });
}

Result<uint32_t> Engine::capture_port(Node& node, uint16_t port, const std::string& path, const CaptureOptions& opts) {
  Port* p = node.port(port);
  if (p == nullptr) return Status::error(node.name() + ":" + std::to_string(port) + " is not connected");
  std::vector<std::pair<const void*, int>> taps = {{p, 0}, {p, 1}};
  if (auto* end = dynamic_cast<LinkEnd*>(p)) {
    const int side = &end->link().end(0) == end ? 0 : 1;
    taps = {{&end->link(), 2 + side}, {&end->link(), 1 - side}};  // as in capture_link
  }
  return add_capture(p->name(), std::move(taps), path, opts,
                     [&](Capture& c, std::vector<std::function<void()>>& detach) {
    const uint32_t tx = c.add_interface(p->name() + " tx", CaptureDirection::kOutbound);
    const uint32_t rx = c.add_interface(p->name() + " rx", CaptureDirection::kInbound);
    if (auto* end = dynamic_cast<LinkEnd*>(p)) {
      InternalLink& link = end->link();
      const int side = &link.end(0) == end ? 0 : 1;
      link.set_tx_tap(side, Tap{&c, tx});
      link.set_tap(1 - side, Tap{&c, rx});
      detach.push_back([&link, side] {
        link.set_tx_tap(side, Tap{});
        link.set_tap(1 - side, Tap{});
      });
    } else if (auto* eth = dynamic_cast<EthdevPort*>(p)) {
      eth->set_tx_tap(Tap{&c, tx});
      eth->set_rx_tap(Tap{&c, rx});
      detach.push_back([eth] {
        eth->set_tx_tap(Tap{});
        eth->set_rx_tap(Tap{});
      });
    }
  });
}

bool Engine::stop_capture(uint32_t id) {
  const auto it = std::find_if(captures_.begin(), captures_.end(), [&](const ActiveCapture& a) { return a.id == id; });
  if (it == captures_.end()) return false;
  for (auto& d : it->detach) d();
  std::unique_ptr<Capture> c = std::move(it->capture);
  captures_.erase(it);
  c->flush();
  // A stream's reader may hold part of a block: the rest follows when it
  // takes more (service_captures), else the stream would end mid-block.
  if (!c->drained()) closing_.emplace_back(std::move(c), now(), kCaptureCloseGrace);
  return true;  // else `c` closes now
}

std::vector<Engine::CaptureInfo> Engine::captures() const {
  std::vector<CaptureInfo> out;
  for (const ActiveCapture& a : captures_)
    out.push_back({a.id, a.point, a.capture->path(), a.capture->packets(), a.capture->dropped()});
  return out;
}

void Engine::flush_captures() {
  for (auto& c : captures_) c.capture->flush();
  for (auto& c : closing_) c.capture().flush();
}

void Engine::service_captures(Time t) {
  constexpr Duration kCaptureInterval = ms(5);
  next_capture_service_ = t + kCaptureInterval;
  std::vector<uint32_t> finished;
  for (auto& a : captures_) {
    a.capture->flush();
    if (a.capture->done() || t >= a.deadline) finished.push_back(a.id);
  }
  for (uint32_t id : finished) stop_capture(id);
  std::erase_if(closing_, [&](ClosingCapture& c) { return c.finish(t); });
}

void Engine::start() {
  if (started_) return;
  started_ = true;
  const Time t = now();
  wheel_.advance(t);
  for (auto& n : nodes_) n->on_start(t);
}

void Engine::post(std::function<void(Engine&)> cmd) {
  {
    std::lock_guard lock(post_mutex_);
    posted_.push_back(std::move(cmd));
  }
  has_posted_.store(true, std::memory_order_release);
  wake();
}

void Engine::wake() {
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(wake_fd_, &one, sizeof one);
  }
}

void Engine::apply_posted() {
  if (!has_posted_.load(std::memory_order_acquire)) return;
  std::vector<std::function<void(Engine&)>> cmds;
  {
    std::lock_guard lock(post_mutex_);
    cmds.swap(posted_);
    has_posted_.store(false, std::memory_order_relaxed);
  }
  for (auto& c : cmds) c(*this);
}

Duration Engine::tx_slack() const {
  return opts_.mode == TimeMode::kReal || opts_.virtual_lag.count() > 0 ? opts_.real_tx_slack : Duration(0);
}

Time Engine::wake_time(Time next) const {
  const int64_t lag = opts_.virtual_lag.count();
  if (lag <= 0 || next == kTimeNever) return next;
  const int64_t k = (next.count() + lag - 1) / lag;
  return Duration(k * lag);
}

void Engine::run_until(Time t) {
  start();
  apply_posted();
  for (;;) {
    const Time next = wheel_.next_expiry();
    if (next == kTimeNever || next > t) break;
    if (next > now()) virtual_clock_->set(std::min(wake_time(next), t));
    wheel_.advance(now());
    iterations_++;
    apply_posted();
  }
  if (t > now()) virtual_clock_->set(t);
  wheel_.advance(now());
}

bool Engine::run_until(const std::function<bool()>& done, Time deadline) {
  start();
  apply_posted();
  while (!done()) {
    const Time next = wheel_.next_expiry();
    if (next == kTimeNever || next > deadline) {
      if (deadline != kTimeNever && deadline > now()) {
        virtual_clock_->set(deadline);
        wheel_.advance(deadline);
      }
      return done();
    }
    if (next > now()) virtual_clock_->set(std::min(wake_time(next), deadline));
    wheel_.advance(now());
    iterations_++;
    if (has_posted_.load(std::memory_order_relaxed)) apply_posted();  // per event: no call unless posted
  }
  return true;
}

void Engine::run_to_idle(Time deadline) {
  run_until([] { return false; }, deadline);
}

bool Engine::poll_once(Time t) {
  bool busy = wheel_.advance(t) > 0;
  for (auto& e : ethdevs_)
    if (e->poll(t) > 0) busy = true;
  for (auto& n : nodes_)
    if (n->poll(t)) busy = true;
  if (has_posted_.load(std::memory_order_relaxed)) {
    apply_posted();
    busy = true;
  }
  if (has_captures() && t >= next_capture_service_) service_captures(t);
  return busy;
}

void Engine::idle(Time t) {
  // Stay on the CPU a little after the last work: traffic comes in bursts.
  // External ports raise no RX interrupt, so a frame that comes while the
  // loop sleeps waits for the sleep to end: with ports, stay up longer.
  const Duration spin = ethdevs_.empty() ? opts_.spin_before_sleep : std::max(opts_.spin_before_sleep, kPortSpin);
  if (t - last_busy_ < spin) return;
  for (auto& n : nodes_)
    if (!n->prepare_sleep(t)) return;
  // Nothing stays unwritten while the engine sleeps; a capture's count or
  // duration, or a slow stream, keep the sleep short.
  if (has_captures()) service_captures(t);
  // Without external ports only a wake fd (host doorbell, post(), wake())
  // or the next timer ends the sleep. DPDK ports here raise no RX
  // interrupts, so with ports the sleep backs off from 10 us to the cap.
  Duration sleep = kMaxIdleSleep;
  if (!ethdevs_.empty()) {
    port_sleep_ = port_sleep_.count() == 0 ? std::min(us(10), opts_.max_port_sleep)
                                           : std::min(port_sleep_ * 2, opts_.max_port_sleep);
    sleep = port_sleep_;
  }
  Time next = wheel_.next_expiry();
  for (const auto& e : ethdevs_) next = std::min(next, e->tx_resume_time());  // a paced port's next slot
  if (next != kTimeNever) sleep = std::min(sleep, next - t);
  if (has_captures()) sleep = std::min(sleep, next_capture_service_ - t);
  if (sleep <= Duration(0)) return;
  sleeps_.store(sleeps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  epoll_event evs[8];
  const timespec ts{time_t(sleep.count() / 1'000'000'000'000), long((sleep.count() % 1'000'000'000'000) / 1000)};
  int n = epoll_pwait2(epoll_fd_, evs, 8, &ts, nullptr);
  if (n < 0 && errno == ENOSYS) {  // kernels before 5.11: millisecond resolution
    const int timeout_ms = int((sleep.count() + 999'999'999) / 1'000'000'000);
    n = epoll_wait(epoll_fd_, evs, 8, timeout_ms);
  }
  for (int i = 0; i < n; i++) drain_eventfd(evs[i].data.fd);
}

void Engine::run(const std::atomic<bool>& stop) {
  // A thread the EAL did not start has no lcore id and so no mempool
  // cache: every mbuf would go through the shared ring. Register it.
  const bool registered = rte_lcore_id() == LCORE_ID_ANY && rte_thread_register() == 0;
  // Short sleeps are the back-off of a poller: let them be short (the
  // default slack stretches a 10 us sleep to 60 us).
  const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  prctl(PR_SET_TIMERSLACK, kTimerSlackNs, 0, 0, 0);
  start();
  last_busy_ = now();
  port_sleep_ = Duration(0);
  while (!stop.load(std::memory_order_relaxed)) {
    const Time t = now();
    iterations_++;
    if (poll_once(t)) {
      last_busy_ = t;
      port_sleep_ = Duration(0);
    } else {
      idle(t);
    }
  }
  flush_captures();
  if (old_slack > 0) prctl(PR_SET_TIMERSLACK, old_slack, 0, 0, 0);
  if (registered) rte_thread_unregister();
}

void Engine::report_counters(CounterSink& sink) const {
  for (const auto& n : nodes_) {
    n->report_counters(sink);
    for (uint16_t i = 0; i < n->num_ports(); i++)
      if (const Port* p = n->port(i)) p->report(sink);
  }
}

}  // namespace rocemu
