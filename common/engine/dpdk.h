// DPDK glue: starting the EAL once per process, the packet pool, and the
// per-packet metadata every node may use while it holds a packet.
#pragma once

#include <rte_mbuf.h>
#include <rte_memzone.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu::dpdk {

struct EalOptions {
  // --in-memory with hugepages if the kernel has free ones (no hugetlbfs
  // mount needed); otherwise, and by default, --no-huge --no-shconf.
  bool hugepages = false;
  uint32_t memory_mb = 512;   // with --no-huge, how much memory to reserve
  // CPU the main lcore (the calling thread) is pinned to; -1 pins nothing
  // (the thread keeps the affinity it has), which suits an engine that
  // shares a small machine with the programs it serves.
  int main_cpu = -1;
  // Probe PCI devices (NICs bound to vfio-pci); off by default, so the EAL
  // touches no hardware. Select devices with extra_args {"-a", "BDF"}.
  bool pci = false;
  // DPDK telemetry: its socket (dpdk-telemetry.py -f PREFIX) in the EAL's
  // runtime directory and its thread. Off by default (tests start many EALs).
  bool telemetry = false;
  std::vector<std::string> extra_args;  // e.g. {"--vdev", "net_null0"}
};

// Starts the EAL the first time; later calls return the first call's status
// (one EAL per process: the options of later calls are ignored).
Status init_eal(const EalOptions& opts = {});
bool eal_running();
// The EAL arguments init_eal uses for `opts` (for logs and tests).
std::vector<std::string> eal_args(const EalOptions& opts);
// The EAL's --file-prefix (rocemu-PID) and, if telemetry is on, its socket
// (empty otherwise, or before init_eal).
std::string file_prefix();
std::string telemetry_socket();
// Whether the kernel has free hugepages of any size.
bool hugepages_available();

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
  // When the packet reached the node holding it, in modelled time (set by
  // the link that delivered it; 0 for a packet a node built). A real-time
  // engine may hand a node a late burst at one `now`; a link sends such a
  // packet on from here, not from `now` (see InternalLink::send).
  Time arrival;
};
static_assert(sizeof(PktMeta) <= 64);

// PktMeta::flags bits. 0x01..0x20 are private to the node holding the
// packet; these two cross nodes and every node keeps them.
// kMetaIcrcValid: the frame's ICRC is the one its builder computed (or
// will compute, see below), and nothing it covers has changed since (like
// a NIC's checksum-good offload flag). A fault stage that corrupts a frame
// clears it; a frame from outside never has it.
inline constexpr uint8_t kMetaIcrcValid = 0x80;
// kMetaIcrcPending: the ICRC bytes are not written yet. Inside the engine
// nobody needs them (receivers trust kMetaIcrcValid), so a NIC leaves the
// CRC of its 4 KiB frames to whoever looks at the bytes: a capture, an
// external port, a fault stage that copies or corrupts the frame -- each
// calls seal() first, like a NIC computing its CRC at the MAC.
inline constexpr uint8_t kMetaIcrcPending = 0x40;
inline constexpr uint8_t kMetaCrossNode = kMetaIcrcValid | kMetaIcrcPending;

inline PktMeta& meta(rte_mbuf* m) { return *static_cast<PktMeta*>(rte_mbuf_to_priv(m)); }
inline std::span<uint8_t> bytes(rte_mbuf* m) {
  return {rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m)};
}
// Writes a pending ICRC (see kMetaIcrcPending); the frame's bytes are then
// what the wire carries.
void seal_slow(rte_mbuf* m);
inline void seal(rte_mbuf* m) {
  if (meta(m).flags & kMetaIcrcPending) seal_slow(m);
}

// A pool of single-segment mbufs large enough for a 4096-byte RoCE MTU
// packet with every header (and for any frame up to kMaxFrame).
//
// The pool's memory is reserved whole at create() (one IOVA-contiguous
// zone) but its buffers are made (placed and initialised, which touches
// their memory) a chunk at a time as they are first needed, each chunk as
// large as all the chunks before it: without hugepages a fabric sized for
// 65536 buffers that never holds more than 8000 touches the memory of at
// most twice that many (setting up all 65536 faults in 65536 pages, half
// a second of system time). Hugepages are mapped whole when reserved. A
// PMD allocates from the pool itself and cannot make more: a port that
// receives into it calls populate_all() before its device starts.
class PacketPool {
 public:
  static constexpr uint16_t kMaxFrame = 4352;

  static Result<PacketPool*> create(const std::string& name, uint32_t n_mbufs);
  ~PacketPool();
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  rte_mbuf* alloc() {
    rte_mbuf* m = rte_pktmbuf_alloc(mp_);
    if (m == nullptr) [[unlikely]]
      m = alloc_after_growing();
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
  // Buffers handed out and not yet freed.
  uint32_t in_use() const;
  // Buffers alloc() can still hand out: free ones and those not made yet.
  uint32_t available() const;
  bool exhausted() const { return available() == 0; }
  uint32_t capacity() const { return capacity_; }
  // Buffers made so far (capacity() once populate_all() has run).
  uint32_t populated() const { return mp_->populated_size; }
  uint64_t alloc_failures() const { return alloc_failures_; }
  // Makes every buffer now.
  Status populate_all();

  // The zone for n buffers of `elt` bytes (mempool header and trailer
  // included) in pages of `page` bytes, and the next chunk's bytes when
  // `made` of n are made (for tests of the sizing).
  static size_t zone_bytes(uint32_t n, size_t elt, size_t page);
  static size_t chunk_bytes(uint32_t made, uint32_t n, size_t elt, size_t page);
  static constexpr uint32_t kFirstChunk = 4096;
  static constexpr uint32_t kMaxChunks = 32;  // chunks double: 2^22 buffers take 12

 private:
  PacketPool(rte_mempool* mp, const rte_memzone* mz, uint32_t capacity, size_t page)
      : mp_(mp), mz_(mz), capacity_(capacity), page_(page) {}
  rte_mbuf* alloc_after_growing();
  bool can_grow() const { return mz_ != nullptr && !grow_failed_ && mp_->populated_size < mp_->size; }
  // Makes the next chunk of buffers; false (and never again) if none could be.
  bool grow();

  rte_mempool* mp_;
  const rte_memzone* mz_;  // the memory of every buffer, made or not
  uint32_t capacity_;
  size_t page_;
  size_t used_bytes_ = 0;  // of mz_, by the chunks made so far
  bool grow_failed_ = false;
  uint64_t alloc_failures_ = 0;
};

inline void free_burst(rte_mbuf** pkts, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) rte_pktmbuf_free(pkts[i]);
}

}  // namespace rocemu::dpdk
