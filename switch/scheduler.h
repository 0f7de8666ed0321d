// Egress scheduler of one port: strict priority, then deficit weighted
// round robin (Shreedhar & Varghese) over the traffic classes NVUE's ETS
// puts in dwrr mode. PFC is honoured by the caller: a paused class is
// simply not eligible, so the scheduler never picks it and the other
// classes share the port.
#pragma once

#include <array>
#include <cstdint>

namespace rocemu::sw {

inline constexpr int kNumTc = 8;

enum class SchedulerMode : uint8_t { kDwrr, kStrict };

struct TcSchedule {
  SchedulerMode mode = SchedulerMode::kDwrr;
  uint32_t bw_percent = 12;  // dwrr weight
};

class Scheduler {
 public:
  // Bytes of credit per round for one percent of weight.
  static constexpr uint32_t kQuantumPerPercent = 256;

  void configure(const std::array<TcSchedule, kNumTc>& tcs);

  // Picks the class to send from among `eligible` (bit per class: has a
  // packet and is not paused); `head_len[tc]` is the length of each
  // eligible class's first packet. Charges the packet to the class's
  // deficit. Returns -1 if nothing is eligible.
  //   1. strict classes, highest class first;
  //   2. dwrr classes with a weight, by deficit round robin;
  //   3. dwrr classes of weight 0, round robin, only when 1 and 2 are idle.
  int select(uint8_t eligible, const uint32_t (&head_len)[kNumTc]);

  uint32_t deficit(int tc) const { return deficit_[tc]; }

 private:
  uint8_t strict_ = 0;
  uint8_t weighted_ = 0;
  uint8_t zero_weight_ = 0;
  std::array<uint32_t, kNumTc> quantum_{};
  std::array<uint32_t, kNumTc> deficit_{};
  int current_ = 0;
  bool fresh_visit_ = true;
  int zero_rr_ = 0;
};

}  // namespace rocemu::sw
