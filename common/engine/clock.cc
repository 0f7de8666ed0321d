#include "common/engine/clock.h"

#include <x86intrin.h>

#include <chrono>
#include <fstream>
#include <string>

namespace rocemu {
namespace {

// Calibrate the TSC against CLOCK_MONOTONIC over a short interval. The
// steady_clock read here is the only clock read outside the engine loop.
double measure_tsc_hz() {
  using std::chrono::steady_clock;
  const auto t0 = steady_clock::now();
  const uint64_t c0 = __rdtsc();
  while (steady_clock::now() - t0 < std::chrono::milliseconds(20)) {
  }
  const auto t1 = steady_clock::now();
  const uint64_t c1 = __rdtsc();
  const double secs = std::chrono::duration<double>(t1 - t0).count();
  return double(c1 - c0) / secs;
}

}  // namespace

TscClock::TscClock() : start_(__rdtsc()), hz_(measure_tsc_hz()), ps_per_cycle_(1e12 / hz_) {}

Time TscClock::now() const { return Duration(int64_t(double(__rdtsc() - start_) * ps_per_cycle_)); }

}  // namespace rocemu
