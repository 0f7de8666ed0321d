// Seeded random source passed into protocol code (never read from a
// global). xoshiro256** seeded through splitmix64: fast, and the same seed
// gives the same stream on every machine.
#pragma once

#include <cstdint>

namespace rocemu {

class Rng {
 public:
  explicit Rng(uint64_t seed = 1) { reseed(seed); }

  void reseed(uint64_t seed) {
    for (auto& w : s_) {
      seed += 0x9e3779b97f4a7c15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  bool bernoulli(double p) { return p > 0 && uniform() < p; }
  // Uniform in [0, n).
  uint64_t below(uint64_t n) { return n == 0 ? 0 : uint64_t((__uint128_t(next()) * n) >> 64); }

  // An independent stream derived from this seed and a label (one per node).
  static uint64_t derive(uint64_t seed, uint64_t label) {
    uint64_t z = seed ^ (label * 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace rocemu
