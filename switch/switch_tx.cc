// The transmit side: per-port scheduling of control frames (PFC, storm,
// ARP) ahead of data, the PFC-aware scheduler, line-rate transmission,
// PFC generation (XOFF/XON per ingress PG) and the PFC watchdog.
#include <algorithm>

#include "common/wire/build.h"
#include "switch/switch.h"
#include "switch/trim.h"

namespace rocemu::sw {
namespace {

constexpr uint16_t kBurst = 32;

}  // namespace

void Switch::mark(PortRuntime& p) {
  if (is_touched_[p.index]) return;
  is_touched_[p.index] = 1;
  touched_.push_back(p.index);
}

void Switch::flush_kicks(Time now) {
  if (kicking_) return;
  kicking_ = true;
  while (!touched_.empty()) {
    const uint16_t i = touched_.back();
    touched_.pop_back();
    is_touched_[i] = 0;
    transmit(*ports_[i], now);
  }
  kicking_ = false;
}

uint8_t Switch::pg_priorities(uint8_t pg) const {
  uint8_t m = 0;
  for (int sp = 0; sp < kNumSwitchPriorities; sp++)
    if (sp_pg_[sp] == pg) m |= uint8_t(1u << sp);
  return m;
}

void Switch::transmit(PortRuntime& p, Time now) {
  Port* port = this->port(p.index);
  if (port == nullptr) return;
  const auto& rate = p.fault.rate_bps();
  for (;;) {
    if (p.n_hold > 0) {
      const uint16_t sent = port->tx_burst(p.hold, p.n_hold, now);
      std::copy(p.hold + sent, p.hold + p.n_hold, p.hold);
      p.n_hold = uint16_t(p.n_hold - sent);
      if (p.n_hold > 0) return;
    }
    if (rate && p.next_tx > now) {
      timers().schedule(p.pace_timer, p.next_tx);
      return;
    }
    if (!has_frame(p)) {
      // Nothing to send: no on_tx_ready() is needed when the wire is free.
      port->tx_idle(now);
      return;
    }
    if (!port->tx_ready(now)) return;
    rte_mbuf* burst[kBurst];
    const uint16_t max = p.batch_tx ? kBurst : 1;
    uint16_t k = 0;
    while (k < max) {
      rte_mbuf* m = next_frame(p, now);
      if (m == nullptr) break;
      burst[k++] = m;
      if (rate) {
        p.next_tx = std::max(p.next_tx, now) + serialization_time(wire_bytes(rte_pktmbuf_pkt_len(m)), *rate);
        if (p.next_tx > now) break;
      }
    }
    if (k == 0) return;
    const uint16_t sent = port->tx_burst(burst, k, now);
    if (sent < k) {
      std::copy(burst + sent, burst + k, p.hold);
      p.n_hold = uint16_t(k - sent);
      return;
    }
  }
}

rte_mbuf* Switch::next_frame(PortRuntime& p, Time now) {
  if (p.pfc_pending) {
    p.pfc_pending = false;
    if (rte_mbuf* m = make_pfc_frame(p, now)) return m;
  }
  if (p.storm_pending) {
    p.storm_pending = false;
    const PfcStorm& s = cfg_.interfaces[p.index].pfc_storm;
    uint16_t quanta[kNumPriorities];
    std::fill(quanta, quanta + kNumPriorities, s.quanta);
    if (rte_mbuf* m = pool().alloc()) {
      auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, wire::kPfcFrameLen));
      wire::encode_pfc({d, wire::kPfcFrameLen}, p.mac, s.priorities, quanta);
      for (int prio = 0; prio < kNumPriorities; prio++)
        if ((s.priorities >> prio) & 1) p.pfc_tx[prio]++;
      p.counters[PortCounters::tx_pfc_frames]++;
      return m;
    }
  }
  if (!p.control.empty()) return p.control.pop();
  return dequeue(p, now);
}

