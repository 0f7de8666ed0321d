#include "switch/nvue.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "common/config/config.h"
#include "switch/switch_fields.h"

namespace rocemu::sw {
namespace {

// Walks the words of one command, remembering the path for messages.
class Cursor {
 public:
  explicit Cursor(const std::vector<std::string>& w) : w_(&w) {}
  bool done() const { return i_ >= w_->size(); }
  const std::string& peek() const { return (*w_)[i_]; }
  bool accept(std::string_view s) {
    if (done() || (*w_)[i_] != s) return false;
    i_++;
    return true;
  }
  // Every space-separated word of `words`, or none (the cursor stays).
  bool accept_words(std::string_view words) {
    Cursor at = *this;
    for (size_t b = 0, e; b < words.size(); b = e + 1) {
      e = std::min(words.find(' ', b), words.size());
      if (!at.accept(words.substr(b, e - b))) return false;
    }
    *this = at;
    return true;
  }
  std::string path() const {
    std::string p = "nv";
    for (size_t k = 0; k < i_ && k < w_->size(); k++) p += " " + (*w_)[k];
    return p;
  }
  Status error(const std::string& expected) const {
    return Status::error(path() + ": expected " + expected + (done() ? "" : ", got '" + (*w_)[i_] + "'"));
  }
  // The next word as a value, or an error naming what was expected.
  bool value(std::string& out) {
    if (done()) return false;
    out = (*w_)[i_++];
    return true;
  }

