// ECN marking, WRED style, in bytes of egress queue depth (what Spectrum's
// "absolute" ECN mode does). Below min-threshold nothing is marked; between
// min and max the probability rises linearly to `probability` percent; at
// or above max every ECT packet is marked. Non-ECT packets are never
// marked: above max they are dropped on a lossy queue (and, with red
// enabled, dropped between min and max with the same probability).
#pragma once

#include <cstdint>

#include "common/engine/rng.h"

namespace rocemu::sw {

struct WredProfile {
  uint64_t min_threshold = 150000;
  uint64_t max_threshold = 1500000;
  uint32_t probability = 100;  // percent at max-threshold

  // Marking (or RED drop) probability at a queue depth of `depth` bytes.
  double probability_at(uint64_t depth) const {
    if (depth < min_threshold) return 0.0;
    if (depth >= max_threshold) return 1.0;
    const double span = double(max_threshold - min_threshold);
    return double(probability) / 100.0 * double(depth - min_threshold) / span;
  }
};

enum class EcnVerdict : uint8_t { kPass, kMark, kDrop };

// The decision for one packet entering a queue of `depth` bytes. `ect`:
// the packet carries ECT(0), ECT(1) or CE. Draws from `rng` only inside
// the [min, max) band, so the stream of decisions is reproducible.
inline EcnVerdict wred_decide(const WredProfile& w, uint64_t depth, bool ect, bool lossy, bool red, Rng& rng) {
  if (depth < w.min_threshold) return EcnVerdict::kPass;
  if (depth >= w.max_threshold) {
    if (ect) return EcnVerdict::kMark;
    return lossy ? EcnVerdict::kDrop : EcnVerdict::kPass;
  }
  if (!ect && !(red && lossy)) return EcnVerdict::kPass;
  if (!rng.bernoulli(w.probability_at(depth))) return EcnVerdict::kPass;
  return ect ? EcnVerdict::kMark : EcnVerdict::kDrop;
}

}  // namespace rocemu::sw
