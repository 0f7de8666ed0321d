#include "switch/scheduler.h"

namespace rocemu::sw {

void Scheduler::configure(const std::array<TcSchedule, kNumTc>& tcs) {
  strict_ = weighted_ = zero_weight_ = 0;
  for (int tc = 0; tc < kNumTc; tc++) {
    const uint8_t bit = uint8_t(1u << tc);
    quantum_[tc] = tcs[tc].bw_percent * kQuantumPerPercent;
    if (tcs[tc].mode == SchedulerMode::kStrict) {
      strict_ |= bit;
    } else if (tcs[tc].bw_percent > 0) {
      weighted_ |= bit;
    } else {
      zero_weight_ |= bit;
    }
  }
  deficit_.fill(0);
  current_ = 0;
  fresh_visit_ = true;
}

int Scheduler::select(uint8_t eligible, const uint32_t (&head_len)[kNumTc]) {
  if (eligible == 0) return -1;
  if (const uint8_t s = eligible & strict_; s != 0) return 31 - __builtin_clz(uint32_t(s));
  if ((eligible & weighted_) != 0) {
    // Each full rotation adds a quantum (> 0) to every eligible class, so
    // the loop ends within max_frame / min_quantum rotations.
    for (;;) {
      const int c = current_;
      const uint8_t bit = uint8_t(1u << c);
      if ((eligible & weighted_ & bit) != 0) {
        if (fresh_visit_) {
          deficit_[c] += quantum_[c];
          fresh_visit_ = false;
        }
        if (head_len[c] <= deficit_[c]) {
          deficit_[c] -= head_len[c];
          return c;
        }
      } else {
        deficit_[c] = 0;  // idle or paused: no credit is banked
      }
      current_ = (current_ + 1) % kNumTc;
      fresh_visit_ = true;
    }
  }
  const uint8_t z = eligible & zero_weight_;
  if (z == 0) return -1;  // only classes the configuration does not serve
  for (int i = 0; i < kNumTc; i++) {
    const int c = (zero_rr_ + i) % kNumTc;
    if ((z >> c) & 1) {
      zero_rr_ = (c + 1) % kNumTc;
      return c;
    }
  }
  return -1;
}

}  // namespace rocemu::sw
