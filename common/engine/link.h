// Internal links: a modelled full-duplex wire between two node ports.
// Each direction serialises frames at line rate (Ethernet preamble, FCS and
// inter-frame gap included), adds the propagation delay, applies its fault
// stage and delivers in bursts at the arrival time.
#pragma once

#include <rte_mbuf.h>

#include <memory>
#include <string>
#include <vector>

#include "common/engine/capture.h"
#include "common/engine/fault_stage.h"
#include "common/engine/port.h"
#include "common/engine/timer_wheel.h"

namespace rocemu {

namespace dpdk {
class PacketPool;
}

struct LinkParams {
  uint64_t rate_bps = 100'000'000'000ull;
  Duration delay = us(1);       // propagation delay
  uint32_t mtu = 9000;          // largest IP packet
  // Real time only: how far ahead of `now` the transmitter may run. An
  // engine iteration handles a burst at one `now`; without slack a 100G
  // port could send one frame per iteration.
  Duration tx_slack{0};
};

class InternalLink;

// One end of a link, as its node sees it; transmits on the wire leading
// away from it.
class LinkEnd final : public Port {
 public:
  LinkEnd(InternalLink* link, int side, Node* owner, uint16_t index, std::string name)
      : Port(owner, index, std::move(name)), link_(link), side_(side) {}
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n, Time now) override;
  bool tx_ready(Time now) override;
  void tx_idle(Time now) override;
  uint64_t rate_bps() const override;
  uint32_t mtu() const override;
  bool link_up() const override;
  Duration peer_tx_slack() const override;
  InternalLink& link() const { return *link_; }

 private:
  InternalLink* link_;
  int side_;
};

class InternalLink {
 public:
  // Both nodes must have the port index free. `seed` drives the fault stages.
  InternalLink(std::string name, Node* a, uint16_t port_a, Node* b, uint16_t port_b, const LinkParams& params,
               TimerWheel& wheel, dpdk::PacketPool& pool, uint64_t seed);
  ~InternalLink();
  InternalLink(const InternalLink&) = delete;
  InternalLink& operator=(const InternalLink&) = delete;

  const std::string& name() const { return name_; }
  LinkEnd& end(int side) { return *ends_[side]; }
  const LinkParams& params() const { return params_; }
  // The fault stage of the direction leaving `side`.
  FaultStage& faults(int side) { return wires_[side].fault; }
  const FaultStage& faults(int side) const { return wires_[side].fault; }
  // Replaces the configured faults of that direction (not those added at run time).
  void set_faults(int side, FaultConfig cfg) { wires_[side].fault.configure(std::move(cfg)); }
  // Capture what is delivered at the far end of the direction leaving
  // `side`, stamped with its arrival.
  void set_tap(int side, Tap tap) { wires_[side].tap = tap; }
  // Capture what `side` puts on the wire, stamped when it starts to leave
  // (before the wire's faults).
  void set_tx_tap(int side, Tap tap) { wires_[side].tx_tap = tap; }
  uint64_t in_flight(int side) const { return wires_[side].fault.held().size(); }

 private:
  friend class LinkEnd;
  struct Wire {
    InternalLink* link = nullptr;
    int side = 0;  // transmitting side
    Time busy_until{0};
    Timer deliver_timer;
    Timer ready_timer;
    bool ready_wanted = false;
    // An on_ready the owner does not wait for (tx_idle): not armed, only
    // its time and place in the firing order are kept, in case the owner
    // asks before it would have come (then it is armed with them).
    bool ready_deferred = false;
    Time deferred_at{0};
    uint64_t deferred_seq = 0;
    // Its faults; what is in flight is held there until it arrives.
    FaultStage fault;
    Tap tap;     // at the far end, on arrival
    Tap tx_tap;  // at the near end, on departure

    void on_deliver(Time now);
    void on_ready(Time now);
  };

  bool up(int side) const { return !wires_[side].fault.link_down(); }
  uint64_t rate(int side) const {
    const auto& r = wires_[side].fault.rate_bps();
    return r ? *r : params_.rate_bps;
  }
  bool ready(int side, Time now);
  void idle(int side, Time now);
  // When a packet handed over at `now` starts on the wire at the earliest.
  Time earliest_start(rte_mbuf* pkt, Time now) const;
  void send(int side, rte_mbuf* pkt, Time now);
  void push(Wire& w, rte_mbuf* pkt, Time arrival);

  std::string name_;
  LinkParams params_;
  TimerWheel& wheel_;
  dpdk::PacketPool& pool_;
  std::unique_ptr<LinkEnd> ends_[2];
  Wire wires_[2];
};

}  // namespace rocemu
