// DCQCN (Zhu et al., SIGCOMM'15) as ConnectX runs it, one Flow per QP.
//
// Reaction point. The first CNP sets alpha to initial_alpha_value and
// starts the clocks (t0). Alpha is updated every dce_tcp_rtt on the grid
// t0 + k * dce_tcp_rtt: alpha <- (1 - g) alpha, plus g if a CNP arrived in
// the period (computed when next needed, exactly as a per-period timer
// would). A CNP cuts the rate at once if the last cut is at least
// rate_reduce_monitor_period ago, else at last cut + that period:
//   target <- current            if clamp_tgt_rate, or the byte counter
//                                has counted, or (clamp_tgt_rate_ati and)
//                                the timer has counted since the last cut
//   current <- max(rpg_min_rate, current - min(current * alpha * 1024 /
//              2^rpg_gd, current * (100 - rpg_min_dec_fac) / 100))
// and resets the increase stages. Increase events come from a timer every
// rpg_time_reset (T++) and from every rpg_byte_reset bytes sent (BC++):
//   min(T, BC) > F : target += rpg_hai_rate      (hyper increase)
//   max(T, BC) >= F: target += rpg_ai_rate       (additive increase)
//   otherwise      : target unchanged            (fast recovery)
//   target <- min(target, max rate); current <- (current + target) / 2
// with T alone standing for both when there is no byte counter. The stage
// is evaluated before it is incremented. A current rate within 1 bit/s of
// the max is the max (halving the gap never quite closes it); at the max
// the timer stops until the next cut. rate_to_set_on_first_cnp > 0 sets
// both rates on the first CNP instead of cutting.
//
// Notification point: a CE-marked packet asks for a CNP, granted at most
// once per min_time_between_cnps per QP, on the priorities enabled.
#pragma once

#include "nic/cc/cc.h"

namespace rocemu::nic::cc {

class DcqcnFlow final : public Flow {
 public:
  DcqcnFlow(const DcqcnParams& p, const FlowInit& init);

  void on_sent(uint32_t bytes, Time now) override;
  bool on_cnp(Time now) override;
  bool on_ce(Time now) override;
  bool np_enabled() const override { return (p_.np_enable & prio_bit_) != 0; }
  void report(CounterSink& sink, std::string_view scope, Time now) const override;

  // ---- state, for tests and counters ----
  double target_rate_bps() const { return target_bps_; }
  double max_rate_bps() const { return max_bps_; }
  // Alpha as of `now`, in [0, 1] (the periods gone by applied).
  double alpha(Time now) const;
  bool active() const { return active_; }  // a CNP has been seen
  uint32_t timer_stage() const { return t_stage_; }
  uint32_t byte_stage() const { return bc_stage_; }
  uint64_t byte_count() const { return byte_count_; }
  uint64_t cnps() const { return cnps_; }
  uint64_t cuts() const { return cuts_; }
  uint64_t increases() const { return increases_; }
  uint64_t cnps_requested() const { return ce_seen_; }
  uint64_t cnps_granted() const { return cnps_granted_; }
  bool cut_pending() const { return cut_timer_.armed(); }
  bool increase_timer_armed() const { return inc_timer_.armed(); }
  Time increase_timer_expiry() const { return inc_timer_.expiry(); }

 private:
  int64_t alpha_epoch(Time now) const;  // alpha periods since t0 at `now`
  void catch_up_alpha(Time now);
  void cut(Time now);
  void increase(Time now);
  void on_cut_timer(Time now);
  void on_increase_timer(Time now);

  const DcqcnParams& p_;
  TimerWheel* timers_;
  uint8_t prio_bit_;  // this QP's priority in roce_rp_enable / roce_np_enable
  double max_bps_;
  double target_bps_;
  // alpha on its grid
  bool active_ = false;
  Time t0_{0};
  int64_t alpha_epoch_ = 0;  // periods since t0 applied so far
  double alpha_ = 0;
  bool alpha_cnp_ = false;   // a CNP arrived in the current alpha period
  // cuts
  bool cut_wanted_ = false;
  bool any_cut_ = false;
  Time last_cut_{0};
  Timer cut_timer_;
  // increases
  uint32_t t_stage_ = 0, bc_stage_ = 0;
  uint64_t byte_count_ = 0;
  Timer inc_timer_;
  // notification point
  bool any_cnp_sent_ = false;
  Time last_cnp_sent_{0};
  // counters
  uint64_t cnps_ = 0, cuts_ = 0, increases_ = 0, ce_seen_ = 0, cnps_granted_ = 0;
};

class Dcqcn final : public Algorithm {
 public:
  explicit Dcqcn(const DcqcnParams& p) : p_(p) {}
  std::string_view name() const override { return "dcqcn"; }
  std::unique_ptr<Flow> open(const FlowInit& init) const override {
    return std::make_unique<DcqcnFlow>(p_, init);
  }
  const DcqcnParams& params() const { return p_; }
  void configure(const CcConfig& cfg) override { p_ = cfg.dcqcn; }

 private:
  DcqcnParams p_;  // the flows refer to it
};

}  // namespace rocemu::nic::cc
