#include "switch/switch_fields.h"

#include <charconv>

#include "common/config/config.h"

namespace rocemu::sw {
namespace {

// A size as written in a topology: whole KiB/MiB/GiB where it is one.
std::string size_text(int64_t v) {
  for (const auto& [unit, scale] : {std::pair{"GiB", int64_t(1) << 30}, {"MiB", int64_t(1) << 20}, {"KiB", 1024}})
    if (v >= scale && v % scale == 0) return std::to_string(v / scale) + unit;
  return std::to_string(v);
}

Duration ns_d(int64_t v) { return Duration(v * 1000); }

// Rows: the YAML path, the NVUE words, the range, get / set / unset.
#define ROCEMU_FIELD(yaml, nvue, range, expr, unset_value)                                  \
  SwitchField {                                                                              \
    yaml, nvue, range, [](const SwitchConfig& c) -> int64_t { return int64_t(c.expr); },    \
        [](SwitchConfig& c, int64_t v) { c.expr = decltype(c.expr)(v); },                   \
        [](SwitchConfig& c) { c.expr = decltype(c.expr)(unset_value); }                     \
  }
#define ROCEMU_DURATION_FIELD(yaml, nvue, range, expr, unset_value)                          \
  SwitchField {                                                                              \
    yaml, nvue, range, [](const SwitchConfig& c) -> int64_t { return to_ns(c.expr); },      \
        [](SwitchConfig& c, int64_t v) { c.expr = ns_d(v); },                               \
        [](SwitchConfig& c) { c.expr = unset_value; }                                       \
  }

constexpr FieldRange kPollingRange{FieldKind::kDuration, 1'000'000, 1'000'000'000, ""};
constexpr FieldRange kDetectionRange{FieldKind::kDuration, 1'000'000, 5'000'000'000, ""};
constexpr FieldRange kRestorationRange{FieldKind::kDuration, 1'000'000, 60'000'000'000, ""};
constexpr FieldRange kBufferSizeRange{FieldKind::kSize, 64 * 1024, int64_t(1) << 34, ""};
constexpr FieldRange kReservedRange{FieldKind::kSize, 0, int64_t(1) << 30, ""};
constexpr FieldRange kCellSizeRange{FieldKind::kInt, 1, 4096, "bytes"};
constexpr FieldRange kLosslessMtuRange{FieldKind::kInt, 64, 9216, "bytes"};
constexpr FieldRange kUdpPortRange{FieldKind::kInt, 1, 65535, ""};
constexpr FieldRange kHeadroomBytesRange{FieldKind::kSize, 0, 1 << 20, ""};
constexpr FieldRange kHashSeedRange{FieldKind::kInt, 0, UINT32_MAX, ""};  // NVUE's 0-4294967295

const PfcWatchdog kWatchdog{};
const PacketTrim kTrim{};
const BufferConfig kBuffer{};
const HeadroomParams kHeadroom{};

const SwitchField kFields[] = {
    ROCEMU_FIELD("qos.mapping.port-default-sp", "qos mapping port-default-sp", kSwitchPriorityRange,
                 qos.mapping.port_default_sp, 0),
    ROCEMU_FIELD("qos.pfc.cable-length", "qos pfc cable-length", kCableLengthRange, qos.pfc.cable_length, 100),
    ROCEMU_FIELD("qos.pfc.pause-quanta", "qos pfc pause-quanta", kPauseQuantaRange, qos.pfc.pause_quanta, 0xffff),
    ROCEMU_DURATION_FIELD("qos.pfc-watchdog.polling-interval", "qos pfc-watchdog polling-interval", kPollingRange,
                          qos.watchdog.polling_interval, kWatchdog.polling_interval),
    ROCEMU_DURATION_FIELD("qos.pfc-watchdog.detection-time", "qos pfc-watchdog detection-time", kDetectionRange,
                          qos.watchdog.detection_time, kWatchdog.detection_time),
    ROCEMU_DURATION_FIELD("qos.pfc-watchdog.restoration-time", "qos pfc-watchdog restoration-time",
                          kRestorationRange, qos.watchdog.restoration_time, kWatchdog.restoration_time),
    ROCEMU_FIELD("qos.packet-trim.size", "system forwarding packet-trim size", kTrimSizeRange, qos.trim.size,
                 kTrim.size),
    ROCEMU_FIELD("qos.packet-trim.remark-dscp", "system forwarding packet-trim remark dscp", kDscpRange,
                 qos.trim.remark_dscp, kTrim.remark_dscp),
    ROCEMU_FIELD("qos.packet-trim.switch-priority", "system forwarding packet-trim switch-priority",
                 kSwitchPriorityRange, qos.trim.switch_priority, kTrim.switch_priority),
    ROCEMU_FIELD("qos.buffer.size", "qos buffer size", kBufferSizeRange, qos.buffer.size, kBuffer.size),
    SwitchField{"qos.buffer.roce-pool-percent", "qos buffer roce-pool-percent", kRocePoolPercentRange,
                [](const SwitchConfig& c) -> int64_t { return c.qos.buffer.roce_pool_percent; },
                [](SwitchConfig& c, int64_t v) { c.qos.buffer.roce_pool_percent = uint32_t(v); },
                // the profile's: the RoCE pools exist in lossless mode
                [](SwitchConfig& c) {
                  c.qos.buffer.roce_pool_percent = c.qos.roce.enable && c.qos.roce.mode == RoceMode::kLossless ? 50 : 0;
                }},
    ROCEMU_FIELD("qos.buffer.pg-reserved", "qos buffer pg-reserved", kReservedRange, qos.buffer.pg_reserved, 0),
    ROCEMU_FIELD("qos.buffer.queue-reserved", "qos buffer queue-reserved", kReservedRange, qos.buffer.queue_reserved,
                 0),
    ROCEMU_FIELD("nve.vxlan.port", "nve vxlan port", kUdpPortRange, vxlan.port, kVxlanPort),
    ROCEMU_FIELD("nve.vxlan.encapsulation.dscp.value", "nve vxlan encapsulation dscp value", kDscpRange,
                 vxlan.dscp_value, 0),
    ROCEMU_FIELD("forwarding.hash-seed", "system forwarding hash-seed", kHashSeedRange, ecmp.hash_seed,
                 EcmpConfig{}.hash_seed),
    ROCEMU_FIELD("bridge.domain.br_default.ageing", "bridge domain br_default ageing", kAgeingRange, bridge.ageing,
                 1800),
    ROCEMU_FIELD("qos.headroom.cell-size", "", kCellSizeRange, qos.headroom.cell_size, kHeadroom.cell_size),
    ROCEMU_FIELD("qos.headroom.pipeline-latency", "", kHeadroomBytesRange, qos.headroom.pipeline_latency,
                 kHeadroom.pipeline_latency),
    ROCEMU_FIELD("qos.headroom.mac-phy-delay", "", kHeadroomBytesRange, qos.headroom.mac_phy_delay,
                 kHeadroom.mac_phy_delay),
    ROCEMU_FIELD("qos.headroom.lossless-mtu", "", kLosslessMtuRange, qos.headroom.lossless_mtu,
                 kHeadroom.lossless_mtu),
    ROCEMU_FIELD("qos.headroom.small-packet-percentage", "", kPercentRange, qos.headroom.small_packet_percentage,
                 kHeadroom.small_packet_percentage),
};

#undef ROCEMU_FIELD
#undef ROCEMU_DURATION_FIELD

}  // namespace

std::string FieldRange::str() const {
  switch (kind) {
    case FieldKind::kSize:
      return size_text(lo) + ".." + size_text(hi);
    case FieldKind::kDuration:
      return config::format_duration(ns_d(lo)) + ".." + config::format_duration(ns_d(hi));
    case FieldKind::kInt:
      break;
  }
  return std::to_string(lo) + ".." + std::to_string(hi) + (unit.empty() ? "" : " " + std::string(unit));
}

std::string_view FieldRange::expected() const {
  switch (kind) {
    case FieldKind::kSize:
      return "a size (e.g. 150000, 150KB, 146KiB)";
    case FieldKind::kDuration:
      return "a duration (e.g. 200ms)";
    case FieldKind::kInt:
      break;
  }
  return "an integer";
}

std::optional<int64_t> FieldRange::parse(std::string_view text) const {
  switch (kind) {
    case FieldKind::kSize: {
      const auto v = config::parse_size(text);
      if (!v || *v > uint64_t(INT64_MAX)) return std::nullopt;
      return int64_t(*v);
    }
    case FieldKind::kDuration: {
      const auto v = config::parse_duration(text);
      if (!v) return std::nullopt;
      return to_ns(*v);
    }
    case FieldKind::kInt:
      break;
  }
  int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string FieldRange::format(int64_t v) const {
  switch (kind) {
    case FieldKind::kSize:
      return std::to_string(v);
    case FieldKind::kDuration:
      return config::format_duration(ns_d(v));
    case FieldKind::kInt:
      break;
  }
  return std::to_string(v);
}

Result<int64_t> FieldRange::read(std::string_view text) const {
  const auto v = parse(text);
  if (!v) return Status::error("'" + std::string(text) + "' is not " + std::string(expected()));
  if (!contains(*v)) return Status::error(refusal(text));
  return *v;
}

Status FieldRange::check(int64_t v, std::string_view field) const {
  if (contains(v)) return {};
  return Status::error(std::string(field) + ": " + refusal(format(v)));
}

std::span<const SwitchField> switch_fields() { return kFields; }

}  // namespace rocemu::sw
