#include "sim/scenario.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/layout.h"
#include "sim/summary.h"
#include "switch/nvue.h"
#include "switch/switch_kind.h"

namespace rocemu::sim {
namespace {

using config::Context;

// The state of one file being read.
struct Reader {
  Context& ctx;
  const NodeKindRegistry& reg;
  std::string dir;  // the scenario file's directory (topology_file is relative to it)
  Scenario& s;
  bool have_topology = false;
  bool topology_ok = false;     // its nodes can be referred to
  Status topology_file_errors;  // a topology_file names its own file in its errors
};

template <typename Key, size_t N>
constexpr std::array<std::string_view, N> key_names(const Key (&table)[N]) {
  std::array<std::string_view, N> names{};
  for (size_t i = 0; i < N; i++) names[i] = table[i].name;
  return names;
}

bool valid_name(std::string_view n) {
  return !n.empty() && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

std::optional<std::string> read_name(const YAML::Node& v, const std::string& f, Context& ctx) {
  auto s = ctx.str(v, f);
  if (s && !valid_name(*s)) {
    ctx.error(v, f, "'" + *s + "' is not a name (letters, digits, '-' and '_')");
    return std::nullopt;
  }
  return s;
}

const NodeSpec* find_node(const Topology& t, std::string_view name) {
  for (const NodeSpec& n : t.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

// ---- the topology ----

void finish_topology(Reader& r, const YAML::Node& at) {
  r.have_topology = true;
  Topology& t = r.s.topology;
  if (!t.ports.empty())
    r.ctx.error(at, "topology.ports", "external ports need real time; rocemu sim runs in virtual time");
  t.engine.mode = TimeMode::kVirtual;  // a scenario always runs in virtual time
  r.s.seed = t.engine.seed;            // unless the scenario gives its own
}

void read_topology(const YAML::Node& v, const std::string&, Reader& r) {
  if (r.have_topology) {
    r.ctx.error(v, "topology", "give topology or topology_file, not both");
    return;
  }
  const std::string before = r.ctx.set_prefix("topology.");
  r.s.topology = parse_topology(v, r.ctx, r.reg);
  r.ctx.set_prefix(before);
  // With errors in it, what did parse is still checked against (a node
  // that failed may make a reference to it fail too).
  r.topology_ok = !r.s.topology.nodes.empty();
  finish_topology(r, v);
}

void read_topology_file(const YAML::Node& v, const std::string& f, Reader& r) {
  if (r.have_topology) {
    r.ctx.error(v, f, "give topology or topology_file, not both");
    return;
  }
  auto name = r.ctx.str(v, f);
  if (!name) return;
  const std::filesystem::path path = std::filesystem::path(r.dir) / *name;
  auto t = load_topology(path.string(), r.reg);
  if (!t.ok()) {
    r.topology_file_errors = t.status();
    r.have_topology = true;
    return;
  }
  r.s.topology = std::move(t.value());
  r.topology_ok = true;
  finish_topology(r, v);
}

// ---- scalars ----

void read_scenario_name(const YAML::Node& v, const std::string& f, Reader& r) {
  if (auto n = read_name(v, f, r.ctx)) r.s.name = *n;
}
void read_description(const YAML::Node& v, const std::string& f, Reader& r) {
  if (auto d = r.ctx.str(v, f)) r.s.description = *d;
}
void read_seed(const YAML::Node& v, const std::string& f, Reader& r) {
  if (auto n = r.ctx.integer(v, f, 0, INT64_MAX)) r.s.seed = uint64_t(*n);
}
void read_duration(const YAML::Node& v, const std::string& f, Reader& r) {
  if (auto d = r.ctx.duration(v, f)) {
    if (d->count() <= 0) r.ctx.error(v, f, "must be longer than 0");
    else r.s.duration = *d;
  }
}
void read_sample_interval(const YAML::Node& v, const std::string& f, Reader& r) {
  if (auto d = r.ctx.duration(v, f)) {
    if (*d < ns(100)) r.ctx.error(v, f, "must be at least 100ns");
    else r.s.sample_interval = *d;
  }
}
void read_until(const YAML::Node& v, const std::string& f, Reader& r) {
  if (auto u = r.ctx.choice(v, f, {"done", "duration"})) r.s.until_done = *u == "done";
}
void read_bottleneck(const YAML::Node& v, const std::string& f, Reader& r) {
  auto b = r.ctx.str(v, f);
  if (!b || !r.topology_ok) return;
  if (layout_of(r.s.topology).find_port(*b) == nullptr)
    r.ctx.error(v, f, "'" + *b + "' is not an end of a link (NODE:PORT, e.g. sw1:4)");
  else r.s.bottleneck = *b;
}

// ---- workloads ----

struct WorkloadField {
  Reader& r;
  Workload& w;
  const std::string& field;  // "workloads[0].verb"
};

std::optional<std::string> host_ref(const YAML::Node& v, const std::string& f, Reader& r) {
  auto h = r.ctx.str(v, f);
  if (!h || !r.topology_ok) return h;
  const NodeSpec* n = find_node(r.s.topology, *h);
  if (n == nullptr) r.ctx.error(v, f, "no node named '" + *h + "' in the topology");
  else if (n->kind->name() != "nic")
    r.ctx.error(v, f, "'" + *h + "' is a " + std::string(n->kind->name()) + ", not a nic");
  else return h;
  return std::nullopt;
}

void w_name(const YAML::Node& v, WorkloadField& x) {
  if (auto n = read_name(v, x.field, x.r.ctx)) x.w.name = *n;
}
void w_from(const YAML::Node& v, WorkloadField& x) {
  if (!v.IsSequence()) {
    if (auto h = host_ref(v, x.field, x.r)) x.w.from.push_back(*h);
    return;
  }
  for (size_t i = 0; i < v.size(); i++)
    if (auto h = host_ref(v[i], x.field + "[" + std::to_string(i) + "]", x.r)) x.w.from.push_back(*h);
  if (v.size() == 0) x.r.ctx.error(v, x.field, "expected a host or a list of hosts");
}
void w_to(const YAML::Node& v, WorkloadField& x) {
  if (auto h = host_ref(v, x.field, x.r)) x.w.to = *h;
}
void w_verb(const YAML::Node& v, WorkloadField& x) {
  if (auto s = x.r.ctx.choice(v, x.field, {"write", "send", "read"}))
    x.w.verb = *s == "write" ? Verb::kWrite : *s == "send" ? Verb::kSend : Verb::kRead;
}
void w_message_size(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.size(v, x.field)) {
    if (*n < 1 || *n > (uint64_t(1) << 30)) x.r.ctx.error(v, x.field, "must be 1 B .. 1 GiB");
    else x.w.message_size = *n;
  }
}
void w_count(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 1, int64_t(1) << 40)) x.w.count = uint64_t(*n);
}
void w_bytes(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.size(v, x.field)) {
    if (*n == 0) x.r.ctx.error(v, x.field, "must be more than 0");
    else x.w.bytes = *n;
  }
}
void w_duration(const YAML::Node& v, WorkloadField& x) {
  if (auto d = x.r.ctx.duration(v, x.field)) {
    if (d->count() <= 0) x.r.ctx.error(v, x.field, "must be longer than 0");
    else x.w.duration = *d;
  }
}
void w_start(const YAML::Node& v, WorkloadField& x) {
  if (auto d = x.r.ctx.duration(v, x.field)) x.w.start = *d;
}
void w_qps(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 1, 1024)) x.w.qps = uint32_t(*n);
}
void w_dscp(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 0, 63)) x.w.traffic_class = uint8_t(*n << 2 | 2);  // ECT(0)
}
void w_traffic_class(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 0, 255)) x.w.traffic_class = uint8_t(*n);
}
void w_mtu(const YAML::Node& v, WorkloadField& x) {
  auto n = x.r.ctx.integer(v, x.field, 256, 4096);
  if (n && (*n & (*n - 1)) != 0) x.r.ctx.error(v, x.field, "must be 256, 512, 1024, 2048 or 4096");
  else if (n) x.w.mtu = uint32_t(*n);
}
void w_window(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 1, 1024)) x.w.window = uint32_t(*n);
}
void w_on_off(const YAML::Node& v, WorkloadField& x) {
  x.r.ctx.check_keys(v, x.field, {"on", "off"});
  if (!v.IsMap() || !v["on"] || !v["off"]) {
    x.r.ctx.error(v, x.field, "expected {on: DURATION, off: DURATION}");
    return;
  }
  auto on = x.r.ctx.duration(v["on"], x.field + ".on");
  auto off = x.r.ctx.duration(v["off"], x.field + ".off");
  if (on && on->count() == 0) x.r.ctx.error(v["on"], x.field + ".on", "must be longer than 0");
  else if (on && off) x.w.on_off = OnOff{*on, *off};
}
void w_timeout(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 0, 31)) x.w.timeout = uint8_t(*n);
}
void w_retry_cnt(const YAML::Node& v, WorkloadField& x) {
  if (auto n = x.r.ctx.integer(v, x.field, 0, 7)) x.w.retry_cnt = uint8_t(*n);
}

