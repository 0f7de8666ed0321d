// Injected clocks. Node code never reads one: the engine reads `now` once
// per iteration and passes it down.
#pragma once

#include "common/engine/time.h"

namespace rocemu {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Time now() const = 0;
};

// Set by hand: unit tests, and the engine in virtual time (where it jumps
// straight to the next event).
class ManualClock final : public Clock {
 public:
  Time now() const override { return now_; }
  void set(Time t) { now_ = t; }
  void advance(Duration d) { now_ += d; }

 private:
  Time now_{0};
};

// Real time from the TSC, calibrated once; epoch = construction.
class TscClock final : public Clock {
 public:
  TscClock();
  Time now() const override;
  double hz() const { return hz_; }

 private:
  uint64_t start_;
  double hz_;
  double ps_per_cycle_;
};

}  // namespace rocemu
