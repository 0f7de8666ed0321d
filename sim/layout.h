// What a scenario's fabric is made of, as the summary names it: the NICs,
// the switches and their interfaces, and every end of an internal link.
// It comes from the topology alone, so a scenario's metric paths can be
// checked before anything is built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/config/topology.h"

namespace rocemu::sim {

struct Layout {
  struct SwitchPorts {
    std::string name;
    std::vector<std::string> interfaces;  // by port index: "swp1", ...
    std::vector<std::string> ecmp_ports;  // interfaces that are next hops of an ECMP group, by port index
    bool vtep = false;                    // a VXLAN VTEP (nve vxlan source address set)
  };
  struct PortInfo {
    std::string name;  // "node:port", as the engine names link ends
    uint64_t rate_bps = 0;
  };
  std::vector<std::string> nics;
  std::vector<SwitchPorts> switches;
  std::vector<PortInfo> ports;  // both ends of every internal link, in file order

  const PortInfo* find_port(std::string_view name) const;
};

Layout layout_of(const Topology& topo);

}  // namespace rocemu::sim
