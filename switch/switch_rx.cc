// The receive side of the pipeline: fault stage, parse, trust, priority
// group, route, admission, ECN/trimming, enqueue; and the frames the
// switch consumes (PFC, ARP).
#include <algorithm>

#include "common/engine/lazy_payload.h"
#include "common/wire/build.h"
#include "switch/ecn.h"
#include "switch/switch.h"
#include "switch/trim.h"

namespace rocemu::sw {
namespace {

constexpr Duration kArpInterval = ms(1);

}  // namespace

void Switch::on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) {
  if (port >= ports_.size() || routes_ == nullptr) {
    dpdk::free_burst(pkts, n);
    return;
  }
  PortRuntime& in = *ports_[port];
  if (in.fault.active()) fault_stage(in, pkts, n, now);
  process(port, pkts, n, now);
}

void Switch::fault_stage(PortRuntime& in, rte_mbuf** pkts, uint16_t& n, Time now) {
  uint16_t kept = 0;
  auto hold = [&](rte_mbuf* m, Time due) {
    in.fault.held().push(m, due);
    if (!in.delay_timer.armed() || due < in.delay_timer.expiry()) timers().schedule(in.delay_timer, due);
  };
  for (uint16_t i = 0; i < n; i++) {
    const FaultStage::Outcome o = in.fault.apply(pkts[i], pool());
    if (o.pkt == nullptr) continue;
    if (o.copy != nullptr) hold(o.copy, now + o.extra);
    if (o.delayed) {
      hold(o.pkt, now + o.extra);
      continue;
    }
    pkts[kept++] = o.pkt;
  }
  n = kept;
}

void Switch::PortRuntime::on_delay(Time now) {
  constexpr uint16_t kBurst = 32;
  rte_mbuf* burst[kBurst];
  DelayQueue& q = fault.held();
  while (!q.empty() && q.next().due <= now) {
    uint16_t k = 0;
    while (k < kBurst && !q.empty() && q.next().due <= now) {
      const DelayQueue::Held h = q.pop();
      burst[k] = h.pkt;
      dpdk::meta(burst[k++]).arrival = h.due;  // it arrives now, as far as the model goes
    }
    sw->process(index, burst, k, now);
  }
  if (!q.empty()) sw->timers().schedule(delay_timer, q.next().due);
}

namespace {
constexpr Duration kModelStep = us(1);  // 12.5 KB at 100 Gbit/s
}  // namespace

void Switch::process(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) {
  PortRuntime& in = *ports_[port];
  constexpr uint16_t kAhead = 4;
  for (uint16_t i = 0; i < n && i < kAhead; i++) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
  // A burst a late real-time engine hands over at one `now` holds packets
  // that arrived over a while (dpdk::PktMeta::arrival). What arrived more
  // than kModelStep after the last transmit waits for the egress to take
  // what came before it, as on time: otherwise the burst would queue (and
  // be ECN-marked, and raise PFC) all at once. In exact virtual time a
  // burst's packets all arrive at `now` and this never splits it.
  Time sent_upto = n > 0 ? dpdk::meta(pkts[0]).arrival : now;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = pkts[i];
    if (i + kAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kAhead], void*));
    if (const Time a = dpdk::meta(m).arrival; a > sent_upto + kModelStep) {
      flush_kicks(now);
      sent_upto = a;
    }
    wire::PacketView v;
    // A frame the engine built and kept has a right IPv4 checksum (every
    // rewrite fixes it; corruption clears the flag): it is not summed again.
    const wire::DecodeError e = (dpdk::meta(m).flags & dpdk::kMetaIcrcValid)
                                    ? wire::decode_ip_checksum_good(dpdk::bytes(m), v)
                                    : wire::decode(dpdk::bytes(m), v);
    if (e != wire::DecodeError::kOk) {
      // A switch forwards IP whatever the transport says; only layer 2
      // and layer 3 faults stop it.
      if (!(v.is_ip() && e >= wire::DecodeError::kTruncatedUdp)) {
        in.counters[PortCounters::drop_parse_error]++;
        rte_pktmbuf_free(m);
        continue;
      }
      v.is_roce = false;
    }
    // An access port of the bridge: every frame but MAC control is
    // switched in its VLAN (switch_bridge.cc).
    if (port_vlan_[port] != 0 && v.kind != wire::PacketKind::kPfc && v.kind != wire::PacketKind::kPause) {
      bridge_local(in, m, v, port_vlan_[port], now);
      continue;
    }
    switch (v.kind) {
      case wire::PacketKind::kIpv4:
      case wire::PacketKind::kIpv6:
        forward(in, m, v, now);
        continue;
      case wire::PacketKind::kPfc:
        on_pfc(in, v, now);
        break;
      case wire::PacketKind::kPause:
        in.counters[PortCounters::rx_pause_frames]++;
        break;
      case wire::PacketKind::kArp:
        on_arp(in, v, now);
        break;
      default:
        in.counters[PortCounters::drop_not_ip]++;
        break;
    }
    rte_pktmbuf_free(m);
  }
  flush_kicks(now);
}

