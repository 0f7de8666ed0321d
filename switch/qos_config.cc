#include "switch/qos_config.h"

namespace rocemu::sw {
namespace {

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view s) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}
template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, name] : table)
    if (v == e) return name;
  return "?";
}

constexpr std::array<std::pair<Trust, std::string_view>, 4> kTrust = {
    {{Trust::kL2, "l2"}, {Trust::kL3, "l3"}, {Trust::kBoth, "both"}, {Trust::kPort, "port"}}};
constexpr std::array<std::pair<RoceMode, std::string_view>, 3> kRoceMode = {
    {{RoceMode::kLossless, "lossless"}, {RoceMode::kLossy, "lossy"}, {RoceMode::kLossyMultiTc, "lossy-multi-tc"}}};
constexpr std::array<std::pair<WatchdogAction, std::string_view>, 2> kAction = {
    {{WatchdogAction::kDrop, "drop"}, {WatchdogAction::kForward, "forward"}}};
constexpr std::array<std::pair<SchedulerMode, std::string_view>, 2> kSched = {
    {{SchedulerMode::kDwrr, "dwrr"}, {SchedulerMode::kStrict, "strict"}}};

}  // namespace

std::string_view trust_name(Trust t) { return name_of(kTrust, t); }
std::string_view roce_mode_name(RoceMode m) { return name_of(kRoceMode, m); }
std::string_view watchdog_action_name(WatchdogAction a) { return name_of(kAction, a); }
std::string_view scheduler_mode_name(SchedulerMode m) { return name_of(kSched, m); }
std::optional<Trust> parse_trust(std::string_view s) { return lookup(kTrust, s); }
std::optional<RoceMode> parse_roce_mode(std::string_view s) { return lookup(kRoceMode, s); }
std::optional<WatchdogAction> parse_watchdog_action(std::string_view s) { return lookup(kAction, s); }
std::optional<SchedulerMode> parse_scheduler_mode(std::string_view s) { return lookup(kSched, s); }

uint8_t QosConfig::lossless_tcs() const {
  uint8_t m = 0;
  for (int sp = 0; sp < kNumSwitchPriorities; sp++)
    if ((pfc.switch_priorities >> sp) & 1) m |= uint8_t(1u << sp_to_tc[sp]);
  return m;
}

uint8_t QosConfig::pg_of(uint8_t sp) const {
  sp &= 7;
  if ((pfc.switch_priorities >> sp) & 1) return sp;
  const uint8_t free = uint8_t(~pfc.switch_priorities);
  return free == 0 ? 0 : uint8_t(__builtin_ctz(free));
}

QosConfig qos_default_global() {
  QosConfig q;
  q.mapping.trust = Trust::kL2;
  for (int d = 0; d < kNumDscp; d++) q.mapping.dscp_to_sp[d] = uint8_t(d >> 3);
  for (int p = 0; p < kNumSwitchPriorities; p++) {
    q.mapping.pcp_to_sp[p] = uint8_t(p);
    q.sp_to_tc[p] = uint8_t(p);
  }
  static constexpr uint32_t kBw[kNumTc] = {12, 13, 12, 13, 12, 13, 12, 13};
  for (int tc = 0; tc < kNumTc; tc++) q.scheduler[tc] = {SchedulerMode::kDwrr, kBw[tc]};
  // ECN on TC0 at 150 000..1 500 000 bytes, RED off.
  q.congestion[0].ecn = true;
  q.congestion[0].wred = {150000, 1500000, 100};
  return q;
}

QosConfig qos_roce_profile(RoceMode mode, const BufferConfig& base) {
  QosConfig q = qos_default_global();
  q.buffer.size = base.size;
  q.roce.enable = true;
  q.roce.mode = mode;
  q.mapping.trust = Trust::kBoth;  // shown as "pcp,dscp"
  q.congestion = {};
  if (mode == RoceMode::kLossyMultiTc) {
    // SP n -> TC n; DWRR 4/8/18/22/22/22/4/0; ECN on TCs 1-3 at 163..234 KB,
    // probability 5; trimming on.
    for (int d = 0; d < kNumDscp; d++) q.mapping.dscp_to_sp[d] = uint8_t(d >> 3);
    q.mapping.dscp_to_sp[q.roce.roce_dscp] = q.roce.roce_sp;
    q.mapping.dscp_to_sp[q.roce.cnp_dscp] = q.roce.cnp_sp;
    static constexpr uint32_t kBw[kNumTc] = {4, 8, 18, 22, 22, 22, 4, 0};
    for (int tc = 0; tc < kNumTc; tc++) q.scheduler[tc] = {SchedulerMode::kDwrr, kBw[tc]};
    for (int tc = 1; tc <= 3; tc++) {
      q.congestion[tc].ecn = true;
      q.congestion[tc].wred = {163 * 1024, 234 * 1024, 5};
    }
    q.trim.enable = true;
    return q;
  }
  q.mapping.dscp_to_sp.fill(0);
  q.mapping.dscp_to_sp[q.roce.roce_dscp] = q.roce.roce_sp;
  q.mapping.dscp_to_sp[q.roce.cnp_dscp] = q.roce.cnp_sp;
  q.mapping.pcp_to_sp.fill(0);
  q.mapping.pcp_to_sp[q.roce.roce_pcp] = q.roce.roce_sp;
  q.mapping.pcp_to_sp[q.roce.cnp_pcp] = q.roce.cnp_sp;
  q.sp_to_tc.fill(0);
  q.sp_to_tc[q.roce.roce_sp] = 3;
  q.sp_to_tc[q.roce.cnp_sp] = 6;
  for (auto& s : q.scheduler) s = {SchedulerMode::kDwrr, 0};
  q.scheduler[0] = {SchedulerMode::kDwrr, 50};
  q.scheduler[3] = {SchedulerMode::kDwrr, 50};
  q.scheduler[6] = {SchedulerMode::kStrict, 0};
  for (int tc : {0, 3}) {
    q.congestion[tc].ecn = true;
    q.congestion[tc].wred = {150000, 1500000, 100};
  }
  if (mode == RoceMode::kLossless) {
    q.pfc.switch_priorities = uint8_t(1u << q.roce.roce_sp);
    q.pfc.cable_length = 100;
    q.buffer.roce_pool_percent = 50;
  }
  return q;
}

}  // namespace rocemu::sw
