// Ports and links as the user names them (apps/ports.h).
#include "apps/ports.h"

#include "switch/switch.h"

namespace rocemu::app {

std::vector<std::string> port_names(Node& n) {
  std::vector<std::string> names;
  const auto* sw = dynamic_cast<const sw::Switch*>(&n);
  for (uint16_t i = 0; i < n.num_ports(); i++)
    names.push_back(sw != nullptr && i < sw->config().interfaces.size() ? sw->config().interfaces[i].name
                                                                         : std::to_string(i));
  return names;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::optional<PortRef> resolve_port(Engine& engine, const std::string& spec, std::string& err) {
  const auto colon = spec.find(':');
  const std::string node = spec.substr(0, colon);
  Node* n = engine.find_node(node);
  if (n == nullptr || n->kind() == "host-agent") {
    std::vector<std::string> nodes;
    for (const auto& x : engine.nodes())
      if (x->kind() != "host-agent") nodes.push_back(x->name());
    err = "no node named '" + node + "' (nodes: " + joined(nodes) + ")";
    return std::nullopt;
  }
  if (colon == std::string::npos) return PortRef{n, 0, node + ":" + port_names(*n).front()};
  const std::string want = spec.substr(colon + 1);
  const std::vector<std::string> names = port_names(*n);
  for (uint16_t i = 0; i < names.size(); i++)
    if (want == names[i] || want == std::to_string(i)) return PortRef{n, i, node + ":" + names[i]};
  err = "no port '" + want + "' on " + node + " (ports: " + joined(names) + ")";
  return std::nullopt;
}

}  // namespace rocemu::app
