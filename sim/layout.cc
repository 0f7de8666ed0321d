#include "sim/layout.h"

#include <any>

#include "switch/switch_config.h"

namespace rocemu::sim {

const Layout::PortInfo* Layout::find_port(std::string_view name) const {
  for (const PortInfo& p : ports)
    if (p.name == name) return &p;
  return nullptr;
}

Layout layout_of(const Topology& topo) {
  Layout l;
  for (const NodeSpec& n : topo.nodes) {
    const std::string_view kind = n.kind->name();
    if (kind == "nic") l.nics.push_back(n.name);
    if (kind != "switch") continue;
    Layout::SwitchPorts sp{n.name, {}};
    const auto& cfg = std::any_cast<const sw::SwitchConfig&>(n.config);
    sp.vtep = cfg.vxlan.enabled();
    for (const sw::InterfaceConfig& f : cfg.interfaces) sp.interfaces.push_back(f.name);
    std::vector<bool> ecmp(cfg.interfaces.size(), false);
    for (const sw::Route& r : cfg.routes)
      for (const sw::Route& o : cfg.routes)
        if (&o != &r && !r.overlay() && o.prefix.same_as(r.prefix)) ecmp[r.port] = true;
    for (size_t i = 0; i < ecmp.size(); i++)
      if (ecmp[i]) sp.ecmp_ports.push_back(cfg.interfaces[i].name);
    l.switches.push_back(std::move(sp));
  }
  for (const LinkSpec& k : topo.links) {
    l.ports.push_back({k.a + ":" + std::to_string(k.a_port), k.params.rate_bps});
    l.ports.push_back({k.b + ":" + std::to_string(k.b_port), k.params.rate_bps});
  }
  return l;
}

}  // namespace rocemu::sim
