// Network byte order as a type: a field declared be16/be32/be64 can only be
// read through get() and written through set(), so a missing swap is a type
// error, not a comment.
#pragma once

#include <cstdint>
#include <cstring>

namespace rocemu {

namespace detail {
constexpr uint16_t bswap(uint16_t v) { return __builtin_bswap16(v); }
constexpr uint32_t bswap(uint32_t v) { return __builtin_bswap32(v); }
constexpr uint64_t bswap(uint64_t v) { return __builtin_bswap64(v); }
}  // namespace detail

template <typename T>
struct __attribute__((packed)) BigEndian {
  T raw;  // bytes exactly as on the wire

  constexpr T get() const { return detail::bswap(raw); }
  constexpr void set(T v) { raw = detail::bswap(v); }
  static constexpr BigEndian from(T v) { return BigEndian{detail::bswap(v)}; }
  friend constexpr bool operator==(BigEndian a, BigEndian b) { return a.raw == b.raw; }
};

using be16 = BigEndian<uint16_t>;
using be32 = BigEndian<uint32_t>;
using be64 = BigEndian<uint64_t>;
static_assert(sizeof(be16) == 2 && sizeof(be32) == 4 && sizeof(be64) == 8);

// 24-bit big-endian field (BTH DestQP/PSN live inside 32-bit words, but a few
// headers carry bare 24-bit quantities).
inline uint32_t load_be24(const uint8_t* p) {
  return (uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | uint32_t{p[2]};
}
inline void store_be24(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 16);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v);
}

// Unaligned typed load/store for header structs over byte spans.
template <typename T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
inline void store(uint8_t* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace rocemu
