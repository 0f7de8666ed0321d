// The `cc` key of a NIC in a topology file: the congestion-control
// algorithm, a profile, and knobs by their mlx5 names.
//
//   cc: dcqcn                 # or none; the default is dcqcn with mlx5's values
//   cc:
//     algorithm: dcqcn
//     profile: paper          # mlx5 (default), paper, hpcc
//     rpg_ai_rate: 40         # Mbit/s, or "40Mbps"
//     rpg_time_reset: 55      # us, or "55us"
//     rpg_byte_reset: 10MB    # a size, or an integer in mlx5's 64-byte units
//     roce_rp_enable: [3]     # priorities whose QPs react to CNPs (default all)
//     roce_np_enable: [3]     # priorities that send CNPs (default all)
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/config/config.h"
#include "nic/cc/cc.h"

namespace rocemu::nic::cc {

CcConfig parse_cc(const YAML::Node& n, std::string_view field, config::Context& ctx);

// The knob names `cc` takes (for help texts and docs).
std::vector<std::string> knob_names();

// Sets the knobs of map `knobs` (mlx5 names, values as the topology takes
// them) on `p`; on any error (recorded in `ctx`, fields under `field`) `p`
// is left as it was. `algorithm` and `profile` are not knobs.
void set_knobs(const YAML::Node& knobs, std::string_view field, config::Context& ctx, DcqcnParams& p);

// Every knob of `p` with its value in mlx5's units (Mbit/s, us, 64-byte
// units, 0/1, priorities), in the order of the table.
std::vector<std::pair<std::string, std::string>> show_knobs(const DcqcnParams& p);

}  // namespace rocemu::nic::cc
