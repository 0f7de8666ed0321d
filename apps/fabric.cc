#include "apps/fabric.h"

#include "nic/nic_kind.h"
#include "switch/switch_kind.h"

namespace rocemu::app {

const NodeKindRegistry& registry() {
  static const NodeKindRegistry reg = [] {
    NodeKindRegistry r;
    register_basic_kinds(r);
    nic::register_nic_kind(r);
    register_switch_kinds(r);
    return r;
  }();
  return reg;
}

const char* const kDefaultTopology = R"(# rocemu's built-in topology: two hosts behind one switch.
engine:
  time: real
nodes:
  h1:
    kind: nic
    mac: "02:00:00:00:01:01"
    ip: 10.0.1.1
    prefix: 24
    gateway: 10.0.1.254
  h2:
    kind: nic
    mac: "02:00:00:00:02:01"
    ip: 10.0.2.1
    prefix: 24
    gateway: 10.0.2.254
  sw1:
    kind: switch
    ports: 2
    interfaces:
      swp1: {address: 10.0.1.254/24}
      swp2: {address: 10.0.2.254/24}
    qos:
      roce: lossless
      pfc-watchdog: {state: enable}
links:
  - {a: h1, b: "sw1:0", rate: 100G, delay: 1us, mtu: 9000}
  - {a: h2, b: "sw1:1", rate: 100G, delay: 1us, mtu: 9000}
)";

Result<Topology> load(const std::string& path) {
  if (path.empty()) return parse_topology(kDefaultTopology, "<built-in topology>", registry());
  return load_topology(path, registry());
}

uint32_t switch_memory_mb(const Topology& topo) {
  constexpr uint32_t kPerSwitchMb = 80;
  uint32_t n = 0;
  for (const NodeSpec& node : topo.nodes) n += node.kind->name() == "switch" ? 1 : 0;
  return n * kPerSwitchMb;
}

}  // namespace rocemu::app
