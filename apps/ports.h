// Ports and links as the user names them on the command line: NODE (its
// port 0), NODE:N, or on a switch NODE:IFNAME (sw1:swp1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/engine/engine.h"

namespace rocemu::app {

struct PortRef {
  Node* node = nullptr;
  uint16_t port = 0;
  std::string label;  // NODE:NAME as the user wrote it (or NODE:N)
};

// The port `spec` names; an unknown node or port is an error naming the
// valid ones.
std::optional<PortRef> resolve_port(Engine& engine, const std::string& spec, std::string& err);
std::string joined(const std::vector<std::string>& v);
// A node's port names: interface names on a switch, else numbers.
std::vector<std::string> port_names(Node& n);

}  // namespace rocemu::app
