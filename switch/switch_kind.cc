#include "switch/switch_kind.h"

#include <algorithm>
#include <span>
#include <utility>

#include "switch/nvue.h"
#include "switch/switch_fields.h"
#include "switch/switch.h"

namespace rocemu::sw {
namespace {

using config::Context;

std::string join(std::string_view a, std::string_view b) { return std::string(a) + "." + std::string(b); }

// A value of `range` (switch_fields.h), refused in the table's words.
std::optional<int64_t> bounded(const YAML::Node& n, const std::string& field, const FieldRange& range, Context& ctx) {
  if (!n.IsScalar()) {
    ctx.error(n, field, "expected " + std::string(range.expected()));
    return std::nullopt;
  }
  const Result<int64_t> v = range.read(n.Scalar());
  if (!v.ok()) {
    ctx.error(n, field, v.status().message());
    return std::nullopt;
  }
  return v.value();
}

// The settings of the table, each at its path under the switch node `sw`
// (after the profile and the other sections: they override both).
void read_fields(const YAML::Node& sw, const std::string& f, Context& ctx, SwitchConfig& cfg) {
  for (const SwitchField& row : switch_fields()) {
    YAML::Node at = sw;
    bool found = true;
    for (size_t b = 0, e; found && b < row.yaml.size(); b = e + 1) {
      e = std::min(row.yaml.find('.', b), row.yaml.size());
      const std::string key(row.yaml.substr(b, e - b));
      found = at.IsMap();
      if (!found) break;
      const YAML::Node child = std::as_const(at)[key];
      found = child.IsDefined() && !child.IsNull();
      if (found) at.reset(child);
    }
    if (found)
      if (auto v = bounded(at, f + "." + std::string(row.yaml), row.range, ctx)) row.set(cfg, *v);
  }
}

// A list of 0..7 as a YAML sequence ([0, 3]) or a string ("0,3", "1-3").
std::optional<uint8_t> index_list(const YAML::Node& n, const std::string& field, Context& ctx) {
  if (n.IsSequence()) {
    uint8_t m = 0;
    for (size_t i = 0; i < n.size(); i++) {
      auto v = bounded(n[i], field + "[" + std::to_string(i) + "]", kSwitchPriorityRange, ctx);
      if (!v) return std::nullopt;
      m |= uint8_t(1u << *v);
    }
    return m;
  }
  if (n.IsScalar()) {
    if (n.Scalar() == "none" || n.Scalar().empty()) return uint8_t(0);
    if (auto m = parse_index_list(n.Scalar())) return m;
  }
  ctx.error(n, field, "expected a list of values 0..7 (e.g. [0, 3], \"1-3\")");
  return std::nullopt;
}

template <typename T>
void read_int(const YAML::Node& n, const char* key, const std::string& field, Context& ctx, T& out, int64_t lo,
              int64_t hi) {
  if (const YAML::Node v = n[key])
    if (auto x = ctx.integer(v, join(field, key), lo, hi)) out = T(*x);
}
void read_bool(const YAML::Node& n, const char* key, const std::string& field, Context& ctx, bool& out) {
  if (const YAML::Node v = n[key]) {
    if (v.IsScalar() && (v.Scalar() == "enabled" || v.Scalar() == "enable")) {
      out = true;
    } else if (v.IsScalar() && (v.Scalar() == "disabled" || v.Scalar() == "disable")) {
      out = false;
    } else if (auto x = ctx.boolean(v, join(field, key))) {
      out = *x;
    }
  }
}
void read_size(const YAML::Node& n, const char* key, const std::string& field, Context& ctx, uint64_t& out) {
  if (const YAML::Node v = n[key])
    if (auto x = ctx.size(v, join(field, key))) out = *x;
}
void read_duration(const YAML::Node& n, const char* key, const std::string& field, Context& ctx, Duration& out) {
  if (const YAML::Node v = n[key])
    if (auto x = ctx.duration(v, join(field, key))) out = *x;
}
void read_double(const YAML::Node& n, const char* key, const std::string& field, Context& ctx, double& out,
                 double lo, double hi) {
  if (const YAML::Node v = n[key])
    if (auto x = ctx.number(v, join(field, key), lo, hi)) out = *x;
}

// Records "expected a mapping" (at n's line) unless n is one: indexing a
// scalar by key throws.
bool expect_map(const YAML::Node& n, const std::string& field, Context& ctx, std::string_view of) {
  if (n.IsMap()) return true;
  ctx.error(n, field, "expected a mapping " + std::string(of));
  return false;
}

// Keys of a map by integer index 0..hi ("26: 3").
template <typename F>
void for_index_keys(const YAML::Node& n, const std::string& field, Context& ctx, const FieldRange& keys, F f) {
  if (!n.IsMap()) {
    ctx.error(n, field, "expected a mapping by number");
    return;
  }
  for (const auto& kv : n) {
    auto k = bounded(kv.first, field, keys, ctx);
    if (k) f(int(*k), kv.second, field + "." + std::to_string(*k));
  }
}

void parse_qos(const YAML::Node& q, const std::string& f, Context& ctx, QosConfig& qos) {
  ctx.check_keys(q, f, {"roce", "mapping", "egress-queue-mapping", "egress-scheduler", "congestion-control", "pfc",
                        "pfc-watchdog", "packet-trim", "buffer", "headroom"});
  // The RoCE profile first; the other sections adjust it (the bounded
  // settings, buffer size included, are read after: read_fields).
  if (const YAML::Node r = q["roce"]) {
    const std::string rf = f + ".roce";
    std::optional<std::string> mode;
    if (r.IsScalar()) {
      mode = r.Scalar();
    } else if (r.IsMap()) {
      ctx.check_keys(r, rf, {"mode", "enable"});
      bool enable = true;
      read_bool(r, "enable", rf, ctx, enable);
      mode = enable ? (r["mode"] ? ctx.str(r["mode"], rf + ".mode") : std::string("lossless")) : "off";
    } else {
      ctx.error(r, rf, "expected a mode (lossless, lossy, lossy-multi-tc, off) or {mode: ...}");
    }
    if (mode && *mode != "off") {
      if (auto m = parse_roce_mode(*mode)) {
        qos = qos_roce_profile(*m, qos.buffer);
      } else {
        ctx.error(r.IsMap() ? r["mode"] : r, rf + ".mode", "'" + *mode + "' is not lossless, lossy, lossy-multi-tc or off");
      }
    }
  }
  if (const YAML::Node m = q["mapping"]) {
    const std::string mf = f + ".mapping";
    ctx.check_keys(m, mf, {"trust", "dscp", "pcp", "port-default-sp"});
    if (m["trust"])
      if (auto t = ctx.choice(m["trust"], mf + ".trust", {"l2", "l3", "both", "port"}))
        qos.mapping.trust = *parse_trust(*t);
    if (m["dscp"])
      for_index_keys(m["dscp"], mf + ".dscp", ctx, kDscpRange, [&](int d, const YAML::Node& v, const std::string& vf) {
        if (auto sp = bounded(v, vf, kSwitchPriorityRange, ctx)) qos.mapping.dscp_to_sp[size_t(d)] = uint8_t(*sp);
      });
    if (m["pcp"])
      for_index_keys(m["pcp"], mf + ".pcp", ctx, kPcpRange, [&](int p, const YAML::Node& v, const std::string& vf) {
        if (auto sp = bounded(v, vf, kSwitchPriorityRange, ctx)) qos.mapping.pcp_to_sp[size_t(p)] = uint8_t(*sp);
      });
  }
  if (const YAML::Node m = q["egress-queue-mapping"])
    for_index_keys(m, f + ".egress-queue-mapping", ctx, kSwitchPriorityRange,
                   [&](int sp, const YAML::Node& v, const std::string& vf) {
                     if (auto tc = bounded(v, vf, kTrafficClassRange, ctx)) qos.sp_to_tc[size_t(sp)] = uint8_t(*tc);
                   });
  if (const YAML::Node m = q["egress-scheduler"])
    for_index_keys(m, f + ".egress-scheduler", ctx, kTrafficClassRange, [&](int tc, const YAML::Node& v, const std::string& vf) {
      ctx.check_keys(v, vf, {"mode", "bw-percent"});
      TcSchedule& s = qos.scheduler[size_t(tc)];
      if (v["mode"])
        if (auto mode = ctx.choice(v["mode"], vf + ".mode", {"strict", "dwrr"})) s.mode = *parse_scheduler_mode(*mode);
      if (v["bw-percent"])
        if (auto bw = bounded(v["bw-percent"], vf + ".bw-percent", kPercentRange, ctx)) s.bw_percent = uint32_t(*bw);
    });
  if (const YAML::Node m = q["congestion-control"])
    for_index_keys(m, f + ".congestion-control", ctx, kTrafficClassRange, [&](int tc, const YAML::Node& v, const std::string& vf) {
      ctx.check_keys(v, vf, {"ecn", "red", "min-threshold", "max-threshold", "probability"});
      CongestionControl& c = qos.congestion[size_t(tc)];
      c.ecn = true;
      read_bool(v, "ecn", vf, ctx, c.ecn);
      read_bool(v, "red", vf, ctx, c.red);
      read_size(v, "min-threshold", vf, ctx, c.wred.min_threshold);
      read_size(v, "max-threshold", vf, ctx, c.wred.max_threshold);
      if (v["probability"])
        if (auto p = bounded(v["probability"], vf + ".probability", kPercentRange, ctx)) c.wred.probability = uint32_t(*p);
    });
  if (const YAML::Node p = q["pfc"]) {
    const std::string pf = f + ".pfc";
    ctx.check_keys(p, pf, {"switch-priority", "cable-length", "tx", "rx", "xoff-threshold", "xon-threshold", "pause-quanta"});
    if (p["switch-priority"])
      if (auto m = index_list(p["switch-priority"], pf + ".switch-priority", ctx)) qos.pfc.switch_priorities = *m;
    read_bool(p, "tx", pf, ctx, qos.pfc.tx);
    read_bool(p, "rx", pf, ctx, qos.pfc.rx);
    if (p["xoff-threshold"])
      if (auto v = ctx.size(p["xoff-threshold"], pf + ".xoff-threshold")) qos.pfc.xoff = v;
    if (p["xon-threshold"])
      if (auto v = ctx.size(p["xon-threshold"], pf + ".xon-threshold")) qos.pfc.xon = v;
  }
  if (const YAML::Node w = q["pfc-watchdog"]) {
    const std::string wf = f + ".pfc-watchdog";
    ctx.check_keys(w, wf, {"state", "polling-interval", "detection-time", "restoration-time", "action"});
    read_bool(w, "state", wf, ctx, qos.watchdog.enable);
    if (w["action"])
      if (auto a = ctx.choice(w["action"], wf + ".action", {"drop", "forward"}))
        qos.watchdog.action = *parse_watchdog_action(*a);
  }
  if (const YAML::Node t = q["packet-trim"]) {
    const std::string tf = f + ".packet-trim";
    ctx.check_keys(t, tf, {"state", "size", "remark-dscp", "switch-priority", "traffic-class"});
    read_bool(t, "state", tf, ctx, qos.trim.enable);
    if (t["traffic-class"])
      if (auto m = index_list(t["traffic-class"], tf + ".traffic-class", ctx)) qos.trim.eligible_tc = *m;
  }
  if (const YAML::Node b = q["buffer"]) {
    const std::string bf = f + ".buffer";
    ctx.check_keys(b, bf, {"size", "roce-pool-percent", "ingress-lossy-alpha", "ingress-lossless-alpha",
                           "egress-lossy-alpha", "pg-reserved", "queue-reserved"});
    read_double(b, "ingress-lossy-alpha", bf, ctx, qos.buffer.ingress_lossy_alpha, 0, 128);
    read_double(b, "ingress-lossless-alpha", bf, ctx, qos.buffer.ingress_lossless_alpha, 0, 128);
    read_double(b, "egress-lossy-alpha", bf, ctx, qos.buffer.egress_lossy_alpha, 0, 128);
  }
  if (const YAML::Node h = q["headroom"]) {
    const std::string hf = f + ".headroom";
    ctx.check_keys(h, hf, {"cell-size", "pipeline-latency", "mac-phy-delay", "lossless-mtu", "small-packet-percentage"});
  }
}

void parse_interface(const YAML::Node& n, const std::string& f, Context& ctx, InterfaceConfig& i) {
  ctx.check_keys(n, f, {"name", "mac", "address", "speed", "mtu", "cable-length", "pfc-watchdog", "faults", "pfc-storm",
                        "bridge"});
  if (n["name"])
    if (auto s = ctx.str(n["name"], f + ".name")) i.name = *s;
  if (n["mac"]) {
    auto s = ctx.str(n["mac"], f + ".mac");
    if (s && !(i.mac = wire::MacAddr::parse(*s))) ctx.error(n["mac"], f + ".mac", "'" + *s + "' is not a MAC address");
  }
  if (n["address"]) {
    auto s = ctx.str(n["address"], f + ".address");
    if (s && !(i.address = IpPrefix::parse(*s)))
      ctx.error(n["address"], f + ".address", "'" + *s + "' is not an address with prefix (10.0.0.254/24)");
  }
  if (n["speed"]) i.speed = ctx.rate(n["speed"], f + ".speed");
  for (const InterfaceIntField& row : kInterfaceIntFields) {
    const std::string key(row.yaml);
    if (n[key])
      if (auto v = bounded(n[key], f + "." + key, row.range, ctx)) i.*row.member = uint32_t(*v);
  }
  if (n["pfc-watchdog"]) {
    bool on = false;
    read_bool(n, "pfc-watchdog", f, ctx, on);
    i.pfc_watchdog = on;
  }
  if (n["faults"]) i.faults = parse_faults(n["faults"], f + ".faults", ctx);
  if (const YAML::Node s = n["pfc-storm"]) i.pfc_storm = parse_pfc_storm(s, f + ".pfc-storm", ctx);
  if (const YAML::Node b = n["bridge"]) {  // bridge: {domain: {br_default: {access: VID}}}
    const std::string df = f + ".bridge.domain." + kBridgeDomain;
    const YAML::Node d = b.IsMap() && b["domain"].IsMap() ? b["domain"][kBridgeDomain] : YAML::Node();
    if (!d.IsMap()) {
      ctx.error(b, f + ".bridge", "expected {domain: {br_default: {access: VLAN}}}");
    } else {
      ctx.check_keys(b, f + ".bridge", {"domain"});
      ctx.check_keys(b["domain"], f + ".bridge.domain", {kBridgeDomain});
      ctx.check_keys(d, df, {"access"});
      if (d["access"])
        if (auto v = bounded(d["access"], df + ".access", kVlanRange, ctx)) i.access = uint16_t(*v);
    }
  }
}

void parse_flooding(const YAML::Node& n, const std::string& f, Context& ctx, std::vector<wire::IpAddr>& out);

// `bridge: {domain: {br_default: {ageing, vlan: {V: {vni: {N: {flooding}}}}}}}`:
// NVUE's bridge domain (ageing is a row of the table, read by read_fields).
void parse_bridge(const YAML::Node& n, const std::string& f, Context& ctx, SwitchConfig& cfg) {
  if (!expect_map(n, f, ctx, "{domain: {br_default: ...}}")) return;
  ctx.check_keys(n, f, {"domain"});
  const YAML::Node dom = n["domain"];
  if (!dom || !expect_map(dom, f + ".domain", ctx, "{br_default: ...}")) return;
  ctx.check_keys(dom, f + ".domain", {kBridgeDomain});
  const YAML::Node d = dom[kBridgeDomain];
  const std::string df = f + ".domain." + kBridgeDomain;
  if (!d || !expect_map(d, df, ctx, "{ageing, vlan}")) return;
  ctx.check_keys(d, df, {"ageing", "vlan"});
  const YAML::Node vlans = d["vlan"];
  if (!vlans) return;
  for_index_keys(vlans, df + ".vlan", ctx, kVlanRange, [&](int vid, const YAML::Node& m, const std::string& mf) {
    cfg.bridge.vlans.push_back(uint16_t(vid));
    if (m.IsNull()) return;
    if (!expect_map(m, mf, ctx, "{vni: {N: {flooding}}}")) return;
    ctx.check_keys(m, mf, {"vni"});
    if (!m["vni"]) return;
    for_index_keys(m["vni"], mf + ".vni", ctx, kVniRange, [&](int id, const YAML::Node& v, const std::string& vf) {
      VxlanVni vni;
      vni.vni = uint32_t(id);
      vni.vlan = uint16_t(vid);
      if (!v.IsNull() && expect_map(v, vf, ctx, "{flooding}")) {
        ctx.check_keys(v, vf, {"flooding"});
        if (const YAML::Node fl = v["flooding"]) parse_flooding(fl, vf + ".flooding", ctx, vni.flood);
      }
      cfg.vxlan.vnis.push_back(vni);
    });
  });
}

// `forwarding`: NVUE's `system forwarding` (ecmp-hash fields; hash-seed
// is a row of the table, read by read_fields) and the load balancing of
// ECMP groups.
void parse_forwarding(const YAML::Node& n, const std::string& f, Context& ctx, EcmpConfig& e) {
  if (!expect_map(n, f, ctx, "{ecmp-hash, hash-seed, load-balancing}")) return;
  ctx.check_keys(n, f, {"ecmp-hash", "hash-seed", "load-balancing"});
  if (const YAML::Node h = n["ecmp-hash"]) {
    const std::string hf = f + ".ecmp-hash";
    if (!expect_map(h, hf, ctx, "field: on|off")) return;
    ctx.check_keys(h, hf, std::span<const std::string_view>(EcmpHashField::kNames));
    for (size_t i = 0; i < EcmpHashField::kCount; i++) {
      const std::string key(EcmpHashField::kNames[i]);
      bool on = e.hashes(EcmpHashField::Id(i));
      read_bool(h, key.c_str(), hf, ctx, on);
      e.set_hashes(EcmpHashField::Id(i), on);
    }
  }
  if (n["load-balancing"])
    if (auto lb = ctx.choice(n["load-balancing"], f + ".load-balancing", {"hash", "per-packet"}))
      e.load_balancing = *parse_load_balancing(*lb);
}

std::optional<uint16_t> interface_ref(const YAML::Node& n, const std::string& field, const SwitchConfig& cfg,
                                      Context& ctx) {
  auto s = ctx.str(n, field);
  if (!s) return std::nullopt;
  const int idx = cfg.find_interface(*s);
  if (idx < 0) {
    ctx.error(n, field, "no interface '" + *s + "' (the switch has " + cfg.interface_range() + ")");
    return std::nullopt;
  }
  return uint16_t(idx);
}

std::optional<wire::IpAddr> address(const YAML::Node& n, const std::string& field, Context& ctx) {
  auto s = ctx.str(n, field);
  if (!s) return std::nullopt;
  auto a = wire::IpAddr::parse(*s);
  if (!a) ctx.error(n, field, "'" + *s + "' is not an address");
  return a;
}

// A next hop of a route: interface, and via (a gateway) or mac; or, into
// the VXLAN overlay, vtep and vni.
bool parse_next_hop(const YAML::Node& r, const std::string& rf, Context& ctx, const SwitchConfig& cfg, Route& route) {
  if (r["vtep"] || r["vni"]) {
    if (!r["vtep"] || !r["vni"] || r["interface"] || r["via"] || r["mac"]) {
      ctx.error(r, rf, "an overlay next hop is {vtep, vni} alone");
      return false;
    }
    route.vtep = address(r["vtep"], rf + ".vtep", ctx);
    auto vni = bounded(r["vni"], rf + ".vni", kVniRange, ctx);
    if (vni) route.vni = uint32_t(*vni);
    if (!route.vtep || !vni) return false;
    // Against the nve section (read before the routes), at this line.
    if (Status s = cfg.check_overlay_route(route, rf); !s.ok()) {
      const std::string& m = s.message();
      const std::string field = m.substr(0, m.find(": "));
      ctx.error(field.ends_with(".vni") ? r["vni"] : r["vtep"], field, m.substr(m.find(": ") + 2));
      return false;
    }
    return true;
  }
  bool ok = true;
  if (auto port = interface_ref(r["interface"], rf + ".interface", cfg, ctx)) route.port = *port;
  else ok = false;
  if (const std::string why = ok ? cfg.unroutable_port(route.port) : std::string(); !why.empty()) {
    ctx.error(r["interface"], rf + ".interface", why);
    ok = false;
  }
  if (r["via"]) {
    auto v = ctx.str(r["via"], rf + ".via");
    if (v && !(route.via = wire::IpAddr::parse(*v))) {
      ctx.error(r["via"], rf + ".via", "'" + *v + "' is not an address");
      ok = false;
    }
  }
  if (r["mac"]) {
    auto v = ctx.str(r["mac"], rf + ".mac");
    if (v && !(route.mac = wire::MacAddr::parse(*v))) {
      ctx.error(r["mac"], rf + ".mac", "'" + *v + "' is not a MAC address");
      ok = false;
    }
  }
  return ok;
}

// A next hop the routes read so far already give for its prefix, or one
// more than an ECMP group takes: named here, where the node gives the field
// and line (validate() sees the routes after next-hops expansion).
bool new_member(const YAML::Node& at, const std::string& field, const Route& r, const SwitchConfig& cfg, Context& ctx) {
  size_t members = 1;
  for (const Route& o : cfg.routes) {
    if (!o.prefix.same_as(r.prefix)) continue;
    if (o.same_next_hop(r)) {
      ctx.error(at, field, "the same next hop as an earlier route for " + r.prefix.str());
      return false;
    }
    members++;
  }
  if (members > kMaxEcmpMembers) {
    ctx.error(at, field, "more than " + std::to_string(kMaxEcmpMembers) + " next hops for " + r.prefix.str());
    return false;
  }
  return true;
}

// {prefix, interface, via?, mac?}, or {prefix, next-hops: [{interface,
// via?, mac?}, ...]}: several next hops make an ECMP group, as several
// routes to the same prefix do.
void parse_route(const YAML::Node& r, const std::string& rf, Context& ctx, SwitchConfig& cfg) {
  if (!expect_map(r, rf, ctx, "{prefix, interface, via?, mac?}, {prefix, vtep, vni} or {prefix, next-hops}")) return;
  ctx.check_keys(r, rf, {"prefix", "interface", "via", "mac", "vtep", "vni", "next-hops"});
  const YAML::Node hops = r["next-hops"];
  if (!r["prefix"] || (!r["interface"] && !r["vtep"] && !hops)) {
    ctx.error(r, rf, "a route needs prefix and interface, vtep and vni, or next-hops");
    return;
  }
  if (hops && (r["interface"] || r["via"] || r["mac"] || r["vtep"] || r["vni"])) {
    ctx.error(hops, rf + ".next-hops", "give next-hops or interface/via/mac (vtep/vni), not both");
    return;
  }
  Route route;
  auto s = ctx.str(r["prefix"], rf + ".prefix");
  auto p = s ? IpPrefix::parse(*s) : std::nullopt;
  if (!p) {
    if (s) ctx.error(r["prefix"], rf + ".prefix", "'" + *s + "' is not a prefix (10.0.1.0/24)");
    return;
  }
  route.prefix = *p;
  if (!hops) {
    if (parse_next_hop(r, rf, ctx, cfg, route) && new_member(r, rf, route, cfg, ctx)) cfg.routes.push_back(route);
    return;
  }
  if (!hops.IsSequence() || hops.size() == 0) {
    ctx.error(hops, rf + ".next-hops", "expected a list of {interface, via} next hops");
    return;
  }
  for (size_t i = 0; i < hops.size(); i++) {
    const std::string hf = rf + ".next-hops[" + std::to_string(i) + "]";
    if (!expect_map(hops[i], hf, ctx, "{interface, via?, mac?} or {vtep, vni}")) continue;
    ctx.check_keys(hops[i], hf, {"interface", "via", "mac", "vtep", "vni"});
    if (!hops[i]["interface"] && !hops[i]["vtep"]) {
      ctx.error(hops[i], hf, "a next hop needs an interface (or vtep and vni)");
      continue;
    }
    Route member = route;
    if (parse_next_hop(hops[i], hf, ctx, cfg, member) && new_member(hops[i], hf, member, cfg, ctx)) cfg.routes.push_back(member);
  }
}

// A list of remote VTEP addresses ({head-end-replication: [a, b]}).
void parse_flooding(const YAML::Node& n, const std::string& f, Context& ctx, std::vector<wire::IpAddr>& out) {
  if (!expect_map(n, f, ctx, "{head-end-replication: [addresses]}")) return;
  ctx.check_keys(n, f, {"head-end-replication"});
  const YAML::Node her = n["head-end-replication"];
  if (!her) return;
  const std::string hf = f + ".head-end-replication";
  if (!her.IsSequence()) {
    ctx.error(her, hf, "expected a list of remote VTEP addresses");
    return;
  }
  for (size_t i = 0; i < her.size(); i++)
    if (auto a = address(her[i], hf + "[" + std::to_string(i) + "]", ctx)) out.push_back(*a);
}

// `nve: {vxlan: {...}}`: NVUE's nve vxlan (the bounded port and DSCP value
// are rows of the table, read by read_fields).
void parse_nve(const YAML::Node& n, const std::string& f, Context& ctx, VxlanConfig& x) {
  if (!expect_map(n, f, ctx, "{vxlan: ...}")) return;
  ctx.check_keys(n, f, {"vxlan"});
  const YAML::Node v = n["vxlan"];
  if (!v) return;
  const std::string vf = f + ".vxlan";
  if (!expect_map(v, vf, ctx, "{state, source, port, encapsulation, flooding, mac-learning, vni}")) return;
  ctx.check_keys(v, vf, {"state", "source", "port", "encapsulation", "flooding", "mac-learning", "vni"});
  if (v["mac-learning"]) read_bool(v, "mac-learning", vf, ctx, x.mac_learning);
  if (v["state"])
    if (auto s = ctx.choice(v["state"], vf + ".state", {"enabled", "disabled"})) x.state = *s == "enabled";
  if (const YAML::Node src = v["source"]) {
    if (expect_map(src, vf + ".source", ctx, "{address}")) {
      ctx.check_keys(src, vf + ".source", {"address"});
      if (src["address"]) x.source = address(src["address"], vf + ".source.address", ctx);
    }
  }
  if (const YAML::Node e = v["encapsulation"]) {
    const std::string ef = vf + ".encapsulation";
    if (expect_map(e, ef, ctx, "{dscp: {action, value}}")) {
      ctx.check_keys(e, ef, {"dscp"});
      if (const YAML::Node d = e["dscp"]; d && expect_map(d, ef + ".dscp", ctx, "{action: copy|set, value}")) {
        ctx.check_keys(d, ef + ".dscp", {"action", "value"});
        if (d["action"])
          if (auto a = ctx.choice(d["action"], ef + ".dscp.action", {"copy", "set"}))
            x.encap_dscp = *parse_vxlan_dscp_action(*a);
      }
    }
  }
  if (const YAML::Node fl = v["flooding"]) parse_flooding(fl, vf + ".flooding", ctx, x.flood);
  if (const YAML::Node vnis = v["vni"]) {
    for_index_keys(vnis, vf + ".vni", ctx, kVniRange, [&](int id, const YAML::Node& m, const std::string& mf) {
      VxlanVni vni;
      vni.vni = uint32_t(id);
      if (!m.IsNull()) {
        if (!expect_map(m, mf, ctx, "{vrf, flooding}")) return;
        ctx.check_keys(m, mf, {"vrf", "flooding"});
        if (m["vrf"])
          if (auto s = ctx.str(m["vrf"], mf + ".vrf")) vni.vrf = *s;
        if (const YAML::Node fl = m["flooding"]) parse_flooding(fl, mf + ".flooding", ctx, vni.flood);
      }
      x.vnis.push_back(vni);
    });
  }
}

}  // namespace

PfcStorm parse_pfc_storm(const YAML::Node& s, std::string_view field, Context& ctx) {
  const std::string sf(field);
  PfcStorm storm;
  ctx.check_keys(s, sf, {"state", "switch-priority", "quanta", "interval"});
  storm.enable = true;
  read_bool(s, "state", sf, ctx, storm.enable);
  if (s["switch-priority"])
    if (auto m = index_list(s["switch-priority"], sf + ".switch-priority", ctx)) storm.priorities = *m;
  if (s["quanta"])
    if (auto q = bounded(s["quanta"], sf + ".quanta", kStormQuantaRange, ctx)) storm.quanta = uint16_t(*q);
  read_duration(s, "interval", sf, ctx, storm.interval);
  return storm;
}

std::optional<SwitchConfig> parse_switch_config(const YAML::Node& n, std::string_view field, Context& ctx) {
  const std::string f(field);
  // Errors recorded before (elsewhere in the file) are not this switch's.
  const size_t errors_before = ctx.error_count();
  ctx.check_keys(n, f, {"kind", "ports", "mac", "proxy-arp", "forwarding", "interfaces", "routes", "neighbors", "qos",
                        "nve", "bridge"});
  uint16_t ports = 4;
  read_int(n, "ports", f, ctx, ports, 1, 256);
  SwitchConfig cfg = SwitchConfig::with_ports(ports);
  if (n["mac"]) {
    auto s = ctx.str(n["mac"], f + ".mac");
    auto m = s ? wire::MacAddr::parse(*s) : std::nullopt;
    if (m) cfg.mac = *m;
    else if (s) ctx.error(n["mac"], f + ".mac", "'" + *s + "' is not a MAC address");
  }
  read_bool(n, "proxy-arp", f, ctx, cfg.proxy_arp);
  if (const YAML::Node fw = n["forwarding"]) parse_forwarding(fw, f + ".forwarding", ctx, cfg.ecmp);
  if (const YAML::Node ifs = n["interfaces"]) {
    if (!ifs.IsMap()) {
      ctx.error(ifs, f + ".interfaces", "expected a mapping of interface names (swp1, ...) to settings");
    } else {
      for (const auto& kv : ifs) {
        const std::string key = kv.first.Scalar();
        const int idx = cfg.find_interface(key);
        if (idx < 0) {
          ctx.error(kv.first, f + ".interfaces." + key, "no such port (the switch has " + cfg.interface_range() + ")");
          continue;
        }
        parse_interface(kv.second, f + ".interfaces." + key, ctx, cfg.interfaces[size_t(idx)]);
      }
    }
  }
  if (const YAML::Node x = n["nve"]) parse_nve(x, f + ".nve", ctx, cfg.vxlan);
  if (const YAML::Node b = n["bridge"]) parse_bridge(b, f + ".bridge", ctx, cfg);
  if (const YAML::Node rs = n["routes"]) {
    for (size_t i = 0; rs.IsSequence() && i < rs.size(); i++) parse_route(rs[i], f + ".routes[" + std::to_string(i) + "]", ctx, cfg);
    if (!rs.IsSequence()) ctx.error(rs, f + ".routes", "expected a list of routes");
  }
  if (const YAML::Node ns = n["neighbors"]) {
    for (size_t i = 0; ns.IsSequence() && i < ns.size(); i++) {
      const std::string nf = f + ".neighbors[" + std::to_string(i) + "]";
      const YAML::Node e = ns[i];
      if (!expect_map(e, nf, ctx, "{ip, mac, interface}")) continue;
      ctx.check_keys(e, nf, {"ip", "mac", "interface"});
      if (!e["ip"] || !e["mac"] || !e["interface"]) {
        ctx.error(e, nf, "a neighbor needs ip, mac and interface");
        continue;
      }
      auto ip_s = ctx.str(e["ip"], nf + ".ip");
      auto mac_s = ctx.str(e["mac"], nf + ".mac");
      auto ip = ip_s ? wire::IpAddr::parse(*ip_s) : std::nullopt;
      auto mac = mac_s ? wire::MacAddr::parse(*mac_s) : std::nullopt;
      const auto port = interface_ref(e["interface"], nf + ".interface", cfg, ctx);
      const std::string why = port ? cfg.unroutable_port(*port) : std::string();
      if (!why.empty()) ctx.error(e["interface"], nf + ".interface", why);
      if (!ip && ip_s) ctx.error(e["ip"], nf + ".ip", "'" + *ip_s + "' is not an address");
      if (!mac && mac_s) ctx.error(e["mac"], nf + ".mac", "'" + *mac_s + "' is not a MAC address");
      if (ip && mac && port && why.empty()) cfg.neighbors.push_back(Neighbor{*ip, *mac, *port});
    }
  }
  if (const YAML::Node q = n["qos"]) parse_qos(q, f + ".qos", ctx, cfg.qos);
  read_fields(n, f, ctx, cfg);
  if (ctx.error_count() == errors_before) {
    if (Status s = cfg.validate(); !s.ok()) ctx.error(n, f + "." + s.message().substr(0, s.message().find(':')),
                                                      s.message().substr(s.message().find(':') + 2));
  }
  if (ctx.error_count() != errors_before) return std::nullopt;
  return cfg;
}

namespace {

class SwitchKind final : public NodeKind {
 public:
  std::string_view name() const override { return "switch"; }
  std::any parse(const YAML::Node& n, std::string_view field, Context& ctx) const override {
    auto cfg = parse_switch_config(n, field, ctx);
    if (!cfg) return {};
    return *cfg;
  }
  uint16_t num_ports(const std::any& cfg) const override { return std::any_cast<const SwitchConfig&>(cfg).num_ports; }
  std::unique_ptr<Node> create(const std::string& name, const std::any& cfg) const override {
    return std::make_unique<Switch>(name, std::any_cast<const SwitchConfig&>(cfg));
  }
};

}  // namespace
}  // namespace rocemu::sw

namespace rocemu {

void register_switch_kinds(NodeKindRegistry& reg) { reg.add(std::make_unique<sw::SwitchKind>()); }

}  // namespace rocemu
