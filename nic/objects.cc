#include "nic/objects.h"

namespace rocemu::nic {

bool Cq::push(const Cqe& cqe, bool solicited) {
  if (produced_ - ring_.consumer() >= ring_.entries()) {
    overflowed_ = true;
    ring_.header()->overflow.store(1, std::memory_order_release);
    return false;
  }
  std::memcpy(ring_.entry(produced_), &cqe, sizeof cqe);
  produced_++;
  ring_.set_producer(produced_);
  // Completion channel: arm = 1 fires on any completion, 2 on solicited
  // ones. The producer index is visible before the arm is read (a full
  // barrier, the other half of nic::arm_cq's): an application arming now
  // either finds this completion in the poll after arming or gets the
  // event. The arm is taken with a compare-exchange, so one the
  // application sets again meanwhile is not wiped.
  // The event count goes up before `polling` is read (the read-modify-
  // write is a full barrier, the other half of nic::end_event_poll's): an
  // application that stops polling either sees the count or gets the fd
  // written.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  RingHeader& h = *ring_.header();
  uint32_t arm = h.arm.load(std::memory_order_relaxed);
  if ((arm == 1 || (arm == 2 && solicited)) && h.arm.compare_exchange_strong(arm, 0, std::memory_order_acq_rel)) {
    h.events.fetch_add(1, std::memory_order_seq_cst);
    if (h.polling.load(std::memory_order_seq_cst) == 0 && on_event) on_event();
  }
  return true;
}

bool RecvQueue::pop(RecvEntry& out) {
  if (available() == 0) return false;
  const uint8_t* e = ring_.entry(consumed_);
  consumed_++;
  ring_.set_consumer(consumed_);
  RecvWqe hdr;
  std::memcpy(&hdr, e, sizeof hdr);
  out.wr_id = hdr.wr_id;
  out.length = 0;
  if (hdr.num_sge > max_sge_ || hdr.num_sge > 16) {
    out.num_sge = UINT32_MAX;
    return true;
  }
  out.num_sge = hdr.num_sge;
  std::memcpy(out.sge, e + sizeof(RecvWqe), sizeof(Sge) * hdr.num_sge);
  for (uint32_t i = 0; i < out.num_sge; i++) out.length += out.sge[i].length;
  return true;
}

}  // namespace rocemu::nic
