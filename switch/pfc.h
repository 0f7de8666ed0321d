// 802.1Qbb priority flow control, the pure parts: quanta and time, the
// receive side (a pause timer per priority, refreshed by every frame and
// released by a zero-quanta frame), and the pause-duration bookkeeping the
// counters need. Frames themselves are built with wire::encode_pfc.
#pragma once

#include <array>
#include <cstdint>

#include "common/engine/time.h"
#include "common/wire/pfc.h"

namespace rocemu::sw {

inline constexpr int kNumPriorities = wire::kNumPriorities;
inline constexpr uint16_t kMaxQuanta = 0xffff;

// One quantum is 512 bit times of the port: 5.12 ns at 100G.
constexpr Duration quanta_to_duration(uint32_t quanta, uint64_t speed_bps) {
  return Duration(int64_t(static_cast<unsigned __int128>(quanta) * wire::kBitsPerQuantum * 1000000000000ull / speed_bps));
}

// Pause state of one priority on one port, driven by received frames.
class PauseTimer {
 public:
  // A frame with `quanta` for this priority arrives at `now`.
  void on_frame(uint32_t quanta, uint64_t speed_bps, Time now) {
    if (!paused(now)) {
      if (until_ > start_) total_ += until_ - start_;  // the last pause ran out
      start_ = now;
      until_ = now;
    }
    if (quanta == 0) {
      total_ += now - start_;  // released early
      start_ = until_ = now;
      return;
    }
    until_ = now + quanta_to_duration(quanta, speed_bps);
  }
  bool paused(Time now) const { return now < until_; }
  Time until() const { return until_; }
  // Start of the current pause (meaningful while paused).
  Time since() const { return start_; }
  // Total time paused up to `now`.
  Duration duration(Time now) const {
    Duration d = total_;
    if (until_ > start_) d += (now < until_ ? now : until_) - start_;
    return d;
  }
  // Forgets the pause (watchdog ignoring a storm), keeping the total.
  void release(Time now) {
    if (until_ > start_) total_ += (now < until_ ? now : until_) - start_;
    start_ = until_ = now;
  }
  void clear_counters(Time now) {
    total_ = Duration(0);
    if (paused(now)) start_ = now;
    else start_ = until_ = now;
  }

 private:
  Time start_{0};
  Time until_{0};
  Duration total_{0};
};

// XOFF asserted by this port on one priority: how long in all.
class XoffTimer {
 public:
  void assert_xoff(Time now) {
    if (!on_) {
      on_ = true;
      since_ = now;
    }
  }
  void release(Time now) {
    if (on_) {
      total_ += now - since_;
      on_ = false;
    }
  }
  bool on() const { return on_; }
  Time since() const { return since_; }
  Duration duration(Time now) const { return on_ ? total_ + (now - since_) : total_; }
  void clear_counters(Time now) {
    total_ = Duration(0);
    since_ = now;
  }

 private:
  bool on_ = false;
  Time since_{0};
  Duration total_{0};
};

}  // namespace rocemu::sw
