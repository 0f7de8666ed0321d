#include "common/config/parts.h"

#include <cctype>
#include <set>

namespace rocemu {
namespace {

bool plain_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// An external: entry, {interface: IF} or {device: SPEC}, netns optional;
// `interface`, if given, is set to IF (the device is made later).
std::optional<EthdevParams> parse_external(const YAML::Node& e, const std::string& field, config::Context& ctx,
                                           std::string& interface) {
  if (!e.IsMap()) {
    ctx.error(e, field, "expected {interface: NAME} or {device: SPEC}, with netns: if the device is in another one");
    return std::nullopt;
  }
  ctx.check_keys(e, field, {"interface", "device", "netns"});
  if (bool(e["interface"]) == bool(e["device"])) {
    ctx.error(e, field,
              "give one of interface (a Linux interface, reached with net_af_packet) or device (a DPDK device "
              "spec such as net_af_packet0,iface=eth1 or a PCI address)");
    return std::nullopt;
  }
  EthdevParams p;
  if (e["interface"]) {
    auto i = ctx.str(e["interface"], field + ".interface");
    if (!i) return std::nullopt;
    if (i->empty() || i->size() > 15 || i->find_first_of(" ,=/:") != std::string::npos) {
      ctx.error(e["interface"], field + ".interface", "'" + *i + "' is not a Linux interface name");
      return std::nullopt;
    }
    interface = *i;
  } else {
    auto d = ctx.str(e["device"], field + ".device");
    if (!d) return std::nullopt;
    p.device = *d;
  }
  if (e["netns"]) {
    auto n = ctx.str(e["netns"], field + ".netns");
    if (!n) return std::nullopt;
    p.netns = *n;
  }
  return p;
}

}  // namespace

std::string af_packet_device(std::string_view vdev_name, std::string_view interface, uint32_t mtu) {
  // A ring frame holds the packet with its Ethernet header (and a VLAN tag)
  // after the kernel's TPACKET2 header and alignment (80 bytes at most).
  // The PMD takes frames up to 4384 bytes (their data must fit the engine's
  // 4352-byte mbufs) and lays its frames out back to back, so they must
  // divide a block (whole pages) exactly: 2048, 4096, or 4352 (16 in a
  // 17-page block). 4096 frames a ring: an engine descheduled for 10 ms at
  // 7 Gbit/s finds what came meanwhile still there (with 512, 0.24 % of the
  // frames were lost in the kernel when two engines shared two cores).
  const uint32_t need = mtu + 18 + 80;
  const uint32_t frame = need <= 2048 ? 2048 : need <= 4096 ? 4096 : 4352;
  const uint32_t block = frame == 4352 ? 17 * 4096 : 4096;
  return std::string(vdev_name) + ",iface=" + std::string(interface) + ",blocksz=" + std::to_string(block) +
         ",framesz=" + std::to_string(frame) + ",framecnt=4096,qpairs=1";
}

void parse_parts(const YAML::Node& root, Topology& topo, config::Context& ctx) {
  const YAML::Node parts = root["parts"];
  if (!parts) return;
  if (!parts.IsMap() || parts.size() == 0) {
    ctx.error(parts, "parts", "expected a mapping of part names to {nodes: [...], external: {...}}");
    return;
  }
  std::map<std::string, size_t, std::less<>> node_index;
  for (size_t i = 0; i < topo.nodes.size(); i++) node_index[topo.nodes[i].name] = i;
  // Every link name in the file (even one that did not parse).
  std::set<std::string, std::less<>> link_names;
  if (const YAML::Node links = root["links"]; links && links.IsSequence())
    for (const auto& l : links)
      if (l.IsMap() && l["name"] && l["name"].IsScalar()) link_names.insert(l["name"].Scalar());

  std::vector<std::string> part_names;
  std::map<std::string, YAML::Node, std::less<>> external_nodes;  // parts.P.external, for lines
  for (const auto& kv : parts) {
    const std::string name = kv.first.Scalar();
    const std::string field = "parts." + name;
    if (!plain_name(name)) {
      ctx.error(kv.first, field, "part names are letters, digits, '-' and '_'");
      continue;
    }
    const YAML::Node p = kv.second;
    if (!p.IsMap()) {
      ctx.error(p, field, "expected {nodes: [...], external: {...}}");
      continue;
    }
    ctx.check_keys(p, field, {"nodes", "external"});
    PartSpec part;
    part.name = name;
    part_names.push_back(name);
    const YAML::Node ns = p["nodes"];
    if (!ns || !ns.IsSequence() || ns.size() == 0) {
      ctx.error(ns ? ns : p, field + ".nodes", "expected a list of the part's nodes");
    } else {
      for (size_t i = 0; i < ns.size(); i++) {
        const std::string nf = field + ".nodes[" + std::to_string(i) + "]";
        auto n = ctx.str(ns[i], nf);
        if (!n) continue;
        auto it = node_index.find(*n);
        if (it == node_index.end()) {
          ctx.error(ns[i], nf, "no node named '" + *n + "'");
          continue;
        }
        NodeSpec& node = topo.nodes[it->second];
        if (!node.part.empty()) {
          ctx.error(ns[i], nf, *n + " is already in part " + node.part);
          continue;
        }
        node.part = name;
        part.nodes.push_back(*n);
      }
    }
    if (const YAML::Node ex = p["external"]) {
      if (!ex.IsMap()) {
        ctx.error(ex, field + ".external", "expected a mapping of link names to {interface: ...} or {device: ...}");
      } else {
        external_nodes[name] = ex;
        for (const auto& e : ex) {
          const std::string link = e.first.Scalar();
          const std::string ef = field + ".external." + link;
          if (!link_names.contains(link)) {
            ctx.error(e.first, ef, "no link named '" + link + "'");
            continue;
          }
          std::string interface;
          if (auto params = parse_external(e.second, ef, ctx, interface)) {
            part.external[link] = *params;
            if (!interface.empty()) part.interfaces[link] = interface;
          }
        }
      }
    }
    topo.parts.push_back(std::move(part));
  }
  for (const NodeSpec& n : topo.nodes)
    if (n.part.empty())
      ctx.error(root["nodes"][n.name], "nodes." + n.name,
                "in no part (parts: " + joined(part_names) + "); with parts: every node is in one");

  auto find_part = [&](std::string_view name) -> PartSpec* {
    for (PartSpec& p : topo.parts)
      if (p.name == name) return &p;
    return nullptr;
  };
  const YAML::Node links = root["links"];
  std::set<std::string, std::less<>> cut;
  for (LinkSpec& l : topo.links) {
    const std::string field = "links[" + std::to_string(l.index) + "]";
    const YAML::Node ln = links[l.index];
    const std::string& pa = topo.nodes[node_index.at(l.a)].part;
    const std::string& pb = topo.nodes[node_index.at(l.b)].part;
    if (pa.empty() || pb.empty() || pa == pb) continue;
    const std::string joins = "joins " + l.a + " (part " + pa + ") and " + l.b + " (part " + pb + ")";
    if (l.name.empty()) {
      ctx.error(ln, field,
                joins + ": a link between parts needs a name, and an interface or device for it under parts." + pa +
                    ".external and parts." + pb + ".external");
      continue;
    }
    cut.insert(l.name);
    for (const std::string* side : {&pa, &pb}) {
      PartSpec* part = find_part(*side);
      auto it = part->external.find(l.name);
      if (it == part->external.end()) {
        ctx.error(ln, field,
                  joins + ": parts." + *side + ".external has no entry '" + l.name +
                      "' (the interface or device the link leaves " + *side + " on)");
        continue;
      }
      it->second.mtu = l.params.mtu;
      it->second.rate_bps = l.params.rate_bps;
      if (auto i = part->interfaces.find(l.name); i != part->interfaces.end())
        it->second.device = af_packet_device("net_af_packet_" + l.name, i->second, l.params.mtu);
    }
    if (l.params.mtu > kMaxExternalMtu)
      ctx.error(ln["mtu"] ? ln["mtu"] : ln, field + ".mtu",
                joins + ": a link between parts becomes external ports, which carry an MTU of at most " +
                    std::to_string(kMaxExternalMtu) + " (the link's is " + std::to_string(l.params.mtu) + ")");
    for (const char* key : {"faults", "faults_ab", "faults_ba"})
      if (ln[key])
        ctx.error(ln[key], field + "." + key,
                  joins + ": a link between parts has no fault stage (it is a real wire); inject faults on a link "
                          "inside a part, or with `rocemu fault` on a port");
  }
  // An external: entry for a link that stays inside a part (or the wrong part).
  for (const PartSpec& p : topo.parts) {
    for (const auto& [link, params] : p.external) {
      if (cut.contains(link)) {
        const LinkSpec* l = nullptr;
        for (const LinkSpec& x : topo.links)
          if (x.name == link) l = &x;
        const std::string& pa = topo.nodes[node_index.at(l->a)].part;
        const std::string& pb = topo.nodes[node_index.at(l->b)].part;
        if (pa == p.name || pb == p.name) continue;
      }
      bool known = false;
      for (const LinkSpec& x : topo.links) known = known || x.name == link;
      if (!known) continue;  // the link itself has errors
      const YAML::Node ex = external_nodes[p.name];
      ctx.error(ex[link], "parts." + p.name + ".external." + link,
                "link '" + link + "' does not leave part " + p.name + " for another part");
    }
  }
}

Result<Topology> topology_part(const Topology& whole, std::string_view part) {
  if (whole.parts.empty())
    return Status::error(whole.file + ": has no parts: section, so there is no part '" + std::string(part) +
                         "' to run (without --part one engine runs the whole file)");
  const PartSpec* spec = nullptr;
  std::vector<std::string> names;
  for (const PartSpec& p : whole.parts) {
    names.push_back(p.name);
    if (p.name == part) spec = &p;
  }
  if (spec == nullptr)
    return Status::error(whole.file + ": no part named '" + std::string(part) + "' (parts: " + joined(names) + ")");
  Topology t;
  t.file = whole.file;
  t.engine = whole.engine;
  t.raw = whole.raw;
  t.parts = whole.parts;
  t.part = spec->name;
  std::set<std::string, std::less<>> mine;
  for (const NodeSpec& n : whole.nodes) {
    if (n.part != part) continue;
    t.nodes.push_back(n);
    mine.insert(n.name);
  }
  for (const LinkSpec& l : whole.links) {
    const bool a = mine.contains(l.a), b = mine.contains(l.b);
    if (a && b) {
      t.links.push_back(l);
    } else if (a || b) {
      ExternalPortSpec p;
      p.node = a ? l.a : l.b;
      p.port = a ? l.a_port : l.b_port;
      p.params = spec->external.at(l.name);  // parse_parts made sure of it
      t.ports.push_back(p);
    }
  }
  for (const ExternalPortSpec& p : whole.ports)
    if (mine.contains(p.node)) t.ports.push_back(p);
  return t;
}

}  // namespace rocemu
