#include "common/config/topology.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/config/fault_kinds.h"
#include "common/config/parts.h"
#include "common/engine/basic_nodes.h"

namespace rocemu {
namespace {

// "sw1:3" -> ("sw1", 3); "h1" -> ("h1", 0).
bool split_endpoint(const std::string& s, std::string& node, uint16_t& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos) {
    node = s;
    port = 0;
    return !node.empty();
  }
  node = s.substr(0, colon);
  const std::string p = s.substr(colon + 1);
  if (node.empty() || p.empty() || p.size() > 5) return false;
  for (char c : p)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  const unsigned long v = std::stoul(p);
  if (v > 0xffff) return false;
  port = uint16_t(v);
  return true;
}

std::optional<uint32_t> u24(const YAML::Node& n, std::string_view field, config::Context& ctx) {
  auto v = ctx.integer(n, field, 0, 0xffffff);
  if (!v) return std::nullopt;
  return uint32_t(*v);
}

// ---- basic node kinds ----
struct GeneratorConfig {
  std::vector<uint8_t> frame;
  uint64_t count = 0;
  uint64_t rate = 0;
};

class GeneratorKind final : public NodeKind {
 public:
  std::string_view name() const override { return "generator"; }
  std::any parse(const YAML::Node& n, std::string_view field, config::Context& ctx) const override {
    const std::string f(field);
    ctx.check_keys(n, f, {"kind", "size", "count", "rate"});
    GeneratorConfig cfg;
    uint64_t size = 1000;
    if (n["size"]) size = uint64_t(ctx.integer(n["size"], f + ".size", 60, 4352).value_or(1000));
    if (n["count"]) cfg.count = uint64_t(ctx.integer(n["count"], f + ".count", 0, int64_t(1) << 40).value_or(0));
    if (n["rate"]) cfg.rate = ctx.rate(n["rate"], f + ".rate").value_or(0);
    cfg.frame.assign(size, 0);
    return cfg;
  }
  uint16_t num_ports(const std::any&) const override { return 1; }
  std::unique_ptr<Node> create(const std::string& name, const std::any& a) const override {
    const auto& cfg = std::any_cast<const GeneratorConfig&>(a);
    auto frame = cfg.frame;
    frame[0] = 0x02;  // locally administered unicast destination
    frame[12] = 0x88;
    frame[13] = 0xb5;
    return std::make_unique<Generator>(name, frame, cfg.count, cfg.rate);
  }
};

class SinkKind final : public NodeKind {
 public:
  std::string_view name() const override { return "sink"; }
  std::any parse(const YAML::Node& n, std::string_view field, config::Context& ctx) const override {
    ctx.check_keys(n, field, {"kind", "ports"});
    uint16_t ports = 1;
    if (n["ports"]) ports = uint16_t(ctx.integer(n["ports"], std::string(field) + ".ports", 1, 64).value_or(1));
    return ports;
  }
  uint16_t num_ports(const std::any& a) const override { return std::any_cast<uint16_t>(a); }
  std::unique_ptr<Node> create(const std::string& name, const std::any& a) const override {
    return std::make_unique<Sink>(name, std::any_cast<uint16_t>(a));
  }
};

class ForwarderKind final : public NodeKind {
 public:
  std::string_view name() const override { return "forwarder"; }
  std::any parse(const YAML::Node& n, std::string_view field, config::Context& ctx) const override {
    ctx.check_keys(n, field, {"kind"});
    return true;
  }
  uint16_t num_ports(const std::any&) const override { return 2; }
  std::unique_ptr<Node> create(const std::string& name, const std::any&) const override {
    return std::make_unique<Forwarder>(name);
  }
};

}  // namespace

void NodeKindRegistry::add(std::unique_ptr<NodeKind> kind) {
  const std::string n(kind->name());
  kinds_[n] = std::move(kind);
}

const NodeKind* NodeKindRegistry::find(std::string_view name) const {
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : it->second.get();
}

std::vector<std::string> NodeKindRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : kinds_) out.push_back(k);
  return out;
}

void register_basic_kinds(NodeKindRegistry& reg) {
  reg.add(std::make_unique<GeneratorKind>());
  reg.add(std::make_unique<SinkKind>());
  reg.add(std::make_unique<ForwarderKind>());
}

