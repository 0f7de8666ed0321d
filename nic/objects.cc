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
  // Completion channel: arm = 1 fires on any completion, 2 on solicited ones.
  const uint32_t arm = ring_.header()->arm.load(std::memory_order_acquire);
  if (arm == 1 || (arm == 2 && solicited)) {
    ring_.header()->arm.store(0, std::memory_order_release);
    ring_.header()->events.fetch_add(1, std::memory_order_release);
    if (on_event) on_event();
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
