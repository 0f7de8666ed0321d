// Engine time: picoseconds since the engine's epoch. Picoseconds keep line
// rate serialisation exact (one bit at 100 Gbit/s is 10 ps) and still span
// 106 days in 64 bits.
#pragma once

#include <chrono>
#include <cstdint>

namespace rocemu {

using Duration = std::chrono::duration<int64_t, std::pico>;
using Time = Duration;  // since the engine epoch

inline constexpr Time kTimeZero{0};
inline constexpr Time kTimeNever = Duration::max();

using namespace std::chrono_literals;

constexpr Duration ps(int64_t v) { return Duration(v); }
constexpr Duration ns(int64_t v) { return Duration(v * 1000); }
constexpr Duration us(int64_t v) { return Duration(v * 1000000); }
constexpr Duration ms(int64_t v) { return Duration(v * 1000000000); }

constexpr double to_seconds(Duration d) { return double(d.count()) * 1e-12; }
constexpr double to_us(Duration d) { return double(d.count()) * 1e-6; }
constexpr int64_t to_ns(Duration d) { return d.count() / 1000; }

// Time to put `bytes` on a wire of `bits_per_second`.
constexpr Duration serialization_time(uint64_t bytes, uint64_t bits_per_second) {
  // bytes * 8 * 1e12 / bps, in integer ps; exact for every standard rate.
  // 128-bit: a PFC pause of 65535 quanta is 4 MB of bits.
  return Duration(int64_t((static_cast<unsigned __int128>(bytes) * 8 * 1000000000000ull) / bits_per_second));
}

// Bytes a frame occupies on an Ethernet wire beyond what a capture shows:
// preamble + SFD (8), FCS (4), minimum inter-frame gap (12).
inline constexpr uint32_t kEthWireOverhead = 24;
inline constexpr uint32_t kEthMinFrame = 60;  // without FCS

constexpr uint32_t wire_bytes(uint32_t frame_len) {
  return (frame_len < kEthMinFrame ? kEthMinFrame : frame_len) + kEthWireOverhead;
}

}  // namespace rocemu
