// The switch's QoS configuration, in NVUE's words: trust and the
// DSCP/PCP -> switch-priority map, switch-priority -> traffic-class,
// the egress scheduler (ETS), congestion control (ECN/WRED) per traffic
// class, PFC, the PFC watchdog, packet trimming, the shared buffer and
// the RoCE profile (`qos roce mode lossless|lossy`) that sets all of it in
// one step. Plain values; see switch_config.h for ports and routes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "common/engine/time.h"
#include "switch/ecn.h"
#include "switch/headroom.h"
#include "switch/scheduler.h"

namespace rocemu::sw {

inline constexpr int kNumSwitchPriorities = 8;
inline constexpr int kNumDscp = 64;

enum class Trust : uint8_t { kL2, kL3, kBoth, kPort };
enum class RoceMode : uint8_t { kLossless, kLossy, kLossyMultiTc };
enum class WatchdogAction : uint8_t { kDrop, kForward };

std::string_view trust_name(Trust t);           // "l2", "l3", "both", "port"
std::string_view roce_mode_name(RoceMode m);     // "lossless", "lossy", "lossy-multi-tc"
std::string_view watchdog_action_name(WatchdogAction a);
std::string_view scheduler_mode_name(SchedulerMode m);  // "dwrr", "strict"
std::optional<Trust> parse_trust(std::string_view s);
std::optional<RoceMode> parse_roce_mode(std::string_view s);
std::optional<WatchdogAction> parse_watchdog_action(std::string_view s);
std::optional<SchedulerMode> parse_scheduler_mode(std::string_view s);

// `qos mapping default-global`
struct Mapping {
  Trust trust = Trust::kL2;
  std::array<uint8_t, kNumDscp> dscp_to_sp{};
  std::array<uint8_t, kNumSwitchPriorities> pcp_to_sp{};
  uint8_t port_default_sp = 0;
};

// `qos congestion-control default-global traffic-class N`
struct CongestionControl {
  bool ecn = false;  // mark ECT packets (the "enabled-tc" list)
  bool red = false;  // also drop non-ECT packets between min and max
  WredProfile wred;
};

// `qos pfc default-global`
struct PfcConfig {
  uint8_t switch_priorities = 0;  // bit per priority with PFC
  bool tx = true;                 // send PFC when a lossless PG fills
  bool rx = true;                 // honour received PFC
  uint32_t cable_length = 100;    // metres; sizes the headroom
  std::optional<uint64_t> xoff;   // bytes of headroom; computed when unset
  std::optional<uint64_t> xon;    // bytes of hysteresis; computed when unset
  uint16_t pause_quanta = 0xffff; // carried in XOFF frames (refreshed at half)
};

// `qos pfc-watchdog` (timers) and per interface `qos pfc-watchdog` (state)
struct PfcWatchdog {
  bool enable = false;  // default for interfaces that do not say
  Duration polling_interval = ms(100);
  Duration detection_time = ms(200);
  Duration restoration_time = ms(200);
  WatchdogAction action = WatchdogAction::kDrop;
};

// `system forwarding packet-trim`
struct PacketTrim {
  bool enable = false;
  uint32_t size = 256;           // bytes of frame kept
  uint8_t remark_dscp = 11;
  uint8_t switch_priority = 4;   // the trimmed packet's priority (and TC via the map)
  uint8_t eligible_tc = 0x0e;    // egress-eligibility traffic-class 1,2,3
};

// The shared buffer. The lossless `roce-reserved` pools exist in lossless
// mode; everything else shares the `lossy-default` pools. Headroom is per
// port and PG on top of the pools, as on Spectrum.
struct BufferConfig {
  uint64_t size = 16 * 1000 * 1000;  // bytes of shared buffer
  uint32_t roce_pool_percent = 0;    // share of `size` in the roce-reserved pools
  double ingress_lossy_alpha = 8;    // dynamic_th 3
  double ingress_lossless_alpha = 1; // dynamic_th 0
  double egress_lossy_alpha = 8;     // dynamic_th 3 (lossless egress is not limited)
  uint64_t pg_reserved = 0;          // bytes guaranteed per port and PG
  uint64_t queue_reserved = 0;       // bytes guaranteed per port and queue
};

// `qos roce`: which mode was applied, and the priorities the counters
// call RoCE and CNP.
struct RoceConfig {
  bool enable = false;
  RoceMode mode = RoceMode::kLossless;
  uint8_t roce_dscp = 26, roce_sp = 3, roce_pcp = 3;
  uint8_t cnp_dscp = 48, cnp_sp = 6, cnp_pcp = 6;
};

struct QosConfig {
  RoceConfig roce;
  Mapping mapping;
  std::array<uint8_t, kNumSwitchPriorities> sp_to_tc{};  // egress-queue-mapping
  std::array<TcSchedule, kNumTc> scheduler{};           // egress-scheduler
  std::array<CongestionControl, kNumTc> congestion{};   // congestion-control
  PfcConfig pfc;
  PfcWatchdog watchdog;
  PacketTrim trim;
  BufferConfig buffer;
  HeadroomParams headroom;

  // The TC a switch priority goes to, and whether a TC carries a PFC
  // priority (its queue is lossless).
  uint8_t tc_of(uint8_t sp) const { return sp_to_tc[sp & 7]; }
  uint8_t lossless_tcs() const;
  // The priority group of a switch priority: a PFC priority has its own PG
  // (PG n for SP n); lossy priorities share the lowest PG no PFC priority
  // uses.
  uint8_t pg_of(uint8_t sp) const;
  bool pg_lossless(uint8_t pg) const { return (pfc.switch_priorities >> pg) & 1; }
};

// NVUE's non-RoCE `default-global` profile.
QosConfig qos_default_global();
// What `nv set qos roce mode <mode>` applies (buffer size kept from `base`).
QosConfig qos_roce_profile(RoceMode mode, const BufferConfig& base = {});

}  // namespace rocemu::sw
