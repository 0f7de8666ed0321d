#include "nic/cc/dcqcn.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace rocemu::nic::cc {

// ---------------------------------------------------------------- params ----

double DcqcnParams::cut_factor() const { return std::ldexp(1024.0, -int(rpg_gd)); }

DcqcnParams DcqcnParams::mlx5() { return DcqcnParams{}; }

DcqcnParams DcqcnParams::paper() {
  DcqcnParams p;
  p.dce_tcp_g = 1020;  // g = 1/256
  p.dce_tcp_rtt = us(55);
  p.rpg_time_reset = us(55);
  p.rpg_byte_reset = 10'000'000;
  p.rpg_threshold = 5;
  p.rpg_ai_rate_bps = 40e6;
  p.rpg_hai_rate_bps = 200e6;  // not in the paper; ns3-rdma's sample value
  p.rate_reduce_monitor_period = us(50);
  p.min_time_between_cnps = us(50);
  p.initial_alpha_value = 1024;
  p.clamp_tgt_rate = false;
  p.clamp_tgt_rate_ati = true;
  return p;
}

DcqcnParams DcqcnParams::hpcc() {
  DcqcnParams p;
  p.dce_tcp_g = 1020;  // g = 1/256
  p.dce_tcp_rtt = us(1);
  p.rate_reduce_monitor_period = us(4);
  p.rpg_time_reset = us(300);
  p.rpg_byte_reset = 0;
  p.rpg_threshold = 1;
  p.rpg_ai_rate_bps = 20e6;
  p.rpg_hai_rate_bps = 200e6;
  p.rpg_min_rate_bps = 1e9;
  p.rpg_min_dec_fac = 0;
  p.initial_alpha_value = 1024;
  p.min_time_between_cnps = Duration(0);
  p.clamp_tgt_rate = false;
  p.clamp_tgt_rate_ati = true;
  return p;
}

bool DcqcnParams::profile(std::string_view name, DcqcnParams& out) {
  if (name == "mlx5") out = mlx5();
  else if (name == "paper") out = paper();
  else if (name == "hpcc") out = hpcc();
  else return false;
  return true;
}

// ------------------------------------------------------------------ flow ----

DcqcnFlow::DcqcnFlow(const DcqcnParams& p, const FlowInit& init)
    : Flow(init),
      p_(p),
      timers_(init.timers),
      prio_bit_(uint8_t(1u << (init.priority & 7))),
      max_bps_(p.rpg_max_rate_bps > 0 ? std::min(p.rpg_max_rate_bps, init.line_rate_bps) : init.line_rate_bps),
      target_bps_(max_bps_) {
  rate_bps_ = max_bps_;
  cut_timer_.bind<&DcqcnFlow::on_cut_timer>(this);
  inc_timer_.bind<&DcqcnFlow::on_increase_timer>(this);
}

int64_t DcqcnFlow::alpha_epoch(Time now) const {
  return active_ && p_.dce_tcp_rtt > Duration(0) ? (now - t0_) / p_.dce_tcp_rtt : alpha_epoch_;
}

double DcqcnFlow::alpha(Time now) const {
  const int64_t n = alpha_epoch(now) - alpha_epoch_;
  if (n <= 0) return alpha_;
  const double keep = 1.0 - p_.gain();
  // The first period that ended may have seen a CNP; the others did not.
  double a = alpha_cnp_ ? keep * alpha_ + p_.gain() : keep * alpha_;
  if (n > 1) a *= std::pow(keep, double(n - 1));
  return a;
}

void DcqcnFlow::catch_up_alpha(Time now) {
  const int64_t epoch = alpha_epoch(now);
  if (epoch <= alpha_epoch_) return;
  alpha_ = alpha(now);
  alpha_cnp_ = false;
  alpha_epoch_ = epoch;
}

