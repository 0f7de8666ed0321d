// The switch's bounded settings, once: name, member, range and unit. The
// YAML reader (switch_kind.cc), the NVUE editor (nvue.cc) and
// SwitchConfig::validate read their ranges from here, so a value one of
// them takes the others take too. (A first part of the one table of
// fields: the settings whose ranges were restated in those three places.)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "switch/switch_config.h"

namespace rocemu::sw {

struct IntRange {
  int64_t lo, hi;
  std::string_view unit;  // "" when the number has none
  bool contains(int64_t v) const { return v >= lo && v <= hi; }
  // "68..9216 bytes"
  std::string str() const {
    return std::to_string(lo) + ".." + std::to_string(hi) + (unit.empty() ? "" : " " + std::string(unit));
  }
  Status check(int64_t v, const std::string& field) const {
    if (contains(v)) return {};
    return Status::error(field + ": must be " + str());
  }
};

inline constexpr IntRange kMtuRange{68, 9216, "bytes"};
inline constexpr IntRange kCableLengthRange{0, 100000, "m"};
inline constexpr IntRange kPauseQuantaRange{2, 0xffff, "quanta"};  // refreshed at half: at least 2
inline constexpr IntRange kTrimSizeRange{64, 9216, "bytes"};
inline constexpr IntRange kRocePoolPercentRange{0, 90, "%"};

// An interface's optional integer settings, by row: the YAML key under
// interfaces.swpN, the NVUE words after `interface swpN`, the member.
struct InterfaceIntField {
  std::string_view yaml;
  std::string_view nvue;  // space-separated words
  std::optional<uint32_t> InterfaceConfig::*member;
  IntRange range;
  std::string_view what;  // for messages: "an MTU"
};

inline constexpr InterfaceIntField kInterfaceIntFields[] = {
    {"mtu", "link mtu", &InterfaceConfig::mtu, kMtuRange, "an MTU"},
    {"cable-length", "cable-length", &InterfaceConfig::cable_length, kCableLengthRange, "a cable length"},
};

}  // namespace rocemu::sw
