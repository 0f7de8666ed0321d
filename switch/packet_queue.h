// A FIFO of packets for one egress queue: a power-of-two ring of mbuf
// pointers that doubles when full. The buffer limits bound its length, so
// it grows a few times early on and then never allocates again.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <memory>

namespace rocemu::sw {

class PacketQueue {
 public:
  explicit PacketQueue(uint32_t capacity = 256) : cap_(capacity), ring_(new rte_mbuf*[capacity]) {}
  ~PacketQueue() { clear(); }
  PacketQueue(const PacketQueue&) = delete;
  PacketQueue& operator=(const PacketQueue&) = delete;

  bool empty() const { return head_ == tail_; }
  uint32_t size() const { return tail_ - head_; }
  rte_mbuf* front() const { return ring_[head_ & (cap_ - 1)]; }
  void push(rte_mbuf* m) {
    if (size() == cap_) grow();
    ring_[tail_++ & (cap_ - 1)] = m;
  }
  rte_mbuf* pop() { return ring_[head_++ & (cap_ - 1)]; }
  // Frees every packet.
  void clear() {
    while (!empty()) rte_pktmbuf_free(pop());
  }

 private:
  void grow() {
    std::unique_ptr<rte_mbuf*[]> bigger(new rte_mbuf*[cap_ * 2]);
    const uint32_t n = size();
    for (uint32_t i = 0; i < n; i++) bigger[i] = ring_[(head_ + i) & (cap_ - 1)];
    ring_ = std::move(bigger);
    cap_ *= 2;
    head_ = 0;
    tail_ = n;
  }
  uint32_t cap_;
  std::unique_ptr<rte_mbuf*[]> ring_;
  uint32_t head_ = 0, tail_ = 0;
};

}  // namespace rocemu::sw
