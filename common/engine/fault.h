// Fault injection as a stage on a wire or switch port: Bernoulli and
// Gilbert-Elliott loss, drop by match (QPN, PSN, opcode, every Nth),
// corruption, delay and jitter, reordering, duplication, link down/up and
// rate change. Decisions come from the stage's own seeded Rng, so a run is
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

struct FaultConfig {
  double loss = 0;                      // Bernoulli loss probability
  std::optional<GilbertElliott> burst;  // burst loss
  std::vector<DropRule> drop;           // drop by match
  double corrupt = 0;                   // probability of flipping a byte
  Duration delay{0};                    // added to every packet
  Duration jitter{0};                   // uniform extra delay in [0, jitter)
  double reorder = 0;                   // probability a packet is held back
  Duration reorder_delay = us(5);       // ... by this much
  double duplicate = 0;                 // probability of sending a second copy
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
  FaultConfig cfg_;
  Rng rng_;
  bool ge_bad_ = false;
};

}  // namespace rocemu