uint8_t Switch::classify(const wire::PacketView& v) const {
  const Mapping& map = cfg_.qos.mapping;
  switch (map.trust) {
    case Trust::kL3:
      return v.is_ip() ? map.dscp_to_sp[v.dscp] : map.port_default_sp;
    case Trust::kL2:
      return v.has_vlan ? map.pcp_to_sp[v.pcp] : map.port_default_sp;
    case Trust::kBoth:
      if (v.is_ip()) return map.dscp_to_sp[v.dscp];
      return v.has_vlan ? map.pcp_to_sp[v.pcp] : map.port_default_sp;
    case Trust::kPort:
      break;
  }
  return map.port_default_sp;
}

bool Switch::ingress(PortRuntime& in, rte_mbuf* m, const wire::PacketView& v, Class& cls) {
  const uint32_t rx_len = rte_pktmbuf_data_len(m);
  // trust -> switch priority -> priority group / traffic class, on the
  // headers as received (the outer ones of a VXLAN frame)
  cls.sp = classify(v);
  cls.pg = sp_pg_[cls.sp];
  cls.tc = cfg_.qos.sp_to_tc[cls.sp];
  in.pg_counters[cls.pg][PgCounters::rx_frames]++;
  in.pg_counters[cls.pg][PgCounters::rx_bytes] += rx_len;
  if (cls.pg == roce_pg_) {
    in.counters[PortCounters::rx_roce_packets]++;
    in.counters[PortCounters::rx_roce_bytes] += rx_len;
  } else {
    in.counters[PortCounters::rx_non_roce_packets]++;
    in.counters[PortCounters::rx_non_roce_bytes] += rx_len;
  }
  if (in.watchdog && in.wd[cls.tc].storm) {
    if (cfg_.qos.watchdog.action == WatchdogAction::kDrop) {
      in.wd[cls.tc].counters[WatchdogCounters::rx_drop]++;
      in.counters[PortCounters::drop_pfc_watchdog]++;
      rte_pktmbuf_free(m);
      return false;
    }
    in.wd[cls.tc].counters[WatchdogCounters::rx_ok]++;
  }
  return true;
}

void Switch::forward(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, Time now) {
  // `v` is the packet as received and, once routed, as it leaves: the
  // inner one of a frame this VTEP decapsulates, the outer one of a frame
  // it encapsulates (rewritten in place: no copy on the common path).
  Class cls;
  if (!ingress(in, m, v, cls)) return;
  // VXLAN to this VTEP: on with the inner packet (switch_vxlan.cc); a
  // bridged VNI's frame is switched in its VLAN (switch_bridge.cc)
  if (vtep_ip_ != 0 && v.is_ipv4() && v.is_udp && v.dport == cfg_.vxlan.port && v.ipv4().dst.get() == vtep_ip_) {
    const uint32_t src_vtep = v.ipv4().src.get();
    size_t vni = 0;
    if (!decapsulate(m, v, vni)) {
      rte_pktmbuf_free(m);
      return;
    }
    if (vnis_[vni].vlan != 0) {
      bridge_remote(in, m, v, vni, src_vtep, cls, now);
      return;
    }
  }

  // route: to an underlay next hop, or into the overlay and then to the
  // underlay next hop toward the remote VTEP
  uint32_t member;
  const NextHop* nh = routes_->route(v, member);
  if (nh != nullptr && nh->tunnel) {
    nh = encapsulate(in, m, v, *nh, member, now);
  } else if (!route_checks(in, m, v, nh, member, now)) {
    nh = nullptr;
  }
  if (nh == nullptr) {
    rte_pktmbuf_free(m);
    return;
  }
  egress(in, *ports_[nh->port], m, v, cls, now);
}