rte_mbuf* Switch::make_pfc_frame(PortRuntime& p, Time now) {
  const uint8_t enable = p.xoff_mask | p.xon_pending;
  if (enable == 0) return nullptr;
  rte_mbuf* m = pool().alloc();
  if (m == nullptr) {
    p.pfc_pending = true;  // try again with the next frame
    return nullptr;
  }
  uint16_t quanta[kNumPriorities] = {};
  for (int prio = 0; prio < kNumPriorities; prio++)
    if ((p.xoff_mask >> prio) & 1) quanta[prio] = cfg_.qos.pfc.pause_quanta;
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, wire::kPfcFrameLen));
  wire::encode_pfc({d, wire::kPfcFrameLen}, p.mac, enable, quanta);
  p.xon_pending = 0;
  for (int prio = 0; prio < kNumPriorities; prio++)
    if ((enable >> prio) & 1) p.pfc_tx[prio]++;
  p.counters[PortCounters::tx_pfc_frames]++;
  if (p.xoff_mask != 0)
    timers().schedule(p.refresh_timer, now + quanta_to_duration(cfg_.qos.pfc.pause_quanta, p.speed) / 2);
  return m;
}

uint8_t Switch::paused_tcs(PortRuntime& p, Time now) {
  if (now >= p.pause_horizon) return 0;
  uint8_t mask = 0;
  for (int prio = 0; prio < kNumPriorities; prio++) {
    if (((pfc_rx_prios_ >> prio) & 1) == 0 || !p.pause[prio].paused(now)) continue;
    const uint8_t tc = cfg_.qos.sp_to_tc[prio];
    if (p.watchdog && p.wd[tc].storm) continue;
    mask |= uint8_t(1u << tc);
  }
  return mask;
}

rte_mbuf* Switch::dequeue(PortRuntime& p, Time now) {
  uint8_t eligible = 0;
  uint32_t head_len[kNumTc] = {};
  for (uint8_t tc = 0; tc < kNumTc; tc++) {
    if (p.queue[tc].empty()) continue;
    eligible |= uint8_t(1u << tc);
    head_len[tc] = rte_pktmbuf_data_len(p.queue[tc].front());
  }
  if (eligible == 0) return nullptr;
  if (pfc_rx_prios_ != 0) eligible &= uint8_t(~paused_tcs(p, now));
  const int tc = p.scheduler.select(eligible, head_len);
  if (tc < 0) return nullptr;
  rte_mbuf* m = p.queue[tc].pop();
  dpdk::PktMeta& meta = dpdk::meta(m);
  // One that waited here (busy port, PFC pause) leaves from now; one that
  // goes on as it came in keeps its arrival (see PktMeta::arrival).
  if (meta.stamp != now) meta.arrival = Time{0};
  mmu_.release(meta.in_port, meta.pg, p.index, uint8_t(tc), meta.aux);
  p.last_dequeue[tc] = now;
  account_tx(p, m);
  if (p.watchdog && p.wd[tc].storm) p.wd[tc].counters[WatchdogCounters::tx_ok]++;
  check_xon(*ports_[meta.in_port], meta.pg, now);
  return m;
}

void Switch::account_tx(PortRuntime& p, rte_mbuf* m) {
  const dpdk::PktMeta& meta = dpdk::meta(m);
  const uint32_t len = rte_pktmbuf_data_len(m);
  QueueCounters& q = p.queue_counters[meta.tc];
  q[QueueCounters::packets]++;
  q[QueueCounters::bytes] += len;
  if (meta.flags & kMetaFlagTrimmed) {
    q[QueueCounters::trim_sent_packets]++;
    p.counters[PortCounters::trim_sent_packets]++;
  }
  if (meta.tc == roce_tc_) {
    p.counters[PortCounters::tx_roce_packets]++;
    p.counters[PortCounters::tx_roce_bytes] += len;
  } else if (meta.tc == cnp_tc_) {
    p.counters[PortCounters::tx_cnp_packets]++;
    p.counters[PortCounters::tx_cnp_bytes] += len;
  } else {
    p.counters[PortCounters::tx_non_roce_packets]++;
    p.counters[PortCounters::tx_non_roce_bytes] += len;
  }
}

void Switch::update_xoff(PortRuntime& in, uint8_t pg, Time now) {
  PgBuffer& b = mmu_.pg(in.index, pg);
  if (b.xoff || !b.lossless || !mmu_.pg_wants_xoff(in.index, pg)) return;
  const uint8_t prios = pg_priorities(pg) & pfc_tx_prios_;
  if (prios == 0) return;
  b.xoff = true;
  in.xoff_mask |= prios;
  in.xon_pending &= uint8_t(~prios);
  for (int prio = 0; prio < kNumPriorities; prio++)
    if ((prios >> prio) & 1) in.xoff[prio].assert_xoff(now);
  in.pfc_pending = true;
  mark(in);
}

