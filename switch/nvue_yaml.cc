#include "switch/nvue_yaml.h"

#include <charconv>
#include <map>

#include "common/config/config.h"
#include "common/config/fault_kinds.h"

namespace rocemu::sw {
namespace {

using config::format_duration;
using config::format_rate;

YAML::Node priorities(uint8_t mask) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (int i = 0; i < 8; i++)
    if ((mask >> i) & 1) n.push_back(i);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

// The shortest text that reads back as the same double.
std::string number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

const char* state(bool on) { return on ? "enabled" : "disabled"; }

YAML::Node faults_yaml(const FaultConfig& f) {
  const FaultConfig def;
  YAML::Node n(YAML::NodeType::Map);
  if (f.loss != def.loss) n["loss"] = number(f.loss);
  if (f.burst) {
    n["burst"]["p_good_to_bad"] = number(f.burst->p_good_to_bad);
    n["burst"]["p_bad_to_good"] = number(f.burst->p_bad_to_good);
    n["burst"]["loss_good"] = number(f.burst->loss_good);
    n["burst"]["loss_bad"] = number(f.burst->loss_bad);
  }
  for (const DropRule& r : f.drop) {
    YAML::Node d(YAML::NodeType::Map);
    if (r.qpn) d["qpn"] = *r.qpn;
    if (r.psn) d["psn"] = *r.psn;
    if (r.opcode) d["opcode"] = int(*r.opcode);
    d["every_nth"] = r.every_nth;
    d["times"] = r.times;
    n["drop"].push_back(d);
  }
  // Every kind of the one table that differs from its default.
  for (const config::FaultKind& k : config::fault_kinds()) {
    const config::FaultValue v = k.get(f);
    if (v == k.get(def)) continue;
    const std::string key(k.key);
    switch (k.unit) {
      case config::FaultUnit::kProbability: n[key] = number(v.probability); break;
      case config::FaultUnit::kTime: n[key] = format_duration(v.time); break;
      case config::FaultUnit::kRate: n[key] = format_rate(v.number); break;
      case config::FaultUnit::kCount: n[key] = v.number; break;
      case config::FaultUnit::kFlag: n[key] = v.flag; break;
    }
  }
  return n;
}

YAML::Node interface_yaml(const InterfaceConfig& i, uint16_t index) {
  YAML::Node n(YAML::NodeType::Map);
  if (i.name != port_name(index)) n["name"] = i.name;
  if (i.mac) n["mac"] = i.mac->str();
  if (i.address) n["address"] = i.address->str();
  if (i.speed) n["speed"] = format_rate(*i.speed);
  if (i.mtu) n["mtu"] = *i.mtu;
  if (i.cable_length) n["cable-length"] = *i.cable_length;
  if (i.pfc_watchdog) n["pfc-watchdog"] = state(*i.pfc_watchdog);
  if (i.faults.any() || i.faults.reorder_delay != FaultConfig{}.reorder_delay) n["faults"] = faults_yaml(i.faults);
  if (i.pfc_storm.enable) {
    YAML::Node s;
    s["switch-priority"] = priorities(i.pfc_storm.priorities);
    s["quanta"] = i.pfc_storm.quanta;
    s["interval"] = format_duration(i.pfc_storm.interval);
    n["pfc-storm"] = s;
  }
  if (i.access) n["bridge"]["domain"][kBridgeDomain]["access"] = *i.access;
  return n;
}

YAML::Node qos_yaml(const QosConfig& q) {
  YAML::Node n;
  if (q.roce.enable) n["roce"]["mode"] = std::string(roce_mode_name(q.roce.mode));
  else n["roce"] = "off";
  YAML::Node m;
  m["trust"] = std::string(trust_name(q.mapping.trust));
  for (int d = 0; d < kNumDscp; d++) m["dscp"][std::to_string(d)] = int(q.mapping.dscp_to_sp[size_t(d)]);
  for (int p = 0; p < 8; p++) m["pcp"][std::to_string(p)] = int(q.mapping.pcp_to_sp[size_t(p)]);
  m["dscp"].SetStyle(YAML::EmitterStyle::Flow);
  m["pcp"].SetStyle(YAML::EmitterStyle::Flow);
  m["port-default-sp"] = int(q.mapping.port_default_sp);
  n["mapping"] = m;
  for (int sp = 0; sp < kNumSwitchPriorities; sp++)
    n["egress-queue-mapping"][std::to_string(sp)] = int(q.sp_to_tc[size_t(sp)]);
  n["egress-queue-mapping"].SetStyle(YAML::EmitterStyle::Flow);
  for (int tc = 0; tc < kNumTc; tc++) {
    YAML::Node s;
    s["mode"] = std::string(scheduler_mode_name(q.scheduler[size_t(tc)].mode));
    s["bw-percent"] = q.scheduler[size_t(tc)].bw_percent;
    s.SetStyle(YAML::EmitterStyle::Flow);
    n["egress-scheduler"][std::to_string(tc)] = s;
  }
  for (int tc = 0; tc < kNumTc; tc++) {
    const CongestionControl& c = q.congestion[size_t(tc)];
    YAML::Node s;
    s["ecn"] = c.ecn;
    s["red"] = c.red;
    s["min-threshold"] = c.wred.min_threshold;
    s["max-threshold"] = c.wred.max_threshold;
    s["probability"] = c.wred.probability;
    s.SetStyle(YAML::EmitterStyle::Flow);
    n["congestion-control"][std::to_string(tc)] = s;
  }
  YAML::Node p;
  p["switch-priority"] = priorities(q.pfc.switch_priorities);
  p["cable-length"] = q.pfc.cable_length;
  p["tx"] = q.pfc.tx;
  p["rx"] = q.pfc.rx;
  if (q.pfc.xoff) p["xoff-threshold"] = *q.pfc.xoff;
  if (q.pfc.xon) p["xon-threshold"] = *q.pfc.xon;
  p["pause-quanta"] = q.pfc.pause_quanta;
  n["pfc"] = p;
  YAML::Node w;
  w["state"] = state(q.watchdog.enable);
  w["polling-interval"] = format_duration(q.watchdog.polling_interval);
  w["detection-time"] = format_duration(q.watchdog.detection_time);
  w["restoration-time"] = format_duration(q.watchdog.restoration_time);
  w["action"] = std::string(watchdog_action_name(q.watchdog.action));
  n["pfc-watchdog"] = w;
  YAML::Node t;
  t["state"] = state(q.trim.enable);
  t["size"] = q.trim.size;
  t["remark-dscp"] = int(q.trim.remark_dscp);
  t["switch-priority"] = int(q.trim.switch_priority);
  t["traffic-class"] = priorities(q.trim.eligible_tc);
  n["packet-trim"] = t;
  YAML::Node b;
  b["size"] = q.buffer.size;
  b["roce-pool-percent"] = q.buffer.roce_pool_percent;
  b["ingress-lossy-alpha"] = number(q.buffer.ingress_lossy_alpha);
  b["ingress-lossless-alpha"] = number(q.buffer.ingress_lossless_alpha);
  b["egress-lossy-alpha"] = number(q.buffer.egress_lossy_alpha);
  b["pg-reserved"] = q.buffer.pg_reserved;
  b["queue-reserved"] = q.buffer.queue_reserved;
  n["buffer"] = b;
  YAML::Node h;
  h["cell-size"] = q.headroom.cell_size;
  h["pipeline-latency"] = q.headroom.pipeline_latency;
  h["mac-phy-delay"] = q.headroom.mac_phy_delay;
  h["lossless-mtu"] = q.headroom.lossless_mtu;
  h["small-packet-percentage"] = q.headroom.small_packet_percentage;
  n["headroom"] = h;
  return n;
}

YAML::Node addresses(const std::vector<wire::IpAddr>& list) {
  YAML::Node n(YAML::NodeType::Sequence);
  for (const wire::IpAddr& a : list) n.push_back(a.str());
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

YAML::Node vxlan_yaml(const VxlanConfig& x) {
  YAML::Node n;
  n["source"]["address"] = x.source->str();
  if (!x.state) n["state"] = "disabled";
  n["port"] = x.port;
  n["encapsulation"]["dscp"]["action"] = std::string(vxlan_dscp_action_name(x.encap_dscp));
  n["encapsulation"]["dscp"]["value"] = int(x.dscp_value);
  n["flooding"]["head-end-replication"] = addresses(x.flood);
  if (x.mac_learning) n["mac-learning"] = "on";
  n["vni"] = YAML::Node(YAML::NodeType::Map);
  for (const VxlanVni& v : x.vnis) {
    if (v.bridged()) continue;  // under bridge domain br_default vlan V vni N
    YAML::Node e;
    e["vrf"] = v.vrf;
    e["flooding"]["head-end-replication"] = addresses(v.flood);
    n["vni"][std::to_string(v.vni)] = e;
  }
  return n;
}

// bridge: {domain: {br_default: {ageing, vlan: {V: {vni: {N: {flooding}}}}}}}
YAML::Node bridge_yaml(const SwitchConfig& cfg) {
  YAML::Node d;
  d["ageing"] = cfg.bridge.ageing;
  d["vlan"] = YAML::Node(YAML::NodeType::Map);
  for (const uint16_t vid : cfg.bridge.vlans) {
    YAML::Node e(YAML::NodeType::Map);
    for (const VxlanVni& v : cfg.vxlan.vnis) {
      if (v.vlan != vid) continue;
      e["vni"][std::to_string(v.vni)]["flooding"]["head-end-replication"] = addresses(v.flood);
    }
    d["vlan"][std::to_string(vid)] = e;
  }
  YAML::Node n;
  n["domain"][kBridgeDomain] = d;
  return n;
}

// Leaves of a YAML tree by path, in the tree's order; a sequence is one
// leaf (a route list or a priority list changes whole).
using Leaves = std::vector<std::pair<std::vector<std::string>, std::string>>;
void flatten(const YAML::Node& n, std::vector<std::string>& path, Leaves& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) {
      path.push_back(kv.first.Scalar());
      flatten(kv.second, path, out);
      path.pop_back();
    }
    return;
  }
  YAML::Emitter e;
  e << YAML::Flow << n;
  out.emplace_back(path, e.c_str());
}

// Places `value` at `path` in `root`.
void put(YAML::Node root, const std::vector<std::string>& path, const YAML::Node& value) {
  YAML::Node at = root;
  for (size_t i = 0; i + 1 < path.size(); i++) {
    YAML::Node next = at[path[i]];
    at.reset(next);
  }
  at[path.back()] = value;
}

}  // namespace

