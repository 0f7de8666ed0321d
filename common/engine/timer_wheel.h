// Hierarchical timer wheel (Varghese & Lauck) with exact expiries.
//
// Six levels of 256 slots over ticks of 4.096 ns; a timer sits in the
// lowest level whose slot range contains its tick. Expiries are kept in
// picoseconds, and timers that fall in the same tick fire in (expiry,
// insertion) order, so virtual-time runs are deterministic. next_expiry()
// gives the exact time of the earliest timer, which is how virtual time
// jumps from event to event.
#pragma once

#include <array>
#include <cstdint>

#include "common/engine/time.h"

namespace rocemu {

class TimerWheel;

// An intrusive timer: it lives inside the object that owns it, so arming
// and cancelling never allocate.
class Timer {
 public:
  using Callback = void (*)(void* ctx, Time now);

  Timer() = default;
  Timer(Callback cb, void* ctx) : cb_(cb), ctx_(ctx) {}
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  ~Timer();

  // Binds a member function: Timer t = Timer::of<&Qp::on_retry>(this);
  template <auto Method, typename T>
  static Callback method() {
    return [](void* ctx, Time now) { (static_cast<T*>(ctx)->*Method)(now); };
  }
  void set_callback(Callback cb, void* ctx) {
    cb_ = cb;
    ctx_ = ctx;
  }
  template <auto Method, typename T>
  void bind(T* obj) {
    set_callback(method<Method, T>(), obj);
  }

  bool armed() const { return wheel_ != nullptr; }
  Time expiry() const { return expiry_; }

 private:
  friend class TimerWheel;
  Callback cb_ = nullptr;
  void* ctx_ = nullptr;
  TimerWheel* wheel_ = nullptr;
  Timer* prev_ = nullptr;
  Timer* next_ = nullptr;
  Time expiry_{0};
  uint64_t seq_ = 0;
  int16_t slot_ = -1;  // level * 256 + index, or kOverflowSlot
};

class TimerWheel {
 public:
  static constexpr int kTickShift = 12;  // 4096 ps per tick
  static constexpr int kLevels = 6;
  static constexpr int kSlotBits = 8;
  static constexpr int kSlots = 1 << kSlotBits;

  explicit TimerWheel(Time start = kTimeZero);
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;
  ~TimerWheel();

  // Arms (or re-arms) `t` to fire at `when`. A time in the past fires on the
  // next advance().
  void schedule(Timer& t, Time when);
  void cancel(Timer& t);

  // Fires every timer with expiry <= now, earliest first, including timers
  // armed by callbacks for times <= now. Returns the number fired.
  size_t advance(Time now);

  // Exact expiry of the earliest armed timer, or kTimeNever.
  Time next_expiry() const;

  size_t size() const { return size_; }
  Time now() const { return now_; }

 private:
  static constexpr int16_t kOverflowSlot = kLevels * kSlots;
  static constexpr int kNumLists = kLevels * kSlots + 1;

  static uint64_t tick_of(Time t) { return uint64_t(t.count()) >> kTickShift; }
  void place(Timer& t);
  void link(Timer& t, int16_t slot);
  void unlink(Timer& t);
  // Lowest tick any armed timer may have (a slot's lower bound), or ~0.
  uint64_t next_tick_bound() const;
  void move_to(uint64_t tick);
  int find_slot(int level, int from) const;  // first non-empty index >= from, or -1

  std::array<Timer*, kNumLists> heads_{};
  std::array<std::array<uint64_t, kSlots / 64>, kLevels> bitmap_{};
  uint64_t cur_tick_;
  Time now_;
  uint64_t seq_ = 0;
  size_t size_ = 0;
};

}  // namespace rocemu
