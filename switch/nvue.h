// NVUE-style commands on a switch configuration, for the CLI
// (`rocemu nv set|unset ...`) and for scripts: the words after `nv`,
// e.g. {"set","qos","roce","mode","lossy"} or {"unset","qos","roce"}.
// The result is a new configuration, not yet validated or applied;
// Switch::nv validates and applies it in one step.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "switch/switch_config.h"

namespace rocemu::sw {

// Applies one `set` or `unset` command to `cfg`. On error `cfg` may be
// partly changed; callers work on a copy. The message says which word is
// wrong and what was expected.
Status nv_edit(SwitchConfig& cfg, const std::vector<std::string>& words);

// Parses "0,3", "1-3", "all" into a bit mask of values 0..7.
std::optional<uint8_t> parse_index_list(std::string_view s);

}  // namespace rocemu::sw