void Switch::check_xon(PortRuntime& in, uint8_t pg, Time now) {
  PgBuffer& b = mmu_.pg(in.index, pg);
  if (!b.xoff || !mmu_.pg_may_xon(in.index, pg)) return;
  b.xoff = false;
  const uint8_t prios = pg_priorities(pg) & in.xoff_mask;
  if (prios == 0) return;
  in.xoff_mask &= uint8_t(~prios);
  in.xon_pending |= prios;
  for (int prio = 0; prio < kNumPriorities; prio++)
    if ((prios >> prio) & 1) in.xoff[prio].release(now);
  if (in.xoff_mask == 0) timers().cancel(in.refresh_timer);
  in.pfc_pending = true;
  mark(in);
}

// ---- PFC watchdog ----

void Switch::on_watchdog(Time now) {
  const PfcWatchdog& w = cfg_.qos.watchdog;
  bool any = false;
  for (auto& pp : ports_) {
    PortRuntime& p = *pp;
    if (!p.watchdog) continue;
    any = true;
    for (uint8_t tc = 0; tc < kNumTc; tc++) {
      if (((lossless_tcs_ >> tc) & 1) == 0) continue;
      WatchdogQueue& s = p.wd[tc];
      if (!s.storm) {
        watchdog_detect(p, tc, now);
        continue;
      }
      Time last{0};
      for (int prio = 0; prio < kNumPriorities; prio++)
        if (((pfc_rx_prios_ >> prio) & 1) && cfg_.qos.sp_to_tc[prio] == tc) last = std::max(last, p.last_pause_rx[prio]);
      if (now - last >= w.restoration_time) {
        s.storm = false;
        s.counters[WatchdogCounters::storm_restored]++;
        log_->info("{}: {} TC{}: PFC storm over, queue restored", name(), cfg_.interfaces[p.index].name, tc);
        mark(p);
      }
    }
  }
  if (any) timers().schedule(watchdog_timer_, now + w.polling_interval);
  flush_kicks(now);
}

void Switch::watchdog_detect(PortRuntime& p, uint8_t tc, Time now) {
  if (p.queue[tc].empty()) return;
  Time since = kTimeNever;
  for (int prio = 0; prio < kNumPriorities; prio++) {
    if (((pfc_rx_prios_ >> prio) & 1) == 0 || cfg_.qos.sp_to_tc[prio] != tc) continue;
    if (p.pause[prio].paused(now)) since = std::min(since, p.pause[prio].since());
  }
  if (since == kTimeNever) return;
  const Time stuck_since = std::max(since, p.last_dequeue[tc]);
  if (now - stuck_since < cfg_.qos.watchdog.detection_time) return;
  WatchdogQueue& s = p.wd[tc];
  s.storm = true;
  s.detected_at = now;
  s.counters[WatchdogCounters::storm_detected]++;
  log_->warn("{}: {} TC{}: PFC storm detected (paused {:.1f} ms without progress), action {}", name(),
             cfg_.interfaces[p.index].name, tc, to_us(now - stuck_since) / 1000.0,
             watchdog_action_name(cfg_.qos.watchdog.action));
  for (int prio = 0; prio < kNumPriorities; prio++)
    if (((pfc_rx_prios_ >> prio) & 1) && cfg_.qos.sp_to_tc[prio] == tc) p.pause[prio].release(now);
  if (cfg_.qos.watchdog.action == WatchdogAction::kDrop) flush_queue(p, tc, now);
  mark(p);
}

void Switch::flush_queue(PortRuntime& p, uint8_t tc, Time now) {
  while (!p.queue[tc].empty()) {
    rte_mbuf* m = p.queue[tc].pop();
    const dpdk::PktMeta& meta = dpdk::meta(m);
    mmu_.release(meta.in_port, meta.pg, p.index, tc, meta.aux);
    p.wd[tc].counters[WatchdogCounters::tx_drop]++;
    p.queue_counters[tc][QueueCounters::drop_packets]++;
    p.queue_counters[tc][QueueCounters::drop_bytes] += meta.aux;
    p.counters[PortCounters::drop_pfc_watchdog]++;
    check_xon(*ports_[meta.in_port], meta.pg, now);
    rte_pktmbuf_free(m);
  }
}

}  // namespace rocemu::sw