 private:
  const std::vector<std::string>* w_;
  size_t i_ = 0;
};

std::optional<int64_t> to_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// The next word as a value of `range` (switch_fields.h), refused in the
// table's words: "nv set qos pfc cable-length: '100001' is out of range (0..100000 m)".
template <typename T>
Status read_in(Cursor& c, T& out, const FieldRange& range) {
  const std::string where = c.path();
  std::string s;
  if (!c.value(s)) return c.error(std::string(range.expected()) + " (" + range.str() + ")");
  const Result<int64_t> v = range.read(s);
  if (!v.ok()) return Status::error(where + ": " + v.status().message());
  out = T(v.value());
  return {};
}

// Sets or unsets one setting of the table.
Status field_value(SwitchConfig& cfg, Cursor& c, bool set, const SwitchField& f) {
  if (!set) {
    f.unset(cfg);
    return {};
  }
  int64_t v = 0;
  if (Status s = read_in(c, v, f.range); !s.ok()) return s;
  f.set(cfg, v);
  return {};
}

const SwitchField& field_named(std::string_view yaml) {
  for (const SwitchField& f : switch_fields())
    if (f.yaml == yaml) return f;
  std::abort();  // a row this file names is missing from switch_fields.cc
}

// A setting of the table after the words `group` ("qos pfc"), if the next
// words name one: the status of setting it; nullopt if they name none.
std::optional<Status> table_field(SwitchConfig& cfg, Cursor& c, bool set, std::string_view group) {
  for (const SwitchField& f : switch_fields()) {
    if (f.nvue.size() <= group.size() + 1 || !f.nvue.starts_with(group) || f.nvue[group.size()] != ' ') continue;
    if (!c.accept_words(f.nvue.substr(group.size() + 1))) continue;
    return field_value(cfg, c, set, f);
  }
  return std::nullopt;
}

Status read_size(Cursor& c, uint64_t& out) {
  std::string s;
  if (!c.value(s)) return c.error("a size (e.g. 150000, 150KB)");
  auto v = config::parse_size(s);
  if (!v) return Status::error(c.path() + ": '" + s + "' is not a size (e.g. 150000, 150KB)");
  out = *v;
  return {};
}

Status read_duration(Cursor& c, Duration& out) {
  std::string s;
  if (!c.value(s)) return c.error("a duration (e.g. 200ms)");
  auto v = config::parse_duration(s);
  if (!v) return Status::error(c.path() + ": '" + s + "' is not a duration (e.g. 200ms)");
  out = *v;
  return {};
}

// A switch: on, enabled (Cumulus 5.15's word), enable; off, disabled,
// disable. `words` is how the command itself spells the two.
Status read_bool(Cursor& c, bool& out, std::string_view words = "enable or disable") {
  std::string s;
  if (!c.value(s)) return c.error(std::string(words));
  if (s == "enable" || s == "enabled" || s == "on") {
    out = true;
  } else if (s == "disable" || s == "disabled" || s == "off") {
    out = false;
  } else {
    return Status::error(c.path() + ": '" + s + "' is not " + std::string(words));
  }
  return {};
}

Status read_list(Cursor& c, uint8_t& out, const char* what) {
  std::string s;
  if (!c.value(s)) return c.error(what);
  auto m = parse_index_list(s);
  if (!m) return Status::error(c.path() + ": '" + s + "' is not " + what + " (e.g. 3, 0,3, 1-3)");
  out = *m;
  return {};
}

template <typename F>
void for_each_bit(uint8_t mask, F f) {
  for (int i = 0; i < 8; i++)
    if ((mask >> i) & 1) f(i);
}

Status qos_roce(SwitchConfig& cfg, Cursor& c, bool set) {
  if (c.done()) {
    if (!set) {
      const BufferConfig keep = cfg.qos.buffer;
      cfg.qos = qos_default_global();
      cfg.qos.buffer.size = keep.size;
      return {};
    }
    if (!cfg.qos.roce.enable) cfg.qos = qos_roce_profile(RoceMode::kLossless, cfg.qos.buffer);
    return {};
  }
  if (c.accept("mode")) {
    std::string s;
    if (!set) {
      cfg.qos = qos_roce_profile(RoceMode::kLossless, cfg.qos.buffer);
      return {};
    }
    if (!c.value(s)) return c.error("lossless, lossy or lossy-multi-tc");
    auto m = parse_roce_mode(s);
    if (!m) return Status::error(c.path() + ": '" + s + "' is not lossless, lossy or lossy-multi-tc");
    cfg.qos = qos_roce_profile(*m, cfg.qos.buffer);
    return {};
  }
  // NVUE's short form of `qos pfc default-global cable-length`.
  if (c.accept("cable-length")) return field_value(cfg, c, set, field_named("qos.pfc.cable-length"));
  return c.error("mode or cable-length");
}

Status qos_mapping(SwitchConfig& cfg, Cursor& c, bool set) {
  Mapping& m = cfg.qos.mapping;
  const Mapping def = qos_default_global().mapping;
  if (c.accept("trust")) {
    if (!set) {
      m.trust = def.trust;
      return {};
    }
    std::string s;
    if (!c.value(s)) return c.error("l2, l3, both or port");
    auto t = parse_trust(s);
    if (!t) return Status::error(c.path() + ": '" + s + "' is not l2, l3, both or port");
    m.trust = *t;
    return {};
  }
  if (auto r = table_field(cfg, c, set, "qos mapping")) return *r;
  const bool dscp = c.accept("dscp");
  if (dscp || c.accept("pcp")) {
    size_t v = 0;
    if (Status s = read_in(c, v, dscp ? kDscpRange : kPcpRange); !s.ok()) return s;
    uint8_t& slot = dscp ? m.dscp_to_sp[v] : m.pcp_to_sp[v];
    if (!set) {
      slot = dscp ? def.dscp_to_sp[v] : def.pcp_to_sp[v];
      return {};
    }
    if (!c.accept("switch-priority")) return c.error("switch-priority");
    return read_in(c, slot, kSwitchPriorityRange);
  }
  return c.error("trust, dscp, pcp or port-default-sp");
}

Status qos_egress_queue_mapping(SwitchConfig& cfg, Cursor& c, bool set) {
  if (!c.accept("switch-priority")) return c.error("switch-priority");
  uint8_t sps;
  if (Status s = read_list(c, sps, "switch priorities"); !s.ok()) return s;
  uint8_t tc = 0;
  if (set) {
    if (!c.accept("traffic-class")) return c.error("traffic-class");
    if (Status s = read_in(c, tc, kTrafficClassRange); !s.ok()) return s;
  }
  for_each_bit(sps, [&](int sp) { cfg.qos.sp_to_tc[sp] = set ? tc : uint8_t(sp); });
  return {};
}

Status qos_egress_scheduler(SwitchConfig& cfg, Cursor& c, bool set) {
  if (!c.accept("traffic-class")) return c.error("traffic-class");
  uint8_t tcs;
  if (Status s = read_list(c, tcs, "traffic classes"); !s.ok()) return s;
  if (!set) {
    const auto def = qos_default_global().scheduler;
    for_each_bit(tcs, [&](int tc) { cfg.qos.scheduler[tc] = def[tc]; });
    return {};
  }
  while (!c.done()) {
    if (c.accept("mode")) {
      std::string s;
      if (!c.value(s)) return c.error("strict or dwrr");
      auto m = parse_scheduler_mode(s);
      if (!m) return Status::error(c.path() + ": '" + s + "' is not strict or dwrr");
      for_each_bit(tcs, [&](int tc) { cfg.qos.scheduler[tc].mode = *m; });
    } else if (c.accept("bw-percent")) {
      uint32_t bw;
      if (Status s = read_in(c, bw, kPercentRange); !s.ok()) return s;
      for_each_bit(tcs, [&](int tc) {
        cfg.qos.scheduler[tc].mode = SchedulerMode::kDwrr;
        cfg.qos.scheduler[tc].bw_percent = bw;
      });
    } else {
      return c.error("mode or bw-percent");
    }
  }
  return {};
}

Status qos_congestion_control(SwitchConfig& cfg, Cursor& c, bool set) {
  if (!c.accept("traffic-class")) return c.error("traffic-class");
  uint8_t tcs;
  if (Status s = read_list(c, tcs, "traffic classes"); !s.ok()) return s;
  if (!set && c.done()) {
    for_each_bit(tcs, [&](int tc) { cfg.qos.congestion[tc] = CongestionControl{}; });
    return {};
  }
  if (c.done()) {  // `set ... traffic-class N`: ECN on with the current band
    for_each_bit(tcs, [&](int tc) { cfg.qos.congestion[tc].ecn = true; });
    return {};
  }
  while (!c.done()) {
    if (c.accept("ecn") || c.accept("red")) {
      const bool ecn = c.path().ends_with("ecn");
      bool on = set;
      if (set)
        if (Status s = read_bool(c, on); !s.ok()) return s;
      for_each_bit(tcs, [&](int tc) { (ecn ? cfg.qos.congestion[tc].ecn : cfg.qos.congestion[tc].red) = on; });
    } else if (c.accept("min-threshold") || c.accept("max-threshold")) {
      const bool min = c.path().ends_with("min-threshold");
      uint64_t v = min ? 150000 : 1500000;
      if (set)
        if (Status s = read_size(c, v); !s.ok()) return s;
      for_each_bit(tcs, [&](int tc) {
        (min ? cfg.qos.congestion[tc].wred.min_threshold : cfg.qos.congestion[tc].wred.max_threshold) = v;
      });
    } else if (c.accept("probability")) {
      uint32_t p = 100;
      if (set)
        if (Status s = read_in(c, p, kPercentRange); !s.ok()) return s;
      for_each_bit(tcs, [&](int tc) { cfg.qos.congestion[tc].wred.probability = p; });
    } else {
      return c.error("ecn, red, min-threshold, max-threshold or probability");
    }
  }
  return {};
}

Status qos_pfc(SwitchConfig& cfg, Cursor& c, bool set) {
  PfcConfig& p = cfg.qos.pfc;
  if (c.done()) {
    if (set) return c.error("switch-priority, cable-length, tx, rx, xoff-threshold or xon-threshold");
    p = PfcConfig{};
    return {};
  }
  while (!c.done()) {
    if (auto r = table_field(cfg, c, set, "qos pfc")) {
      if (!r->ok()) return *r;
    } else if (c.accept("switch-priority")) {
      if (!set) {
        p.switch_priorities = 0;
        continue;
      }
      if (Status s = read_list(c, p.switch_priorities, "switch priorities"); !s.ok()) return s;
    } else if (c.accept("tx") || c.accept("rx")) {
      const bool tx = c.path().ends_with("tx");
      bool on = true;
      if (set)
        if (Status s = read_bool(c, on); !s.ok()) return s;
      (tx ? p.tx : p.rx) = on;
    } else if (c.accept("xoff-threshold") || c.accept("xon-threshold")) {
      const bool xoff = c.path().ends_with("xoff-threshold");
      std::optional<uint64_t>& slot = xoff ? p.xoff : p.xon;
      if (!set) {
        slot.reset();
        continue;
      }
      uint64_t v;
      if (Status s = read_size(c, v); !s.ok()) return s;
      slot = v;
    } else {
      return c.error("switch-priority, cable-length, tx, rx, xoff-threshold, xon-threshold or pause-quanta");
    }
  }
  return {};
}

Status qos_watchdog(SwitchConfig& cfg, Cursor& c, bool set) {
  PfcWatchdog& w = cfg.qos.watchdog;
  const PfcWatchdog def;
  if (c.done()) {
    if (set) {
      w.enable = true;
    } else {
      w = def;
    }
    return {};
  }
  while (!c.done()) {
    if (auto r = table_field(cfg, c, set, "qos pfc-watchdog")) {
      if (!r->ok()) return *r;
    } else if (c.accept("action")) {
      w.action = def.action;
      if (!set) continue;
      std::string s;
      if (!c.value(s)) return c.error("drop or forward");
      auto a = parse_watchdog_action(s);
      if (!a) return Status::error(c.path() + ": '" + s + "' is not drop or forward");
      w.action = *a;
    } else if (c.accept("state")) {
      w.enable = false;
      if (set)
        if (Status s = read_bool(c, w.enable); !s.ok()) return s;
    } else {
      return c.error("polling-interval, detection-time, restoration-time, action or state");
    }
  }
  return {};
}

Status qos_buffer(SwitchConfig& cfg, Cursor& c, bool set) {
  BufferConfig& b = cfg.qos.buffer;
  const BufferConfig def;
  if (auto r = table_field(cfg, c, set, "qos buffer")) return *r;
  for (auto [word, slot, d] : {std::tuple{"ingress-lossy-alpha", &b.ingress_lossy_alpha, def.ingress_lossy_alpha},
                               {"ingress-lossless-alpha", &b.ingress_lossless_alpha, def.ingress_lossless_alpha},
                               {"egress-lossy-alpha", &b.egress_lossy_alpha, def.egress_lossy_alpha}}) {
    if (!c.accept(word)) continue;
    *slot = d;
    if (!set) return {};
    std::string s;
    if (!c.value(s)) return c.error("an alpha (e.g. 8, 0.5)");
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return Status::error(c.path() + ": '" + s + "' is not a number");
    *slot = v;
    return {};
  }
  return c.error("size, roce-pool-percent, ingress-lossy-alpha, ingress-lossless-alpha, egress-lossy-alpha, "
                 "pg-reserved or queue-reserved");
}

Status qos(SwitchConfig& cfg, Cursor& c, bool set) {
  if (c.accept("roce")) return qos_roce(cfg, c, set);
  if (c.accept("pfc-watchdog")) return qos_watchdog(cfg, c, set);
  if (c.accept("buffer")) return qos_buffer(cfg, c, set);
  for (const char* group : {"mapping", "egress-queue-mapping", "egress-scheduler", "congestion-control", "pfc"}) {
    if (!c.accept(group)) continue;
    c.accept("default-global");  // the one profile there is
    const std::string g = group;
    if (g == "mapping") return qos_mapping(cfg, c, set);
    if (g == "egress-queue-mapping") return qos_egress_queue_mapping(cfg, c, set);
    if (g == "egress-scheduler") return qos_egress_scheduler(cfg, c, set);
    if (g == "congestion-control") return qos_congestion_control(cfg, c, set);
    return qos_pfc(cfg, c, set);
  }
  return c.error("roce, mapping, egress-queue-mapping, egress-scheduler, congestion-control, pfc, pfc-watchdog or buffer");
}

Status interface_fault(InterfaceConfig& f, Cursor& c, bool set) {
  if (!set && c.done()) {
    f.faults = FaultConfig{};
    return {};
  }
  std::string key, s;
  if (!c.value(key)) return c.error("loss, corrupt, duplicate, reorder, delay, jitter, link-down or rate");
  FaultConfig& fc = f.faults;
  auto prob = [&](double& slot) -> Status {
    slot = 0;
    if (!set) return {};
    if (!c.value(s)) return c.error("a probability");
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || v < 0 || v > 1) return Status::error(c.path() + ": '" + s + "' is not 0..1");
    slot = v;
    return {};
  };
  if (key == "loss") return prob(fc.loss);
  if (key == "corrupt") return prob(fc.corrupt);
  if (key == "duplicate") return prob(fc.duplicate);
  if (key == "reorder") return prob(fc.reorder);
  if (key == "delay" || key == "jitter") {
    Duration& slot = key == "delay" ? fc.delay : fc.jitter;
    slot = Duration(0);
    return set ? read_duration(c, slot) : Status{};
  }
  if (key == "link-down") {
    fc.link_down = set;
    return {};
  }
  if (key == "rate") {
    fc.rate_bps.reset();
    if (!set) return {};
    if (!c.value(s)) return c.error("a rate (e.g. 25G)");
    auto r = config::parse_rate(s);
    if (!r) return Status::error(c.path() + ": '" + s + "' is not a rate");
    fc.rate_bps = r;
    return {};
  }
  return Status::error(c.path() + ": '" + key + "' is not loss, corrupt, duplicate, reorder, delay, jitter, link-down or rate");
}

Status interface_settings(InterfaceConfig& f, Cursor& c, bool set) {
  for (const InterfaceIntField& row : kInterfaceIntFields) {
    // The row's words, all of them, or the next row.
    Cursor at = c;
    bool match = true;
    for (size_t b = 0, e; match && b < row.nvue.size(); b = e + 1) {
      e = std::min(row.nvue.find(' ', b), row.nvue.size());
      match = at.accept(row.nvue.substr(b, e - b));
    }
    if (!match) continue;
    std::optional<uint32_t>& slot = f.*row.member;
    slot.reset();
    if (!set) return {};
    uint32_t v;
    if (Status s = read_in(at, v, row.range); !s.ok()) return s;
    slot = v;
    return {};
  }
  if (c.accept("qos")) {
    if (!c.accept("pfc-watchdog")) return c.error("pfc-watchdog");
    if (!set) {
      f.pfc_watchdog.reset();
      return {};
    }
    bool on = true;
    if (c.accept("state"))
      if (Status s = read_bool(c, on); !s.ok()) return s;
    f.pfc_watchdog = on;
    return {};
  }
  if (c.accept("link")) {
    if (c.accept("speed")) {
      f.speed.reset();
      if (!set) return {};
      std::string s;
      if (!c.value(s)) return c.error("a speed (e.g. 100G)");
      auto r = config::parse_rate(s);
      if (!r) return Status::error(c.path() + ": '" + s + "' is not a speed");
      f.speed = r;
      return {};
    }
    return c.error("speed or mtu");
  }
  if (c.accept("ip")) {
    if (!c.accept("address")) return c.error("address");
    f.address.reset();
    if (!set) return {};
    std::string s;
    if (!c.value(s)) return c.error("an address with prefix (10.0.0.254/24)");
    auto p = IpPrefix::parse(s);
    if (!p) return Status::error(c.path() + ": '" + s + "' is not an address with prefix");
    f.address = p;
    return {};
  }
  if (c.accept("fault")) return interface_fault(f, c, set);
  if (c.accept("bridge")) {  // bridge domain br_default access VID
    if (!c.accept("domain") || !c.accept(kBridgeDomain)) return c.error("domain br_default");
    if (!c.accept("access")) return c.error("access");
    f.access.reset();
    if (!set) return {};
    uint16_t vid = 0;
    if (Status s = read_in(c, vid, kVlanRange); !s.ok()) return s;
    f.access = vid;
    return {};
  }
  if (c.accept("pfc-storm")) {
    if (!set) {
      f.pfc_storm = PfcStorm{};
      return {};
    }
    f.pfc_storm.enable = true;
    while (!c.done()) {
      if (c.accept("switch-priority")) {
        if (Status s = read_list(c, f.pfc_storm.priorities, "switch priorities"); !s.ok()) return s;
      } else if (c.accept("quanta")) {
        if (Status s = read_in(c, f.pfc_storm.quanta, kStormQuantaRange); !s.ok()) return s;
      } else if (c.accept("interval")) {
        if (Status s = read_duration(c, f.pfc_storm.interval); !s.ok()) return s;
      } else {
        return c.error("switch-priority, quanta or interval");
      }
    }
    return {};
  }
  return c.error("qos, link, cable-length, ip, fault, bridge or pfc-storm");
}

// `interface swp1,swp3 ...`, `interface swp1-4 ...`: the same words on each.
Status interface(SwitchConfig& cfg, Cursor& c, bool set) {
  std::string name;
  if (!c.value(name)) return c.error("an interface name (" + cfg.interface_range() + ")");
  auto ports = cfg.find_interfaces(name);
  if (!ports.ok()) return Status::error(c.path() + ": " + ports.status().message());
  for (const uint16_t p : ports.value()) {
    Cursor each = c;
    if (Status s = interface_settings(cfg.interfaces[p], each, set); !s.ok()) return s;
  }
  return {};
}

Status packet_trim(SwitchConfig& cfg, Cursor& c, bool set) {
  PacketTrim& t = cfg.qos.trim;
  const PacketTrim def;
  if (c.done()) {
    if (set) return c.error("state, size, remark, switch-priority or traffic-class");
    t = def;
    return {};
  }
  if (c.accept("state")) {
    t.enable = false;
    return set ? read_bool(c, t.enable) : Status{};
  }
  if (auto r = table_field(cfg, c, set, "system forwarding packet-trim")) return *r;
  if (c.accept("traffic-class") || (c.accept("egress-eligibility") && c.accept("traffic-class"))) {
    t.eligible_tc = def.eligible_tc;
    return set ? read_list(c, t.eligible_tc, "traffic classes") : Status{};
  }
  return c.error("state, size, remark, switch-priority or traffic-class");
}

// `ecmp-hash FIELD on|off`, by NVUE's field names (ecmp.h); unset puts a
// field (or, without one, every field) back to its default, on.
Status forwarding_ecmp_hash(EcmpConfig& e, Cursor& c, bool set) {
  const EcmpConfig def;
  if (!set && c.done()) {
    e.hash_fields = def.hash_fields;
    return {};
  }
  const std::string expected = "a field of the hash (" + ecmp_hash_field_list() + ")";
  std::string name;
  if (!c.value(name)) return c.error(expected);
  const auto field = parse_ecmp_hash_field(name);
  if (!field) return Status::error(c.path() + ": '" + name + "' is not " + expected);
  bool on = def.hashes(*field);
  if (set)
    if (Status s = read_bool(c, on, "on or off"); !s.ok()) return s;
  e.set_hashes(*field, on);
  return {};
}

// NVUE's `system forwarding`: ecmp-hash, hash-seed (a row of the table),
// packet-trim. The load balancing (hash or per-packet) has no NVUE
// command: NVUE's per-packet choice is adaptive routing, a different
// algorithm (the least loaded port), which is not modelled.
Status system_forwarding(SwitchConfig& cfg, Cursor& c, bool set) {
  if (c.accept("packet-trim")) return packet_trim(cfg, c, set);
  if (c.accept("ecmp-hash")) return forwarding_ecmp_hash(cfg.ecmp, c, set);
  if (auto r = table_field(cfg, c, set, "system forwarding")) return *r;
  return c.error("ecmp-hash, hash-seed or packet-trim");
}

Status read_address(Cursor& c, wire::IpAddr& out) {
  std::string s;
  if (!c.value(s)) return c.error("an address");
  auto a = wire::IpAddr::parse(s);
  if (!a) return Status::error(c.path() + ": '" + s + "' is not an address");
  out = *a;
  return {};
}

Status static_route(SwitchConfig& cfg, Cursor& c, bool set) {
  std::string s;
  if (!c.value(s)) return c.error("a prefix (10.0.1.0/24)");
  auto prefix = IpPrefix::parse(s);
  if (!prefix) return Status::error(c.path() + ": '" + s + "' is not a prefix");
  auto same = [&](const Route& r) { return r.prefix.addr == prefix->addr && r.prefix.length == prefix->length; };
  std::erase_if(cfg.routes, same);
  if (!set) return {};
  Route r;
  r.prefix = *prefix;
  bool have_port = false;
  while (!c.done()) {
    if (c.accept("via")) {
      if (!c.value(s)) return c.error("a next-hop address");
      auto ip = wire::IpAddr::parse(s);
      if (!ip) return Status::error(c.path() + ": '" + s + "' is not an address");
      r.via = ip;
    } else if (c.accept("interface")) {
      if (!c.value(s)) return c.error("an interface");
      const int idx = cfg.find_interface(s);
      if (idx < 0) return Status::error(c.path() + ": no interface '" + s + "' (" + cfg.interface_range() + ")");
      r.port = uint16_t(idx);
      have_port = true;
    } else if (c.accept("vtep")) {  // into the VXLAN overlay
      wire::IpAddr a;
      if (Status st = read_address(c, a); !st.ok()) return st;
      r.vtep = a;
    } else if (c.accept("vni")) {
      if (Status st = read_in(c, r.vni, kVniRange); !st.ok()) return st;
    } else {
      return c.error("via, interface, vtep or vni");
    }
  }
  if (r.overlay() || r.vni != 0) {
    if (have_port || r.via || !r.vtep || r.vni == 0)
      return Status::error(c.path() + ": an overlay route takes vtep and vni, and no interface or via");
  } else if (!have_port) {
    return Status::error(c.path() + ": a static route needs an interface (or vtep and vni)");
  }
  cfg.routes.push_back(r);
  return {};
}

// `flooding head-end-replication IP`: set adds IP, unset removes it (or
// every address without one).
Status flooding(std::vector<wire::IpAddr>& list, Cursor& c, bool set) {
  if (!c.accept("head-end-replication")) return c.error("head-end-replication");
  if (!set && c.done()) {
    list.clear();
    return {};
  }
  wire::IpAddr a;
  if (Status s = read_address(c, a); !s.ok()) return s;
  std::erase(list, a);
  if (set) list.push_back(a);
  return {};
}

// NVUE's `nve vxlan ...` (the switch as a static VTEP).
Status nve_vxlan(SwitchConfig& cfg, Cursor& c, bool set) {
  VxlanConfig& x = cfg.vxlan;
  if (c.done()) {
    if (set) return c.error("state, source, port, encapsulation, flooding or vni");
    x = VxlanConfig{};
    return {};
  }
  if (c.accept("state")) {  // Cumulus 5.x: nv set nve vxlan state enabled
    x.state = true;
    return set ? read_bool(c, x.state) : Status{};
  }
  if (c.accept("source")) {
    if (!c.accept("address")) return c.error("address");
    x.source.reset();
    if (!set) return {};
    wire::IpAddr a;
    if (Status s = read_address(c, a); !s.ok()) return s;
    x.source = a;
    return {};
  }
  if (auto r = table_field(cfg, c, set, "nve vxlan")) return *r;
  if (c.accept_words("encapsulation dscp action")) {
    x.encap_dscp = VxlanDscpAction::kCopy;
    if (!set) return {};
    std::string s;
    if (!c.value(s)) return c.error("copy or set");
    auto a = parse_vxlan_dscp_action(s);
    if (!a) return Status::error(c.path() + ": '" + s + "' is not copy or set");
    x.encap_dscp = *a;
    return {};
  }
  if (c.accept("flooding")) return flooding(x.flood, c, set);
  if (c.accept("mac-learning")) {
    x.mac_learning = false;
    return set ? read_bool(c, x.mac_learning) : Status{};
  }
  if (c.accept("vni")) {
    uint32_t id = 0;
    if (Status s = read_in(c, id, kVniRange); !s.ok()) return s;
    auto it = std::find_if(x.vnis.begin(), x.vnis.end(), [&](const VxlanVni& v) { return v.vni == id; });
    if (!set && c.done()) {
      if (it != x.vnis.end()) x.vnis.erase(it);
      return {};
    }
    if (it == x.vnis.end()) {
      if (!set) return {};
      x.vnis.push_back(VxlanVni{id, "default", {}});
      it = x.vnis.end() - 1;
    }
    if (c.done()) return {};
    if (c.accept("vrf")) {
      it->vrf = "default";
      return set ? (c.value(it->vrf) ? Status{} : c.error("a VRF name")) : Status{};
    }
    if (c.accept("flooding")) return flooding(it->flood, c, set);
    return c.error("vrf or flooding");
  }
  return c.error("state, source, port, encapsulation, flooding, mac-learning or vni");
}

// NVUE's `bridge domain br_default ...`: ageing, VLANs, a VLAN's VNI (a
// bridged VNI of the VTEP) and that VNI's flood list.
Status bridge_domain(SwitchConfig& cfg, Cursor& c, bool set) {
  if (!c.accept("domain") || !c.accept(kBridgeDomain)) return c.error("domain br_default (the one bridge)");
  if (auto r = table_field(cfg, c, set, std::string("bridge domain ") + kBridgeDomain)) return *r;
  if (!c.accept("vlan")) return c.error("ageing or vlan");
  uint16_t vid = 0;
  if (Status s = read_in(c, vid, kVlanRange); !s.ok()) return s;
  std::vector<VxlanVni>& vnis = cfg.vxlan.vnis;
  if (c.done()) {
    std::erase(cfg.bridge.vlans, vid);
    if (set) {
      cfg.bridge.vlans.push_back(vid);
    } else {
      std::erase_if(vnis, [&](const VxlanVni& v) { return v.vlan == vid; });
    }
    return {};
  }
  if (!c.accept("vni")) return c.error("vni");
  uint32_t id = 0;
  if (Status s = read_in(c, id, kVniRange); !s.ok()) return s;
  auto it = std::find_if(vnis.begin(), vnis.end(), [&](const VxlanVni& v) { return v.vni == id; });
  if (!set && c.done()) {
    if (it != vnis.end() && it->vlan == vid) vnis.erase(it);
    return {};
  }
  if (it == vnis.end()) {
    if (!set) return {};
    vnis.push_back(VxlanVni{id, "default", {}, vid});
    it = vnis.end() - 1;
  }
  if (set) {
    it->vlan = vid;
    if (!cfg.bridge.has_vlan(vid)) cfg.bridge.vlans.push_back(vid);
  }
  if (c.done()) return {};
  if (c.accept("flooding")) return flooding(it->flood, c, set);
  return c.error("flooding");
}

}  // namespace

