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

  // Deferred arming, for an owner that may not need its timer after all.
  // reserve() takes the place in the firing order that schedule() would
  // take now; schedule(t, when, seq) arms `t` later with that place, so
  // the timers fire exactly as if it had been armed when reserved.
  // fired(when, seq): whether a timer armed then would have fired by now
  // (false while it is still to come, also when it is due at this very
  // time but later in the order than the timer firing now).
  uint64_t reserve() { return seq_++; }
  void schedule(Timer& t, Time when, uint64_t seq);
  bool fired(Time when, uint64_t seq) const {
    // While timers fire: all due by the previous advance() has fired, and
    // in this one everything before the latest (expiry, place) fired so
    // far -- a callback may arm a timer in the past, which then fires after
    // later ones, so the timer firing now is not always the latest.
    if (firing_) return when <= swept_ || when < fired_expiry_ || (when == fired_expiry_ && seq < fired_seq_);
    return when <= now_;
  }

  // Fires every timer with expiry <= now, earliest first, including timers
  // armed by callbacks for times <= now. Returns the number fired.
  size_t advance(Time now);

  // Exact expiry of the earliest armed timer, or kTimeNever.
  Time next_expiry() const {
    const Timer* t = earliest();
    return t == nullptr ? kTimeNever : t->expiry_;
  }

  size_t size() const { return size_; }
  Time now() const { return now_; }

 private:
  static constexpr int16_t kOverflowSlot = kLevels * kSlots;
  static constexpr int kNumLists = kLevels * kSlots + 1;

  static uint64_t tick_of(Time t) { return uint64_t(t.count()) >> kTickShift; }
  void arm(Timer& t, Time when, uint64_t seq);
  void place(Timer& t);
  void link(Timer& t, int16_t slot);
  void unlink(Timer& t);
  // Lowest tick any armed timer may have (a slot's lower bound), or ~0.
  uint64_t next_tick_bound() const;
  void move_to(uint64_t tick);
  int find_slot(int level, int from) const;  // first non-empty index >= from, or -1
  // The timer that fires next (least expiry, then sequence), or nullptr;
  // kept until a timer is armed before it or it leaves the wheel.
  Timer* earliest() const {
    if (!min_valid_) find_earliest();
    return min_;
  }
  void find_earliest() const;

  std::array<Timer*, kNumLists> heads_{};
  std::array<std::array<uint64_t, kSlots / 64>, kLevels> bitmap_{};
  uint64_t cur_tick_;
  Time now_;
  uint64_t seq_ = 0;
  size_t size_ = 0;
  mutable Timer* min_ = nullptr;
  mutable bool min_valid_ = true;  // min_ is the earliest timer (nullptr: none)
  // For fired(): whether a callback runs, the time the previous advance()
  // reached, and the latest (expiry, place) fired since.
  bool firing_ = false;
  Time swept_{0};
  Time fired_expiry_{0};
  uint64_t fired_seq_ = 0;
};

}  // namespace rocemu
