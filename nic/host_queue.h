// The application side of the host queues: turning ibv_send_wr /
// ibv_recv_wr into ring entries and CQEs into ibv_wc. Used by the verbs
// provider (over shared memory) and by the in-process test host. No DPDK
// here: the provider links none.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "nic/queues.h"

namespace rocemu::nic {

struct SendQueueShadow {
  Ring ring;
  uint32_t head = 0;       // oldest entry not known complete
  uint32_t tail = 0;       // next entry to write (= producer)
  uint32_t max_sge = 0;
  uint32_t max_inline = 0;
  bool sig_all = false;
  uint32_t unsignaled_since = 0;
};

struct RecvQueueShadow {
  Ring ring;
  uint32_t tail = 0;
  uint32_t max_sge = 0;
};

// Checks and writes one send WR; returns 0 or the errno a provider gives
// (ENOMEM: queue full, EINVAL: too many SGEs or inline too long). Does not
// publish it: call publish_send() after a chain.
// `xrc_srqn`: an XRC send QP's WR, the SRQ at the target (wr.qp_type.xrc.remote_srqn).
int write_send_wqe(SendQueueShadow& sq, const ibv_send_wr& wr, uint32_t ud_ah, uint32_t ud_qpn, uint32_t ud_qkey,
                   uint32_t xrc_srqn = 0);
void publish_send(SendQueueShadow& sq);
int write_recv_wqe(RecvQueueShadow& rq, const ibv_recv_wr& wr);
void publish_recv(RecvQueueShadow& rq);

// Reads completions from a CQ ring. Send completions also retire the send
// queue entries up to the one they name (signalled entries vouch for the
// unsignalled ones before them).
struct CqShadow {
  Ring ring;
  uint32_t consumer = 0;
};
// Arms the CQ for an event on its next completion (any, or solicited
// only): ibv_req_notify_cq. A full barrier: the poll that follows must not
// read the producer index before the arm is visible, or a completion the
// engine writes meanwhile is neither seen nor signalled (Cq::push holds
// the other half).
inline void arm_cq(CqShadow& cq, bool solicited_only) {
  cq.ring.header()->arm.store(solicited_only ? 2 : 1, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// ibv_get_cq_event polling a CQ's event count before it sleeps: while
// `polling` is set the NIC raises events without writing the channel's fd
// (on this emulation the NIC pays for the wake-up: a cross-core wake costs
// the engine thread 8-16 us here). end_event_poll() clears it with a full
// barrier before the caller's last look at the count and its sleep on the
// fd: either that look sees an event raised meanwhile or the NIC saw the
// flag clear and wrote the fd (Cq::push holds the other half).
inline void begin_event_poll(CqShadow& cq) { cq.ring.header()->polling.store(1, std::memory_order_seq_cst); }
inline void end_event_poll(CqShadow& cq) {
  cq.ring.header()->polling.store(0, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// Returns the number of entries written to wc; `on_send_cqe(qp_num,
// wqe_index)` lets the caller retire send queue entries.
template <typename OnSend>
int poll_cq_ring(CqShadow& cq, int n, ibv_wc* wc, OnSend&& on_send) {
  int got = 0;
  const uint32_t producer = cq.ring.producer();
  while (got < n && cq.consumer != producer) {
    Cqe c;
    __builtin_memcpy(&c, cq.ring.entry(cq.consumer), sizeof c);
    cq.consumer++;
    ibv_wc& w = wc[got++];
    w = ibv_wc{};
    w.wr_id = c.wr_id;
    w.status = ibv_wc_status(c.status);
    w.opcode = ibv_wc_opcode(c.opcode);
    w.vendor_err = c.vendor_err;
    w.byte_len = c.byte_len;
    w.imm_data = c.imm;
    w.qp_num = c.qp_num;
    w.src_qp = c.src_qp;
    w.wc_flags = c.wc_flags;
    w.pkey_index = c.pkey_index;
    w.slid = c.slid;
    w.sl = c.sl;
    w.dlid_path_bits = c.dlid_path_bits;
    if (c.is_send) on_send(c.qp_num, c.wqe_index);
  }
  if (got > 0) cq.ring.set_consumer(cq.consumer);
  return got;
}

}  // namespace rocemu::nic
