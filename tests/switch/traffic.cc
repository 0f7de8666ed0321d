#include "tests/switch/traffic.h"

#include <algorithm>
#include <cstring>

#include "common/engine/dpdk.h"
#include "switch/pfc.h"

namespace rocemu::test {

wire::MacAddr host_mac(int i) { return wire::MacAddr{{0x02, 0x00, 0x00, 0x00, 0x00, uint8_t(i)}}; }
wire::IpAddr host_ip(int i) { return wire::IpAddr::v4(0x0a000001u | uint32_t(i) << 8); }
wire::IpAddr gateway_ip(int i) { return wire::IpAddr::v4(0x0a0000feu | uint32_t(i) << 8); }

TestHost::TestHost(std::string name, wire::IpAddr ip, wire::MacAddr mac, wire::IpAddr gateway)
    : Node(std::move(name), 1), ip_(ip), gateway_(gateway), mac_(mac) {
  timer_.bind<&TestHost::on_timer>(this);
  refresh_.bind<&TestHost::on_refresh>(this);
}

size_t TestHost::add_flow(const FlowSpec& f) {
  Flow fl;
  fl.spec = f;
  fl.prio = f.priority.value_or(uint8_t(f.dscp >> 3));
  fl.next = f.start;
  flows_.push_back(fl);
  if (started_) {  // wake the sender when the flow starts
    const Time at = std::max(f.start, timers().now());
    if (!timer_.armed() || timer_.expiry() > at) timers().schedule(timer_, at);
  }
  return flows_.size() - 1;
}

void TestHost::queue_control(rte_mbuf* m) {
  if (m != nullptr) control_.push_back(m);
}

void TestHost::on_start(Time now) {
  started_ = true;
  rte_mbuf* m = pool().alloc();
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 60));
  wire::encode_arp({d, 60}, wire::kArpRequest, mac_, ip_.v4_host_order(), wire::MacAddr{}, gateway_.v4_host_order(),
                   wire::kBroadcastMac);
  queue_control(m);
  timers().schedule(timer_, now + us(50));
  pump(now);
}

void TestHost::on_tx_ready(uint16_t, Time now) { pump(now); }

void TestHost::on_timer(Time now) {
  if (!gateway_mac_) {  // ARP again until the gateway answers
    rte_mbuf* m = pool().alloc();
    auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 60));
    wire::encode_arp({d, 60}, wire::kArpRequest, mac_, ip_.v4_host_order(), wire::MacAddr{},
                     gateway_.v4_host_order(), wire::kBroadcastMac);
    queue_control(m);
    timers().schedule(timer_, now + us(50));
  }
  pump(now);
}

Duration TestHost::paused_for(uint8_t prio, Time now) const {
  Duration d = paused_total_[prio];
  if (pause_until_[prio] > pause_start_[prio]) d += std::min(now, pause_until_[prio]) - pause_start_[prio];
  return d;
}

rte_mbuf* TestHost::build(Flow& f, Time now) {
  wire::PathHeaders path;
  path.src_mac = mac_;
  path.dst_mac = *gateway_mac_;
  path.ipv6 = !f.spec.dst.is_v4();
  path.src_ip = f.spec.src.value_or(ip_);
  path.dst_ip = f.spec.dst;
  path.dscp = f.spec.dscp;
  path.ttl = f.spec.ttl;
  path.ecn = f.spec.ecn;
  path.udp_sport = uint16_t(0xc000 | (f.spec.qpn & 0x3fff));
  if (f.spec.cnp) return build_cnp(f.spec.dst, f.spec.qpn);
  wire::RoceFields rf;
  rf.opcode = wire::op::kWriteMiddle;
  rf.dest_qp = f.spec.qpn;
  rf.psn = f.psn & 0xffffff;
  const uint32_t len = wire::roce_frame_len(path, rf.opcode, f.spec.payload);
  rte_mbuf* m = pool().alloc();
  if (m == nullptr) return nullptr;
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(len)));
  if (d == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::span<uint8_t> frame{d, len};
  const uint32_t hdr = wire::write_roce_headers(frame, path, rf, f.spec.payload);
  std::memset(d + hdr, 0, f.spec.payload);
  if (f.spec.payload >= 8) {
    const int64_t t = now.count();
    std::memcpy(d + hdr, &t, sizeof t);
  }
  wire::seal_roce(frame, path, f.spec.payload);
  return m;
}

