// The VTEP in the pipeline: decapsulation of VXLAN frames to the switch's
// source address, encapsulation of packets routed into the overlay
// (switch/vxlan.h has the headers, the source port and RFC 6040).
//
// Classification (switch priority, PG, TC) is done once, on the headers
// as received: the inner DSCP at the encapsulating VTEP, the outer DSCP at
// every underlay switch and at the decapsulating VTEP. With the
// encapsulation's DSCP `set` to 0 instead of `copy`, RoCE leaves the RoCE
// class at the first underlay hop.
#include <cstring>

#include "common/config/config.h"
#include "switch/switch.h"
#include "switch/trim.h"

namespace rocemu::sw {

std::optional<size_t> Switch::vni_index(uint32_t vni) const {
  for (size_t i = 0; i < vnis_.size(); i++)
    if (vnis_[i].vni == vni) return i;
  return std::nullopt;
}

const VniCounters* Switch::vni_counters(uint32_t vni) const {
  const std::optional<size_t> i = vni_index(vni);
  return i ? &vnis_[*i].counters : nullptr;
}

bool Switch::decapsulate(rte_mbuf* m, wire::PacketView& v, size_t& index) {
  uint32_t vni = 0;
  wire::PacketView inner;
  const VxlanRxCheck check = vxlan_check(
      v,
      [&](uint32_t n) {
        const std::optional<size_t> i = vni_index(n);
        if (!i) return VniKind::kUnknown;
        return vnis_[*i].vlan != 0 ? VniKind::kBridged : VniKind::kRouted;
      },
      vni, inner);
  switch (check) {
    case VxlanRxCheck::kOk:
      break;
    case VxlanRxCheck::kBadHeader:
      vtep_counters_[VtepCounters::drop_bad_header]++;
      return false;
    case VxlanRxCheck::kUnknownVni:
      vtep_counters_[VtepCounters::drop_unknown_vni]++;
      return false;
    case VxlanRxCheck::kInnerNotIp:
      vtep_counters_[VtepCounters::drop_inner_not_ip]++;
      return false;
    case VxlanRxCheck::kInnerTagged:
      vtep_counters_[VtepCounters::drop_inner_vlan_tagged]++;
      return false;
    case VxlanRxCheck::kInnerMalformed:
      vtep_counters_[VtepCounters::drop_inner_malformed]++;
      return false;
  }
  index = *vni_index(vni);
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t inner_off = uint32_t(inner.data - data);
  const uint32_t inner_len = inner.len;
  if (inner.is_ip()) {  // RFC 6040 (a bridged VNI's ARP and other frames have no ECN field)
    const std::optional<wire::Ecn> ecn = rfc6040_decap(v.ecn, inner.ecn);
    if (!ecn) {
      vtep_counters_[VtepCounters::drop_ecn_not_ect_ce]++;
      return false;
    }
    if (*ecn != inner.ecn) {
      set_ecn(data + inner_off, inner, *ecn);
      if (*ecn == wire::Ecn::kCe) vtep_counters_[VtepCounters::decap_ce_copied]++;
      inner.ecn = *ecn;
    }
  }
  rte_pktmbuf_adj(m, uint16_t(inner_off));
  rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_data_len(m) - inner_len));  // the outer frame's padding
  vtep_counters_[VtepCounters::decap_packets]++;
  vtep_counters_[VtepCounters::decap_bytes] += inner_len;
  vnis_[index].counters[VniCounters::decap_packets]++;
  vnis_[index].counters[VniCounters::decap_bytes] += inner_len;
  v = inner;  // the same bytes, now at the start of the mbuf
  return true;
}

// RFC 7348 6.1: a VTEP SHOULD NOT encapsulate the inner frame's 802.1Q
// tag. The MAC addresses move over the 4 bytes of the tag; `v` describes
// the untagged frame after. False if it no longer decodes (it cannot).
wire::DecodeError Switch::untag(rte_mbuf* m, wire::PacketView& v) {
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  std::memmove(data + 4, data, 12);
  rte_pktmbuf_adj(m, 4);
  return wire::decode(dpdk::bytes(m), v);
}

bool Switch::strip_vlan(rte_mbuf* m, wire::PacketView& v) {
  const wire::DecodeError e = untag(m, v);
  if (!v.is_ip() || (e != wire::DecodeError::kOk && e < wire::DecodeError::kTruncatedUdp)) return false;
  if (e != wire::DecodeError::kOk) v.is_roce = false;
  return true;
}

