// The switch's bounded settings, once: name (YAML path and NVUE words),
// member, range, parser and unit. The YAML reader (switch_kind.cc), the
// NVUE editor (nvue.cc) and SwitchConfig::validate all go through this
// table, so a value one of them takes the others take too, and a value
// out of range is refused by each with the same words:
//
//   t.yaml:7: nodes.sw1.qos.pfc.cable-length: '100001' is out of range (0..100000 m)
//   nv set qos pfc cable-length: '100001' is out of range (0..100000 m)
//   qos.pfc.cable-length: '100001' is out of range (0..100000 m)      (validate)
//
// Settings indexed by a priority, a DSCP or a traffic class use the
// named ranges below (kSwitchPriorityRange, ...) in all three places.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/config/config.h"
#include "common/status.h"
#include "switch/switch_config.h"

namespace rocemu::sw {

// How a value is written: an integer, a size ("150KB"), a duration ("200ms").
enum class FieldKind : uint8_t { kInt, kSize, kDuration };

struct FieldRange {
  FieldKind kind;
  int64_t lo, hi;         // a duration in ns
  std::string_view unit;  // for integers: "bytes", "m", ... ("" when none)

  bool contains(int64_t v) const { return v >= lo && v <= hi; }
  // "68..9216 bytes", "64KiB..16GiB", "1ms..1s"
  std::string str() const;
  // What a value must look like: "an integer", "a size (e.g. 150000, 150KB)"...
  std::string_view expected() const;
  // The value of `text`, or nullopt if it is not of this kind.
  std::optional<int64_t> parse(std::string_view text) const;
  // `v` as a user writes it (for messages about a value no text came with).
  std::string format(int64_t v) const;
  // The words every front end uses for a value out of range.
  std::string refusal(std::string_view given) const { return "'" + std::string(given) + "' is out of range (" + str() + ")"; }
  // Parses and checks `text`: the value, or the message (not a number of
  // this kind, or out of range).
  Result<int64_t> read(std::string_view text) const;
  // validate(): ok, or "FIELD: '<v>' is out of range (...)".
  Status check(int64_t v, std::string_view field) const;
};

inline constexpr FieldRange kMtuRange{FieldKind::kInt, config::kMinMtu, config::kMaxMtu, "bytes"};
inline constexpr FieldRange kCableLengthRange{FieldKind::kInt, 0, 100000, "m"};
inline constexpr FieldRange kPauseQuantaRange{FieldKind::kInt, 2, 0xffff, "quanta"};  // refreshed at half: at least 2
inline constexpr FieldRange kStormQuantaRange{FieldKind::kInt, 1, 0xffff, "quanta"};
inline constexpr FieldRange kTrimSizeRange{FieldKind::kInt, 64, 9216, "bytes"};
inline constexpr FieldRange kRocePoolPercentRange{FieldKind::kInt, 0, 90, "%"};
inline constexpr FieldRange kPercentRange{FieldKind::kInt, 0, 100, "%"};
inline constexpr FieldRange kSwitchPriorityRange{FieldKind::kInt, 0, 7, ""};
inline constexpr FieldRange kTrafficClassRange{FieldKind::kInt, 0, 7, ""};
inline constexpr FieldRange kDscpRange{FieldKind::kInt, 0, 63, ""};
inline constexpr FieldRange kPcpRange{FieldKind::kInt, 0, 7, ""};
inline constexpr FieldRange kVniRange{FieldKind::kInt, 1, kMaxVni, ""};
inline constexpr FieldRange kVlanRange{FieldKind::kInt, 1, kMaxVlan, ""};
inline constexpr FieldRange kAgeingRange{FieldKind::kInt, 0, 1'000'000, "s"};

// One global setting: where it is in a topology's switch section and in
// NVUE, how it is read and bounded, and the member it sets.
struct SwitchField {
  std::string_view yaml;  // "qos.pfc.cable-length": the path under the switch node
  std::string_view nvue;  // "qos pfc cable-length": the words after set/unset ("" if NVUE has none)
  FieldRange range;
  int64_t (*get)(const SwitchConfig&);
  void (*set)(SwitchConfig&, int64_t);
  void (*unset)(SwitchConfig&);  // what `nv unset` restores
};

std::span<const SwitchField> switch_fields();

// An interface's optional integer settings, by row: the YAML key under
// interfaces.swpN, the NVUE words after `interface swpN`, the member.
struct InterfaceIntField {
  std::string_view yaml;
  std::string_view nvue;  // space-separated words
  std::optional<uint32_t> InterfaceConfig::*member;
  FieldRange range;
};

inline constexpr InterfaceIntField kInterfaceIntFields[] = {
    {"mtu", "link mtu", &InterfaceConfig::mtu, kMtuRange},
    {"cable-length", "cable-length", &InterfaceConfig::cable_length, kCableLengthRange},
};

}  // namespace rocemu::sw
