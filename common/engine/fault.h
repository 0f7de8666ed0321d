// Fault injection as a stage on a wire or switch port: Bernoulli and
// Gilbert-Elliott loss, drop by match (QPN, PSN, opcode, every Nth),
// corruption, delay and jitter, reordering, duplication, link down/up and
// rate change, as tc-netem defines them (with netem's correlations).
// Decisions come from the stage's own seeded Rng, so a run is
// reproducible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/engine/rng.h"
#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu {

struct DropRule {
  std::optional<uint32_t> qpn;     // BTH DestQP
  std::optional<uint32_t> psn;
  std::optional<uint8_t> opcode;
  uint32_t every_nth = 1;          // of the packets that match, drop every Nth
  uint32_t times = 0;              // stop after this many drops (0 = no limit)

  // state
  uint64_t matched = 0;
  uint64_t dropped = 0;
};

struct GilbertElliott {
  double p_good_to_bad = 0;  // per packet
  double p_bad_to_good = 1;
  double loss_good = 0;
  double loss_bad = 1;
};

// A correlation is netem's CORRELATION of a random decision: the chance
// that a draw repeats the one before (else it is new). The long-run rate
// stays what is asked for and successive decisions are correlated by
// exactly that much. (The kernel's netem averages the new draw with the
// last instead, which narrows the draws: a correlated `loss 1% 25%` there
// loses far less than 1%, why tc-netem(8) calls it deprecated.)
struct FaultConfig {
  double loss = 0;                      // Bernoulli loss probability
  double loss_correlation = 0;
  std::optional<GilbertElliott> burst;  // burst loss
  std::vector<DropRule> drop;           // drop by match
  double corrupt = 0;                   // probability of flipping a byte
  double corrupt_correlation = 0;
  Duration delay{0};                    // added to every packet ...
  Duration jitter{0};                   // ... give or take this: uniform in [delay - jitter, delay + jitter), never below 0
  double delay_correlation = 0;         // of the jitter
  // netem's reordering: a frame chosen (this probability, among every
  // reorder_gap-th) skips the delay and jitter and goes at once, ahead of
  // those delayed. Without a delay (netem then cannot reorder) it is held
  // back reorder_delay instead and overtaken.
  double reorder = 0;
  double reorder_correlation = 0;
  uint32_t reorder_gap = 1;
  Duration reorder_delay = us(5);
  double duplicate = 0;                 // probability of sending a second copy
  double duplicate_correlation = 0;
  bool link_down = false;
  std::optional<uint64_t> rate_bps;     // overrides the link rate

  bool any() const {
    return loss > 0 || burst || !drop.empty() || corrupt > 0 || delay.count() > 0 || jitter.count() > 0 ||
           reorder > 0 || duplicate > 0 || link_down || rate_bps;
  }
  // Rejects out-of-range values, naming the field.
  Status validate() const;
};

struct FaultDecision {
  bool drop = false;
  bool corrupt = false;
  bool duplicate = false;
  bool delayed = false;
  Duration extra_delay{0};
};

// One random decision of a kind, with its correlation (see FaultConfig).
class CorrelatedDraw {
 public:
  // Uniform in [0, 1): the last draw again with probability `correlation`.
  double next(Rng& rng, double correlation) {
    if (!(has_last_ && correlation > 0 && rng.bernoulli(correlation))) {
      last_ = rng.uniform();
      has_last_ = true;
    }
    return last_;
  }
  // True with probability p (without correlation, one Rng::bernoulli).
  bool chance(Rng& rng, double p, double correlation) {
    if (p <= 0) return false;
    if (correlation <= 0) return rng.bernoulli(p);
    return next(rng, correlation) < p;
  }

 private:
  double last_ = 0;
  bool has_last_ = false;
};

class FaultInjector {
 public:
  explicit FaultInjector(uint64_t seed = 1) : rng_(seed) {}

  void configure(FaultConfig cfg) { cfg_ = std::move(cfg); }
  const FaultConfig& config() const { return cfg_; }
  FaultConfig& config() { return cfg_; }
  bool active() const { return cfg_.any(); }

  // Decides the fate of one frame.
  FaultDecision decide(const uint8_t* frame, uint32_t len);
  // Flips one byte of the frame where it breaks the ICRC (or, for non-RoCE
  // frames, anywhere past the Ethernet header).
  void corrupt(uint8_t* frame, uint32_t len);

 private:
  bool match_drop(const uint8_t* frame, uint32_t len);
  Duration jittered_delay();
  bool reordered();
  FaultConfig cfg_;
  Rng rng_;
  bool ge_bad_ = false;
  CorrelatedDraw loss_, corrupt_, duplicate_, jitter_, reorder_;
  uint32_t since_reorder_ = 0;  // frames since the last one reordered (netem's gap)
};

}  // namespace rocemu