YAML::Node switch_config_yaml(const SwitchConfig& cfg) {
  YAML::Node n;
  n["kind"] = "switch";
  n["ports"] = cfg.num_ports;
  n["mac"] = cfg.mac.str();
  n["proxy-arp"] = cfg.proxy_arp;
  YAML::Node fw;
  for (size_t i = 0; i < EcmpHashField::kCount; i++)
    fw["ecmp-hash"][std::string(EcmpHashField::kNames[i])] = cfg.ecmp.hashes(EcmpHashField::Id(i)) ? "on" : "off";
  fw["hash-seed"] = cfg.ecmp.hash_seed;
  fw["load-balancing"] = std::string(load_balancing_name(cfg.ecmp.load_balancing));
  n["forwarding"] = fw;
  n["interfaces"] = YAML::Node(YAML::NodeType::Map);
  for (uint16_t i = 0; i < cfg.interfaces.size(); i++) {
    YAML::Node f = interface_yaml(cfg.interfaces[i], i);
    if (f.size() > 0) n["interfaces"][port_name(i)] = f;
  }
  if (cfg.vxlan.source) n["nve"]["vxlan"] = vxlan_yaml(cfg.vxlan);
  if (!cfg.bridge.vlans.empty() || cfg.bridge.ageing != BridgeDomain{}.ageing) n["bridge"] = bridge_yaml(cfg);
  for (const Route& r : cfg.routes) {
    YAML::Node e;
    e["prefix"] = r.prefix.str();
    if (r.overlay()) {
      e["vtep"] = r.vtep->str();
      e["vni"] = r.vni;
    } else {
      e["interface"] = cfg.interfaces[r.port].name;
    }
    if (r.via) e["via"] = r.via->str();
    if (r.mac) e["mac"] = r.mac->str();
    e.SetStyle(YAML::EmitterStyle::Flow);
    n["routes"].push_back(e);
  }
  for (const Neighbor& nb : cfg.neighbors) {
    YAML::Node e;
    e["ip"] = nb.ip.str();
    e["mac"] = nb.mac.str();
    e["interface"] = cfg.interfaces[nb.port].name;
    e.SetStyle(YAML::EmitterStyle::Flow);
    n["neighbors"].push_back(e);
  }
  n["qos"] = qos_yaml(cfg.qos);
  return n;
}