std::optional<uint8_t> parse_index_list(std::string_view s) {
  if (s == "all") return uint8_t(0xff);
  uint8_t mask = 0;
  while (!s.empty()) {
    const auto comma = s.find(',');
    const std::string_view item = s.substr(0, comma);
    s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
    const auto dash = item.find('-');
    auto lo = to_int(item.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : to_int(item.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi > 7 || *lo > *hi) return std::nullopt;
    for (int64_t i = *lo; i <= *hi; i++) mask |= uint8_t(1u << i);
  }
  return mask == 0 ? std::nullopt : std::optional<uint8_t>(mask);
}

Status nv_edit(SwitchConfig& cfg, const std::vector<std::string>& words) {
  Cursor c(words);
  const bool set = c.accept("set");
  if (!set && !c.accept("unset")) return c.error("set or unset");
  // A command read whole: `... hash-seed 7 junk` is refused.
  const auto whole = [&c](Status s) { return s.ok() && !c.done() ? c.error("the end of the command") : s; };
  if (c.accept("qos")) return qos(cfg, c, set);
  if (c.accept("interface")) return interface(cfg, c, set);
  if (c.accept("system")) {
    if (!c.accept("forwarding")) return c.error("forwarding");
    return whole(system_forwarding(cfg, c, set));
  }
  if (c.accept("vrf")) {
    if (!c.accept("default") || !c.accept("router") || !c.accept("static")) return c.error("default router static");
    return static_route(cfg, c, set);
  }
  if (c.accept("nve")) {
    if (!c.accept("vxlan")) return c.error("vxlan");
    return whole(nve_vxlan(cfg, c, set));
  }
  if (c.accept("bridge")) return whole(bridge_domain(cfg, c, set));
  return c.error("qos, interface, system, vrf, nve or bridge");
}

}  // namespace rocemu::sw
