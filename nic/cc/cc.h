// Congestion control at the NIC: a strategy chosen once per NIC (`none`,
// `dcqcn`, ...). The algorithm owns its per-QP state (a Flow), is fed the
// events it needs -- bytes sent, CNPs received, CE-marked packets received,
// ACKs, its own timers on the engine's timer wheel -- and answers with a
// rate, which the NIC's transmit scheduler enforces by pacing the QP.
//
// Adding an algorithm: a Flow subclass, an Algorithm that opens it, a name
// in make_algorithm(), and its knobs in CcConfig. Nothing in the transport
// (requester, responder, completer) changes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/counters.h"
#include "common/engine/time.h"
#include "common/engine/timer_wheel.h"
#include "nic/cc/dcqcn_params.h"

namespace rocemu::nic::cc {

// What a flow (one QP) is opened with.
struct FlowInit {
  uint32_t qpn = 0;
  uint8_t priority = 0;        // IEEE priority of the QP's traffic (PFC, mlx5 enable/<prio>)
  double line_rate_bps = 0;    // the port's rate
  TimerWheel* timers = nullptr;
  // Called when the rate goes up, so a QP waiting at the old rate can go sooner.
  Timer::Callback on_rate_up = nullptr;
  void* ctx = nullptr;
};

// One QP's congestion state. The scheduler reads rate_bps() on every
// packet; the algorithm changes it on events and timers.
class Flow {
 public:
  explicit Flow(const FlowInit& init) : rate_bps_(init.line_rate_bps), on_rate_up_(init.on_rate_up), ctx_(init.ctx) {}
  virtual ~Flow() = default;
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;

  // Current sending rate in bits per second (frame bytes on the wire).
  double rate_bps() const { return rate_bps_; }

  // ---- reaction point (sender) ----
  // A packet of `bytes` (the whole frame) left the QP.
  virtual void on_sent(uint32_t /*bytes*/, Time /*now*/) {}
  // A CNP arrived for this QP. Returns false if the algorithm ignores CNPs
  // on the QP's priority (mlx5 roce_rp/enable/<prio> off).
  virtual bool on_cnp(Time /*now*/) { return false; }
  // An ACK or NAK arrived (for algorithms that use them; DCQCN does not).
  virtual void on_ack(Time /*now*/) {}

  // ---- notification point (receiver) ----
  // A CE-marked RoCE packet arrived on this QP. Returns true if a CNP must
  // go to the sender now (at most one per min_time_between_cnps).
  virtual bool on_ce(Time /*now*/) { return false; }
  // Whether this QP's priority has a notification point at all.
  virtual bool np_enabled() const { return false; }

  // Per-QP counters under `scope` (e.g. "h1/qp17").
  virtual void report(CounterSink& /*sink*/, std::string_view /*scope*/, Time /*now*/) const {}

 protected:
  void set_rate(double bps, Time now) {
    const bool up = bps > rate_bps_;
    rate_bps_ = bps;
    if (up && on_rate_up_ != nullptr) on_rate_up_(ctx_, now);
  }
  double rate_bps_;

 private:
  Timer::Callback on_rate_up_;
  void* ctx_;
};

struct CcConfig;

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string_view name() const = 0;
  virtual std::unique_ptr<Flow> open(const FlowInit& init) const = 0;
  // New knob values while running: open flows use them from their next
  // event on (what a flow derives from the line rate when it opens, such as
  // its maximum rate, stays).
  virtual void configure(const CcConfig& /*cfg*/) {}
};

// The configuration surface of congestion control on a NIC (topology file
// key `cc`). One table of knobs per algorithm.
struct CcConfig {
  std::string algorithm = "dcqcn";  // "none" or "dcqcn"
  std::string profile = "mlx5";     // dcqcn: mlx5, paper, hpcc
  DcqcnParams dcqcn = DcqcnParams::mlx5();
};

// The algorithm named by `cfg`; nullptr for an unknown name (the topology
// parser rejects those first).
std::unique_ptr<Algorithm> make_algorithm(const CcConfig& cfg);

}  // namespace rocemu::nic::cc
