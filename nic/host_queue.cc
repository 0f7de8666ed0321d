#include "nic/host_queue.h"

#include <cerrno>
#include <cstring>

namespace rocemu::nic {

namespace host_queue_sge {

// Sum of the SGE lengths, stopped as soon as it passes `limit` (each length
// is compared with what is left, so no sum wraps); false when it does.
bool total_within(const ibv_send_wr& wr, uint32_t limit, uint32_t& total) {
  total = 0;
  for (int i = 0; i < wr.num_sge; i++) {
    if (wr.sg_list[i].length > limit - total) return false;
    total += wr.sg_list[i].length;
  }
  return true;
}

}  // namespace host_queue_sge

int write_send_wqe(SendQueueShadow& sq, const ibv_send_wr& wr, uint32_t ud_ah, uint32_t ud_qpn, uint32_t ud_qkey,
                   uint32_t xrc_srqn) {
  if (sq.tail - sq.head >= sq.ring.entries()) return ENOMEM;
  // As mlx5_post_send: more SGEs than the QP was created with is EINVAL,
  // whatever the opcode and whether inline or not.
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > sq.max_sge) return EINVAL;
  uint8_t* e = sq.ring.entry(sq.tail);
  SendWqe hdr{};
  hdr.wr_id = wr.wr_id;
  hdr.opcode = uint8_t(wr.opcode);
  hdr.send_flags = uint16_t(wr.send_flags);
  hdr.imm = wr.opcode == IBV_WR_SEND_WITH_INV || wr.opcode == IBV_WR_LOCAL_INV ? wr.invalidate_rkey : wr.imm_data;
  hdr.xrc_remote_srqn = xrc_srqn;
  switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      hdr.remote_addr = wr.wr.rdma.remote_addr;
      hdr.rkey = wr.wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      hdr.remote_addr = wr.wr.atomic.remote_addr;
      hdr.rkey = wr.wr.atomic.rkey;
      hdr.compare_add = wr.wr.atomic.compare_add;
      hdr.swap = wr.wr.atomic.swap;
      break;
    case IBV_WR_ATOMIC_WRITE: {
      // The 8 bytes are taken now, as inline data is (rxe's
      // ibv_wr_atomic_write copies them at the call too).
      uint32_t total = 0;
      if (!host_queue_sge::total_within(wr, 8, total) || total != 8) return EINVAL;
      uint8_t value[8];
      uint8_t* p = value;
      for (int i = 0; i < wr.num_sge; i++) {
        std::memcpy(p, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
        p += wr.sg_list[i].length;
      }
      hdr.remote_addr = wr.wr.rdma.remote_addr;
      hdr.rkey = wr.wr.rdma.rkey;
      std::memcpy(&hdr.compare_add, value, 8);
      std::memcpy(e, &hdr, sizeof hdr);
      sq.tail++;
      return 0;
    }
    case IBV_WR_BIND_MW: {
      if (wr.bind_mw.mw == nullptr) return EINVAL;
      const ibv_mw_bind_info& b = wr.bind_mw.bind_info;
      hdr.imm = wr.bind_mw.mw != nullptr ? wr.bind_mw.mw->rkey : 0;
      hdr.rkey = wr.bind_mw.rkey;
      hdr.remote_addr = b.addr;
      hdr.compare_add = b.length;
      hdr.swap = uint32_t(b.mw_access_flags);
      hdr.ud_ah = b.mr != nullptr ? b.mr->lkey : 0;
      std::memcpy(e, &hdr, sizeof hdr);
      sq.tail++;
      return 0;
    }
    default:
      break;
  }
  hdr.ud_ah = ud_ah;
  hdr.ud_remote_qpn = ud_qpn;
  hdr.ud_remote_qkey = ud_qkey;
  if (wr.send_flags & IBV_SEND_INLINE) {
    uint32_t total = 0;
    if (!host_queue_sge::total_within(wr, sq.max_inline, total) || sizeof(SendWqe) + total > sq.ring.stride()) return EINVAL;
    uint8_t* p = e + sizeof(SendWqe);
    for (int i = 0; i < wr.num_sge; i++) {
      std::memcpy(p, reinterpret_cast<const void*>(wr.sg_list[i].addr), wr.sg_list[i].length);
      p += wr.sg_list[i].length;
    }
    hdr.inline_len = total;
  } else {
    hdr.num_sge = uint8_t(wr.num_sge);
    auto* s = reinterpret_cast<Sge*>(e + sizeof(SendWqe));
    for (int i = 0; i < wr.num_sge; i++) s[i] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  }
  std::memcpy(e, &hdr, sizeof hdr);
  sq.tail++;
  return 0;
}

void publish_send(SendQueueShadow& sq) { sq.ring.set_producer(sq.tail); }

int write_recv_wqe(RecvQueueShadow& rq, const ibv_recv_wr& wr) {
  if (rq.tail - rq.ring.consumer() >= rq.ring.entries()) return ENOMEM;
  if (wr.num_sge < 0 || uint32_t(wr.num_sge) > rq.max_sge) return EINVAL;
  uint8_t* e = rq.ring.entry(rq.tail);
  RecvWqe hdr{wr.wr_id, uint32_t(wr.num_sge), 0};
  std::memcpy(e, &hdr, sizeof hdr);
  auto* s = reinterpret_cast<Sge*>(e + sizeof(RecvWqe));
  for (int i = 0; i < wr.num_sge; i++) s[i] = {wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey};
  rq.tail++;
  return 0;
}

void publish_recv(RecvQueueShadow& rq) { rq.ring.set_producer(rq.tail); }

}  // namespace rocemu::nic
