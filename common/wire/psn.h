// 24-bit packet sequence numbers. Every comparison goes through psn_diff,
// which treats the space as a circle with a window of +/- 2^23
// (kernel rxe psn_compare).
#pragma once

#include <cstdint>

namespace rocemu::wire {

inline constexpr uint32_t kPsnMask = 0xffffff;
inline constexpr uint32_t kPsnHalf = 1u << 23;

constexpr uint32_t psn_add(uint32_t psn, int64_t n) { return uint32_t(int64_t(psn) + n) & kPsnMask; }
// Signed distance a - b in [-2^23, 2^23).
constexpr int32_t psn_diff(uint32_t a, uint32_t b) {
  return int32_t(uint32_t(a - b) << 8) >> 8;
}
constexpr bool psn_lt(uint32_t a, uint32_t b) { return psn_diff(a, b) < 0; }
constexpr bool psn_le(uint32_t a, uint32_t b) { return psn_diff(a, b) <= 0; }
constexpr bool psn_gt(uint32_t a, uint32_t b) { return psn_diff(a, b) > 0; }
constexpr bool psn_ge(uint32_t a, uint32_t b) { return psn_diff(a, b) >= 0; }

static_assert(psn_add(0xffffff, 1) == 0);
static_assert(psn_diff(0, 0xffffff) == 1);
static_assert(psn_lt(0xfffffe, 1));

}  // namespace rocemu::wire