rte_mbuf* TestHost::build_cnp(const wire::IpAddr& to, uint32_t qpn) {
  if (!gateway_mac_) return nullptr;
  wire::PathHeaders path;
  path.src_mac = mac_;
  path.dst_mac = *gateway_mac_;
  path.ipv6 = !to.is_v4();
  path.src_ip = ip_;
  path.dst_ip = to;
  path.dscp = 48;
  path.ecn = wire::Ecn::kNotEct;
  path.udp_sport = uint16_t(0xc000 | (qpn & 0x3fff));
  rte_mbuf* m = pool().alloc();
  if (m == nullptr) return nullptr;
  const uint32_t len = wire::roce_frame_len(path, wire::op::kCnp, wire::kCnpPadLen);
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, uint16_t(len)));
  wire::encode_cnp({d, len}, path, qpn);
  return m;
}

void TestHost::pump(Time now) {
  Port* p = port(0);
  if (p == nullptr) return;
  while (p->tx_ready(now)) {
    rte_mbuf* m = nullptr;
    if (!control_.empty()) {
      m = control_.front();
      control_.pop_front();
    } else if (gateway_mac_ && !flows_.empty()) {
      Flow* pick = nullptr;
      Time wake = kTimeNever;
      for (size_t k = 0; k < flows_.size(); k++) {
        const size_t idx = (rr_ + k) % flows_.size();
        Flow& f = flows_[idx];
        if (f.sent >= f.spec.count || now >= f.spec.stop) continue;
        const Time ready = std::max({f.spec.start, f.next, pause_until_[f.prio]});
        if (ready > now) {
          wake = std::min(wake, ready);
          continue;
        }
        pick = &f;
        rr_ = idx + 1;
        break;
      }
      if (pick == nullptr) {
        if (wake != kTimeNever && (!timer_.armed() || timer_.expiry() > wake)) timers().schedule(timer_, wake);
        return;
      }
      m = build(*pick, now);
      if (m == nullptr) {
        timers().schedule(timer_, now + us(1));
        return;
      }
      pick->sent++;
      pick->psn++;
      if (pick->spec.rate_bps != 0)
        pick->next = std::max(pick->next, now) +
                     serialization_time(wire_bytes(rte_pktmbuf_pkt_len(m)), pick->spec.rate_bps);
    } else {
      return;
    }
    if (p->tx_burst(&m, 1, now) != 1) rte_pktmbuf_free(m);
  }
}

void TestHost::on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time now) {
  for (uint16_t i = 0; i < n; i++) {
    on_frame(pkts[i], now);
    rte_pktmbuf_free(pkts[i]);
  }
  pump(now);
}

