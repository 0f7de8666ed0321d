#include "common/engine/timer_wheel.h"

#include <cassert>

namespace rocemu {

Timer::~Timer() {
  if (wheel_ != nullptr) wheel_->cancel(*this);
}

TimerWheel::~TimerWheel() {
  for (Entry& e : heap_) e.t->wheel_ = nullptr;
}

// Moves `e` from the hole at `i` towards the root to its place.
void TimerWheel::sift_up(uint32_t i, Entry e) {
  while (i > 0) {
    const uint32_t parent = (i - 1) / 2;
    if (heap_[parent].key <= e.key) break;
    heap_[i] = heap_[parent];
    heap_[i].t->pos_ = i;
    i = parent;
  }
  heap_[i] = e;
  e.t->pos_ = i;
}

// Moves `e` from the hole at `i` towards the leaves to its place.
void TimerWheel::sift_down(uint32_t i, Entry e) {
  const uint32_t n = uint32_t(heap_.size());
  for (;;) {
    uint32_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1].key < heap_[child].key) child++;
    if (e.key <= heap_[child].key) break;
    heap_[i] = heap_[child];
    heap_[i].t->pos_ = i;
    i = child;
  }
  heap_[i] = e;
  e.t->pos_ = i;
}

void TimerWheel::remove_at(uint32_t i) {
  const Entry last = heap_.back();
  heap_.pop_back();
  if (i == heap_.size()) return;
  // The last entry fills the hole, up or down from there.
  if (i > 0 && last.key < heap_[(i - 1) / 2].key) {
    sift_up(i, last);
  } else {
    sift_down(i, last);
  }
}

void TimerWheel::schedule(Timer& t, Time when) {
  const Entry e{key_of(when, seq_++), &t};
  t.expiry_ = when;
  if (t.wheel_ == nullptr) {
    t.wheel_ = this;
    heap_.push_back(e);
    sift_up(uint32_t(heap_.size() - 1), e);
    return;
  }
  assert(t.wheel_ == this);
  const uint32_t i = t.pos_;
  // Re-armed: a later key sinks, an earlier one rises.
  if (e.key > heap_[i].key) {
    sift_down(i, e);
  } else {
    sift_up(i, e);
  }
}

void TimerWheel::cancel(Timer& t) {
  if (t.wheel_ == nullptr) return;
  assert(t.wheel_ == this);
  t.wheel_ = nullptr;
  remove_at(t.pos_);
}

size_t TimerWheel::advance(Time now) {
  if (now < now_) now = now_;
  now_ = now;
  size_t fired = 0;
  // One at a time: a callback may arm another timer that is due even sooner.
  while (!heap_.empty() && heap_.front().t->expiry_ <= now) {
    Timer& t = *heap_.front().t;
    t.wheel_ = nullptr;
    remove_at(0);
    fired++;
    t.cb_(t.ctx_, now);
  }
  return fired;
}

}  // namespace rocemu
