#include "common/engine/fault_stage.h"

#include <algorithm>

#include "common/engine/dpdk.h"

namespace rocemu {
namespace {

void bump(uint64_t* cell) {
  if (cell != nullptr) (*cell)++;
}

}  // namespace

void DelayQueue::grow() {
  std::vector<Held> bigger(ring_.size() * 2);
  for (size_t i = 0; i < count_; i++) bigger[i] = ring_[(head_ + i) & (ring_.size() - 1)];
  ring_ = std::move(bigger);
  head_ = 0;
}

void DelayQueue::push_out_of_order(rte_mbuf* pkt, Time due) {
  heap_.push_back({due, seq_++, pkt});
  std::push_heap(heap_.begin(), heap_.end(), later);
}

DelayQueue::Held DelayQueue::pop_heap() {
  std::pop_heap(heap_.begin(), heap_.end(), later);
  const Held h = heap_.back();
  heap_.pop_back();
  return h;
}

void DelayQueue::clear() {
  for (size_t i = 0; i < count_; i++) rte_pktmbuf_free(ring_[(head_ + i) & (ring_.size() - 1)].pkt);
  for (Held& h : heap_) rte_pktmbuf_free(h.pkt);
  head_ = count_ = 0;
  heap_.clear();
}

FaultStage::FaultStage(uint64_t seed) : seed_(seed) { entries_.push_back(Entry{0, FaultInjector(seed), {}}); }

void FaultStage::reseed(uint64_t seed) {
  seed_ = seed;
  for (Entry& e : entries_) {
    FaultConfig cfg = e.injector.config();
    e.injector = FaultInjector(e.id == 0 ? seed : Rng::derive(seed, e.id));
    e.injector.configure(std::move(cfg));
  }
}

void FaultStage::configure(FaultConfig cfg) {
  entries_.front().injector.configure(std::move(cfg));
  derive();
}

void FaultStage::add(uint32_t id, FaultConfig cfg) {
  Entry e{id, FaultInjector(Rng::derive(seed_, id)), {}};
  e.injector.configure(std::move(cfg));
  entries_.push_back(std::move(e));
  derive();
}

bool FaultStage::remove(uint32_t id) {
  if (id == 0) {
    if (!entries_.front().injector.active()) return false;
    entries_.front().injector.configure(FaultConfig{});
    derive();
    return true;
  }
  const auto it = std::find_if(entries_.begin() + 1, entries_.end(), [&](const Entry& e) { return e.id == id; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  derive();
  return true;
}

void FaultStage::clear() {
  entries_.erase(entries_.begin() + 1, entries_.end());
  entries_.front().injector.configure(FaultConfig{});
  derive();
}

const FaultStage::Entry* FaultStage::find(uint32_t id) const {
  for (const Entry& e : entries_)
    if (e.id == id) return &e;
  return nullptr;
}

void FaultStage::derive() {
  delayers_.reserve(entries_.size());
  active_ = link_down_ = false;
  rate_.reset();
  for (const Entry& e : entries_) {
    const FaultConfig& c = e.injector.config();
    active_ |= c.any();
    link_down_ |= c.link_down;
    if (c.rate_bps && (!rate_ || *c.rate_bps < *rate_)) rate_ = c.rate_bps;
  }
}

FaultStage::Outcome FaultStage::apply(rte_mbuf* m, dpdk::PacketPool& pool) {
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  Entry* corrupter = nullptr;
  Entry* duplicator = nullptr;
  Outcome o;
  delayers_.clear();
  // Decide first: a frame a later fault drops was neither delayed nor
  // corrupted by an earlier one.
  for (Entry& e : entries_) {
    if (!e.injector.active()) continue;
    const FaultDecision d = e.injector.decide(data, len);
    if (d.drop) {
      e.stats.dropped++;
      bump(cells_.dropped);
      rte_pktmbuf_free(m);
      return {};
    }
    if (d.corrupt && corrupter == nullptr) corrupter = &e;
    if (d.duplicate && duplicator == nullptr) duplicator = &e;
    if (d.delayed) {
      o.extra += d.extra_delay;
      delayers_.push_back(&e);
    }
  }
  if (corrupter != nullptr || duplicator != nullptr) dpdk::seal(m);  // corrupt, or copy, what the wire carries
  if (corrupter != nullptr) {
    corrupter->injector.corrupt(data, len);
    dpdk::meta(m).flags &= uint8_t(~dpdk::kMetaIcrcValid);
    corrupter->stats.corrupted++;
    bump(cells_.corrupted);
  }
  if (duplicator != nullptr) {
    o.copy = pool.alloc_copy({data, len});
    if (o.copy != nullptr) {
      duplicator->stats.duplicated++;
      bump(cells_.duplicated);
    }
  }
  o.delayed = o.extra.count() > 0;
  if (o.delayed) bump(cells_.delayed);
  for (Entry* e : delayers_) e->stats.delayed++;
  o.pkt = m;
  return o;
}

}  // namespace rocemu
