// Dynamic thresholds for a shared buffer (Choudhury & Hahne, IEEE/ACM ToN
// 1998): a queue may take shared buffer while its occupancy is below
// alpha x (pool size - pool occupancy). With N queues busy the buffer
// settles at alpha·B/(1+N·alpha) each, leaving B/(1+N·alpha) free for a
// newcomer. SONiC writes alpha as dynamic_th = log2(alpha).
#pragma once

#include <cmath>
#include <cstdint>

namespace rocemu::sw {

// The current limit of one queue's shared occupancy, in bytes.
inline uint64_t dynamic_threshold(double alpha, uint64_t pool_size, uint64_t pool_used) {
  if (pool_used >= pool_size) return 0;
  const double t = alpha * double(pool_size - pool_used);
  return t >= 1.8e19 ? UINT64_MAX : uint64_t(t);
}

// The same in fixed point, for the data path: alpha in units of 1/65536
// (alpha <= 128, buffers below 2^40 bytes: the product fits in 64 bits).
inline constexpr int kAlphaShift = 16;
inline uint64_t alpha_to_fixed(double alpha) { return uint64_t(std::llround(alpha * double(1u << kAlphaShift))); }
inline uint64_t dynamic_threshold_fixed(uint64_t alpha_fixed, uint64_t pool_size, uint64_t pool_used) {
  return pool_used >= pool_size ? 0 : ((pool_size - pool_used) * alpha_fixed) >> kAlphaShift;
}

// Steady-state share of each of `n` equally greedy queues.
inline double dynamic_threshold_share(double alpha, uint64_t pool_size, uint32_t n) {
  return alpha * double(pool_size) / (1.0 + double(n) * alpha);
}

// SONiC's dynamic_th: alpha = 2^dynamic_th, and -8 means alpha 0.
inline double alpha_from_dynamic_th(int dynamic_th) { return dynamic_th <= -8 ? 0.0 : std::ldexp(1.0, dynamic_th); }

}  // namespace rocemu::sw