struct WorkloadKey {
  std::string_view name;
  void (*read)(const YAML::Node&, WorkloadField&);
  std::string_view help;
};
constexpr WorkloadKey kWorkloadKeys[] = {
    {"name", w_name, "flow name (several sources: <name>-<source>); default w<index>"},
    {"from", w_from, "the host, or list of hosts, the data comes from (required)"},
    {"to", w_to, "the host the data goes to (required)"},
    {"verb", w_verb, "write (default), send or read (`to` posts the READs)"},
    {"message_size", w_message_size, "bytes per message, e.g. 64KB (default 64KiB)"},
    {"count", w_count, "messages per flow (one of count, bytes, duration)"},
    {"bytes", w_bytes, "bytes per flow, rounded up to whole messages"},
    {"duration", w_duration, "keep posting this long"},
    {"start", w_start, "when the flow starts (default 0)"},
    {"qps", w_qps, "QPs per flow; messages go round-robin (default 1)"},
    {"dscp", w_dscp, "DSCP of the data, sent ECT(0) (default: the NIC's, 26)"},
    {"traffic_class", w_traffic_class, "the whole IP traffic class byte instead of dscp"},
    {"mtu", w_mtu, "RoCE path MTU, 256..4096 (default 1024)"},
    {"window", w_window, "messages outstanding per QP (default 8)"},
    {"on_off", w_on_off, "{on: 100us, off: 50us}: post only during the on periods"},
    {"timeout", w_timeout, "QP local ACK timeout exponent, 4.096us x 2^n (default 14)"},
    {"retry_cnt", w_retry_cnt, "QP retry count (default 7)"},
};