const NextHop* Switch::encapsulate(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, const NextHop& tunnel_nh,
                                   uint32_t member, Time now) {
  // The inner packet is routed into the overlay: TTL as for any route.
  const uint8_t ttl = v.is_ipv4() ? v.ipv4().ttl : v.ipv6().hop_limit;
  if (ttl <= 1) {
    in.counters[PortCounters::drop_ttl_expired]++;
    return nullptr;
  }
  if (v.has_vlan && !strip_vlan(m, v)) {
    vtep_counters_[VtepCounters::drop_inner_not_ip]++;  // cannot happen: it decoded with the tag
    return nullptr;
  }
  const uint32_t inner_len = v.ip_end;  // the inner frame without Ethernet padding
  seal_inner(m, v);
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  // Inner Ethernet: from this switch to the remote VTEP (which does not
  // check it; rocemu derives a MAC of the VTEP's address, 02:00:a.b.c.d).
  auto& eth = *reinterpret_cast<wire::EthHdr*>(data);
  const uint32_t remote = tunnel_nh.ip.v4_host_order();
  eth.src = cfg_.mac;
  eth.dst = wire::MacAddr{{0x02, 0x00, uint8_t(remote >> 24), uint8_t(remote >> 16), uint8_t(remote >> 8),
                           uint8_t(remote)}};
  decrement_ttl(data, v);
  const NextHop* nh = tunnel(in, m, v, remote, tunnel_nh.vni, now);
  if (nh != nullptr) routes_->count_ecmp(member, inner_len);
  return nh;
}

void Switch::seal_inner(rte_mbuf* m, const wire::PacketView& v) {
  dpdk::seal(m);  // the inner ICRC goes inside as the wire would carry it
  if (v.is_ip() && rte_pktmbuf_data_len(m) > v.ip_end)  // no Ethernet padding inside the tunnel
    rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_data_len(m) - v.ip_end));
}

const NextHop* Switch::tunnel(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, uint32_t remote, uint32_t vni,
                              Time now) {
  const uint32_t inner_len = rte_pktmbuf_data_len(m);
  if (inner_len + kVxlanIpOverhead - sizeof(wire::EthHdr) > config::kMaxMtu) {
    vtep_counters_[VtepCounters::drop_underlay_mtu]++;
    return nullptr;
  }
  if (rte_pktmbuf_headroom(m) < kVxlanOverhead) {
    vtep_counters_[VtepCounters::drop_no_headroom]++;
    return nullptr;
  }
  VxlanEncap e;
  e.src_ip = vtep_ip_;
  e.dst_ip = remote;
  e.vni = vni;
  e.dst_port = cfg_.vxlan.port;
  e.src_port = vxlan_source_port(v, cfg_.ecmp.hash_seed);
  e.dscp = cfg_.vxlan.encap_dscp == VxlanDscpAction::kCopy ? v.dscp : cfg_.vxlan.dscp_value;
  e.ecn = v.ecn;  // RFC 6040 normal mode: the inner ECN, CE included (not-ECT for a frame that is not IP)
  e.ip_id = vxlan_ip_id_++;
  uint8_t* outer = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, uint16_t(kVxlanOverhead)));
  vxlan_write_outer({outer, kVxlanOverhead}, e, inner_len);
  wire::PacketView o;
  if (wire::decode(dpdk::bytes(m), o) != wire::DecodeError::kOk) {  // cannot happen: headers we wrote
    vtep_counters_[VtepCounters::drop_no_headroom]++;
    return nullptr;
  }
  // The underlay route to the remote VTEP (an ECMP group hashes the outer
  // 5-tuple: the source port carries the inner flow's entropy).
  uint32_t underlay_member;
  const NextHop* nh = routes_->route(o, underlay_member);
  if (nh == nullptr || nh->local || nh->tunnel) {
    vtep_counters_[VtepCounters::drop_underlay_no_route]++;
    return nullptr;
  }
  if (!nh->resolved) {  // as on the routed path: ARP for it, count a neighbor miss
    glean(*nh, o.dst_ip(), now);
    in.counters[PortCounters::drop_neighbor_miss]++;
    return nullptr;
  }
  PortRuntime& out = *ports_[nh->port];
  if (port(out.index) == nullptr || out.fault.link_down()) {
    in.counters[PortCounters::drop_link_down]++;
    return nullptr;
  }
  if (uint32_t(o.ip_end - o.l3_off) > out.mtu) {  // the seed's MTU pitfall: VTEPs never fragment
    vtep_counters_[VtepCounters::drop_underlay_mtu]++;
    return nullptr;
  }
  auto& oeth = *reinterpret_cast<wire::EthHdr*>(outer);
  oeth.dst = nh->mac;
  oeth.src = out.mac;
  routes_->count_ecmp(underlay_member, rte_pktmbuf_data_len(m));
  vtep_counters_[VtepCounters::encap_packets]++;
  vtep_counters_[VtepCounters::encap_bytes] += inner_len;
  if (const std::optional<size_t> i = vni_index(vni)) {
    vnis_[*i].counters[VniCounters::encap_packets]++;
    vnis_[*i].counters[VniCounters::encap_bytes] += inner_len;
  }
  v = o;
  return nh;
}

}  // namespace rocemu::sw
