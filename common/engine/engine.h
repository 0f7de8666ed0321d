// The engine runs a fabric: nodes joined by internal links and external
// DPDK ports, on one thread, run to completion. In real time it reads the
// TSC once per iteration, polls ports and host queues, fires due timers and
// sleeps when idle; in virtual time it jumps from event to event, so a run
// is deterministic for a given topology, traffic and seed.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/engine/capture.h"
#include "common/engine/clock.h"
#include "common/engine/dpdk.h"
#include "common/engine/ethdev_port.h"
#include "common/engine/link.h"
#include "common/engine/node.h"
#include "common/engine/timer_wheel.h"
#include "common/status.h"

namespace rocemu {

enum class TimeMode { kVirtual, kReal };

struct EngineOptions {
  TimeMode mode = TimeMode::kVirtual;
  uint64_t seed = 1;
  uint32_t mbufs = 16384;
  // Real time: internal links may run this far ahead of `now` (see LinkParams).
  Duration real_tx_slack = us(50);
  // Virtual time only: a real-time engine that falls behind, made
  // deterministic. The loop wakes only on multiples of this (timers then
  // fire late, in batches, as after a busy or descheduled iteration) and
  // links run with real_tx_slack as in real time. 0: exact virtual time.
  Duration virtual_lag{0};
  // Real time: busy-poll this long after the last work before sleeping:
  // long enough to ride through a frame's modelled link delays (a sleep
  // that short costs more than it saves), short enough that the engine is
  // not a third busy poller beside a busy-polling perftest pair on two
  // cores. At 100 us it never slept between ib_write_lat's round trips,
  // which then took 62 us (the pair shared one core); at 10 us, 17-19 us.
  Duration spin_before_sleep = us(10);
  // Real time with external ports (no RX interrupts): after
  // spin_before_sleep without work the loop sleeps 10 us, then twice as
  // long after each empty poll, up to this.
  Duration max_port_sleep = us(500);
};

// Reads an eventfd's counter to zero without ever waiting, whatever its
// flags: O_NONBLOCK belongs to the open file, which an application that
// was handed the descriptor can clear (RWF_NOWAIT holds for this read).
void drain_eventfd(int fd);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineOptions& opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // ---- building a fabric (before start()) ----
  template <typename T, typename... Args>
  T& add(Args&&... args) {
    auto node = std::make_unique<T>(std::forward<Args>(args)...);
    T& ref = *node;
    add_node(std::move(node));
    return ref;
  }
  Node& add_node(std::unique_ptr<Node> node);
  Node* find_node(std::string_view name) const;
  Result<InternalLink*> connect(Node& a, uint16_t port_a, Node& b, uint16_t port_b, LinkParams params);
  Result<EthdevPort*> attach_ethdev(Node& node, uint16_t port, const EthdevParams& params);
  // Captures both directions of a link (what each end receives, inbound)
  // into one file; returns the capture's id.
  Status capture_link(InternalLink& link, const std::string& path) { return capture_link(link, path, {}).status(); }
  Result<uint32_t> capture_link(InternalLink& link, const std::string& path, const CaptureOptions& opts);
  // Captures what a port sends (outbound, as it starts to leave) and
  // receives (inbound, as it arrives).
  Status capture_port(Node& node, uint16_t port, const std::string& path) {
    return capture_port(node, port, path, {}).status();
  }
  Result<uint32_t> capture_port(Node& node, uint16_t port, const std::string& path, const CaptureOptions& opts);
  // Stops a capture: its taps go, what it holds is written, the file closes.
  // A stream whose reader has not taken it all yet closes once it has (the
  // engine tries again at each service, never waiting): a reader never
  // sees a block cut short, unless it takes nothing for kCaptureCloseGrace.
  static constexpr Duration kCaptureCloseGrace = ms(2000);
  bool stop_capture(uint32_t id);
  struct CaptureInfo {
    uint32_t id;
    std::string point;  // the port or link
    std::string path;
    uint64_t packets;
    uint64_t dropped;
  };
  std::vector<CaptureInfo> captures() const;
  void flush_captures();