void TestHost::on_frame(rte_mbuf* m, Time now) {
  wire::PacketView v;
  if (wire::decode(dpdk::bytes(m), v) != wire::DecodeError::kOk) return;
  if (v.kind == wire::PacketKind::kPfc) {
    pfc_rx_++;
    Port* p = port(0);
    const uint64_t rate = p != nullptr ? p->rate_bps() : 100'000'000'000ull;
    for (int prio = 0; prio < 8; prio++) {
      if (!v.pfc().enabled(prio)) continue;
      const uint32_t q = v.pfc().time[prio].get();
      if (now >= pause_until_[prio]) {
        if (pause_until_[prio] > pause_start_[prio]) paused_total_[prio] += pause_until_[prio] - pause_start_[prio];
        pause_start_[prio] = now;
      }
      // (serialization_time would overflow: 65535 quanta are 4 MB of bits.)
      pause_until_[prio] = q == 0 ? now : now + sw::quanta_to_duration(q, rate);
      if (q == 0) {
        paused_total_[prio] += now - pause_start_[prio];
        pause_start_[prio] = now;
      }
    }
    return;
  }
  if (v.kind == wire::PacketKind::kArp) {
    const wire::ArpHdr& a = v.arp();
    if (a.oper.get() == wire::kArpRequest && a.tpa.get() == ip_.v4_host_order()) {
      rte_mbuf* r = pool().alloc();
      auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(r, 60));
      wire::encode_arp({d, 60}, wire::kArpReply, mac_, ip_.v4_host_order(), a.sha, a.spa.get(), a.sha);
      queue_control(r);
    } else if (a.oper.get() == wire::kArpReply && a.spa.get() == gateway_.v4_host_order()) {
      gateway_mac_ = a.sha;
    }
    return;
  }
  if (!v.is_roce) return;
  FlowStats& s = rx_[v.bth().dest_qp()];
  s.packets++;
  s.bytes += v.len;
  const bool ce = v.ecn == wire::Ecn::kCe;
  if (ce) s.ce++;
  if (v.dscp == trim_dscp) s.trimmed++;
  if (!v.icrc_ok()) s.icrc_errors++;
  if (record_marks_) s.marks.push_back(ce ? 1 : 0);
  s.first = std::min(s.first, now);
  s.last = now;
  if (v.opcode != wire::op::kCnp && v.payload_len >= 8) {
    int64_t t;
    std::memcpy(&t, v.data + v.payload_off, sizeof t);
    const Duration lat = now - Duration(t);
    s.latency_max = std::max(s.latency_max, lat);
    s.latency_min = std::min(s.latency_min, lat);
    s.latency_sum += lat;
  } else if (v.opcode == wire::op::kCnp) {
    // CNPs carry no timestamp; the test measures them by arrival.
  }
  if (cnp_on_ce && ce && v.opcode != wire::op::kCnp) {
    if (rte_mbuf* c = build_cnp(v.src_ip(), v.bth().dest_qp())) {
      queue_control(c);
      cnps_sent_++;
    }
  }
}

void TestHost::send_pfc(uint8_t priorities, uint16_t quanta, Time now) {
  rte_mbuf* m = pool().alloc();
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, wire::kPfcFrameLen));
  uint16_t q[8];
  std::fill(q, q + 8, quanta);
  wire::encode_pfc({d, wire::kPfcFrameLen}, mac_, priorities, q);
  queue_control(m);
  pump(now);
}

void TestHost::hold_pause(uint8_t priorities, Time now, Duration refresh) {
  held_ = priorities;
  hold_refresh_ = refresh;
  send_pfc(priorities, 0xffff, now);
  timers().schedule(refresh_, now + refresh);
}

void TestHost::release_pause(Time now) {
  if (held_ == 0) return;
  send_pfc(held_, 0, now);
  held_ = 0;
  timers().cancel(refresh_);
}

void TestHost::on_refresh(Time now) {
  if (held_ == 0) return;
  send_pfc(held_, 0xffff, now);
  timers().schedule(refresh_, now + hold_refresh_);
}

void FrameNode::on_start(Time now) {
  Port* p = port(0);
  while (p != nullptr && next_ < frames_.size() && p->tx_ready(now)) {
    rte_mbuf* m = pool().alloc_copy(frames_[next_]);
    if (m == nullptr || p->tx_burst(&m, 1, now) != 1) {
      if (m != nullptr) rte_pktmbuf_free(m);
      return;
    }
    next_++;
  }
}

void FrameNode::on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) {
  for (uint16_t i = 0; i < n; i++) {
    dpdk::seal(pkts[i]);
    auto b = dpdk::bytes(pkts[i]);
    received_.emplace_back(b.begin(), b.end());
    rte_pktmbuf_free(pkts[i]);
  }
}

}  // namespace rocemu::test
