// The "switch" node kind for topology files, and the YAML reader of a
// switch's configuration (schema in switch/README.md).
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string_view>

#include "common/config/config.h"
#include "common/config/topology.h"
#include "switch/switch_config.h"

namespace rocemu::sw {

// Reads a switch's mapping (the node entry of a topology file). Records
// every error in `ctx` and returns nullopt if there was any.
std::optional<SwitchConfig> parse_switch_config(const YAML::Node& n, std::string_view field, config::Context& ctx);
// Reads an interface's `pfc-storm` mapping (also used by scenario fault schedules).
PfcStorm parse_pfc_storm(const YAML::Node& n, std::string_view field, config::Context& ctx);

}  // namespace rocemu::sw

namespace rocemu {

// Registers the "switch" kind.
void register_switch_kinds(NodeKindRegistry& reg);

}  // namespace rocemu
