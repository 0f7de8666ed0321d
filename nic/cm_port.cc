// The NIC side of the connection manager (the protocol is in cm/): CM MADs
// in and out on QP1 (the GSI QP) as RoCEv2 UD SEND_ONLY packets with Q_Key
// 0x80010000, neighbours for address resolution, and the CM's one timer.
#include <algorithm>

#include "common/engine/engine.h"
#include "common/wire/build.h"
#include "nic/nic.h"

namespace rocemu::nic {

uint64_t Nic::node_guid() const {
  const auto& m = cfg_.mac.b;
  return uint64_t(m[0]) << 56 | uint64_t(m[1]) << 48 | uint64_t(m[2]) << 40 | uint64_t(0xff) << 32 |
         uint64_t(0xfe) << 24 | uint64_t(m[3]) << 16 | uint64_t(m[4]) << 8 | m[5];
}

void Nic::make_cm() {
  cm::CmConfig c;
  c.node_guid = node_guid();
  // The first IPv4 address and its RoCEv2 GID (the table the constructor
  // laid out: 2 link-local entries, then a v1 and a v2 entry per address).
  for (size_t i = 0; i < cfg_.ips.size(); i++) {
    if (!cfg_.ips[i].is_v4()) continue;
    c.ip = cfg_.ips[i];
    c.sgid_index = uint8_t(2 + 2 * i + 1);
    break;
  }
  c.max_responder_resources = uint8_t(std::min<uint32_t>(cfg_.max_qp_rd_atom, 255));
  c.max_initiator_depth = uint8_t(std::min<uint32_t>(cfg_.max_qp_init_rd_atom, 255));
  c.seed = node_guid();
  cm::Host& host = *this;  // a private base: the CM alone sees it
  cm_ = std::make_unique<cm::ConnectionManager>(c, host);
  cm_timer_.bind<&Nic::on_cm_timer>(this);
}

void Nic::report_cm_counters(CounterSink& sink) const {
  const std::string scope = name() + "/cm";
  const auto& c = cm_->counters();
  sink.counter(scope, "mads_sent", c.mads_sent);
  sink.counter(scope, "mads_received", c.mads_received);
  sink.counter(scope, "mads_resent", c.mads_resent);
  sink.counter(scope, "mads_dropped", c.mads_dropped);
  sink.counter(scope, "no_listener", c.no_listener);
  sink.counter(scope, "qp_type_mismatch", c.qp_type_mismatch);
  sink.counter(scope, "backlog_full", c.backlog_full);
  sink.counter(scope, "ids", cm_->ids());
  sink.counter(scope, "listening", cm_->listening());
}

void Nic::rearm_cm(Time) {
  const Time at = cm_->next_deadline();
  if (cm_timer_.armed()) {
    if (cm_timer_.expiry() == at) return;
    timers().cancel(cm_timer_);
  }
  if (at != Time::max()) timers().schedule(cm_timer_, at);
}

void Nic::on_cm_timer(Time now) {
  cm_->on_timer(now);
  rearm_cm(now);
}

RxDisposition Nic::handle_gsi(const wire::PacketView& v, Time now) {
  if (v.opcode != wire::op::ud(wire::op::kSendOnly) || v.deth().qkey.get() != cm::kGsiQkey) {
    counters_[NicCounters::rx_not_for_us]++;
    return RxDisposition::kFree;
  }
  const auto mad = cm::Mad::parse(v.payload());
  if (!mad) {
    counters_[NicCounters::rx_not_for_us]++;
    return RxDisposition::kFree;
  }
  const wire::IpAddr src = v.src_ip();
  // Replies go back the way the MAD came (the kernel addresses them from
  // the received headers), even before ARP has an entry for the sender.
  if (cm_peers_.size() >= kMaxNeighbors && !cm_peers_.contains(src)) cm_peers_.clear();
  cm_peers_[src] = v.eth().src;
  cm_->on_mad(src, *mad, now);
  rearm_cm(now);
  return RxDisposition::kFree;
}

cm::Host::Reach Nic::reach(const wire::IpAddr& ip, Time now) {
  if (is_local_ip(ip)) return Reach::kReachable;
  const wire::IpAddr hop = next_hop(ip);
  if (neighbor(hop)) return Reach::kReachable;
  if (!hop.is_v4()) return Reach::kUnknown;
  // Asked again each second, as Linux retransmits ARP (retrans_time_ms).
  auto it = arp_pending_.find(hop);
  if (it == arp_pending_.end() || now - it->second >= ms(1000)) send_arp_request(hop, now);
  return Reach::kPending;
}

void Nic::send_mad(const wire::IpAddr& dst, const cm::Mad& mad, Time now) {
  wire::PathHeaders p;
  p.src_mac = cfg_.mac;
  for (const auto& a : cfg_.ips)
    if (a.is_v4()) {
      p.src_ip = a;
      break;
    }
  p.dst_ip = dst;
  p.ipv6 = !dst.is_v4();
  p.ttl = 64;
  p.udp_sport = wire::flow_label_to_udp_sport(0);
  p.vlan = cfg_.vlan;
  p.vid = cfg_.vid;
  p.pcp = prio_of(0);
  const bool local = is_local_ip(dst);
  if (local) {
    p.dst_mac = cfg_.mac;
  } else if (auto mac = neighbor(next_hop(dst))) {
    p.dst_mac = *mac;
  } else if (auto it = cm_peers_.find(dst); it != cm_peers_.end()) {
    p.dst_mac = it->second;
  } else {
    reach(dst, now);  // ask; the CM sends again on its timeout
    return;
  }
  wire::RoceFields f;
  f.opcode = wire::op::ud(wire::op::kSendOnly);
  f.dest_qp = cm::kGsiQpn;
  f.psn = gsi_psn_++ & 0xffffff;
  f.deth_qkey = cm::kGsiQkey;
  f.deth_src_qp = cm::kGsiQpn;
  rte_mbuf* m = new_frame();
  if (m == nullptr) return;
  const uint32_t len =
      wire::encode_roce({rte_pktmbuf_mtod(m, uint8_t*), dpdk::PacketPool::kMaxFrame}, p, f, mad.wire());
  if (len == 0) {
    rte_pktmbuf_free(m);
    return;
  }
  rte_pktmbuf_append(m, uint16_t(len));
  if (local) emit(kLoopbackTx, m, now);
  else send_control(m, now);
}

}  // namespace rocemu::nic