void check_workload(const YAML::Node& n, const std::string& f, Workload& w, Reader& r) {
  if (!n["from"] || !n["to"]) r.ctx.error(n, f, "a workload needs from and to");
  const int amounts = (n["count"] ? 1 : 0) + (n["bytes"] ? 1 : 0) + (n["duration"] ? 1 : 0);
  if (amounts != 1) r.ctx.error(n, f, "give exactly one of count, bytes and duration");
  if (n["dscp"] && n["traffic_class"])
    r.ctx.error(n["traffic_class"], f + ".traffic_class", "give dscp or traffic_class, not both");
  if (w.bytes > 0) w.count = (w.bytes + w.message_size - 1) / w.message_size;
}

void read_workloads(const YAML::Node& v, const std::string& f, Reader& r) {
  if (!v.IsSequence()) {
    r.ctx.error(v, f, "expected a list of workloads");
    return;
  }
  static constexpr auto names = key_names(kWorkloadKeys);
  for (size_t i = 0; i < v.size(); i++) {
    const std::string wf = f + "[" + std::to_string(i) + "]";
    const YAML::Node n = v[i];
    if (!n.IsMap()) {
      r.ctx.error(n, wf, "expected a mapping with from, to, verb, message_size, count, ...");
      continue;
    }
    r.ctx.check_keys(n, wf, names);
    Workload w;
    w.name = "w" + std::to_string(i);
    for (const WorkloadKey& k : kWorkloadKeys) {
      const std::string kf = wf + "." + std::string(k.name);
      WorkloadField x{r, w, kf};
      if (const YAML::Node kv = n[std::string(k.name)]) k.read(kv, x);
    }
    check_workload(n, wf, w, r);
    r.s.workloads.push_back(std::move(w));
  }
}

