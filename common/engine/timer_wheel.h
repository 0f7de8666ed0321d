// The engine's timers: an indexed binary min-heap with exact expiries.
//
// Expiries are kept in picoseconds; timers fire in (expiry, order of
// arming) order, so virtual-time runs are deterministic, and
// next_expiry() is the exact time of the earliest timer, which is how
// virtual time jumps from event to event. The heap holds each timer's key
// next to its pointer (one cache line per two entries, no pointer chasing
// to compare), and each timer knows its place in it, so re-arming and
// cancelling are O(log n) and never allocate once the heap has grown to
// the number of timers armed at once. (It replaced a hierarchical timer
// wheel: the earliest timer had to be searched for in the wheel's bitmaps
// on every event, twice per event in the virtual-time loop.)
#pragma once

#include <cstdint>
#include <vector>

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
  Time expiry_{0};
  uint32_t pos_ = 0;  // index in the heap while armed
};

class TimerWheel {
 public:
  explicit TimerWheel(Time start = kTimeZero) : now_(start) {}
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
  Time next_expiry() const { return heap_.empty() ? kTimeNever : heap_.front().t->expiry_; }

  size_t size() const { return heap_.size(); }
  Time now() const { return now_; }

 private:
  // (expiry, arming order) as one unsigned number: the expiry's sign bit
  // flipped keeps signed order, the sequence breaks ties.
  using Key = unsigned __int128;
  struct Entry {
    Key key;
    Timer* t;
  };
  static Key key_of(Time when, uint64_t seq) {
    return Key(uint64_t(when.count()) ^ (uint64_t(1) << 63)) << 64 | seq;
  }
  void sift_up(uint32_t i, Entry e);
  void sift_down(uint32_t i, Entry e);
  void remove_at(uint32_t i);

  std::vector<Entry> heap_;
  Time now_;
  uint64_t seq_ = 0;
};

}  // namespace rocemu
