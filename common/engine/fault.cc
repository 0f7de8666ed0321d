#include "common/engine/fault.h"

#include <algorithm>
#include <tuple>

#include "common/wire/packet.h"

namespace rocemu {
namespace {

Status check_probability(double p, const char* field) {
  if (p < 0 || p > 1) return Status::error(std::string(field) + ": must be between 0 and 1");
  return {};
}

// A setting that only shapes another one is refused without it: it would
// do nothing.
Status check_dependents(const FaultConfig& f) {
  for (auto [c, base, name, needs] :
       {std::tuple{f.loss_correlation, f.loss, "loss_correlation", "loss"},
        {f.corrupt_correlation, f.corrupt, "corrupt_correlation", "corrupt"},
        {f.delay_correlation, f.jitter.count() > 0 ? 1.0 : 0.0, "delay_correlation", "jitter (it correlates the jitter)"},
        {f.reorder_correlation, f.reorder, "reorder_correlation", "reorder"},
        {f.duplicate_correlation, f.duplicate, "duplicate_correlation", "duplicate"}}) {
    if (c > 0 && base <= 0) return Status::error(std::string(name) + ": does nothing without " + needs);
  }
  const FaultConfig defaults;
  if (f.reorder_gap != defaults.reorder_gap && f.reorder <= 0)
    return Status::error("reorder_gap: does nothing without reorder (as netem: reorder 25% gap 5)");
  if (f.reorder_delay != defaults.reorder_delay && f.delay.count() > 0)
    return Status::error("reorder_delay: does nothing with a delay (the frames reordered then go at once, as netem's); "
                         "it is the hold-back for reorder without a delay");
  return {};
}

}  // namespace

Status FaultConfig::validate() const {
  for (auto [p, name] : {std::pair{loss, "loss"}, {corrupt, "corrupt"}, {reorder, "reorder"},
                         {duplicate, "duplicate"}, {loss_correlation, "loss_correlation"},
                         {corrupt_correlation, "corrupt_correlation"}, {delay_correlation, "delay_correlation"},
                         {reorder_correlation, "reorder_correlation"},
                         {duplicate_correlation, "duplicate_correlation"}}) {
    if (Status s = check_probability(p, name); !s.ok()) return s;
  }
  if (burst) {
    for (auto [p, name] : {std::pair{burst->p_good_to_bad, "burst.p_good_to_bad"},
                           {burst->p_bad_to_good, "burst.p_bad_to_good"},
                           {burst->loss_good, "burst.loss_good"},
                           {burst->loss_bad, "burst.loss_bad"}}) {
      if (Status s = check_probability(p, name); !s.ok()) return s;
    }
  }
  for (const DropRule& r : drop) {
    if (r.every_nth == 0) return Status::error("drop.every_nth: must be at least 1");
    if (r.qpn && *r.qpn > 0xffffff) return Status::error("drop.qpn: must fit in 24 bits");
    if (r.psn && *r.psn > 0xffffff) return Status::error("drop.psn: must fit in 24 bits");
  }
  if (delay.count() < 0) return Status::error("delay: must not be negative");
  if (jitter.count() < 0) return Status::error("jitter: must not be negative");
  if (reorder_delay.count() < 0) return Status::error("reorder_delay: must not be negative");
  if (reorder_gap == 0) return Status::error("reorder_gap: must be at least 1");
  if (rate_bps && *rate_bps == 0) return Status::error("rate: must be above 0");
  return check_dependents(*this);
}


bool FaultInjector::match_drop(const uint8_t* frame, uint32_t len) {
  if (cfg_.drop.empty()) return false;
  wire::PacketView v;
  const bool roce = wire::decode({frame, len}, v) == wire::DecodeError::kOk && v.is_roce;
  for (DropRule& r : cfg_.drop) {
    if (r.qpn || r.psn || r.opcode) {
      if (!roce) continue;
      if (r.qpn && v.bth().dest_qp() != *r.qpn) continue;
      if (r.psn && v.bth().psn() != *r.psn) continue;
      if (r.opcode && v.opcode != *r.opcode) continue;
    }
    if (r.times != 0 && r.dropped >= r.times) continue;
    r.matched++;
    if (r.matched % r.every_nth != 0) continue;
    r.dropped++;
    return true;
  }
  return false;
}

FaultDecision FaultInjector::decide(const uint8_t* frame, uint32_t len) {
  FaultDecision d;
  if (cfg_.link_down || match_drop(frame, len)) {
    d.drop = true;
    return d;
  }
  if (cfg_.burst) {
    const GilbertElliott& ge = *cfg_.burst;
    ge_bad_ = ge_bad_ ? !rng_.bernoulli(ge.p_bad_to_good) : rng_.bernoulli(ge.p_good_to_bad);
    if (rng_.bernoulli(ge_bad_ ? ge.loss_bad : ge.loss_good)) {
      d.drop = true;
      return d;
    }
  }
  if (loss_.chance(rng_, cfg_.loss, cfg_.loss_correlation)) {
    d.drop = true;
    return d;
  }
  d.corrupt = corrupt_.chance(rng_, cfg_.corrupt, cfg_.corrupt_correlation);
  d.duplicate = duplicate_.chance(rng_, cfg_.duplicate, cfg_.duplicate_correlation);
  const Duration delay = jittered_delay();
  if (reordered()) d.extra_delay = cfg_.delay.count() > 0 ? Duration(0) : cfg_.reorder_delay;
  else d.extra_delay = delay;
  d.delayed = d.extra_delay.count() > 0;
  return d;
}

Duration FaultInjector::jittered_delay() {
  const int64_t j = cfg_.jitter.count();
  if (j <= 0) return cfg_.delay;
  // netem's default (uniform) distribution: delay +- jitter.
  const int64_t offset = int64_t(jitter_.next(rng_, cfg_.delay_correlation) * double(2 * j)) - j;
  return std::max(Duration(0), cfg_.delay + Duration(offset));
}

bool FaultInjector::reordered() {
  if (cfg_.reorder <= 0) return false;
  // netem's gap: after a reordered frame, the next gap - 1 go the normal way.
  if (since_reorder_ < cfg_.reorder_gap) since_reorder_++;
  if (since_reorder_ < cfg_.reorder_gap) return false;
  if (!reorder_.chance(rng_, cfg_.reorder, cfg_.reorder_correlation)) return false;
  since_reorder_ = 0;
  return true;
}

void FaultInjector::corrupt(uint8_t* frame, uint32_t len) {
  wire::PacketView v;
  uint32_t lo = 14, hi = len;
  if (wire::decode({frame, len}, v) == wire::DecodeError::kOk && v.is_roce) {
    // Anything the ICRC covers and routers do not rewrite: BTH onwards,
    // except the FECN/BECN byte, up to the ICRC itself.
    lo = v.bth_off;
    hi = v.icrc_off;
  }
  if (hi <= lo) return;
  uint32_t at = lo + uint32_t(rng_.below(hi - lo));
  if (v.is_roce && at == uint32_t(v.bth_off) + 4u) at++;
  if (at >= hi) at = lo;
  frame[at] ^= uint8_t(1u << rng_.below(8));
}

}  // namespace rocemu