bool DcqcnFlow::on_cnp(Time now) {
  if ((p_.rp_enable & prio_bit_) == 0) return false;
  cnps_++;
  if (!active_) {
    // The first CNP starts the clocks.
    active_ = true;
    t0_ = now;
    alpha_epoch_ = 0;
    alpha_ = double(p_.initial_alpha_value) / 1024.0;
    alpha_cnp_ = false;
    if (p_.rate_to_set_on_first_cnp_bps > 0) {
      target_bps_ = std::min(p_.rate_to_set_on_first_cnp_bps, max_bps_);
      set_rate(target_bps_, now);
      t_stage_ = bc_stage_ = 0;
      byte_count_ = 0;
      timers_->schedule(inc_timer_, now + p_.rpg_time_reset);
      return true;
    }
  } else {
    catch_up_alpha(now);
    alpha_cnp_ = true;
  }
  // One cut per monitor period: now, or when the period since the last one ends.
  cut_wanted_ = true;
  const Time allowed = any_cut_ ? last_cut_ + p_.rate_reduce_monitor_period : now;
  if (allowed <= now) {
    cut(now);
  } else if (!cut_timer_.armed()) {
    timers_->schedule(cut_timer_, allowed);
  }
  return true;
}

void DcqcnFlow::on_cut_timer(Time now) {
  if (cut_wanted_) cut(now);
}

void DcqcnFlow::cut(Time now) {
  catch_up_alpha(now);
  cut_wanted_ = false;
  if (cut_timer_.armed()) timers_->cancel(cut_timer_);
  const bool clamp = p_.clamp_tgt_rate || bc_stage_ > 0 || (p_.clamp_tgt_rate_ati && t_stage_ > 0);
  if (clamp) target_bps_ = rate_bps_;
  const double by_alpha = rate_bps_ * alpha_ * p_.cut_factor();
  const double most = rate_bps_ * double(100 - std::min(p_.rpg_min_dec_fac, 100u)) / 100.0;
  rate_bps_ = std::max(p_.rpg_min_rate_bps, rate_bps_ - std::min(by_alpha, most));
  rate_bps_ = std::min(rate_bps_, max_bps_);
  t_stage_ = bc_stage_ = 0;
  byte_count_ = 0;
  any_cut_ = true;
  last_cut_ = now;
  cuts_++;
  timers_->schedule(inc_timer_, now + p_.rpg_time_reset);
}

void DcqcnFlow::increase(Time now) {
  // Without a byte counter the timer stage stands for both.
  const uint32_t bc = p_.rpg_byte_reset > 0 ? bc_stage_ : t_stage_;
  const uint32_t lo = std::min(t_stage_, bc), hi = std::max(t_stage_, bc);
  if (lo > p_.rpg_threshold) target_bps_ += p_.rpg_hai_rate_bps;
  else if (hi >= p_.rpg_threshold) target_bps_ += p_.rpg_ai_rate_bps;
  target_bps_ = std::min(target_bps_, max_bps_);
  const double r = (rate_bps_ + target_bps_) / 2;
  set_rate(max_bps_ - r < 1.0 ? max_bps_ : r, now);  // halving never quite arrives
  increases_++;
}

void DcqcnFlow::on_increase_timer(Time now) {
  increase(now);
  t_stage_++;
  // Back at the top nothing more can change until the next cut re-arms it.
  if (rate_bps_ < max_bps_) timers_->schedule(inc_timer_, now + p_.rpg_time_reset);
}

void DcqcnFlow::on_sent(uint32_t bytes, Time now) {
  if (!active_ || p_.rpg_byte_reset == 0 || rate_bps_ >= max_bps_) return;
  byte_count_ += bytes;
  while (byte_count_ >= p_.rpg_byte_reset) {
    byte_count_ -= p_.rpg_byte_reset;
    increase(now);
    bc_stage_++;
  }
}

bool DcqcnFlow::on_ce(Time now) {
  if ((p_.np_enable & prio_bit_) == 0) return false;
  ce_seen_++;
  if (any_cnp_sent_ && now - last_cnp_sent_ < p_.min_time_between_cnps) return false;
  any_cnp_sent_ = true;
  last_cnp_sent_ = now;
  cnps_granted_++;
  return true;
}

void DcqcnFlow::report(CounterSink& sink, std::string_view scope, Time now) const {
  sink.counter(scope, "cc_rate_kbps", uint64_t(std::llround(rate_bps_ / 1e3)));
  sink.counter(scope, "cc_target_rate_kbps", uint64_t(std::llround(target_bps_ / 1e3)));
  sink.counter(scope, "cc_alpha_ppm", uint64_t(std::llround(alpha(now) * 1e6)));
  sink.counter(scope, "cc_cnps", cnps_);
  sink.counter(scope, "cc_rate_cuts", cuts_);
  sink.counter(scope, "cc_increases", increases_);
}

}  // namespace rocemu::nic::cc