FaultConfig parse_faults(const YAML::Node& n, std::string_view field, config::Context& ctx) {
  FaultConfig fc;
  const std::string f(field);
  const size_t errors_before = ctx.error_count();
  if (!n.IsMap()) {
    ctx.error(n, f, "expected a mapping of fault settings");
    return fc;
  }
  ctx.check_keys(n, f, config::fault_keys());
  for (const config::FaultKind& k : config::fault_kinds()) {
    const YAML::Node v = n[std::string(k.key)];
    if (!v) continue;
    const std::string kf = f + "." + std::string(k.key);
    switch (k.unit) {
      case config::FaultUnit::kProbability:
        if (auto p = ctx.number(v, kf, 0, 1)) k.set(fc, *p, {}, 0, false);
        break;
      case config::FaultUnit::kTime:
        if (auto t = ctx.duration(v, kf)) k.set(fc, 0, *t, 0, false);
        break;
      case config::FaultUnit::kRate:
        if (auto r = ctx.rate(v, kf)) k.set(fc, 0, {}, *r, false);
        break;
      case config::FaultUnit::kCount:
        if (auto c = ctx.integer(v, kf, 1, 1 << 30)) k.set(fc, 0, {}, uint64_t(*c), false);
        break;
      case config::FaultUnit::kFlag:
        if (auto b = ctx.boolean(v, kf)) k.set(fc, 0, {}, 0, *b);
        break;
    }
  }
  if (const auto& b = n["burst"]) {
    ctx.check_keys(b, f + ".burst", {"p_good_to_bad", "p_bad_to_good", "loss_good", "loss_bad"});
    GilbertElliott ge;
    if (b["p_good_to_bad"]) ge.p_good_to_bad = ctx.number(b["p_good_to_bad"], f + ".burst.p_good_to_bad", 0, 1).value_or(0);
    if (b["p_bad_to_good"]) ge.p_bad_to_good = ctx.number(b["p_bad_to_good"], f + ".burst.p_bad_to_good", 0, 1).value_or(1);
    if (b["loss_good"]) ge.loss_good = ctx.number(b["loss_good"], f + ".burst.loss_good", 0, 1).value_or(0);
    if (b["loss_bad"]) ge.loss_bad = ctx.number(b["loss_bad"], f + ".burst.loss_bad", 0, 1).value_or(1);
    fc.burst = ge;
  }
  if (const auto& d = n["drop"]) {
    if (!d.IsSequence()) {
      ctx.error(d, f + ".drop", "expected a list of match rules");
    } else {
      for (size_t i = 0; i < d.size(); i++) {
        const std::string rf = f + ".drop[" + std::to_string(i) + "]";
        const YAML::Node r = d[i];
        ctx.check_keys(r, rf, {"qpn", "psn", "opcode", "every_nth", "times"});
        DropRule rule;
        if (r["qpn"]) rule.qpn = u24(r["qpn"], rf + ".qpn", ctx);
        if (r["psn"]) rule.psn = u24(r["psn"], rf + ".psn", ctx);
        if (r["opcode"]) {
          if (auto v = ctx.integer(r["opcode"], rf + ".opcode", 0, 255)) rule.opcode = uint8_t(*v);
        }
        if (r["every_nth"]) rule.every_nth = uint32_t(ctx.integer(r["every_nth"], rf + ".every_nth", 1, 1 << 30).value_or(1));
        if (r["times"]) rule.times = uint32_t(ctx.integer(r["times"], rf + ".times", 0, 1 << 30).value_or(0));
        fc.drop.push_back(rule);
      }
    }
  }
  // Settings that do nothing together are refused as the command line refuses
  // them (one check, FaultConfig::validate), once the values read.
  if (ctx.error_count() == errors_before)
    if (Status s = fc.validate(); !s.ok()) ctx.error(n, f, s.message());
  return fc;
}