  // ---- running ----
  void start();
  bool started() const { return started_; }
  // Virtual time: process events up to and including `t`; now() = t after.
  void run_until(Time t);
  void run_for(Duration d) { run_until(now() + d); }
  // Virtual time: run until `done()` holds (checked after every event) or
  // `deadline`; returns done().
  bool run_until(const std::function<bool()>& done, Time deadline);
  // Virtual time: run until no event is left or `deadline`.
  void run_to_idle(Time deadline = kTimeNever);
  // Real time: the loop, until `stop` is set (then wake() it). Every
  // iteration reads the clock once, polls the external ports and the
  // nodes, and fires due timers; an idle loop sleeps (see EngineOptions).
  void run(const std::atomic<bool>& stop);
  // Thread-safe: runs `cmd` on the engine thread between bursts.
  void post(std::function<void(Engine&)> cmd);
  // Wakes a sleeping real-time loop (e.g. after setting `stop`).
  void wake();
  // Real time: a descriptor whose readiness wakes the sleeping loop (which
  // then reads 8 bytes from it: an eventfd), until unwatch_fd() (before it
  // is closed). Engine thread. Nothing in virtual time.
  void watch_fd(int fd);
  void unwatch_fd(int fd);

  Time now() const { return clock_->now(); }
  TimeMode mode() const { return opts_.mode; }
  // How far internal links may run ahead of `now` in this engine.
  Duration tx_slack() const;
  const EngineOptions& options() const { return opts_; }
  TimerWheel& timers() { return wheel_; }
  dpdk::PacketPool& pool() { return *pool_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const std::vector<std::unique_ptr<InternalLink>>& links() const { return links_; }
  InternalLink* find_link(std::string_view name) const;
  void report_counters(CounterSink& sink) const;
  uint64_t iterations() const { return iterations_; }
  // Real time: how many times the loop went to sleep (any thread may ask).
  uint64_t sleeps() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  Engine(const EngineOptions& opts, std::unique_ptr<dpdk::PacketPool> pool);
  void apply_posted();
  // Virtual time: when the loop next wakes for an event due at `next`.
  Time wake_time(Time next) const;
  bool poll_once(Time now);
  void idle(Time now);

  EngineOptions opts_;
  std::unique_ptr<Clock> clock_;
  ManualClock* virtual_clock_ = nullptr;
  TimerWheel wheel_;
  std::unique_ptr<dpdk::PacketPool> pool_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<InternalLink>> links_;
  std::vector<std::unique_ptr<EthdevPort>> ethdevs_;
  struct ActiveCapture {
    uint32_t id;
    std::string point;
    std::unique_ptr<Capture> capture;
    Time deadline;
    std::vector<std::function<void()>> detach;  // clears its taps
    std::vector<std::pair<const void*, int>> taps;  // the taps it holds: (link or device, which)
  };
  // `taps`: the taps the capture takes; each one capture at a time (a
  // second would take the first one's taps).
  Result<uint32_t> add_capture(const std::string& point, std::vector<std::pair<const void*, int>> taps,
                               const std::string& path,
                               const CaptureOptions& opts,
                               const std::function<void(Capture&, std::vector<std::function<void()>>&)>& attach);
  // Real time, every kCaptureInterval and before a sleep: writes out what
  // captures hold and stops those that are done (count, duration, reader gone).
  void service_captures(Time now);
  bool has_captures() const { return !captures_.empty() || !closing_.empty(); }
  std::vector<ActiveCapture> captures_;
  // Stopped streams still writing out what they hold.
  std::vector<ClosingCapture> closing_;
  uint32_t next_capture_id_ = 1;
  Time next_capture_service_{0};
  bool started_ = false;
  uint64_t iterations_ = 0;
  std::atomic<uint64_t> sleeps_{0};

  std::mutex post_mutex_;
  std::vector<std::function<void(Engine&)>> posted_;
  std::atomic<bool> has_posted_{false};
  int wake_fd_ = -1;
  int epoll_fd_ = -1;
  Time last_busy_{0};
  Duration port_sleep_{0};
};

}  // namespace rocemu
