// Topology files (YAML): the engine settings, the nodes, the internal
// links between them and the external DPDK ports. Node kinds (nic, switch,
// ...) are registered by the libraries that implement them; each validates
// its own part of the file. A bad file is rejected whole, before anything
// is built, with every error naming the file, line and field.
//
//   engine: {time: virtual, seed: 1, mbufs: 16384}
//   nodes:
//     h1: {kind: nic, ip: 10.0.0.1}
//     sw1: {kind: switch, ports: 4}
//   links:
//     - {a: h1, b: "sw1:0", rate: 100G, delay: 1us, mtu: 9000}
//   ports:
//     - {node: "sw1:3", device: "net_memif0,role=server,socket=/tmp/sw1-3.sock"}
//
// One file can describe a fabric that several engines run, each a part
// (common/config/parts.h): `rocemu up FILE --part rack1` runs rack1's
// nodes, and each link to another part becomes an external port there.
#pragma once

#include <yaml-cpp/yaml.h>

#include <any>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/engine/engine.h"
#include "common/engine/fault.h"
#include "common/engine/link.h"

namespace rocemu {

// A kind of node that topology files can declare.
class NodeKind {
 public:
  virtual ~NodeKind() = default;
  virtual std::string_view name() const = 0;
  // Validates the node's mapping (`field` is e.g. "nodes.h1"); returns the
  // parsed configuration, or an empty std::any after recording errors.
  virtual std::any parse(const YAML::Node& node, std::string_view field, config::Context& ctx) const = 0;
  virtual uint16_t num_ports(const std::any& cfg) const = 0;
  virtual std::unique_ptr<Node> create(const std::string& name, const std::any& cfg) const = 0;
  // Called once the whole fabric is built (e.g. to learn neighbours).
  virtual Status finish(Node& /*node*/, Engine& /*engine*/) const { return {}; }
};

class NodeKindRegistry {
 public:
  void add(std::unique_ptr<NodeKind> kind);
  const NodeKind* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::unique_ptr<NodeKind>, std::less<>> kinds_;
};

// generator, sink and forwarder.
void register_basic_kinds(NodeKindRegistry& reg);

struct NodeSpec {
  std::string name;
  const NodeKind* kind = nullptr;
  std::any config;
  uint16_t ports = 0;
  std::string part;  // the part that runs it (parts:); empty in a file without parts
};

struct LinkSpec {
  std::string name;  // optional (name:); a link between parts needs one
  size_t index = 0;  // its place in the file's links: list
  std::string a, b;
  uint16_t a_port = 0, b_port = 0;
  LinkParams params;
  FaultConfig faults[2];  // a->b, b->a
};

struct ExternalPortSpec {
  std::string node;
  uint16_t port = 0;
  EthdevParams params;
};

// One engine's share of a fabric that several engines run (parts:).
struct PartSpec {
  std::string name;
  std::vector<std::string> nodes;
  // The device each link to another part leaves this part on, by link name
  // (the link's mtu and rate filled in).
  std::map<std::string, EthdevParams, std::less<>> external;
  // Of those, the ones given as `interface: NAME`, by link name: their
  // device (net_af_packet on NAME) is made once the link's MTU is known.
  std::map<std::string, std::string, std::less<>> interfaces;
};

struct Topology {
  std::string file;
  EngineOptions engine;
  std::vector<NodeSpec> nodes;
  // All links, those between parts included: built as they are, the parts
  // run in one engine (see topology_part for one part alone).
  std::vector<LinkSpec> links;
  std::vector<ExternalPortSpec> ports;
  std::vector<PartSpec> parts;  // empty: one engine runs the whole file
  std::string part;             // set by topology_part: the part this is
  YAML::Node raw;  // the whole document, for front ends that read more
};

Result<Topology> parse_topology(const std::string& text, const std::string& file, const NodeKindRegistry& reg);
Result<Topology> load_topology(const std::string& path, const NodeKindRegistry& reg);
// Reads an already loaded document (e.g. a scenario's inline topology),
// recording every error in `ctx`; the result is only usable if ctx.ok().
Topology parse_topology(const YAML::Node& root, config::Context& ctx, const NodeKindRegistry& reg);

// Parses a fault stage mapping (shared by links, ports and the CLI).
FaultConfig parse_faults(const YAML::Node& n, std::string_view field, config::Context& ctx);

// Builds the nodes, links and ports of `topo` into `engine`.
Status build_fabric(const Topology& topo, Engine& engine);

}  // namespace rocemu