Result<Topology> parse_topology(const std::string& text, const std::string& file, const NodeKindRegistry& reg) {
  config::Context ctx(file);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::error(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (!root.IsMap()) return Status::error(file + ": expected a mapping with nodes, links, ports and engine");
  Topology topo = parse_topology(root, ctx, reg);
  if (!ctx.ok()) return ctx.status();
  return topo;
}

Topology parse_topology(const YAML::Node& root, config::Context& ctx, const NodeKindRegistry& reg) {
  Topology topo;
  topo.file = ctx.file();
  if (!root.IsMap()) {
    ctx.error(root, "", "expected a mapping with nodes, links, ports and engine");
    return topo;
  }
  topo.raw = root;
  ctx.check_keys(root, "", {"engine", "nodes", "links", "ports", "parts", "switch", "scenario", "nics"});

  if (const auto& e = root["engine"]) {
    ctx.check_keys(e, "engine", {"time", "seed", "mbufs", "tx_slack", "virtual_lag"});
    if (e["time"]) {
      if (auto t = ctx.choice(e["time"], "engine.time", {"virtual", "real"}))
        topo.engine.mode = *t == "virtual" ? TimeMode::kVirtual : TimeMode::kReal;
    }
    if (e["seed"]) topo.engine.seed = uint64_t(ctx.integer(e["seed"], "engine.seed", 0, INT64_MAX).value_or(1));
    if (e["mbufs"]) topo.engine.mbufs = uint32_t(ctx.integer(e["mbufs"], "engine.mbufs", 1024, 1 << 22).value_or(16384));
    if (e["tx_slack"]) topo.engine.real_tx_slack = ctx.duration(e["tx_slack"], "engine.tx_slack").value_or(us(50));
    if (e["virtual_lag"]) topo.engine.virtual_lag = ctx.duration(e["virtual_lag"], "engine.virtual_lag").value_or(Duration(0));
  }

  std::map<std::string, size_t> node_index;
  const YAML::Node nodes = root["nodes"];
  if (!nodes || !nodes.IsMap() || nodes.size() == 0) {
    ctx.error(nodes ? nodes : root, "nodes", "expected a mapping of node names to node settings");
  } else {
    for (const auto& kv : nodes) {
      const std::string name = kv.first.Scalar();
      const std::string field = "nodes." + name;
      const YAML::Node n = kv.second;
      if (name.empty() || name.find_first_of(": /") != std::string::npos) {
        ctx.error(kv.first, field, "node names may not be empty or contain ':', ' ' or '/'");
        continue;
      }
      if (!n.IsMap() || !n["kind"]) {
        ctx.error(n.IsDefined() ? n : kv.first, field + ".kind", "every node needs a kind");
        continue;
      }
      const std::string kind_name = n["kind"].IsScalar() ? n["kind"].Scalar() : "";
      const NodeKind* kind = reg.find(kind_name);
      if (kind == nullptr) {
        std::string list;
        for (const auto& k : reg.names()) list += (list.empty() ? "" : ", ") + k;
        ctx.error(n["kind"], field + ".kind", "'" + kind_name + "' is not a node kind (known: " + list + ")");
        continue;
      }
      std::any cfg = kind->parse(n, field, ctx);
      if (!cfg.has_value()) continue;
      node_index[name] = topo.nodes.size();
      topo.nodes.push_back(NodeSpec{name, kind, std::move(cfg), 0});
      topo.nodes.back().ports = kind->num_ports(topo.nodes.back().config);
    }
  }

  std::set<std::pair<std::string, uint16_t>> used;
  auto endpoint = [&](const YAML::Node& n, const std::string& field, std::string& node, uint16_t& port) {
    auto s = ctx.str(n, field);
    if (!s) return false;
    if (!split_endpoint(*s, node, port)) {
      ctx.error(n, field, "'" + *s + "' is not NODE or NODE:PORT");
      return false;
    }
    auto it = node_index.find(node);
    if (it == node_index.end()) {
      if (ctx.ok() || nodes.IsMap()) ctx.error(n, field, "no node named '" + node + "'");
      return false;
    }
    const uint16_t nports = topo.nodes[it->second].ports;
    if (port >= nports) {
      ctx.error(n, field, node + " has ports 0.." + std::to_string(nports - 1) + ", not " + std::to_string(port));
      return false;
    }
    if (!used.insert({node, port}).second) {
      ctx.error(n, field, node + ":" + std::to_string(port) + " is connected twice");
      return false;
    }
    return true;
  };

  std::set<std::string> link_names;
  if (const auto& links = root["links"]) {
    if (!links.IsSequence()) ctx.error(links, "links", "expected a list of links");
    for (size_t i = 0; links.IsSequence() && i < links.size(); i++) {
      const std::string field = "links[" + std::to_string(i) + "]";
      const YAML::Node l = links[i];
      if (!l.IsMap()) {
        ctx.error(l, field, "expected a mapping with a, b, rate, delay, mtu");
        continue;
      }
      ctx.check_keys(l, field, {"name", "a", "b", "rate", "delay", "mtu", "faults", "faults_ab", "faults_ba"});
      LinkSpec spec;
      spec.index = i;
      bool ok = true;
      if (l["name"]) {
        auto n = ctx.str(l["name"], field + ".name");
        if (n && (n->empty() || !std::all_of(n->begin(), n->end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
                  }))) {
          ctx.error(l["name"], field + ".name", "link names are letters, digits, '-' and '_'");
          ok = false;
        } else if (n && !link_names.insert(*n).second) {
          ctx.error(l["name"], field + ".name", "another link is named '" + *n + "'");
          ok = false;
        } else if (n) {
          spec.name = *n;
        }
      }
      if (!l["a"] || !l["b"]) {
        ctx.error(l, field, "a link needs both ends, a and b");
        ok = false;
      } else {
        ok &= endpoint(l["a"], field + ".a", spec.a, spec.a_port);
        ok &= endpoint(l["b"], field + ".b", spec.b, spec.b_port);
      }
      if (l["rate"]) spec.params.rate_bps = ctx.rate(l["rate"], field + ".rate").value_or(spec.params.rate_bps);
      if (l["delay"]) spec.params.delay = ctx.duration(l["delay"], field + ".delay").value_or(spec.params.delay);
      if (l["mtu"])
        spec.params.mtu =
            uint32_t(ctx.integer(l["mtu"], field + ".mtu", config::kMinMtu, config::kMaxMtu).value_or(9000));
      if (l["faults"]) spec.faults[0] = spec.faults[1] = parse_faults(l["faults"], field + ".faults", ctx);
      if (l["faults_ab"]) spec.faults[0] = parse_faults(l["faults_ab"], field + ".faults_ab", ctx);
      if (l["faults_ba"]) spec.faults[1] = parse_faults(l["faults_ba"], field + ".faults_ba", ctx);
      if (ok) topo.links.push_back(spec);
    }
  }

  if (const auto& ports = root["ports"]) {
    if (!ports.IsSequence()) ctx.error(ports, "ports", "expected a list of external ports");
    for (size_t i = 0; ports.IsSequence() && i < ports.size(); i++) {
      const std::string field = "ports[" + std::to_string(i) + "]";
      const YAML::Node p = ports[i];
      ctx.check_keys(p, field, {"node", "device", "mtu", "rate", "netns"});
      ExternalPortSpec spec;
      bool ok = p.IsMap() && p["node"] && p["device"];
      if (!ok) {
        ctx.error(p, field, "an external port needs node and device");
        continue;
      }
      ok &= endpoint(p["node"], field + ".node", spec.node, spec.port);
      if (auto d = ctx.str(p["device"], field + ".device")) spec.params.device = *d;
      if (p["mtu"]) spec.params.mtu = uint32_t(ctx.integer(p["mtu"], field + ".mtu", 68, kMaxExternalMtu).value_or(kMaxExternalMtu));
      if (p["rate"]) spec.params.rate_bps = ctx.rate(p["rate"], field + ".rate").value_or(spec.params.rate_bps);
      if (p["netns"]) spec.params.netns = ctx.str(p["netns"], field + ".netns").value_or("");
      if (ok) topo.ports.push_back(spec);
    }
    if (!topo.ports.empty() && topo.engine.mode == TimeMode::kVirtual && root["engine"] && root["engine"]["time"])
      ctx.error(root["engine"]["time"], "engine.time", "external ports need real time");
  }
  parse_parts(root, topo, ctx);
  return topo;
}

Result<Topology> load_topology(const std::string& path, const NodeKindRegistry& reg) {
  std::ifstream in(path);
  if (!in) return Status::error(path + ": cannot open the topology file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_topology(ss.str(), path, reg);
}

Status build_fabric(const Topology& topo, Engine& engine) {
  for (const NodeSpec& n : topo.nodes) engine.add_node(n.kind->create(n.name, n.config));
  for (const LinkSpec& l : topo.links) {
    auto link = engine.connect(*engine.find_node(l.a), l.a_port, *engine.find_node(l.b), l.b_port, l.params);
    if (!link.ok()) return Status::error(topo.file + ": " + link.status().message());
    link.value()->set_faults(0, l.faults[0]);
    link.value()->set_faults(1, l.faults[1]);
  }
  for (const ExternalPortSpec& p : topo.ports) {
    auto port = engine.attach_ethdev(*engine.find_node(p.node), p.port, p.params);
    if (!port.ok()) return Status::error(topo.file + ": " + port.status().message());
  }
  for (const NodeSpec& n : topo.nodes)
    if (Status s = n.kind->finish(*engine.find_node(n.name), engine); !s.ok()) return s;
  return {};
}

}  // namespace rocemu