void expand_flows(const YAML::Node& at, Reader& r) {
  std::vector<std::string> seen;
  for (size_t wi = 0; wi < r.s.workloads.size(); wi++) {
    const Workload& w = r.s.workloads[wi];
    for (const std::string& src : w.from) {
      FlowSpec fs{w.from.size() == 1 ? w.name : w.name + "-" + src, wi, src, w.to, w.count};
      if (std::find(seen.begin(), seen.end(), fs.name) != seen.end()) {
        r.ctx.error(at[wi], "workloads[" + std::to_string(wi) + "]", "a second flow named '" + fs.name + "'");
        continue;
      }
      seen.push_back(fs.name);
      r.s.flows.push_back(std::move(fs));
    }
  }
}

// ---- faults ----

bool read_link_target(const YAML::Node& v, const std::string& f, ScheduledEvent& e, Reader& r) {
  auto s = r.ctx.str(v, f);
  if (!s) return false;
  const auto colon = s->rfind(':');
  e.node = s->substr(0, colon);
  e.port = 0;
  if (colon != std::string::npos) {
    const std::string p = s->substr(colon + 1);
    const bool digits = !p.empty() && p.size() <= 5 && std::all_of(p.begin(), p.end(), ::isdigit);
    e.port = digits ? uint16_t(std::min(std::stoul(p), 0xfffful)) : 0xffff;
  }
  if (!r.topology_ok) return true;
  for (const LinkSpec& l : r.s.topology.links)
    if ((l.a == e.node && l.a_port == e.port) || (l.b == e.node && l.b_port == e.port)) return true;
  r.ctx.error(v, f, "no link at '" + *s + "' (NODE or NODE:PORT of a link's end)");
  return false;
}

bool read_port_target(const YAML::Node& v, const std::string& f, ScheduledEvent& e, Reader& r) {
  auto s = r.ctx.str(v, f);
  if (!s) return false;
  const auto colon = s->rfind(':');
  e.node = s->substr(0, colon == std::string::npos ? s->size() : colon);
  if (!r.topology_ok) return true;
  const NodeSpec* n = find_node(r.s.topology, e.node);
  if (n == nullptr || n->kind->name() != "switch" || colon == std::string::npos) {
    r.ctx.error(v, f, "'" + *s + "' is not SWITCH:INTERFACE (e.g. sw1:swp2)");
    return false;
  }
  const auto& cfg = std::any_cast<const sw::SwitchConfig&>(n->config);
  const int idx = cfg.find_interface(s->substr(colon + 1));
  if (idx < 0) {
    r.ctx.error(v, f, e.node + " has no interface '" + s->substr(colon + 1) + "' (" + cfg.interface_range() + ")");
    return false;
  }
  e.port = uint16_t(idx);
  return true;
}

void read_fault_action(const YAML::Node& n, const std::string& f, ScheduledEvent& e, Reader& r) {
  const bool clear = n["clear"] && r.ctx.boolean(n["clear"], f + ".clear").value_or(false);
  if (clear == bool(n["set"] || n["pfc_storm"]))
    r.ctx.error(n, f, "give set (and for a switch port, pfc_storm) or clear: true");
  if (n["set"]) e.faults = parse_faults(n["set"], f + ".set", r.ctx);
  if (n["pfc_storm"]) {
    if (e.kind != ScheduledEvent::Kind::kPortFault)
      r.ctx.error(n["pfc_storm"], f + ".pfc_storm", "only a switch port (port: SWITCH:INTERFACE) emits a PFC storm");
    else e.storm = sw::parse_pfc_storm(n["pfc_storm"], f + ".pfc_storm", r.ctx);
  }
  if (const YAML::Node d = n["direction"]) {
    if (e.kind != ScheduledEvent::Kind::kLinkFault) r.ctx.error(d, f + ".direction", "only links have directions");
    if (auto s = r.ctx.choice(d, f + ".direction", {"out", "in", "both"})) e.out = *s != "in", e.in = *s != "out";
  }
}

