// DPDK glue: starting the EAL once per process, the packet pool, and the
// per-packet metadata every node may use while it holds a packet.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu::dpdk {

struct EalOptions {
  bool hugepages = false;     // --in-memory with hugepages, else --no-huge
  uint32_t memory_mb = 512;   // with --no-huge, how much memory to reserve
  std::vector<std::string> extra_args;
};

// Starts the EAL the first time; later calls return the first call's status.
Status init_eal(const EalOptions& opts = {});
bool eal_running();

// Metadata in each mbuf's private area, owned by whichever node holds the
// packet at the moment.
struct PktMeta {
  Time stamp;            // when the packet entered its current queue or link
  uint16_t in_port;      // ingress port on the node holding it
  uint16_t out_port;
  uint8_t prio;          // switch priority
  uint8_t tc;            // traffic class
  uint8_t pg;            // priority group
  uint8_t flags;
  uint32_t seq;          // per-link sequence number (ordering in flight)
  uint32_t aux;
  uint64_t scratch[4];
};
static_assert(sizeof(PktMeta) <= 64);

inline PktMeta& meta(rte_mbuf* m) { return *static_cast<PktMeta*>(rte_mbuf_to_priv(m)); }
inline std::span<uint8_t> bytes(rte_mbuf* m) {
  return {rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m)};
}

// A pool of single-segment mbufs large enough for a 4096-byte RoCE MTU
// packet with every header (and for any frame up to kMaxFrame).
class PacketPool {
 public:
  static constexpr uint16_t kMaxFrame = 4352;

  static Result<PacketPool*> create(const std::string& name, uint32_t n_mbufs);
  ~PacketPool();
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  rte_mbuf* alloc() {
    rte_mbuf* m = rte_pktmbuf_alloc(mp_);
    if (m == nullptr) {
      alloc_failures_++;
    } else {
      meta(m) = PktMeta{};
    }
    return m;
  }
  // A new packet holding a copy of `frame` (nullptr if the pool is empty or
  // the frame does not fit).
  rte_mbuf* alloc_copy(std::span<const uint8_t> frame);
  rte_mempool* mempool() const { return mp_; }
  uint32_t in_use() const;
  uint32_t capacity() const { return capacity_; }
  uint64_t alloc_failures() const { return alloc_failures_; }

 private:
  PacketPool(rte_mempool* mp, uint32_t capacity) : mp_(mp), capacity_(capacity) {}
  rte_mempool* mp_;
  uint32_t capacity_;
  uint64_t alloc_failures_ = 0;
};

inline void free_burst(rte_mbuf** pkts, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) rte_pktmbuf_free(pkts[i]);
}

}  // namespace rocemu::dpdk
