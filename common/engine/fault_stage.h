// The fault stage of a wire or a switch port: one type for both. It holds
// the faults in force (the configured set of a topology, scenario or NVUE,
// plus any added at run time by `rocemu fault add`, each with its own
// counters), applies them to each frame (drop, corrupt, duplicate, delay),
// answers whether the link is down and at what rate it runs, and keeps the
// frames it holds back in a queue ordered by when they are due.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "common/engine/fault.h"
#include "common/engine/time.h"

namespace rocemu {

namespace dpdk {
class PacketPool;
}

// What one fault did, counted per fault.
struct FaultStats {
  uint64_t dropped = 0;
  uint64_t corrupted = 0;
  uint64_t duplicated = 0;
  uint64_t delayed = 0;
};

// Frames held until they are due, delivered in (due, order of arrival)
// order. Almost everything comes in order (a wire is a FIFO): that queues
// in a ring; only a frame due earlier than one before it goes to a heap.
// The in-order paths are inline: a link pushes and pops every frame here.
class DelayQueue {
 public:
  struct Held {
    Time due;
    uint64_t seq;
    rte_mbuf* pkt;
  };
  DelayQueue() : ring_(kInitialRing) { heap_.reserve(256); }
  ~DelayQueue() { clear(); }
  DelayQueue(const DelayQueue&) = delete;
  DelayQueue& operator=(const DelayQueue&) = delete;

  void push(rte_mbuf* pkt, Time due) {
    if (count_ == 0 || due >= back().due) {
      if (count_ == ring_.size()) grow();
      ring_[(head_ + count_) & (ring_.size() - 1)] = {due, seq_++, pkt};
      count_++;
      return;
    }
    push_out_of_order(pkt, due);
  }
  bool empty() const { return count_ == 0 && heap_.empty(); }
  uint64_t size() const { return count_ + heap_.size(); }
  const Held& next() const {
    if (heap_.empty() || (count_ != 0 && !later(front(), heap_.front()))) return front();
    return heap_.front();
  }
  Held pop() {
    if (heap_.empty() || (count_ != 0 && !later(front(), heap_.front()))) {
      const Held h = front();
      head_ = (head_ + 1) & (ring_.size() - 1);
      count_--;
      return h;
    }
    return pop_heap();
  }
  // Frees every frame held.
  void clear();

 private:
  static constexpr size_t kInitialRing = 64;  // a power of two, as the ring stays
  static bool later(const Held& a, const Held& b) { return a.due != b.due ? a.due > b.due : a.seq > b.seq; }
  const Held& front() const { return ring_[head_]; }
  const Held& back() const { return ring_[(head_ + count_ - 1) & (ring_.size() - 1)]; }
  void grow();
  void push_out_of_order(rte_mbuf* pkt, Time due);
  Held pop_heap();

  std::vector<Held> ring_;  // in-order frames: count_ of them from head_
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<Held> heap_;  // binary heap on (due, seq)
  uint64_t seq_ = 0;
};

class FaultStage {
 public:
  // The owner's counters the stage bumps besides each fault's own (a
  // link end's tx_*_fault, a switch port's discards.fault and fault.*).
  struct Cells {
    uint64_t* dropped = nullptr;
    uint64_t* corrupted = nullptr;
    uint64_t* duplicated = nullptr;
    uint64_t* delayed = nullptr;
  };
  // One fault in force. Id 0 is the configured set (configure()); run-time
  // faults have the id add() gave them.
  struct Entry {
    uint32_t id = 0;
    FaultInjector injector;
    FaultStats stats;
  };
  // What becomes of a frame: `pkt` null if dropped; `copy` a duplicate;
  // both due `extra` later than they would be; `delayed` if a fault
  // delayed them.
  struct Outcome {
    rte_mbuf* pkt = nullptr;
    rte_mbuf* copy = nullptr;
    Duration extra{0};
    bool delayed = false;
  };

  explicit FaultStage(uint64_t seed = 1);
  FaultStage(const FaultStage&) = delete;
  FaultStage& operator=(const FaultStage&) = delete;

  void bind(Cells cells) { cells_ = cells; }
  // A new random stream for every fault (what each decides from here on).
  void reseed(uint64_t seed);

  // The configured set: replaces entry 0, leaving run-time faults alone.
  void configure(FaultConfig cfg);
  const FaultConfig& configured() const { return entries_.front().injector.config(); }
  // Run-time faults: each adds to what is in force (a delay added to a
  // loss keeps the loss). `id` must be above 0 and not in use.
  void add(uint32_t id, FaultConfig cfg);
  bool remove(uint32_t id);
  // Every fault goes, the configured set included.
  void clear();
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* find(uint32_t id) const;

  bool active() const { return active_; }
  bool link_down() const { return link_down_; }
  // The lowest rate a fault sets, if any sets one.
  const std::optional<uint64_t>& rate_bps() const { return rate_; }

  // Applies every fault to `m`, in the order they were added; `pool`
  // makes duplicates.
  Outcome apply(rte_mbuf* m, dpdk::PacketPool& pool);

  // What the owner holds back until it is due.
  DelayQueue& held() { return held_; }
  const DelayQueue& held() const { return held_; }

 private:
  void derive();  // active_, link_down_, rate_ from the entries

  uint64_t seed_;
  std::vector<Entry> entries_;
  Cells cells_;
  bool active_ = false;
  bool link_down_ = false;
  std::optional<uint64_t> rate_;
  std::vector<Entry*> delayers_;  // apply(): the faults that delay this frame
  DelayQueue held_;
};

}  // namespace rocemu