void read_fault(const YAML::Node& n, const std::string& f, Reader& r) {
  r.ctx.check_keys(n, f, {"at", "link", "port", "direction", "set", "pfc_storm", "clear"});
  ScheduledEvent e;
  if (!n["at"]) r.ctx.error(n, f + ".at", "every fault needs a time (at: 500us)");
  else if (auto t = r.ctx.duration(n["at"], f + ".at")) e.at = *t;
  bool ok = false;
  if (bool(n["link"]) == bool(n["port"])) {
    r.ctx.error(n, f, "give link (NODE[:PORT]) or port (SWITCH:INTERFACE)");
  } else if (n["link"]) {
    ok = read_link_target(n["link"], f + ".link", e, r);
  } else {
    e.kind = ScheduledEvent::Kind::kPortFault;
    ok = read_port_target(n["port"], f + ".port", e, r);
  }
  read_fault_action(n, f, e, r);
  if (ok) r.s.schedule.push_back(std::move(e));
}

void read_faults(const YAML::Node& v, const std::string& f, Reader& r) {
  if (!v.IsSequence()) {
    r.ctx.error(v, f, "expected a list of {at, link|port, set|clear}");
    return;
  }
  for (size_t i = 0; i < v.size(); i++) {
    const std::string ff = f + "[" + std::to_string(i) + "]";
    if (!v[i].IsMap()) r.ctx.error(v[i], ff, "expected a mapping {at, link|port, set|clear}");
    else read_fault(v[i], ff, r);
  }
}

// ---- NVUE commands ----

