// DCQCN's knobs, named and defaulted as mlx5 names them
// (/sys/class/net/<if>/ecn/roce_rp|roce_np/, mlxconfig), held in SI units.
// shared/reference/dcqcn-transport.md section 2 has the sources.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/engine/time.h"

namespace rocemu::nic::cc {

struct DcqcnParams {
  // ---- reaction point (sender) ----
  Duration rpg_time_reset = us(300);      // rate-increase timer period
  uint64_t rpg_byte_reset = 32767 * 64;   // bytes between byte-counter increases; 0: no byte counter
  uint32_t rpg_threshold = 1;             // F: fast-recovery stages before additive increase
  double rpg_max_rate_bps = 0;            // 0: the link rate
  double rpg_ai_rate_bps = 5e6;           // additive increase step of the target rate
  double rpg_hai_rate_bps = 50e6;         // hyper increase step
  uint32_t rpg_gd = 11;                   // cut = rate * alpha * 1024 / 2^rpg_gd (11: alpha / 2)
  uint32_t rpg_min_dec_fac = 50;          // %: one cut leaves at least this share of the rate
  double rpg_min_rate_bps = 1e6;          // floor of the current rate
  double rate_to_set_on_first_cnp_bps = 0;  // 0: the first CNP cuts as any other does
  uint32_t dce_tcp_g = 1019;              // alpha <- alpha * g/1024 (+ (1024 - g)/1024 after a CNP)
  Duration dce_tcp_rtt = us(1);           // alpha update period
  uint32_t initial_alpha_value = 1023;    // alpha at the first CNP, on a 1024 scale
  Duration rate_reduce_monitor_period = us(4);  // minimum time between two cuts
  bool clamp_tgt_rate = false;            // target <- current rate on every cut
  bool clamp_tgt_rate_ati = true;         // ... also once an increase came from the timer
  uint8_t rp_enable = 0xff;               // priorities whose QPs react (roce_rp/enable/<prio>)

  // ---- notification point (receiver) ----
  Duration min_time_between_cnps = us(2);  // per QP
  uint8_t np_enable = 0xff;                // priorities that send CNPs (roce_np/enable/<prio>)
  // (cnp_dscp and cnp_802p_prio are the NIC's: NicConfig)

  // alpha gain g as a fraction: (1024 - dce_tcp_g) / 1024.
  double gain() const { return double(1024 - dce_tcp_g) / 1024.0; }
  // Fraction of the rate one cut removes per unit of alpha.
  double cut_factor() const;

  // ConnectX defaults (mlxconfig q on CX-5 Ex FW 16.27).
  static DcqcnParams mlx5();
  // SIGCOMM'15: g = 1/256, 55 us timers, 10 MB byte counter, F = 5,
  // 40 Mbit/s AI, CNPs at most every 50 us.
  static DcqcnParams paper();
  // HPCC's ns-3 `dcqcn` (run.py at 100 Gbit/s): alpha every 1 us, cuts at
  // most every 4 us, 300 us timer, g = 1/256, AI 20 Mbit/s, HAI 200 Mbit/s,
  // minimum 1 Gbit/s, F = 1, no byte counter, a CNP for every CE packet.
  static DcqcnParams hpcc();
  // By name: "mlx5", "paper", "hpcc"; false if unknown.
  static bool profile(std::string_view name, DcqcnParams& out);
};

}  // namespace rocemu::nic::cc
