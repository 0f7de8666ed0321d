// One fabric, several engines: the parts: section of a topology file says
// which engine runs which nodes, so one file describes a fabric spread over
// machines. A link whose ends are in two parts is cut: each part reaches
// the other through an external port (a DPDK ethdev) on the device its
// external: entry names.
//
//   parts:
//     rack1:
//       nodes: [h1, sw1]
//       external:
//         trunk: {interface: veth-a}     # net_af_packet on a Linux interface
//     rack2:
//       nodes: [h2, sw2]
//       external:
//         trunk: {device: "0000:3b:00.0"}  # a PCI NIC bound to DPDK
//   links:
//     - {name: trunk, a: "sw1:1", b: "sw2:1", rate: 10G, mtu: 4200}
//
// `rocemu up FILE --part rack1` builds topology_part(FILE, "rack1"): rack1's
// nodes, the links inside it, the ports: of its nodes, and an external port
// on the cut link's local end, paced at the link's rate with the link's MTU.
// Without --part one engine runs every part and a cut link is the internal
// link it describes (delay included): the one-engine baseline.
#pragma once

#include <string>
#include <string_view>

#include "common/config/topology.h"

namespace rocemu {

// Reads root["parts"] into topo.parts and each node's part, and checks it
// against the nodes and links already read; errors go to `ctx`.
void parse_parts(const YAML::Node& root, Topology& topo, config::Context& ctx);

// The fabric one engine runs for `part` of `whole`.
Result<Topology> topology_part(const Topology& whole, std::string_view part);

// The DPDK device that `interface: NAME` stands for: net_af_packet on that
// Linux interface, its frames big enough for `mtu`, 4096 of them a ring.
std::string af_packet_device(std::string_view vdev_name, std::string_view interface, uint32_t mtu);

// The largest MTU an external port carries.
inline constexpr uint32_t kMaxExternalMtu = 4200;

}  // namespace rocemu
