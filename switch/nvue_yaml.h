// A switch configuration as the YAML a topology's switch section accepts
// (`nv config show -o yaml`, `nv config save`), and the difference between
// two of them as NVUE prints `nv config diff`: a `- set:` document of what
// the pending revision changes or adds and an `- unset:` one of what it
// removes, each nested as the YAML is.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "switch/switch_config.h"

namespace rocemu::sw {

// Every setting, explicitly: parse_switch_config of the result gives `cfg`
// back (drop-rule counters and gearbox delay, which no file sets, aside).
YAML::Node switch_config_yaml(const SwitchConfig& cfg);
std::string switch_config_text(const SwitchConfig& cfg);

// "" when they are the same.
std::string switch_config_diff(const SwitchConfig& applied, const SwitchConfig& pending);

// Parts of it as text, to tell whether two configurations differ there
// (the structs have no operator==: FaultConfig carries drop-rule state).
std::string faults_text(const FaultConfig& f);
std::string storm_text(const PfcStorm& s);
std::string interface_text(const InterfaceConfig& i, uint16_t index);

}  // namespace rocemu::sw