void Switch::egress(PortRuntime& in, PortRuntime& out, rte_mbuf* m, wire::PacketView& v, const Class& cls, Time now) {
  const uint8_t pg = cls.pg, tc = cls.tc;
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t len = rte_pktmbuf_data_len(m);

  // egress admission
  if (out.watchdog && out.wd[tc].storm && cfg_.qos.watchdog.action == WatchdogAction::kDrop) {
    out.wd[tc].counters[WatchdogCounters::tx_drop]++;
    out.queue_counters[tc][QueueCounters::drop_packets]++;
    out.queue_counters[tc][QueueCounters::drop_bytes] += len;
    in.counters[PortCounters::drop_pfc_watchdog]++;
    rte_pktmbuf_free(m);
    return;
  }
  const Admission adm = mmu_.check(in.index, pg, out.index, tc, len);
  if (!adm.ok()) {
    const bool ingress = adm.ingress == IngressPlace::kNone;
    const PacketTrim& trim = cfg_.qos.trim;
    if (!ingress && trim.enable && v.is_ip() && ((trim.eligible_tc >> tc) & 1) && tc != cnp_tc_) {
      // A VXLAN frame (encapsulated here or in transit) is trimmed inside:
      // its inner packet is the one a NIC reads. CNPs are never trimmed,
      // in VXLAN or not, and neither is a VXLAN frame whose inner frame is
      // not IP (a bridged ARP or other EtherType): it is dropped.
      wire::PacketView inner;
      const VxlanInner carried = vxlan_inner(v, cfg_.vxlan.port, inner);
      const bool vxlan = carried == VxlanInner::kIp;
      const wire::PacketView& pkt = vxlan ? inner : v;
      if (carried != VxlanInner::kOther && !(pkt.is_roce && pkt.opcode == wire::op::kCnp)) {
        enqueue_trimmed(in, out, m, v, vxlan ? &inner : nullptr, pg, tc, now);
        return;
      }
    }
    drop_no_buffer(in, out, m, pg, tc, ingress);
    return;
  }

  // ECN / WRED on the egress queue's depth
  const CongestionControl& cc = cfg_.qos.congestion[tc];
  if ((cc.ecn || cc.red) && v.is_ip()) {
    const bool ect = cc.ecn && v.ecn != wire::Ecn::kNotEct;
    const bool lossy = ((lossless_tcs_ >> tc) & 1) == 0;
    switch (wred_decide(cc.wred, mmu_.queue(out.index, tc).total(), ect, lossy, cc.red, rng())) {
      case EcnVerdict::kPass:
        break;
      case EcnVerdict::kMark:
        if (v.ecn != wire::Ecn::kCe) {
          set_ecn(data, v, wire::Ecn::kCe);
          out.queue_counters[tc][QueueCounters::ecn_marked_packets]++;
          out.counters[PortCounters::tx_ecn_marked_packets]++;
        }
        break;
      case EcnVerdict::kDrop:
        out.queue_counters[tc][QueueCounters::wred_dropped_packets]++;
        out.queue_counters[tc][QueueCounters::drop_packets]++;
        out.queue_counters[tc][QueueCounters::drop_bytes] += len;
        out.counters[PortCounters::drop_wred]++;
        rte_pktmbuf_free(m);
        return;
    }
  }
  enqueue(in, out, m, cls.sp, pg, tc, adm.ingress, now);
}

// The checks and rewrite of a packet routed to the underlay next hop `nh`
// (nullptr: no route): MAC rewrite, TTL; false if it is dropped (counted;
// the caller frees it).
bool Switch::route_checks(PortRuntime& in, rte_mbuf* m, const wire::PacketView& v, const NextHop* nh, uint32_t member,
                          Time now) {
  if (nh == nullptr || nh->local) {
    in.counters[nh == nullptr ? PortCounters::drop_no_route : PortCounters::drop_to_switch]++;
    return false;
  }
  if (!nh->resolved) {
    glean(*nh, v.dst_ip(), now);
    in.counters[PortCounters::drop_neighbor_miss]++;
    return false;
  }
  const uint8_t ttl = v.is_ipv4() ? v.ipv4().ttl : v.ipv6().hop_limit;
  if (ttl <= 1) {
    in.counters[PortCounters::drop_ttl_expired]++;
    return false;
  }
  PortRuntime& out = *ports_[nh->port];
  if (port(out.index) == nullptr || out.fault.link_down()) {
    in.counters[PortCounters::drop_link_down]++;
    return false;
  }
  if (uint32_t(v.ip_end - v.l3_off) > out.mtu) {
    in.counters[PortCounters::drop_mtu_exceeded]++;
    return false;
  }
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  auto& eth = *reinterpret_cast<wire::EthHdr*>(data);
  eth.dst = nh->mac;
  eth.src = out.mac;
  decrement_ttl(data, v);
  routes_->count_ecmp(member, rte_pktmbuf_data_len(m));
  return true;
}

