#include "common/engine/link.h"

#include <algorithm>

#include "common/engine/dpdk.h"
#include "common/engine/node.h"

namespace rocemu {
namespace {

// serialization_time() of a frame: its bits times 1e12 fit in 64 bits
// (up to 2 MB), so no 128-bit division (a library call) per frame. The
// same value.
Duration frame_time(uint32_t wire_len, uint64_t bits_per_second) {
  if (wire_len > 2'000'000) return serialization_time(wire_len, bits_per_second);
  return Duration(int64_t(uint64_t(wire_len) * 8 * 1000000000000ull / bits_per_second));
}

}  // namespace

uint16_t LinkEnd::tx_burst(rte_mbuf** pkts, uint16_t n, Time now) {
  uint16_t i = 0;
  for (; i < n; i++) {
    if (!link_->ready(side_, now)) break;
    link_->send(side_, pkts[i], now);
  }
  return i;
}

bool LinkEnd::tx_ready(Time now) { return link_->ready(side_, now); }
void LinkEnd::tx_idle(Time now) { link_->idle(side_, now); }
uint64_t LinkEnd::rate_bps() const { return link_->rate(side_); }
uint32_t LinkEnd::mtu() const { return link_->params_.mtu; }
bool LinkEnd::link_up() const { return link_->up(side_) && link_->up(1 - side_); }
Duration LinkEnd::peer_tx_slack() const { return link_->params_.tx_slack; }

InternalLink::InternalLink(std::string name, Node* a, uint16_t port_a, Node* b, uint16_t port_b,
                           const LinkParams& params, TimerWheel& wheel, dpdk::PacketPool& pool, uint64_t seed)
    : name_(std::move(name)), params_(params), wheel_(wheel), pool_(pool) {
  ends_[0] = std::make_unique<LinkEnd>(this, 0, a, port_a, a->name() + ":" + std::to_string(port_a));
  ends_[1] = std::make_unique<LinkEnd>(this, 1, b, port_b, b->name() + ":" + std::to_string(port_b));
  a->set_port(port_a, ends_[0].get());
  b->set_port(port_b, ends_[1].get());
  for (int s = 0; s < 2; s++) {
    Wire& w = wires_[s];
    w.link = this;
    w.side = s;
    w.fault.reseed(Rng::derive(seed, uint64_t(s) + 1));
    PortCounters& c = ends_[s]->counters();
    w.fault.bind({.dropped = &c[PortCounters::tx_drop_fault],
                  .corrupted = &c[PortCounters::tx_corrupted_fault],
                  .duplicated = &c[PortCounters::tx_duplicated_fault],
                  .delayed = &c[PortCounters::tx_delayed_fault]});
    w.deliver_timer.bind<&Wire::on_deliver>(&w);
    w.ready_timer.bind<&Wire::on_ready>(&w);
  }
}

InternalLink::~InternalLink() {
  for (Wire& w : wires_) {
    w.fault.held().clear();
    wheel_.cancel(w.deliver_timer);
    wheel_.cancel(w.ready_timer);
  }
}

bool InternalLink::ready(int side, Time now) {
  Wire& w = wires_[side];
  if (!w.ready_deferred && w.busy_until <= now + params_.tx_slack) [[likely]]
    return true;
  // Out of line: the common case above stays small enough to inline.
  return [&]() __attribute__((noinline)) {
    if (w.ready_deferred) {
      // The owner asks after all: the deferred on_ready is armed as it would
      // have been, unless its time has passed (it would have found nothing
      // to do). Armed also when the port is ready: if it comes later at this
      // same time, it finds the owner's next frame on the wire.
      w.ready_deferred = false;
      if (!wheel_.fired(w.deferred_at, w.deferred_seq)) {
        w.ready_wanted = true;
        wheel_.schedule(w.ready_timer, w.deferred_at, w.deferred_seq);
      }
    }
    if (w.busy_until <= now + params_.tx_slack) return true;
    if (!w.ready_wanted) {
      w.ready_wanted = true;
      wheel_.schedule(w.ready_timer, w.busy_until - params_.tx_slack);
    }
    return false;
  }();
}

void InternalLink::idle(int side, Time now) {
  // ready(), but the on_ready it would arm is only noted.
  Wire& w = wires_[side];
  if (w.busy_until <= now + params_.tx_slack || w.ready_wanted) return;
  if (w.ready_deferred && !wheel_.fired(w.deferred_at, w.deferred_seq)) return;
  w.ready_deferred = true;
  w.deferred_at = w.busy_until - params_.tx_slack;
  w.deferred_seq = wheel_.reserve();
}

void InternalLink::push(Wire& w, rte_mbuf* pkt, Time arrival) {
  w.fault.held().push(pkt, arrival);
  if (!w.deliver_timer.armed() || arrival < w.deliver_timer.expiry()) wheel_.schedule(w.deliver_timer, arrival);
}

Time InternalLink::earliest_start(rte_mbuf* pkt, Time now) const {
  // Modelled time rules: a packet handed on late (the engine handled its
  // burst after the fact) leaves as it would have on time, from its
  // arrival at this node -- within the slack the link may run ahead, so
  // nothing is dated earlier than `now - tx_slack`. Without slack (exact
  // virtual time) every packet is handled on time and leaves at `now`.
  if (params_.tx_slack.count() == 0) return now;
  const Time arrival = dpdk::meta(pkt).arrival;
  if (arrival <= Duration(0)) return now;
  return std::clamp(arrival, now - params_.tx_slack, now);
}

void InternalLink::send(int side, rte_mbuf* pkt, Time now) {
  Wire& w = wires_[side];
  PortCounters& c = ends_[side]->counters();
  const uint32_t len = rte_pktmbuf_pkt_len(pkt);
  if (!up(side) || !up(1 - side)) {
    c[PortCounters::tx_drop_link_down]++;
    rte_pktmbuf_free(pkt);
    return;
  }
  // Frames carry no FCS; allow Ethernet + one VLAN tag on top of the MTU.
  if (len > params_.mtu + 18) {
    c[PortCounters::tx_drop_oversize]++;
    rte_pktmbuf_free(pkt);
    return;
  }
  c[PortCounters::tx_packets]++;
  c[PortCounters::tx_bytes] += len;
  const Time start = std::max(earliest_start(pkt, now), w.busy_until);
  w.busy_until = start + frame_time(wire_bytes(len), rate(side));
  if (w.tx_tap.capture != nullptr) {
    dpdk::seal(pkt);
    w.tx_tap.record(start, dpdk::bytes(pkt));
  }
  const Time arrival = w.busy_until + params_.delay;
  if (!w.fault.active()) {
    push(w, pkt, arrival);
    return;
  }
  const FaultStage::Outcome o = w.fault.apply(pkt, pool_);
  if (o.pkt == nullptr) return;
  if (o.copy != nullptr) push(w, o.copy, arrival + o.extra);
  push(w, o.pkt, arrival + o.extra);
}

void InternalLink::Wire::on_deliver(Time now) {
  constexpr uint16_t kBurst = 256;  // a NIC writes a burst's payload in one call
  rte_mbuf* burst[kBurst];
  LinkEnd& to = *link->ends_[1 - side];
  DelayQueue& q = fault.held();
  while (!q.empty() && q.next().due <= now) {
    uint16_t n = 0;
    while (n < kBurst && !q.empty() && q.next().due <= now) {
      const DelayQueue::Held f = q.pop();
      rte_mbuf* m = f.pkt;
      dpdk::meta(m).arrival = f.due;
      const uint32_t len = rte_pktmbuf_pkt_len(m);
      to.counters()[PortCounters::rx_packets]++;
      to.counters()[PortCounters::rx_bytes] += len;
      if (tap.capture != nullptr) {
        dpdk::seal(m);
        tap.record(f.due, {rte_pktmbuf_mtod(m, const uint8_t*), len});
      }
      burst[n++] = m;
    }
    to.owner()->on_rx(to.index(), burst, n, now);
  }
  if (!q.empty()) link->wheel_.schedule(deliver_timer, q.next().due);
}

void InternalLink::Wire::on_ready(Time now) {
  ready_wanted = false;
  LinkEnd& from = *link->ends_[side];
  from.owner()->on_tx_ready(from.index(), now);
}

}  // namespace rocemu
