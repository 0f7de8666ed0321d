#include "apps/snapshot.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "common/engine/engine.h"
#include "nic/nic.h"
#include "switch/switch.h"

namespace rocemu::app {

uint8_t SwitchSnap::priority_of(uint8_t dscp, bool vlan, uint8_t pcp) const {
  // As the switch's classifier (switch_rx.cc) reads an IP packet.
  if (trust == "l3" || trust == "both") return dscp_to_sp[dscp & 63];
  if (trust == "l2") return vlan ? pcp_to_sp[pcp & 7] : port_default_sp;
  return port_default_sp;
}

bool SwitchSnap::tc_lossless(uint8_t tc) const {
  for (uint8_t sp = 0; sp < 8; sp++)
    if (pfc_on(sp) && tc_of(sp) == tc) return true;
  return false;
}

const NicSnap* FabricSnapshot::nic(const std::string& name) const {
  for (const auto& n : nics)
    if (n.name == name) return &n;
  return nullptr;
}

const SwitchSnap* FabricSnapshot::switch_named(const std::string& name) const {
  for (const auto& s : switches)
    if (s.name == name) return &s;
  return nullptr;
}

namespace {

NicSnap nic_snap(const nic::Nic& n) {
  using NC = nic::NicCounters;
  NicSnap s;
  s.name = n.name();
  s.mtu = n.link_mtu();
  s.pfc_priorities = n.config().pfc_priorities;
  s.cnp_dscp = n.config().cnp_dscp;
  s.cnp_prio = n.config().cnp_prio;
  s.ecn = n.config().ecn;
  // Live QPs grouped by what they send with (one entry per class, not per QP).
  std::map<std::tuple<uint8_t, uint8_t, uint32_t>, QpClassSnap> classes;
  n.for_each_qp([&](const nic::Qp& q) {
    if (q.state != IBV_QPS_RTR && q.state != IBV_QPS_RTS) return;
    const uint8_t tclass = uint8_t(q.path.dscp << 2 | uint8_t(q.path.ecn));
    QpClassSnap& c = classes[{tclass, q.priority, q.mtu}];
    if (c.count++ == 0) c.example_qpn = q.qpn;
    c.traffic_class = tclass;
    c.dscp = q.path.dscp;
    c.priority = q.priority;
    c.path_mtu = q.mtu;
  });
  for (auto& [key, c] : classes) s.qps.push_back(c);
  const auto& c = n.counters();
  s.tx_bytes = c[NC::tx_roce_bytes];
  s.rx_bytes = c[NC::rx_roce_bytes];
  s.cnp_sent = c[NC::np_cnp_sent];
  s.cnp_handled = c[NC::rp_cnp_handled];
  s.ecn_marked = c[NC::np_ecn_marked_roce_packets];
  s.pfc_rx = c[NC::rx_pfc_frames];
  return s;
}

SwitchPortSnap port_snap(const sw::Switch& sw, uint16_t i) {
  using PC = sw::PortCounters;
  using QC = sw::QueueCounters;
  SwitchPortSnap p;
  p.index = i;
  p.name = i < sw.config().interfaces.size() ? sw.config().interfaces[i].name : std::to_string(i);
  p.mtu = sw.port_mtu(i);
  p.speed = sw.port_speed(i);
  p.cable_length = sw.port_cable_length(i);
  p.headroom_xoff = sw.headroom(i).xoff;
  p.watchdog = sw.port_watchdog(i);
  const auto& c = sw.counters(i);
  p.rx_bytes = c[PC::rx_roce_bytes] + c[PC::rx_non_roce_bytes];
  p.tx_bytes = c[PC::tx_roce_bytes] + c[PC::tx_cnp_bytes] + c[PC::tx_non_roce_bytes];
  p.roce_no_buffer_discard = c[PC::rx_roce_no_buffer_discard];
  p.cnp_packets = c[PC::tx_cnp_packets];
  for (const PC::Id id : {PC::rx_roce_no_buffer_discard, PC::rx_non_roce_no_buffer_discard, PC::tx_roce_no_buffer_discard,
                          PC::tx_cnp_no_buffer_discard, PC::tx_non_roce_no_buffer_discard, PC::drop_parse_error,
                          PC::drop_not_ip, PC::drop_no_route, PC::drop_to_switch, PC::drop_ttl_expired,
                          PC::drop_neighbor_miss, PC::drop_mtu_exceeded, PC::drop_link_down, PC::drop_wred,
                          PC::drop_pfc_watchdog, PC::drop_fault, PC::drop_arp})
    p.drops += c[id];
  for (uint8_t k = 0; k < 8; k++) {
    p.pfc_tx[k] = sw.pfc_tx_frames(i, k);
    p.pfc_rx[k] = sw.pfc_rx_frames(i, k);
    p.queue_depth[k] = sw.queue_length(i, k);
    p.tc_drops[k] = sw.queue_counters(i, k)[QC::drop_packets];
    p.tc_ecn_marked[k] = sw.queue_counters(i, k)[QC::ecn_marked_packets];
  }
  return p;
}

SwitchSnap switch_snap(const sw::Switch& sw) {
  const sw::QosConfig& q = sw.config().qos;
  SwitchSnap s;
  s.name = sw.name();
  s.roce = q.roce.enable;
  s.roce_mode = std::string(sw::roce_mode_name(q.roce.mode));
  s.roce_dscp = q.roce.roce_dscp;
  s.roce_sp = q.roce.roce_sp;
  s.cnp_dscp = q.roce.cnp_dscp;
  s.cnp_sp = q.roce.cnp_sp;
  s.trust = std::string(sw::trust_name(q.mapping.trust));
  s.dscp_to_sp = q.mapping.dscp_to_sp;
  s.pcp_to_sp = q.mapping.pcp_to_sp;
  s.port_default_sp = q.mapping.port_default_sp;
  s.sp_to_tc = q.sp_to_tc;
  for (size_t tc = 0; tc < 8 && tc < q.scheduler.size(); tc++) {
    s.tc_strict[tc] = q.scheduler[tc].mode == sw::SchedulerMode::kStrict;
    s.tc_ecn[tc] = q.congestion[tc].ecn;
    s.tc_ecn_min[tc] = q.congestion[tc].wred.min_threshold;
    s.tc_ecn_max[tc] = q.congestion[tc].wred.max_threshold;
  }
  s.pfc_priorities = q.pfc.switch_priorities;
  for (uint16_t i = 0; i < sw.num_ports(); i++) s.ports.push_back(port_snap(sw, i));
  return s;
}

EndSnap end_snap(const Port& end) {
  EndSnap e;
  e.node = end.owner()->name();
  e.port = end.index();
  if (const auto* sw = dynamic_cast<const sw::Switch*>(end.owner())) {
    e.port_name = e.port < sw->config().interfaces.size() ? sw->config().interfaces[e.port].name : std::to_string(e.port);
    e.mtu = sw->port_mtu(e.port);
  } else if (const auto* n = dynamic_cast<const nic::Nic*>(end.owner())) {
    e.mtu = n->link_mtu();
  } else {
    e.mtu = end.mtu();
  }
  return e;
}

}  // namespace

FabricSnapshot take_snapshot(const Engine& engine) {
  FabricSnapshot s;
  s.time_ns = engine.now().count() / 1000;
  for (const auto& node : engine.nodes()) {
    if (const auto* n = dynamic_cast<const nic::Nic*>(node.get())) s.nics.push_back(nic_snap(*n));
    if (const auto* sw = dynamic_cast<const sw::Switch*>(node.get())) s.switches.push_back(switch_snap(*sw));
  }
  for (const auto& l : engine.links()) s.links.push_back({l->name(), end_snap(l->end(0)), end_snap(l->end(1))});
  return s;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(QpClassSnap, example_qpn, count, traffic_class, dscp, priority, path_mtu)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(NicSnap, name, mtu, pfc_priorities, cnp_dscp, cnp_prio, ecn, qps, tx_bytes,
                                   rx_bytes, cnp_sent, cnp_handled, ecn_marked, pfc_rx)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SwitchPortSnap, index, name, mtu, speed, cable_length, headroom_xoff, watchdog,
                                   rx_bytes, tx_bytes, pfc_tx, pfc_rx, queue_depth, tc_drops, tc_ecn_marked,
                                   roce_no_buffer_discard, cnp_packets, drops)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(SwitchSnap, name, roce, roce_mode, roce_dscp, roce_sp, cnp_dscp, cnp_sp, trust,
                                   dscp_to_sp, pcp_to_sp, port_default_sp, sp_to_tc, tc_strict, tc_ecn, tc_ecn_min,
                                   tc_ecn_max, pfc_priorities, ports)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(EndSnap, node, port, port_name, mtu)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LinkSnap, name, a, b)

void to_json(nlohmann::json& j, const FabricSnapshot& s) {
  j = {{"time_ns", s.time_ns}, {"nics", s.nics}, {"switches", s.switches}, {"links", s.links}};
}

void from_json(const nlohmann::json& j, FabricSnapshot& s) {
  j.at("time_ns").get_to(s.time_ns);
  j.at("nics").get_to(s.nics);
  j.at("switches").get_to(s.switches);
  j.at("links").get_to(s.links);
}

}  // namespace rocemu::app
