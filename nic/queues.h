// Host queues: the layout of send, receive and completion queues in memory
// shared between an application (the verbs provider, or a test acting as
// one) and the emulated NIC, as a real NIC's queues live in host memory.
// One producer and one consumer per ring; indices run freely and wrap at
// 2^32; entries are a power of two. Everything the NIC reads from here was
// written by an untrusted application and is validated before use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rocemu::nic {

struct alignas(64) RingIndex {
  std::atomic<uint32_t> v{0};
};
static_assert(sizeof(RingIndex) == 64);

struct alignas(64) RingHeader {
  RingIndex producer;  // next entry the producer will write
  RingIndex consumer;  // next entry the consumer will read
  uint32_t entries;    // power of two
  uint32_t stride;     // bytes per entry
  // CQ only: armed for an event (1 = next completion, 2 = solicited only).
  std::atomic<uint32_t> arm{0};
  // CQ only: the NIC sets it when a completion was lost for want of room.
  std::atomic<uint32_t> overflow{0};
  // CQ only: completion events raised (the provider finds which CQ of a
  // channel fired by comparing with what it has seen).
  std::atomic<uint32_t> events{0};
  // CQ only: nonzero while the application polls `events` itself in
  // ibv_get_cq_event: the NIC then raises the event without writing the
  // channel's fd (no wake-up to pay for). The application clears it
  // before it sleeps on the fd (see nic::end_event_poll).
  std::atomic<uint32_t> polling{0};
  uint32_t reserved[10];
};
static_assert(sizeof(RingHeader) == 192);

struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};
static_assert(sizeof(Sge) == 16);

// Send queue entry: a 64-byte header followed by num_sge Sge entries or
// inline_len bytes of inline data. IBV_WR_BIND_MW has neither: imm is the
// window's rkey now, rkey its new one, remote_addr and compare_add the
// window's address and length, swap its access flags and ud_ah the MR's
// lkey (0: no MR). IBV_WR_LOCAL_INV: imm is the rkey to invalidate.
// IBV_WR_ATOMIC_WRITE has neither either: compare_add holds the 8 bytes to
// store, as they were in the application's memory when it posted.
struct SendWqe {
  uint64_t wr_id;
  uint8_t opcode;       // enum ibv_wr_opcode
  uint8_t num_sge;
  uint16_t send_flags;  // enum ibv_send_flags
  uint32_t imm;         // imm_data as the application gave it (network order) or invalidate_rkey
  uint64_t remote_addr;
  uint32_t rkey;
  uint32_t inline_len;
  uint64_t compare_add;
  uint64_t swap;
  uint32_t ud_ah;       // address handle id (UD)
  uint32_t ud_remote_qpn;
  uint32_t ud_remote_qkey;
  uint32_t xrc_remote_srqn;  // XRC send QP: the SRQ at the target (24 bits)
};
static_assert(sizeof(SendWqe) == 64);

struct RecvWqe {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;
};
static_assert(sizeof(RecvWqe) == 16);

// Completion queue entry, written by the NIC.
struct Cqe {
  uint64_t wr_id;
  uint32_t status;      // enum ibv_wc_status
  uint32_t opcode;      // enum ibv_wc_opcode
  uint32_t vendor_err;
  uint32_t byte_len;
  uint32_t imm;         // imm_data (network order) or invalidated rkey
  uint32_t qp_num;
  uint32_t src_qp;
  uint32_t wc_flags;    // enum ibv_wc_flags
  uint16_t pkey_index;
  uint16_t slid;
  uint8_t sl;
  uint8_t dlid_path_bits;
  uint8_t is_send;      // 1 = from the send queue
  uint8_t reserved0;
  uint32_t wqe_index;   // send queue index of the completed entry
  uint32_t reserved[3];
};
static_assert(sizeof(Cqe) == 64);

// Sizes of one queue in shared memory.
constexpr uint32_t send_wqe_stride(uint32_t max_sge, uint32_t max_inline) {
  uint32_t body = max_sge * uint32_t(sizeof(Sge));
  if (max_inline > body) body = max_inline;
  return (uint32_t(sizeof(SendWqe)) + body + 63) & ~63u;
}
constexpr uint32_t recv_wqe_stride(uint32_t max_sge) {
  return (uint32_t(sizeof(RecvWqe)) + max_sge * uint32_t(sizeof(Sge)) + 15) & ~15u;
}
// The smallest power of two >= v; 0 if there is none in 32 bits (v above
// 2^31): callers refuse such sizes.
constexpr uint32_t round_up_pow2(uint32_t v) {
  if (v > (1u << 31)) return 0;
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
constexpr size_t ring_bytes(uint32_t entries, uint32_t stride) {
  return sizeof(RingHeader) + size_t(entries) * stride;
}

// A view of a ring placed in memory (shared or local). Sizes are kept on
// this side, never re-read from the shared header an application can write.
class Ring {
 public:
  Ring() = default;
  Ring(void* base, uint32_t entries, uint32_t stride, bool initialize)
      : base_(static_cast<uint8_t*>(base)), entries_(entries), stride_(stride) {
    if (initialize) {
      new (base_) RingHeader();
      header()->entries = entries;
      header()->stride = stride;
    }
  }
  bool valid() const { return base_ != nullptr; }
  RingHeader* header() const { return reinterpret_cast<RingHeader*>(base_); }
  uint32_t entries() const { return entries_; }
  uint32_t stride() const { return stride_; }
  uint8_t* entry(uint32_t index) const {
    return base_ + sizeof(RingHeader) + size_t(index & (entries_ - 1)) * stride_;
  }
  uint32_t producer() const { return header()->producer.v.load(std::memory_order_acquire); }
  uint32_t consumer() const { return header()->consumer.v.load(std::memory_order_acquire); }
  void set_producer(uint32_t v) { header()->producer.v.store(v, std::memory_order_release); }
  void set_consumer(uint32_t v) { header()->consumer.v.store(v, std::memory_order_release); }

 private:
  uint8_t* base_ = nullptr;
  uint32_t entries_ = 0;
  uint32_t stride_ = 0;
};

}  // namespace rocemu::nic