std::string switch_config_text(const SwitchConfig& cfg) {
  YAML::Emitter e;
  e << switch_config_yaml(cfg);
  return std::string(e.c_str()) + "\n";
}

namespace {

std::string emitted(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

}  // namespace

std::string faults_text(const FaultConfig& f) { return emitted(faults_yaml(f)); }

std::string storm_text(const PfcStorm& s) {
  YAML::Node n;
  n["state"] = state(s.enable);
  n["switch-priority"] = priorities(s.priorities);
  n["quanta"] = s.quanta;
  n["interval"] = format_duration(s.interval);
  return emitted(n);
}

std::string interface_text(const InterfaceConfig& i, uint16_t index) { return emitted(interface_yaml(i, index)); }

std::string switch_config_diff(const SwitchConfig& applied, const SwitchConfig& pending) {
  Leaves before, after;
  std::vector<std::string> path;
  flatten(switch_config_yaml(applied), path, before);
  flatten(switch_config_yaml(pending), path, after);
  const std::map<std::vector<std::string>, std::string> old(before.begin(), before.end());
  const std::map<std::vector<std::string>, std::string> now(after.begin(), after.end());
  // In the order of the YAML, not sorted.
  YAML::Node set(YAML::NodeType::Map), unset(YAML::NodeType::Map);
  for (const auto& [leaf, value] : after)
    if (const auto it = old.find(leaf); it == old.end() || it->second != value) put(set, leaf, YAML::Load(value));
  for (const auto& [leaf, value] : before)
    if (!now.contains(leaf)) put(unset, leaf, YAML::Node(YAML::NodeType::Null));
  if (set.size() == 0 && unset.size() == 0) return "";
  YAML::Node doc(YAML::NodeType::Sequence);
  for (const auto& [verb, tree] : {std::pair{"set", set}, {"unset", unset}}) {
    if (tree.size() == 0) continue;
    YAML::Node item;
    item[verb] = tree;
    doc.push_back(item);
  }
  YAML::Emitter e;
  e << doc;
  return std::string(e.c_str()) + "\n";
}

}  // namespace rocemu::sw