std::vector<std::string> words(const std::string& command) {
  std::vector<std::string> out;
  std::istringstream in(command);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// One `nv` entry; false if it is unusable.
bool read_nv_command(const YAML::Node& n, const std::string& f, Reader& r, ScheduledEvent& e) {
  r.ctx.check_keys(n, f, {"at", "switch", "command"});
  e.kind = ScheduledEvent::Kind::kNv;
  if (n["at"])
    if (auto t = r.ctx.duration(n["at"], f + ".at")) e.at = *t;
  if (!n["switch"] || !n["command"]) {
    r.ctx.error(n, f, "an nv entry needs switch and command");
    return false;
  }
  auto sw = r.ctx.str(n["switch"], f + ".switch");
  auto cmd = r.ctx.str(n["command"], f + ".command");
  if (!sw || !cmd) return false;
  e.node = *sw;
  e.nv = words(*cmd);
  if (e.nv.empty() || (e.nv[0] != "set" && e.nv[0] != "unset")) {
    r.ctx.error(n["command"], f + ".command", "expected an NVUE set or unset command (set qos roce mode lossy)");
    return false;
  }
  const NodeSpec* node = r.topology_ok ? find_node(r.s.topology, *sw) : nullptr;
  if (r.topology_ok && (node == nullptr || node->kind->name() != "switch")) {
    r.ctx.error(n["switch"], f + ".switch", "no switch named '" + *sw + "' in the topology");
    return false;
  }
  return true;
}

// Every switch's configuration through its commands, in time order, as
// the run will apply them: a command that fails names its entry.
void check_nv_commands(const YAML::Node& v, std::vector<std::pair<ScheduledEvent, size_t>> cmds, Reader& r) {
  std::map<std::string, sw::SwitchConfig> cfgs;
  for (const NodeSpec& n : r.s.topology.nodes)
    if (n.kind->name() == "switch") cfgs[n.name] = std::any_cast<const sw::SwitchConfig&>(n.config);
  std::stable_sort(cmds.begin(), cmds.end(), [](const auto& a, const auto& b) { return a.first.at < b.first.at; });
  for (const auto& [e, i] : cmds) {
    sw::SwitchConfig& cfg = cfgs.at(e.node);
    Status st = sw::nv_edit(cfg, e.nv);
    if (st.ok()) st = cfg.validate();
    if (!st.ok()) r.ctx.error(v[i]["command"], "nv[" + std::to_string(i) + "].command", st.message());
  }
}

void read_nv(const YAML::Node& v, const std::string& f, Reader& r) {
  if (!v.IsSequence()) {
    r.ctx.error(v, f, "expected a list of {at, switch, command}");
    return;
  }
  std::vector<std::pair<ScheduledEvent, size_t>> cmds;
  for (size_t i = 0; i < v.size(); i++) {
    const std::string nf = f + "[" + std::to_string(i) + "]";
    ScheduledEvent e;
    if (!v[i].IsMap()) r.ctx.error(v[i], nf, "expected a mapping {at, switch, command}");
    else if (read_nv_command(v[i], nf, r, e)) cmds.push_back({std::move(e), i});
  }
  if (r.topology_ok) check_nv_commands(v, cmds, r);
  for (auto& [e, i] : cmds) r.s.schedule.push_back(std::move(e));
}

// ---- expectations ----

void read_expectation(const YAML::Node& n, const std::string& f, const Json* skeleton, Reader& r) {
  r.ctx.check_keys(n, f, {"name", "metric", "op", "value"});
  Expectation e;
  if (!n["metric"] || !n["op"] || !n["value"]) {
    r.ctx.error(n, f, "an expectation needs metric, op and value");
    return;
  }
  auto metric = r.ctx.str(n["metric"], f + ".metric");
  auto op = r.ctx.str(n["op"], f + ".op");
  if (op && !parse_op(*op, e.op, e.within_percent))
    r.ctx.error(n["op"], f + ".op", "'" + *op + "' is not <, <=, >, >=, == or \"within X% of\"");
  const YAML::Node v = n["value"];
  if (v.IsScalar() && (v.Scalar() == "true" || v.Scalar() == "false")) e.value = v.Scalar() == "true" ? 1 : 0;
  else if (auto x = r.ctx.number(v, f + ".value", -1e300, 1e300)) e.value = *x;
  if (metric && skeleton != nullptr) {
    const Json* m = find_metric(*skeleton, *metric);
    if (m == nullptr)
      r.ctx.error(n["metric"], f + ".metric",
                  "'" + *metric + "' is not in summary.json (" + metric_hint(*skeleton, *metric) + ")");
    else if (!m->is_number() && !m->is_boolean())
      r.ctx.error(n["metric"], f + ".metric", "'" + *metric + "' is a section, not a number");
  }
  if (!metric || !op) return;
  e.metric = *metric;
  e.text = *op;
  e.name = n["name"] ? r.ctx.str(n["name"], f + ".name").value_or("") : *metric + " " + *op + " " + v.Scalar();
  r.s.expectations.push_back(std::move(e));
}

void read_expectations(const YAML::Node& v, const std::string& f, Reader& r) {
  if (!v.IsSequence()) {
    r.ctx.error(v, f, "expected a list of {name, metric, op, value}");
    return;
  }
  // Metric paths are checked against the summary a run of this scenario
  // would write: the same builder, on empty results.
  std::optional<Json> skeleton;
  if (r.topology_ok) skeleton = build_summary(r.s, layout_of(r.s.topology), Measurements::empty_for(r.s));
  for (size_t i = 0; i < v.size(); i++) {
    const std::string ef = f + "[" + std::to_string(i) + "]";
    if (!v[i].IsMap()) r.ctx.error(v[i], ef, "expected a mapping {name, metric, op, value}");
    else read_expectation(v[i], ef, skeleton ? &*skeleton : nullptr, r);
  }
}

// ---- the top level ----

struct ScenarioKey {
  std::string_view name;
  void (*read)(const YAML::Node&, const std::string&, Reader&);
  std::string_view help;
};
// Read in this order (later keys need earlier ones), whatever the file's order.
constexpr ScenarioKey kScenarioKeys[] = {
    {"name", read_scenario_name, "the scenario's name (default: the file name without .yaml)"},
    {"description", read_description, "one line saying what it shows (plot titles use it)"},
    {"topology", read_topology, "the fabric, inline, in the format of `rocemu up`"},
    {"topology_file", read_topology_file, "... or a topology file, relative to the scenario"},
    {"seed", read_seed, "the engine's seed (default: the topology's, else 1)"},
    {"duration", read_duration, "the most virtual time to run (default 10ms)"},
    {"sample_interval", read_sample_interval, "time between samples of the time series (default 10us)"},
    {"until", read_until, "done (default: stop once every flow is done) or duration"},
    {"bottleneck", read_bottleneck, "NODE:PORT whose utilisation is summary.bottleneck (default: the busiest)"},
    {"workloads", read_workloads, "flows between hosts: see the workload keys"},
    {"faults", read_faults, "a schedule: [{at, link: NODE[:PORT] | port: SWITCH:IF, set: {...} | clear: true}]"},
    {"nv", read_nv, "NVUE commands on a switch: [{at: 0, switch: sw1, command: \"set qos roce mode lossy\"}]"},
    {"expectations", read_expectations, "[{name, metric, op, value}]: the verdict"},
};

void read_root(const YAML::Node& root, Reader& r) {
  static constexpr auto names = key_names(kScenarioKeys);
  r.ctx.check_keys(root, "", names);
  for (const ScenarioKey& k : kScenarioKeys) {
    const std::string f(k.name);
    if (const YAML::Node v = root[f]) k.read(v, f, r);
    if (k.name == "workloads" && root[f]) expand_flows(root[f], r);
  }
  if (!r.have_topology) r.ctx.error(root, "topology", "a scenario needs a topology (inline) or a topology_file");
  std::stable_sort(r.s.schedule.begin(), r.s.schedule.end(), [](const auto& a, const auto& b) { return a.at < b.at; });
  r.s.topology.engine.seed = r.s.seed;
}

Status combine(const Status& a, const Status& b) {
  if (a.ok()) return b;
  if (b.ok()) return a;
  return Status::error(a.message() + "\n" + b.message());
}

}  // namespace

