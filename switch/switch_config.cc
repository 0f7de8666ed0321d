#include "switch/switch_config.h"

#include "switch/switch_fields.h"

#include <algorithm>
#include <set>

namespace rocemu::sw {
namespace {

std::string field_tc(const char* group, int tc, const char* key) {
  return std::string("qos.") + group + ".traffic-class." + std::to_string(tc) + "." + key;
}

Status err(const std::string& field, const std::string& message) { return Status::error(field + ": " + message); }

}  // namespace

std::optional<IpPrefix> IpPrefix::parse(std::string_view text) {
  const auto slash = text.find('/');
  auto addr = wire::IpAddr::parse(text.substr(0, slash));
  if (!addr) return std::nullopt;
  IpPrefix p;
  p.addr = *addr;
  const int max = addr->is_v4() ? 32 : 128;
  if (slash == std::string_view::npos) {
    p.length = uint8_t(max);
    return p;
  }
  const std::string_view len = text.substr(slash + 1);
  if (len.empty() || len.size() > 3) return std::nullopt;
  int v = 0;
  for (char c : len) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  if (v > max) return std::nullopt;
  p.length = uint8_t(v);
  return p;
}

bool IpPrefix::contains(const wire::IpAddr& a) const {
  if (a.is_v4() != is_v4()) return false;
  const int base = is_v4() ? 96 : 0;
  const int bits = base + length;
  for (int i = 0; i < bits; i++) {
    const uint8_t m = uint8_t(0x80u >> (i % 8));
    if ((a.b[size_t(i / 8)] & m) != (addr.b[size_t(i / 8)] & m)) return false;
  }
  return true;
}

std::string IpPrefix::str() const { return addr.str() + "/" + std::to_string(length); }

SwitchConfig SwitchConfig::with_ports(uint16_t ports) {
  SwitchConfig c;
  c.num_ports = ports;
  c.interfaces.resize(ports);
  for (uint16_t i = 0; i < ports; i++) c.interfaces[i].name = port_name(i);
  return c;
}

std::string port_name(uint16_t index) { return "swp" + std::to_string(uint32_t(index) + 1); }

std::optional<uint16_t> parse_port_name(std::string_view name) {
  if (!name.starts_with("swp")) return std::nullopt;
  const std::string_view digits = name.substr(3);
  if (digits.empty() || digits.size() > 5 || digits[0] == '0') return std::nullopt;
  uint32_t n = 0;
  for (char ch : digits) {
    if (ch < '0' || ch > '9') return std::nullopt;
    n = n * 10 + uint32_t(ch - '0');
  }
  if (n > 65536) return std::nullopt;
  return uint16_t(n - 1);
}

int SwitchConfig::find_interface(std::string_view name) const {
  for (size_t i = 0; i < interfaces.size(); i++)
    if (interfaces[i].name == name) return int(i);  // a topology may rename a port
  const auto idx = parse_port_name(name);
  return idx && *idx < num_ports ? int(*idx) : -1;
}

std::string SwitchConfig::interface_range() const {
  if (num_ports == 0) return "no ports";
  return num_ports == 1 ? port_name(0) : port_name(0) + ".." + port_name(uint16_t(num_ports - 1));
}

Result<std::vector<uint16_t>> SwitchConfig::find_interfaces(std::string_view list) const {
  std::vector<uint16_t> out;
  const auto add = [&](int idx) {
    if (std::find(out.begin(), out.end(), uint16_t(idx)) == out.end()) out.push_back(uint16_t(idx));
  };
  const auto bad = [&](std::string_view item) {
    return Status::error("no interface '" + std::string(item) + "' (" + interface_range() + ")");
  };
  const std::string_view whole = list;
  for (bool more = true; more;) {
    const auto comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    more = comma != std::string_view::npos;
    if (more) list = list.substr(comma + 1);
    if (item.empty()) return bad(whole);
    if (const int idx = find_interface(item); idx >= 0) {
      add(idx);
      continue;
    }
    // A range, or a number continuing the list's prefix ("swp1,3").
    const std::string name = item.starts_with("swp") || out.empty() ? std::string(item) : "swp" + std::string(item);
    const auto dash = name.find('-');
    if (dash == std::string::npos) {
      const int idx = find_interface(name);
      if (idx < 0) return bad(item);
      add(idx);
      continue;
    }
    const int lo = find_interface(name.substr(0, dash));
    const int hi = find_interface("swp" + name.substr(dash + 1));
    if (lo < 0 || hi < 0 || hi < lo) return bad(item);
    for (int i = lo; i <= hi; i++) add(i);
  }
  return out;
}

wire::MacAddr SwitchConfig::port_mac(uint16_t port) const {
  if (port < interfaces.size() && interfaces[port].mac) return *interfaces[port].mac;
  wire::MacAddr m = mac;
  uint32_t low = uint32_t(m.b[3]) << 16 | uint32_t(m.b[4]) << 8 | m.b[5];
  low = (low + port) & 0xffffff;
  m.b[3] = uint8_t(low >> 16);
  m.b[4] = uint8_t(low >> 8);
  m.b[5] = uint8_t(low);
  return m;
}

Status SwitchConfig::validate() const {
  if (num_ports == 0 || num_ports > 256) return err("ports", "a switch has 1 to 256 ports");
  if (interfaces.size() != num_ports) return err("interfaces", "there must be one interface per port");
  if (mac.is_multicast()) return err("mac", "must be a unicast address");
  std::set<std::string> names;
  for (size_t i = 0; i < interfaces.size(); i++) {
    const InterfaceConfig& f = interfaces[i];
    const std::string at = "interfaces." + (f.name.empty() ? std::to_string(i) : f.name);
    if (f.name.empty()) return err(at + ".name", "every interface needs a name");
    if (!names.insert(f.name).second) return err(at + ".name", "'" + f.name + "' is used twice");
    if (f.mac && f.mac->is_multicast()) return err(at + ".mac", "must be a unicast address");
    if (f.speed && (*f.speed < 1000000 || *f.speed > 1600000000000ull))
      return err(at + ".speed", "must be between 1M and 1600G");
    for (const InterfaceIntField& row : kInterfaceIntFields)
      if (const auto& v = f.*row.member)
        if (Status s = row.range.check(*v, at + "." + std::string(row.yaml)); !s.ok()) return s;
    if (Status s = f.faults.validate(); !s.ok()) return err(at + ".faults", s.message());
    if (f.pfc_storm.enable && f.pfc_storm.priorities == 0)
      return err(at + ".pfc-storm.switch-priority", "a storm needs at least one priority");
    if (f.pfc_storm.interval.count() < 0) return err(at + ".pfc-storm.interval", "must not be negative");
  }
  for (size_t i = 0; i < routes.size(); i++) {
    const Route& r = routes[i];
    const std::string at = "routes[" + std::to_string(i) + "]";
    if (r.overlay()) {
      if (Status s = check_overlay_route(r, at); !s.ok()) return s;
      continue;
    }
    if (r.port >= num_ports) return err(at + ".interface", "no such port " + std::to_string(r.port));
    if (const std::string why = unroutable_port(r.port); !why.empty()) return err(at + ".interface", why);
    if (r.via && r.via->is_v4() != r.prefix.is_v4()) return err(at + ".via", "address family differs from the prefix");
    if (r.mac && r.mac->is_multicast()) return err(at + ".mac", "must be a unicast address");
  }
  for (size_t i = 0; i < routes.size(); i++) {
    size_t members = 1;
    for (size_t j = 0; j < i; j++) {
      const Route& a = routes[j];
      const Route& b = routes[i];
      if (!a.prefix.same_as(b.prefix)) continue;
      members++;
      if (a.overlay() != b.overlay())
        return err("routes[" + std::to_string(i) + "]", "an ECMP group for " + b.prefix.str() +
                                                            " mixes overlay (vtep) and underlay next hops");
      if (a.same_next_hop(b))
        return err("routes[" + std::to_string(i) + "]", "the same next hop as routes[" + std::to_string(j) + "] for " +
                                                            b.prefix.str());
    }
    if (members > kMaxEcmpMembers)
      return err("routes[" + std::to_string(i) + "]", "more than " + std::to_string(kMaxEcmpMembers) +
                                                          " next hops for " + routes[i].prefix.str());
  }
  if (Status s = validate_vxlan(); !s.ok()) return s;
  if (Status s = validate_bridge(); !s.ok()) return s;
  if (ecmp.hash_fields == 0 && ecmp.load_balancing == LoadBalancing::kHash)
    return err("forwarding.ecmp-hash", "at least one field must be hashed");
  if (routes.size() + neighbors.size() + interfaces.size() > 8000)
    return err("routes", "at most 8000 routes, neighbors and interface addresses in all");
  for (size_t i = 0; i < neighbors.size(); i++) {
    const Neighbor& n = neighbors[i];
    const std::string at = "neighbors[" + std::to_string(i) + "]";
    if (n.port >= num_ports) return err(at + ".interface", "no such port " + std::to_string(n.port));
    if (const std::string why = unroutable_port(n.port); !why.empty()) return err(at + ".interface", why);
    if (n.mac.is_multicast()) return err(at + ".mac", "must be a unicast address");
  }

  // The bounded settings of the table (switch_fields.h), each by its range.
  for (const SwitchField& f : switch_fields())
    if (Status s = f.range.check(f.get(*this), f.yaml); !s.ok()) return s;
  const QosConfig& q = qos;
  for (int d = 0; d < kNumDscp; d++)
    if (Status s = kSwitchPriorityRange.check(q.mapping.dscp_to_sp[d], "qos.mapping.dscp." + std::to_string(d));
        !s.ok())
      return s;
  for (int p = 0; p < kNumSwitchPriorities; p++) {
    if (Status s = kSwitchPriorityRange.check(q.mapping.pcp_to_sp[p], "qos.mapping.pcp." + std::to_string(p)); !s.ok())
      return s;
    if (Status s = kTrafficClassRange.check(q.sp_to_tc[p], "qos.egress-queue-mapping." + std::to_string(p)); !s.ok())
      return s;
  }
  uint32_t bw = 0;
  for (int tc = 0; tc < kNumTc; tc++) {
    if (q.scheduler[tc].mode == SchedulerMode::kDwrr) {
      if (Status s = kPercentRange.check(q.scheduler[tc].bw_percent, field_tc("egress-scheduler", tc, "bw-percent"));
          !s.ok())
        return s;
      bw += q.scheduler[tc].bw_percent;
    }
    const CongestionControl& c = q.congestion[tc];
    if (c.ecn || c.red) {
      if (c.wred.min_threshold >= c.wred.max_threshold)
        return err(field_tc("congestion-control", tc, "min-threshold"), "must be below max-threshold (" +
                                                                            std::to_string(c.wred.max_threshold) + ")");
      if (Status s = kPercentRange.check(c.wred.probability, field_tc("congestion-control", tc, "probability"));
          !s.ok())
        return s;
    }
  }
  if (bw > 100) return err("qos.egress-scheduler.traffic-class", "dwrr bw-percent adds up to " + std::to_string(bw) + ", more than 100");
  for (int sp = 0; sp < kNumSwitchPriorities; sp++) {
    const uint8_t tc = q.sp_to_tc[sp];
    if (((q.pfc.switch_priorities >> sp) & 1) == 0) continue;
    for (int other = 0; other < kNumSwitchPriorities; other++) {
      if (other != sp && q.sp_to_tc[other] == tc && ((q.pfc.switch_priorities >> other) & 1) == 0)
        return err("qos.egress-queue-mapping.switch-priority." + std::to_string(other) + ".traffic-class",
                   "TC" + std::to_string(tc) + " carries PFC priority " + std::to_string(sp) +
                       "; a lossy priority cannot share a lossless queue");
    }
  }
  if (q.pfc.switch_priorities == 0xff) return err("qos.pfc.switch-priority", "at least one priority must stay lossy");
  if (q.pfc.xoff && *q.pfc.xoff < 1024) return err("qos.pfc.xoff-threshold", "at least 1024 bytes");
  const PacketTrim& t = q.trim;
  if (t.enable && ((q.pfc.switch_priorities >> t.switch_priority) & 1))
    return err("qos.packet-trim.switch-priority", "must not be a PFC (lossless) priority");
  const BufferConfig& b = q.buffer;
  for (auto [a, name] : {std::pair{b.ingress_lossy_alpha, "qos.buffer.ingress-lossy-alpha"},
                         {b.ingress_lossless_alpha, "qos.buffer.ingress-lossless-alpha"},
                         {b.egress_lossy_alpha, "qos.buffer.egress-lossy-alpha"}}) {
    if (!(a >= 0 && a <= 128)) return err(name, "must be between 0 and 128 (alpha = 2^dynamic_th)");
  }
  if (b.pg_reserved > b.size / 64) return err("qos.buffer.pg-reserved", "too large for the buffer");
  if (b.queue_reserved > b.size / 64) return err("qos.buffer.queue-reserved", "too large for the buffer");
  return {};
}

std::optional<VxlanDscpAction> parse_vxlan_dscp_action(std::string_view name) {
  for (size_t i = 0; i < kVxlanDscpActionNames.size(); i++)
    if (kVxlanDscpActionNames[i] == name) return VxlanDscpAction(i);
  return std::nullopt;
}

std::string_view vxlan_dscp_action_name(VxlanDscpAction a) { return kVxlanDscpActionNames[size_t(a)]; }

bool VxlanConfig::is_remote(uint32_t vni, const wire::IpAddr& vtep) const {
  if (std::find(flood.begin(), flood.end(), vtep) != flood.end()) return true;
  const VxlanVni* v = find(vni);
  return v != nullptr && std::find(v->flood.begin(), v->flood.end(), vtep) != v->flood.end();
}

Status SwitchConfig::validate_vxlan() const {
  const VxlanConfig& x = vxlan;
  const auto err = [](const std::string& field, const std::string& msg) { return Status::error(field + ": " + msg); };
  // Every switch reads it (trimming looks inside VXLAN frames), VTEP or not.
  if (x.port == wire::kRoceV2Port)
    return err("nve.vxlan.port", "4791 is RoCEv2's port: RoCE would be taken for VXLAN (the IANA port is 4789)");
  if (!x.source) {
    if (!x.vnis.empty() || !x.flood.empty())
      return err("nve.vxlan.source.address", "a VTEP with VNIs or a flood list needs a source address");
    return {};
  }
  if (!x.source->is_v4()) return err("nve.vxlan.source.address", "must be an IPv4 address (no IPv6 underlay)");
  auto check_flood = [&](const std::vector<wire::IpAddr>& list, const std::string& field) -> Status {
    std::set<wire::IpAddr> seen;
    for (const wire::IpAddr& a : list) {
      if (!a.is_v4()) return err(field, "'" + a.str() + "' is not an IPv4 address");
      if (a == *x.source) return err(field, "'" + a.str() + "' is this VTEP's own source address");
      if (!seen.insert(a).second) return err(field, "'" + a.str() + "' is listed twice");
    }
    return {};
  };
  if (Status s = check_flood(x.flood, "nve.vxlan.flooding.head-end-replication"); !s.ok()) return s;
  std::set<uint32_t> vnis;
  for (const VxlanVni& v : x.vnis) {
    const std::string at = v.bridged() ? std::string("bridge.domain.") + kBridgeDomain + ".vlan." +
                                             std::to_string(v.vlan) + ".vni." + std::to_string(v.vni)
                                       : "nve.vxlan.vni." + std::to_string(v.vni);
    if (Status s = kVniRange.check(v.vni, "nve.vxlan.vni"); !s.ok()) return s;
    if (!vnis.insert(v.vni).second) return err(at, "mapped twice");
    if (v.vrf != "default") return err(at + ".vrf", "'" + v.vrf + "': the switch has one VRF, default");
    if (v.bridged() && !bridge.has_vlan(v.vlan))
      return err(at, "mapped to VLAN " + std::to_string(v.vlan) + ", which is not a VLAN of bridge domain br_default");
    if (Status s = check_flood(v.flood, at + ".flooding.head-end-replication"); !s.ok()) return s;
  }
  return {};
}

Status SwitchConfig::validate_bridge() const {
  const auto err = [](const std::string& field, const std::string& msg) { return Status::error(field + ": " + msg); };
  const std::string at = std::string("bridge.domain.") + kBridgeDomain;
  std::set<uint16_t> vlans;
  for (const uint16_t v : bridge.vlans) {
    if (Status s = kVlanRange.check(v, at + ".vlan"); !s.ok()) return s;
    if (!vlans.insert(v).second) return err(at + ".vlan." + std::to_string(v), "listed twice");
  }
  std::set<uint16_t> mapped;
  for (const VxlanVni& v : vxlan.vnis)
    if (v.bridged() && !mapped.insert(v.vlan).second)
      return err(at + ".vlan." + std::to_string(v.vlan) + ".vni",
                 "VLAN " + std::to_string(v.vlan) + " is mapped to two VNIs (one VNI per VLAN)");
  for (const InterfaceConfig& i : interfaces) {
    if (!i.access) continue;
    const std::string f = "interfaces." + i.name + ".bridge.domain." + kBridgeDomain + ".access";
    if (!bridge.has_vlan(*i.access))
      return err(f, "VLAN " + std::to_string(*i.access) + " is not a VLAN of bridge domain br_default (" + at + ".vlan)");
    if (i.address)
      return err(f, "a bridge port is switched, not routed: it takes no address (" + i.address->str() + ")");
  }
  return {};
}

std::string SwitchConfig::unroutable_port(uint16_t port) const {
  if (port >= interfaces.size() || !interfaces[port].access) return {};
  return interfaces[port].name + " is an access port of bridge domain br_default (VLAN " +
         std::to_string(*interfaces[port].access) + "): it is switched, nothing is routed out of it";
}

Status SwitchConfig::check_overlay_route(const Route& r, const std::string& at) const {
  const auto err = [](const std::string& field, const std::string& msg) { return Status::error(field + ": " + msg); };
  if (!vxlan.enabled())
    return err(at + ".vtep", "an overlay route needs the switch to be a VTEP (nve.vxlan.source.address, state enabled)");
  if (vxlan.find(r.vni) == nullptr)
    return err(at + ".vni", "VNI " + std::to_string(r.vni) + " is not mapped (nve.vxlan.vni)");
  if (vxlan.find(r.vni)->bridged())
    return err(at + ".vni", "VNI " + std::to_string(r.vni) + " is bridged (VLAN " +
                                std::to_string(vxlan.find(r.vni)->vlan) + "): a route needs a routed VNI");
  if (!vxlan.is_remote(r.vni, *r.vtep))
    return err(at + ".vtep", "'" + r.vtep->str() + "' is not a remote VTEP of VNI " + std::to_string(r.vni) +
                                 " (nve.vxlan.flooding or nve.vxlan.vni." + std::to_string(r.vni) + ".flooding)");
  if (r.via || r.mac) return err(at + ".vtep", "an overlay route takes vtep and vni, not via or mac");
  // The outer packet to the VTEP would be routed by this route again: a loop.
  if (r.prefix.contains(*r.vtep))
    return err(at + ".prefix", r.prefix.str() + " covers its own remote VTEP " + r.vtep->str() +
                                   " (the underlay route to a VTEP must not lead into the overlay)");
  return {};
}

}  // namespace rocemu::sw