void Switch::enqueue(PortRuntime& in, PortRuntime& out, rte_mbuf* m, uint8_t sp, uint8_t pg, uint8_t tc,
                     IngressPlace where, Time now) {
  const uint32_t len = rte_pktmbuf_data_len(m);
  mmu_.commit(in.index, pg, out.index, tc, len, where);
  if (where == IngressPlace::kSlack) in.pg_counters[pg][PgCounters::rx_slack_frames]++;
  dpdk::PktMeta& meta = dpdk::meta(m);
  meta.stamp = now;
  meta.in_port = in.index;
  meta.out_port = out.index;
  meta.prio = sp;
  meta.tc = tc;
  meta.pg = pg;
  meta.aux = len;
  meta.flags &= dpdk::kMetaCrossNode;  // the switch's own flags start clear
  out.queue[tc].push(m);
  mark(out);
  update_xoff(in, pg, now);
}

bool Switch::enqueue_trimmed(PortRuntime& in, PortRuntime& out, rte_mbuf* m, const wire::PacketView& v,
                             const wire::PacketView* inner, uint8_t pg, uint8_t tc, Time now) {
  const PacketTrim& trim = cfg_.qos.trim;
  out.queue_counters[tc][QueueCounters::trim_packets]++;
  out.counters[PortCounters::trim_packets]++;
  const uint32_t len = rte_pktmbuf_data_len(m);
  dpdk::materialize(m);  // trimming rewrites the ICRC over the payload
  const uint32_t cut = inner != nullptr ? trim_vxlan_frame(dpdk::bytes(m), v, *inner, trim.size, trim.remark_dscp)
                                        : trim_frame(dpdk::bytes(m), v, trim.size, trim.remark_dscp);
  uint32_t new_len = len;
  if (cut != 0) {
    rte_pktmbuf_trim(m, uint16_t(len - cut));
    new_len = cut;
    dpdk::meta(m).flags &= uint8_t(~dpdk::kMetaIcrcPending);  // trim_frame() wrote the ICRC
  }
  const Admission adm = mmu_.check(in.index, pg, out.index, trim_tc_, new_len);
  if (!adm.ok()) {
    out.queue_counters[tc][QueueCounters::trim_drop_packets]++;
    out.queue_counters[tc][QueueCounters::drop_packets]++;
    out.queue_counters[tc][QueueCounters::drop_bytes] += len;
    out.counters[PortCounters::trim_drop_packets]++;
    rte_pktmbuf_free(m);
    return false;
  }
  enqueue(in, out, m, trim.switch_priority, pg, trim_tc_, adm.ingress, now);
  dpdk::meta(m).flags |= kMetaFlagTrimmed;
  return true;
}

void Switch::drop_no_buffer(PortRuntime& in, PortRuntime& out, rte_mbuf* m, uint8_t pg, uint8_t tc, bool ingress) {
  const uint32_t len = rte_pktmbuf_data_len(m);
  if (ingress) {
    in.counters[pg == roce_pg_ ? PortCounters::rx_roce_no_buffer_discard
                               : PortCounters::rx_non_roce_no_buffer_discard]++;
    in.pg_counters[pg][PgCounters::rx_buffer_discards]++;
    if (!mmu_.pg(in.index, pg).lossless) in.pg_counters[pg][PgCounters::rx_shared_buffer_discards]++;
  } else {
    out.counters[tc == roce_tc_   ? PortCounters::tx_roce_no_buffer_discard
                 : tc == cnp_tc_ ? PortCounters::tx_cnp_no_buffer_discard
                                 : PortCounters::tx_non_roce_no_buffer_discard]++;
  }
  out.queue_counters[tc][QueueCounters::drop_packets]++;
  out.queue_counters[tc][QueueCounters::drop_bytes] += len;
  rte_pktmbuf_free(m);
}

