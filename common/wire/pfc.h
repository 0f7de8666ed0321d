// IEEE 802.1Qbb priority-based flow control frame (802.3 Annex 31D):
// DA 01-80-C2-00-00-01, EtherType 0x8808, opcode 0x0101, a class-enable
// vector and eight pause times in quanta of 512 bit times.
#pragma once

#include <array>
#include <cstdint>

#include "common/byteorder.h"

namespace rocemu::wire {

inline constexpr uint16_t kPfcOpcode = 0x0101;
inline constexpr uint16_t kPauseOpcode = 0x0001;  // 802.3x global PAUSE
inline constexpr int kNumPriorities = 8;
inline constexpr uint32_t kBitsPerQuantum = 512;

// The MAC control payload after the EtherType.
struct __attribute__((packed)) PfcHdr {
  be16 opcode;
  be16 class_enable;  // upper byte reserved (0), bit i enables priority i
  be16 time[kNumPriorities];

  bool enabled(int prio) const { return (class_enable.get() >> prio) & 1; }
};
static_assert(sizeof(PfcHdr) == 20);

// A PFC frame is always a minimum-size frame: 14 + 20 + 26 bytes of padding
// = 60 bytes before the FCS.
inline constexpr uint32_t kPfcFrameLen = 60;

}  // namespace rocemu::wire