std::string_view verb_name(Verb v) {
  switch (v) {
    case Verb::kWrite: return "write";
    case Verb::kSend: return "send";
    case Verb::kRead: return "read";
  }
  return "?";
}

bool parse_op(std::string_view t, Op& op, double& within_percent) {
  static constexpr std::pair<std::string_view, Op> kOps[] = {
      {"<", Op::kLt}, {"<=", Op::kLe}, {">", Op::kGt}, {">=", Op::kGe}, {"==", Op::kEq}};
  for (const auto& [text, o] : kOps)
    if (t == text) {
      op = o;
      return true;
    }
  // "within 5% of"
  constexpr std::string_view kPre = "within ", kPost = "% of";
  if (!t.starts_with(kPre) || !t.ends_with(kPost) || t.size() <= kPre.size() + kPost.size()) return false;
  const std::string num(t.substr(kPre.size(), t.size() - kPre.size() - kPost.size()));
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !(v >= 0)) return false;
  op = Op::kWithin;
  within_percent = v;
  return true;
}

Result<Scenario> parse_scenario(const std::string& text, const std::string& file, const NodeKindRegistry& reg) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::error(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) return Status::error(file + ": expected a mapping with topology, workloads and expectations");
  Context ctx(file);
  Scenario s;
  s.file = file;
  s.name = std::filesystem::path(file).stem().string();
  Reader r{ctx, reg, std::filesystem::path(file).parent_path().string(), s};
  read_root(root, r);
  const Status st = combine(r.topology_file_errors, ctx.status());
  if (!st.ok()) return st;
  return s;
}

Result<Scenario> load_scenario(const std::string& path, const NodeKindRegistry& reg) {
  std::ifstream in(path);
  if (!in) return Status::error(path + ": cannot open the scenario file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_scenario(ss.str(), path, reg);
}

}  // namespace rocemu::sim
