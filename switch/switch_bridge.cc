// The bridge in the pipeline (switch/bridge.h has the MAC table): frames
// received on an access port are switched in its VLAN by destination MAC,
// and so are the inner frames of a bridged VNI decapsulated by the VTEP.
//
//   access port -> learn source -> known port: out of it (never the ingress)
//                               -> known remote VTEP: encapsulated to it
//                               -> broadcast, multicast, unknown unicast:
//                                  the VLAN's other ports + every VTEP of
//                                  the VNI's flood lists (head-end replication)
//   overlay     -> learn source (mac-learning) -> known port: out of it
//                               -> BUM: the VLAN's ports only (split horizon)
//                               -> known remote VTEP: dropped (split horizon)
//
// Classification is the one the frame was received with (the inner DSCP
// at the encapsulating leaf, the outer at the decapsulating one), as for
// routed traffic; every copy of a flood takes the egress path of its port
// (admission, ECN, PFC accounting against the ingress port).
#include <cstring>

#include "common/config/config.h"
#include "switch/switch.h"

namespace rocemu::sw {

bool Switch::same_bridge(const SwitchConfig& a, const SwitchConfig& b) {
  if (a.bridge.vlans != b.bridge.vlans || a.vxlan.vnis != b.vxlan.vnis || a.vxlan.mac_learning != b.vxlan.mac_learning ||
      a.vxlan.enabled() != b.vxlan.enabled() || a.vxlan.source != b.vxlan.source ||
      a.interfaces.size() != b.interfaces.size())
    return false;
  for (size_t i = 0; i < a.interfaces.size(); i++)
    if (a.interfaces[i].access != b.interfaces[i].access) return false;
  return true;
}

void Switch::rebuild_bridge(bool fresh) {
  std::vector<VniRuntime> next;
  for (const VxlanVni& x : cfg_.vxlan.vnis) {
    VniRuntime r;
    r.vni = x.vni;
    r.vlan = x.vlan;
    const std::vector<wire::IpAddr>* lists[] = {&x.flood, &cfg_.vxlan.flood};
    for (const std::vector<wire::IpAddr>* list : lists)
      for (const wire::IpAddr& a : *list)
        if (a.is_v4() && std::find(r.flood.begin(), r.flood.end(), a.v4_host_order()) == r.flood.end())
          r.flood.push_back(a.v4_host_order());
    if (const std::optional<size_t> old = vni_index(x.vni)) r.counters = vnis_[*old].counters;  // kept across applies
    next.push_back(std::move(r));
  }
  vnis_ = std::move(next);
  vlan_vni_.fill(-1);
  if (cfg_.vxlan.enabled())
    for (size_t i = 0; i < vnis_.size(); i++)
      if (vnis_[i].vlan != 0 && vnis_[i].vlan <= kMaxVlan) vlan_vni_[vnis_[i].vlan] = int32_t(i);
  for (auto& ports : vlan_ports_) ports.clear();
  port_vlan_.assign(cfg_.interfaces.size(), 0);
  for (uint16_t p = 0; p < cfg_.interfaces.size(); p++) {
    const std::optional<uint16_t>& a = cfg_.interfaces[p].access;
    // (An invalid configuration, which the constructor only logs, may
    // name VLAN 0 or one past 4094: such a port bridges nothing.)
    if (!a || *a == 0 || *a > kMaxVlan) continue;
    port_vlan_[p] = *a;
    vlan_ports_[*a].push_back(p);
  }
  // Addresses learned under the previous bridge configuration may be wrong
  // now (a port moved VLAN, a VNI went): learn afresh. Any other change
  // (QoS, faults, routes) keeps them.
  if (fresh) mac_table_.clear();
  mac_table_.set_ageing(Duration(int64_t(cfg_.bridge.ageing) * 1'000'000'000'000));
}

bool Switch::valid_source(const wire::MacAddr& src) {
  if (!src.is_multicast() && src != wire::MacAddr{}) return true;
  bridge_counters_[BridgeCounters::drop_bad_source_mac]++;
  return false;
}

void Switch::learn(uint16_t vlan, const wire::MacAddr& mac, const MacPlace& place, Time now) {
  size_t aged = 0;
  const MacTable::Learn learned = mac_table_.learn(vlan, mac, place, now, aged);
  bridge_counters_[BridgeCounters::mac_aged] += aged;
  switch (learned) {
    case MacTable::Learn::kRefreshed:
      break;
    case MacTable::Learn::kLearned:
      bridge_counters_[BridgeCounters::mac_learned]++;
      break;
    case MacTable::Learn::kMoved:
      bridge_counters_[BridgeCounters::mac_moved]++;
      break;
    case MacTable::Learn::kFull:
      bridge_counters_[BridgeCounters::mac_table_full]++;
      break;
  }
}

std::optional<MacPlace> Switch::find_mac(uint16_t vlan, const wire::MacAddr& mac, Time now) {
  bool aged = false;
  std::optional<MacPlace> at = mac_table_.lookup(vlan, mac, now, aged);
  if (aged) bridge_counters_[BridgeCounters::mac_aged]++;
  return at;
}

void Switch::bridge_local(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, uint16_t vlan, Time now) {
  Class cls;
  if (!ingress(in, m, v, cls)) return;
  if (v.has_vlan) {  // an access port: untagged, or tagged with its own VLAN (or priority-tagged)
    if (v.vid != 0 && v.vid != vlan) {
      bridge_counters_[BridgeCounters::drop_vlan_filter]++;
      rte_pktmbuf_free(m);
      return;
    }
    if (untag(m, v) != wire::DecodeError::kOk) v.is_roce = false;
  }
  const wire::EthHdr& eth = v.eth();
  if (!valid_source(eth.src)) {
    rte_pktmbuf_free(m);
    return;
  }
  // A bridge forwards no link-local frame (IEEE 802.1Q 8.6.3: STP, LACP,
  // LLDP) and no MAC control (PFC and PAUSE were taken before).
  constexpr uint8_t kLinkLocal[5] = {0x01, 0x80, 0xc2, 0x00, 0x00};
  if ((std::memcmp(eth.dst.b.data(), kLinkLocal, 5) == 0 && eth.dst.b[5] <= 0x0f) || v.ether_type == 0x8808) {
    bridge_counters_[BridgeCounters::drop_link_local]++;
    rte_pktmbuf_free(m);
    return;
  }
  learn(vlan, eth.src, MacPlace{false, in.index, 0}, now);
  const int32_t vni = vlan_vni_[vlan];
  const std::optional<size_t> vni_at = vni >= 0 ? std::optional<size_t>(size_t(vni)) : std::nullopt;
  const std::optional<MacPlace> to = eth.dst.is_multicast() ? std::nullopt : find_mac(vlan, eth.dst, now);
  if (!to) {
    flood(in, m, vlan, vni_at, true, cls, now);
    return;
  }
  if (to->remote) {
    if (!vni_at) {  // the VNI went since it was learned (cannot happen: a new configuration clears the table)
      vtep_counters_[VtepCounters::drop_unknown_vni]++;
      rte_pktmbuf_free(m);
      return;
    }
    bridge_to_vtep(in, m, v, *vni_at, to->vtep, cls, now);
    return;
  }
  if (to->port == in.index) {
    bridge_counters_[BridgeCounters::drop_same_port]++;
    rte_pktmbuf_free(m);
    return;
  }
  bridge_to_port(in, *ports_[to->port], m, v, cls, now);
}

void Switch::bridge_remote(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, size_t vni, uint32_t src_vtep,
                           const Class& cls, Time now) {
  const uint16_t vlan = vnis_[vni].vlan;
  const wire::EthHdr& eth = v.eth();
  if (!valid_source(eth.src)) {
    rte_pktmbuf_free(m);
    return;
  }
  if (cfg_.vxlan.mac_learning) learn(vlan, eth.src, MacPlace{true, 0, src_vtep}, now);
  const std::optional<MacPlace> to = eth.dst.is_multicast() ? std::nullopt : find_mac(vlan, eth.dst, now);
  if (!to) {
    flood(in, m, vlan, vni, false, cls, now);
    return;
  }
  if (to->remote) {
    bridge_counters_[BridgeCounters::drop_split_horizon]++;
    rte_pktmbuf_free(m);
    return;
  }
  bridge_to_port(in, *ports_[to->port], m, v, cls, now);
}

void Switch::bridge_to_port(PortRuntime& in, PortRuntime& out, rte_mbuf* m, wire::PacketView& v, const Class& cls,
                            Time now) {
  if (port(out.index) == nullptr || out.fault.link_down()) {
    in.counters[PortCounters::drop_link_down]++;
    rte_pktmbuf_free(m);
    return;
  }
  // The port's MTU bounds the frame's payload (the IP packet, for IP).
  const uint32_t payload = v.is_ip() ? uint32_t(v.ip_end - v.l3_off) : rte_pktmbuf_data_len(m) - v.l3_off;
  if (payload > out.mtu) {
    in.counters[PortCounters::drop_mtu_exceeded]++;
    rte_pktmbuf_free(m);
    return;
  }
  egress(in, out, m, v, cls, now);
}

void Switch::bridge_to_vtep(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, size_t vni, uint32_t vtep,
                            const Class& cls, Time now) {
  seal_inner(m, v);
  const NextHop* nh = tunnel(in, m, v, vtep, vnis_[vni].vni, now);
  if (nh == nullptr) {
    rte_pktmbuf_free(m);
    return;
  }
  egress(in, *ports_[nh->port], m, v, cls, now);
}

rte_mbuf* Switch::flood_copy(rte_mbuf* m) {
  rte_mbuf* c = pool().alloc_copy(dpdk::bytes(m));
  if (c == nullptr) {
    bridge_counters_[BridgeCounters::drop_no_buffer]++;
    return nullptr;
  }
  dpdk::meta(c).flags = dpdk::meta(m).flags & dpdk::kMetaCrossNode;
  dpdk::meta(c).arrival = dpdk::meta(m).arrival;
  return c;
}

void Switch::flood(PortRuntime& in, rte_mbuf* m, uint16_t vlan, std::optional<size_t> vni, bool to_overlay,
                   const Class& cls, Time now) {
  bridge_counters_[BridgeCounters::flood_packets]++;
  dpdk::seal(m);  // every copy carries the frame as the wire would
  // Targets: the VLAN's other ports, then (from a local port) the VNI's VTEPs.
  const std::vector<uint16_t>& local = vlan_ports_[vlan];
  const std::vector<uint32_t> none;
  const std::vector<uint32_t>& vteps = to_overlay && vni ? vnis_[*vni].flood : none;
  // A port with no link, or with its link down, is no flood target (and no
  // drop: only a known unicast address behind it counts one).
  auto floods_to = [&](uint16_t p) { return p != in.index && port(p) != nullptr && !ports_[p]->fault.link_down(); };
  size_t targets = 0;
  for (const uint16_t p : local) targets += floods_to(p);
  targets += vteps.size();
  size_t done = 0;
  // Each target gets its own copy; the last takes the original.
  auto next = [&]() -> rte_mbuf* { return ++done == targets ? m : flood_copy(m); };
  // Each copy's own view (it was decoded once already: no error beyond the transport's).
  auto view_of = [](rte_mbuf* c) {
    wire::PacketView cv;
    if (wire::decode(dpdk::bytes(c), cv) != wire::DecodeError::kOk) cv.is_roce = false;
    return cv;
  };
  for (const uint16_t p : local) {
    if (!floods_to(p)) continue;
    rte_mbuf* c = next();
    if (c == nullptr) continue;
    wire::PacketView cv = view_of(c);
    bridge_counters_[BridgeCounters::flood_local_copies]++;
    bridge_to_port(in, *ports_[p], c, cv, cls, now);
  }
  for (const uint32_t vtep : vteps) {
    rte_mbuf* c = next();
    if (c == nullptr) continue;
    wire::PacketView cv = view_of(c);
    vtep_counters_[VtepCounters::flood_copies]++;
    vnis_[*vni].counters[VniCounters::flood_copies]++;
    bridge_to_vtep(in, c, cv, *vni, vtep, cls, now);
  }
  if (targets == 0) rte_pktmbuf_free(m);
}

NvView Switch::view_mac_table() const {
  // NVUE's `nv show bridge domain br_default mac-table`: one row per entry;
  // a remote address shows the VXLAN device and its VTEP as remote-dst
  // (the command is NVUE's; its exact column set is not confirmed here).
  NvView view(NvView::Columns::kOperational);
  auto& t = view.table("mac-table", {"entry-id", "age", "bridge-domain", "entry-type", "interface", "last-update",
                                     "MAC address", "src-vni", "vlan", "remote-dst"});
  const Time now = current_time();
  int id = 0;
  for (const MacEntry& e : mac_table_.entries(now)) {
    const auto secs = [&](Time at) { return int64_t(to_seconds(now - at)); };
    const int32_t vni = vlan_vni_[e.vlan];
    const std::string remote = e.place.remote ? wire::IpAddr::v4(e.place.vtep).str() : std::string();
    t.rows.push_back({++id, secs(e.learned), std::string(kBridgeDomain), std::string("dynamic"),
                      e.place.remote ? std::string("vxlan48") : cfg_.interfaces[e.place.port].name, secs(e.seen),
                      e.mac.str(), e.place.remote && vni >= 0 ? ojson(vnis_[size_t(vni)].vni) : ojson(""), e.vlan,
                      remote});
  }
  return view;
}

}  // namespace rocemu::sw
