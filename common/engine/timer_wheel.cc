#include "common/engine/timer_wheel.h"

#include <cassert>

namespace rocemu {

Timer::~Timer() {
  if (wheel_ != nullptr) wheel_->cancel(*this);
}

TimerWheel::TimerWheel(Time start) : cur_tick_(tick_of(start)), now_(start) {}

TimerWheel::~TimerWheel() {
  for (Timer* head : heads_) {
    for (Timer* t = head; t != nullptr;) {
      Timer* next = t->next_;
      t->wheel_ = nullptr;
      t->prev_ = t->next_ = nullptr;
      t = next;
    }
  }
}

void TimerWheel::link(Timer& t, int16_t slot) {
  t.slot_ = slot;
  t.prev_ = nullptr;
  t.next_ = heads_[size_t(slot)];
  if (t.next_ != nullptr) t.next_->prev_ = &t;
  heads_[size_t(slot)] = &t;
  if (slot != kOverflowSlot) {
    const int level = slot / kSlots, idx = slot % kSlots;
    bitmap_[size_t(level)][size_t(idx / 64)] |= 1ull << (idx % 64);
  }
}

void TimerWheel::unlink(Timer& t) {
  const int16_t slot = t.slot_;
  if (t.prev_ != nullptr) {
    t.prev_->next_ = t.next_;
  } else {
    heads_[size_t(slot)] = t.next_;
  }
  if (t.next_ != nullptr) t.next_->prev_ = t.prev_;
  t.prev_ = t.next_ = nullptr;
  if (slot != kOverflowSlot && heads_[size_t(slot)] == nullptr) {
    const int level = slot / kSlots, idx = slot % kSlots;
    bitmap_[size_t(level)][size_t(idx / 64)] &= ~(1ull << (idx % 64));
  }
}

void TimerWheel::place(Timer& t) {
  uint64_t tick = tick_of(t.expiry_);
  if (tick < cur_tick_) tick = cur_tick_;  // overdue: fire at the current tick
  const uint64_t diff = tick ^ cur_tick_;
  int level = 0;
  if (diff != 0) level = (63 - __builtin_clzll(diff)) / kSlotBits;
  if (level >= kLevels) {
    link(t, kOverflowSlot);
    return;
  }
  const int idx = int((tick >> (level * kSlotBits)) & (kSlots - 1));
  link(t, int16_t(level * kSlots + idx));
}

void TimerWheel::arm(Timer& t, Time when, uint64_t seq) {
  if (t.wheel_ != nullptr) {
    assert(t.wheel_ == this);
    unlink(t);
    size_--;
    if (min_ == &t) min_valid_ = false;
  }
  t.wheel_ = this;
  t.expiry_ = when;
  t.seq_ = seq;
  place(t);
  size_++;
  if (min_valid_ && (min_ == nullptr || when < min_->expiry_ || (when == min_->expiry_ && seq < min_->seq_)))
    min_ = &t;
}

void TimerWheel::schedule(Timer& t, Time when) { arm(t, when, seq_++); }

void TimerWheel::schedule(Timer& t, Time when, uint64_t seq) {
  assert(seq < seq_);
  arm(t, when, seq);
}

void TimerWheel::cancel(Timer& t) {
  if (t.wheel_ == nullptr) return;
  assert(t.wheel_ == this);
  unlink(t);
  t.wheel_ = nullptr;
  size_--;
  if (min_ == &t) min_valid_ = false;
}

int TimerWheel::find_slot(int level, int from) const {
  for (int w = from / 64; w < kSlots / 64; w++) {
    uint64_t bits = bitmap_[size_t(level)][size_t(w)];
    if (w == from / 64) bits &= ~0ull << (from % 64);
    if (bits != 0) return w * 64 + __builtin_ctzll(bits);
  }
  return -1;
}

uint64_t TimerWheel::next_tick_bound() const {
  for (int level = 0; level < kLevels; level++) {
    const int shift = level * kSlotBits;
    const int cur_idx = int((cur_tick_ >> shift) & (kSlots - 1));
    // Level 0 holds the current tick itself; higher levels start after it.
    const int idx = find_slot(level, level == 0 ? cur_idx : cur_idx + 1);
    if (idx < 0) continue;
    const uint64_t prefix = (shift + kSlotBits >= 64) ? 0 : (cur_tick_ >> (shift + kSlotBits)) << (shift + kSlotBits);
    return prefix | (uint64_t(idx) << shift);
  }
  uint64_t best = ~0ull;
  for (Timer* t = heads_[kOverflowSlot]; t != nullptr; t = t->next_) {
    const uint64_t tick = tick_of(t->expiry_);
    if (tick < best) best = tick;
  }
  return best;
}

void TimerWheel::find_earliest() const {
  min_valid_ = true;
  min_ = nullptr;
  if (size_ == 0) return;
  // Most often a timer is due within the current tick's 64-slot word of
  // level 0: no search beyond it.
  const int cur = int(cur_tick_ & (kSlots - 1));
  if (const uint64_t bits = bitmap_[0][size_t(cur / 64)] & (~0ull << (cur % 64)); bits != 0) {
    Timer* best = heads_[size_t((cur & ~63) + __builtin_ctzll(bits))];
    for (Timer* t = best->next_; t != nullptr; t = t->next_)
      if (t->expiry_ < best->expiry_ || (t->expiry_ == best->expiry_ && t->seq_ < best->seq_)) best = t;
    min_ = best;
    return;
  }
  const uint64_t bound = next_tick_bound();
  // The earliest timer is in the slot that holds `bound` (or overflow).
  int16_t slot = kOverflowSlot;
  const uint64_t diff = bound ^ cur_tick_;
  const int level = diff == 0 ? 0 : (63 - __builtin_clzll(diff)) / kSlotBits;
  if (level < kLevels) slot = int16_t(level * kSlots + int((bound >> (level * kSlotBits)) & (kSlots - 1)));
  Timer* best = heads_[size_t(slot)];
  for (Timer* t = best->next_; t != nullptr; t = t->next_)
    if (t->expiry_ < best->expiry_ || (t->expiry_ == best->expiry_ && t->seq_ < best->seq_)) best = t;
  min_ = best;
}

void TimerWheel::move_to(uint64_t tick) {
  if (tick <= cur_tick_) return;
  const uint64_t diff = tick ^ cur_tick_;
  const int top = (63 - __builtin_clzll(diff)) / kSlotBits;
  cur_tick_ = tick;
  // Every slot skipped over is empty (we never move past a non-empty one),
  // so only the slot the new tick lands in at the highest changed level
  // needs its timers spread to lower levels.
  if (top >= kLevels) {
    Timer* list = heads_[kOverflowSlot];
    heads_[kOverflowSlot] = nullptr;
    while (list != nullptr) {
      Timer* next = list->next_;
      place(*list);
      list = next;
    }
    return;
  }
  if (top == 0) return;
  const int idx = int((tick >> (top * kSlotBits)) & (kSlots - 1));
  const int16_t slot = int16_t(top * kSlots + idx);
  Timer* list = heads_[size_t(slot)];
  heads_[size_t(slot)] = nullptr;
  bitmap_[size_t(top)][size_t(idx / 64)] &= ~(1ull << (idx % 64));
  while (list != nullptr) {
    Timer* next = list->next_;
    place(*list);
    list = next;
  }
}

size_t TimerWheel::advance(Time now) {
  if (now < now_) now = now_;
  const bool was_firing = firing_;  // advance() called from a callback
  if (!was_firing) {
    swept_ = now_;
    fired_expiry_ = now_;
    fired_seq_ = 0;
  }
  now_ = now;
  size_t fired = 0;
  // Fire the earliest due timer, one at a time: a callback may arm another
  // timer that is due even sooner.
  for (;;) {
    Timer* best = earliest();
    if (best == nullptr || best->expiry_ > now) break;
    // Nothing fires before it, so the wheel may turn to its tick.
    const uint64_t tick = tick_of(best->expiry_);
    if (tick > cur_tick_) move_to(tick);
    unlink(*best);
    best->wheel_ = nullptr;
    size_--;
    min_valid_ = false;
    fired++;
    firing_ = true;
    if (best->expiry_ > fired_expiry_ || (best->expiry_ == fired_expiry_ && best->seq_ > fired_seq_)) {
      fired_expiry_ = best->expiry_;
      fired_seq_ = best->seq_;
    }
    best->cb_(best->ctx_, now);
  }
  firing_ = was_firing;
  // What is left is due after `now`, so no later than its tick.
  const uint64_t target = tick_of(now);
  if (target > cur_tick_) move_to(target);
  return fired;
}

}  // namespace rocemu