void Switch::on_pfc(PortRuntime& in, const wire::PacketView& v, Time now) {
  in.counters[PortCounters::rx_pfc_frames]++;
  const wire::PfcHdr& h = v.pfc();
  bool released = false;
  for (int prio = 0; prio < kNumPriorities; prio++) {
    if (!h.enabled(prio)) continue;
    in.pfc_rx[prio]++;
    if (((pfc_rx_prios_ >> prio) & 1) == 0) continue;
    const uint16_t quanta = h.time[prio].get();
    if (quanta != 0) in.last_pause_rx[prio] = now;
    const uint8_t tc = cfg_.qos.sp_to_tc[prio];
    if (in.watchdog && in.wd[tc].storm) continue;  // ignored while the watchdog holds the queue
    released |= quanta == 0 && in.pause[prio].paused(now);
    in.pause[prio].on_frame(quanta, in.speed, now);
  }
  Time next = kTimeNever;
  in.pause_horizon = now;
  for (const PauseTimer& t : in.pause) {
    if (!t.paused(now)) continue;
    next = std::min(next, t.until());
    in.pause_horizon = std::max(in.pause_horizon, t.until());
  }
  if (next != kTimeNever) timers().schedule(in.pause_timer, next);
  if (released) mark(in);
}

void Switch::on_arp(PortRuntime& in, const wire::PacketView& v, Time now) {
  in.counters[PortCounters::rx_arp]++;
  const wire::ArpHdr& a = v.arp();
  if (a.htype.get() != 1 || a.ptype.get() != 0x0800 || a.hlen != 6 || a.plen != 4) {
    in.counters[PortCounters::drop_arp]++;
    return;
  }
  const wire::IpAddr spa = wire::IpAddr::v4(a.spa.get());
  const wire::IpAddr tpa = wire::IpAddr::v4(a.tpa.get());
  if (a.spa.get() != 0 && !a.sha.is_multicast()) routes_->learn(spa, a.sha, in.index);
  if (a.oper.get() != wire::kArpRequest || a.tpa.get() == a.spa.get()) return;
  const auto& own = cfg_.interfaces[in.index].address;
  bool answer = own && own->addr == tpa;
  if (!answer && cfg_.proxy_arp) {
    const NextHop* nh = routes_->lookup_v4(a.tpa.get());
    if (nh != nullptr) {
      answer = nh->port != in.index && !nh->local;
    } else if (routes_->may_request(tpa, now, kArpInterval)) {
      // Unknown target: ask every other port, so the next request finds it.
      for (auto& p : ports_) {
        if (p->index == in.index || port(p->index) == nullptr || port_vlan_[p->index] != 0) continue;
        const auto& src = cfg_.interfaces[p->index].address;
        send_arp(*p, wire::kArpRequest, tpa, wire::MacAddr{}, src ? src->addr : wire::IpAddr::v4(0),
                 wire::kBroadcastMac, now);
      }
    }
  }
  if (answer) send_arp(in, wire::kArpReply, spa, a.sha, tpa, a.sha, now);
}

void Switch::send_arp(PortRuntime& out, uint16_t oper, const wire::IpAddr& target, const wire::MacAddr& tha,
                      const wire::IpAddr& spa, const wire::MacAddr& dst, Time /*now*/) {
  if (out.control.size() >= 64) return;
  rte_mbuf* m = pool().alloc();
  if (m == nullptr) return;
  uint8_t* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 60));
  const uint32_t n = wire::encode_arp({p, 60}, oper, out.mac, spa.is_v4() ? spa.v4_host_order() : 0, tha,
                                      target.v4_host_order(), dst);
  if (n == 0) {
    rte_pktmbuf_free(m);
    return;
  }
  out.control.push(m);
  out.counters[PortCounters::tx_arp]++;
  mark(out);
}

void Switch::glean(const NextHop& nh, const wire::IpAddr& dst, Time now) {
  const wire::IpAddr target = nh.glean ? dst : nh.ip;
  if (!target.is_v4() || !routes_->may_request(target, now, kArpInterval)) return;  // IPv6: static neighbours only
  PortRuntime& out = *ports_[nh.port];
  if (port(out.index) == nullptr) return;
  const auto& src = cfg_.interfaces[out.index].address;
  send_arp(out, wire::kArpRequest, target, wire::MacAddr{}, src ? src->addr : wire::IpAddr::v4(0),
           wire::kBroadcastMac, now);
}

}  // namespace rocemu::sw
