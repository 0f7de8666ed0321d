// Requester: turns send WQEs into request packets. Copies each WQE out of
// the ring once and checks it, segments messages to the path MTU, numbers
// packets with PSNs, honours max_rd_atomic, fences and the loss
// recovery's window, and resends on NAK or timeout as the loss recovery
// says (nic/loss_recovery.h: go-back-N rewinds, selective repeat resends
// single PSNs).
#include <algorithm>

#include "common/engine/lazy_payload.h"
#include "nic/nic.h"

namespace rocemu::nic {

namespace {

bool opcode_allowed(QpType t, uint8_t opcode) {
  switch (opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      return true;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return t != QpType::kUd;
    case IBV_WR_BIND_MW:  // as mlx5: on RC and UC QPs
    case IBV_WR_LOCAL_INV:
      return t != QpType::kUd;
    case IBV_WR_SEND_WITH_INV:
    case IBV_WR_RDMA_READ:
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return t == QpType::kRc || t == QpType::kXrcSend;
    case IBV_WR_ATOMIC_WRITE:  // RC only, as rxe
      return t == QpType::kRc;
    default:
      return false;
  }
}

uint32_t packets_for(uint32_t length, uint32_t mtu) { return length == 0 ? 1 : (length + mtu - 1) / mtu; }

Duration ack_timeout(uint8_t timeout) {
  // 4.096 us * 2^timeout; 0 means wait forever.
  return timeout == 0 ? kTimeNever : ns(4096) * (int64_t(1) << timeout);
}

}  // namespace

void Nic::retry_thunk(void* c, Time now) {
  auto* qp = static_cast<Qp*>(c);
  qp->nic->on_retry_timer(*qp, now);
}

void Nic::rnr_thunk(void* c, Time now) {
  auto* qp = static_cast<Qp*>(c);
  qp->nic->on_rnr_timer(*qp, now);
}

bool Nic::validate_local_sges(Qp& qp, SendWork& w) {
  // Local keys: an MR of the QP's PD, not invalidated, covering the range;
  // READ and atomic results are written, so they need local write access.
  const bool writes = w.needs_response();
  uint64_t total = 0;
  for (uint32_t i = 0; i < w.num_sge; i++) {
    const Sge& s = w.sge[i];
    total += s.length;
    if (s.length == 0) continue;
    Mr* mr = mrs_.find(s.lkey);
    if (mr == nullptr || mr->invalidated || mr->pd != qp.pd || !mr->contains(s.addr, s.length) ||
        (writes && !(mr->access & IBV_ACCESS_LOCAL_WRITE))) {
      w.status = IBV_WC_LOC_PROT_ERR;
      return false;
    }
  }
  if (total > 0x80000000ull) {
    w.status = IBV_WC_LOC_LEN_ERR;
    return false;
  }
  w.length = uint32_t(total);
  return true;
}

bool Nic::fetch_send_wqes(Qp& qp, Time now) {
  // An XRC target has no send queue (nor a CQ to complete one).
  if (qp.type == QpType::kXrcRecv) return false;
  const uint32_t producer = qp.sq.producer();
  bool fetched = false;
  // Never more than the ring holds beyond what is not yet completed.
  while (qp.req.sq_fetched != producer && qp.req.sq_fetched - qp.req.sq_head < qp.sq.entries()) {
    const uint8_t* e = qp.sq.entry(qp.req.sq_fetched);
    SendWqe hdr;
    std::memcpy(&hdr, e, sizeof hdr);
    SendWork& w = qp.work(qp.req.sq_fetched);
    w = SendWork{};
    w.index = qp.req.sq_fetched;
    w.wr_id = hdr.wr_id;
    w.opcode = hdr.opcode;
    w.flags = hdr.send_flags;
    w.imm = hdr.imm;
    w.remote_addr = hdr.remote_addr;
    w.rkey = hdr.rkey;
    w.compare_add = hdr.compare_add;
    w.swap = hdr.swap;
    w.ud_ah = hdr.ud_ah;
    w.ud_remote_qpn = hdr.ud_remote_qpn & 0xffffff;
    w.ud_remote_qkey = hdr.ud_remote_qkey;
    w.xrc_remote_srqn = hdr.xrc_remote_srqn & 0xffffff;
    qp.req.sq_fetched++;
    fetched = true;
    if (!opcode_allowed(qp.type, w.opcode)) {
      w.status = IBV_WC_LOC_QP_OP_ERR;
      continue;
    }
    if (w.is_local()) continue;  // no data: the bind's fields say it all
    if (w.is_atomic_write()) {
      // Its 8 bytes came in the WQE: sent as inline data. An unaligned
      // address goes out as it is; the responder NAKs it (as rxe's does).
      w.is_inline = true;
      w.length = 8;
      std::memcpy(w.inline_data.data(), &hdr.compare_add, 8);
      continue;
    }
    if (w.flags & IBV_SEND_INLINE) {
      if (hdr.inline_len > qp.cap.max_inline_data || hdr.inline_len > kMaxInline ||
          sizeof(SendWqe) + hdr.inline_len > qp.sq.stride() || w.needs_response()) {
        w.status = IBV_WC_LOC_LEN_ERR;
        continue;
      }
      w.is_inline = true;
      w.length = hdr.inline_len;
      std::memcpy(w.inline_data.data(), e + sizeof(SendWqe), hdr.inline_len);
    } else {
      if (hdr.num_sge > qp.cap.max_send_sge || hdr.num_sge > kMaxSge) {
        w.status = IBV_WC_LOC_LEN_ERR;
        continue;
      }
      w.num_sge = hdr.num_sge;
      std::memcpy(w.sge.data(), e + sizeof(SendWqe), sizeof(Sge) * hdr.num_sge);
      if (!validate_local_sges(qp, w)) continue;
    }
    if (w.is_atomic() && (w.length != 8 || (w.remote_addr & 7) != 0)) {
      w.status = IBV_WC_LOC_LEN_ERR;
      continue;
    }
    if (qp.is_ud() && w.length > qp.mtu) {
      w.status = IBV_WC_LOC_LEN_ERR;
      continue;
    }
  }
  if (fetched && qp.state == IBV_QPS_ERR) flush_qp(qp, now);
  return fetched;
}

uint16_t Nic::requester_port(Qp& qp) { return qp.egress_port; }

bool Nic::requester_has_work(Qp& qp, Time now) {
  if (qp.state == IBV_QPS_ERR) {
    fetch_send_wqes(qp, now);
    return false;
  }
  if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD) return false;
  fetch_send_wqes(qp, now);
  if (qp.req.rnr_waiting) return false;
  if (!qp.lr.resend_psns.empty()) return qp.neighbor_ok;
  run_local_wqes(qp, now);
  if (qp.state == IBV_QPS_ERR) return false;
  if (qp.req.sq_send == qp.req.sq_fetched) return false;
  SendWork& w = qp.work(qp.req.sq_send);
  if (w.status != IBV_WC_SUCCESS) {
    complete_send_queue(qp, now);  // an invalid WQE completes once all before it have
    return false;
  }
  if (qp.is_ud()) {
    // Each WQE names its destination: resolve it before sending.
    Ah* ah = ahs_.find(w.ud_ah);
    if (ah == nullptr || ah->pd != qp.pd) {
      w.status = IBV_WC_LOC_QP_OP_ERR;
      complete_send_queue(qp, now);
      return false;
    }
    std::memcpy(qp.ah.grh.dgid.raw, ah->dgid.b.data(), 16);
    qp.ah.grh.sgid_index = ah->sgid_index;
    qp.ah.grh.flow_label = ah->flow_label;
    qp.ah.grh.traffic_class = ah->traffic_class;
    fill_path(qp);
    return resolve_neighbor(qp, now);
  }
  if (!qp.neighbor_ok) return false;
  if (!w.started) {
    if (qp.state == IBV_QPS_SQD) return false;  // drained: no new WQEs
    if ((w.flags & IBV_SEND_FENCE) && qp.req.rd_atomic_outstanding > 0) return false;
    if (w.needs_response() && qp.req.rd_atomic_outstanding >= std::max<uint32_t>(qp.max_rd_atomic, 1)) return false;
  }
  // In flight is bounded by the loss recovery's window.
  const uint32_t window = recovery_->send_window();
  const uint32_t next = w.started ? qp.req.send_psn : qp.req.next_new_psn;
  const int32_t ahead = wire::psn_diff(next, qp.req.una_psn);  // negative: resending what is acked
  if (!(w.started && w.needs_response()) && ahead > 0 && uint32_t(ahead) >= window) return false;
  return true;
}

void Nic::run_local_wqes(Qp& qp, Time now) {
  // Binds and local invalidates at the head of what is to be sent run now:
  // everything posted before them has been sent. They take no PSN; a fence
  // waits for the READs and atomics before them, as for any WQE.
  bool ran = false;
  while (qp.req.sq_send != qp.req.sq_fetched && qp.state != IBV_QPS_SQD) {
    SendWork& w = qp.work(qp.req.sq_send);
    if (!w.is_local() || w.started || w.status != IBV_WC_SUCCESS) break;
    if ((w.flags & IBV_SEND_FENCE) && qp.req.rd_atomic_outstanding > 0) break;
    ran = true;
    w.status = execute_local_wqe(qp, w);
    if (w.status != IBV_WC_SUCCESS) break;  // completes in error once all before it have
    w.started = w.done = true;
    w.first_psn = qp.req.next_new_psn;
    w.npkts = 0;
    qp.req.sq_send++;
    qp.req.send_psn = qp.req.next_new_psn;
  }
  if (ran) complete_send_queue(qp, now);
}

bool Nic::gather(Qp& qp, const SendWork& w, uint32_t offset, uint8_t* dst, uint32_t len) {
  if (w.is_inline) {
    std::memcpy(dst, w.inline_data.data() + offset, len);
    return true;
  }
  HostPiece pieces[kMaxSge];
  const size_t n = sge_pieces(qp, w, offset, len, pieces);
  return n > 0 && qp.ctx->memory->readv(pieces, n, dst);
}

size_t Nic::sge_pieces(Qp& qp, const SendWork& w, uint32_t offset, uint32_t len, HostPiece* pieces) {
  size_t n = 0;
  for (uint32_t i = 0; i < w.num_sge && len > 0; i++) {
    const Sge& s = w.sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint32_t k = std::min(len, s.length - offset);
    // The MR may have been deregistered or invalidated since the WQE was
    // fetched.
    Mr* mr = mrs_.find(s.lkey);
    if (mr == nullptr || mr->invalidated || mr->pd != qp.pd || !mr->contains(s.addr + offset, k)) return 0;
    pieces[n++] = {mr->host(s.addr + offset), k};
    len -= k;
    offset = 0;
  }
  return len == 0 ? n : 0;
}

namespace {
constexpr uint16_t kPayloadOff = ReadAhead::kPayloadOff;
static_assert(kPayloadOff + 4096 + 3 + 4 <= RTE_PKTMBUF_HEADROOM + dpdk::PacketPool::kMaxFrame);
}  // namespace

void Nic::drop_prefetch(ReadAhead& p) {
  for (uint32_t i = p.next; i < p.count; i++) rte_pktmbuf_free(p.frames[i]);
  p.next = p.count = 0;
}

void Nic::drop_prefetch(Qp& qp) {
  drop_prefetch(qp.req.prefetch);
  drop_prefetch(qp.resp.response_prefetch);
}

// May the payload of `w`, posted behind the WQE being sent, be read ahead?
// Only a message of several packets not started yet, read from memory (not
// inline), and never across a READ, an atomic or a fence: a WQE behind
// those may depend on what they bring.
bool Nic::read_ahead_ok(const Qp& qp, const SendWork& w) const {
  const bool kind = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
                    w.opcode == IBV_WR_SEND || w.opcode == IBV_WR_SEND_WITH_IMM || w.opcode == IBV_WR_SEND_WITH_INV;
  return kind && !w.started && !w.is_inline && w.length > qp.mtu && !(w.flags & IBV_SEND_FENCE) &&
         w.status == IBV_WC_SUCCESS;
}

uint32_t Nic::read_ahead_limit() {
  // Keep most of the pool for traffic: with many QPs, read per packet.
  const bool room = pool().available() > pool().capacity() / 4;
  return room ? ReadAhead::kFrames : 1;
}

bool Nic::add_ahead_frame(ReadAhead& p, iovec* dst, uint32_t len, uint32_t key, uint64_t pos) {
  rte_mbuf* m = new_frame();
  if (m == nullptr) return false;
  m->data_off = kPayloadOff;
  dst[p.count] = {rte_pktmbuf_mtod(m, uint8_t*), len};
  p.frames[p.count] = m;
  p.key[p.count] = key;
  p.pos[p.count] = pos;
  p.count++;
  return true;
}

bool Nic::read_ahead(Qp& qp, ReadAhead& p, const HostPiece* pieces, size_t n_pieces, const iovec* dst) {
  // The responder's READ responses come from the host of the PD they are
  // checked against (an XRC target's: its SRQ's, maybe another process's).
  HostMemory* mem = qp.ctx->memory;
  if (&p == &qp.resp.response_prefetch && !qp.resp.tasks.empty())
    if (const Pd* pd = response_pd(qp, qp.resp.tasks.front())) mem = pd->ctx->memory;
  if (p.count == 0 || mem->readv_scatter(pieces, n_pieces, dst, p.count)) return true;
  drop_prefetch(p);
  return false;
}

// Reads ahead from payload `offset` of `w` on: with `more`, on into the
// WQEs behind it. False if `w` itself cannot be read; what follows it is
// read only as far as it can be.
bool Nic::fill_prefetch(Qp& qp, const SendWork& w, uint32_t offset, bool more) {
  auto& p = qp.req.prefetch;
  p.next = p.count = 0;
  const uint32_t ahead = read_ahead_limit();
  constexpr size_t kMaxPieces = 128;  // one batch of reads (see ProcessMemory)
  iovec dst[ReadAhead::kFrames];
  HostPiece pieces[kMaxPieces];
  size_t n_pieces = 0;
  const SendWork* cur = &w;
  uint32_t at = offset;
  while (true) {
    const uint32_t first = p.count, start = at;
    uint32_t bytes = 0;
    for (; p.count < ahead && at < cur->length; at += qp.mtu) {
      const uint32_t k = std::min(qp.mtu, cur->length - at);
      if (!add_ahead_frame(p, dst, k, cur->index, at)) break;
      bytes += k;
    }
    if (bytes == 0) break;  // no mbuf: read what there is (perhaps nothing)
    const size_t n = n_pieces + kMaxSge > kMaxPieces ? 0 : sge_pieces(qp, *cur, start, bytes, pieces + n_pieces);
    if (n == 0) {  // no room for its pieces, or not readable: stop before this WQE
      for (uint32_t i = first; i < p.count; i++) rte_pktmbuf_free(p.frames[i]);
      p.count = first;
      if (cur == &w) return false;
      break;
    }
    n_pieces += n;
    if (!more || p.count == ahead) break;
    const uint32_t next = cur->index + 1;
    if (next == qp.req.sq_fetched || !read_ahead_ok(qp, qp.work(next))) break;
    cur = &qp.work(next);
    at = 0;
  }
  return read_ahead(qp, p, pieces, n_pieces, dst);
}

// The frame for payload [offset, offset + len) of a multi-packet WQE, the
// payload already in place at kPayloadOff (see take_ahead()).
rte_mbuf* Nic::take_prefetched(Qp& qp, const SendWork& w, uint32_t offset, bool& failed) {
  auto& p = qp.req.prefetch;
  // A WQE read ahead before its turn: its MRs must still be there now.
  HostPiece check[kMaxSge];
  if (offset == 0 && p.holds(w.index, 0) && sge_pieces(qp, w, 0, w.length, check) == 0) drop_prefetch(p);
  return take_ahead(p, w.index, offset, failed, [&](bool more) { return fill_prefetch(qp, w, offset, more); });
}

rte_mbuf* Nic::make_request(Qp& qp, SendWork& w, uint32_t psn, Time now) {
  const uint32_t index = uint32_t(wire::psn_diff(psn, w.first_psn));
  const bool uc = qp.type == QpType::kUc;
  const uint8_t transport = qp.opcode_transport();
  wire::RoceFields f;
  f.dest_qp = qp.dest_qpn;
  f.psn = psn;
  f.xrc_srqn = w.xrc_remote_srqn;  // written for XRC opcodes only
  uint32_t offset = 0, len = 0;
  switch (w.opcode) {
    case IBV_WR_RDMA_READ: {
      offset = index * qp.mtu;
      f.opcode = wire::op::kReadRequest;
      f.reth_va = w.remote_addr + offset;
      f.reth_rkey = w.rkey;
      f.reth_len = w.length - offset;
      break;
    }
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD: {
      const bool cas = w.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
      f.opcode = cas ? wire::op::kCmpSwap : wire::op::kFetchAdd;
      f.atomic_va = w.remote_addr;
      f.atomic_rkey = w.rkey;
      f.atomic_swap_add = cas ? w.swap : w.compare_add;
      f.atomic_compare = cas ? w.compare_add : 0;
      break;
    }
    case IBV_WR_ATOMIC_WRITE: {
      f.opcode = wire::op::kAtomicWrite;
      f.reth_va = w.remote_addr;
      f.reth_rkey = w.rkey;
      f.reth_len = len = 8;
      f.ack_req = true;  // its only packet, as rxe sends it
      break;
    }
    default: {
      offset = index * qp.mtu;
      len = std::min(qp.mtu, w.length - std::min(w.length, offset));
      const bool first = index == 0, last = index + 1 == w.npkts;
      const bool write = w.opcode == IBV_WR_RDMA_WRITE || w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
      const bool imm = w.opcode == IBV_WR_RDMA_WRITE_WITH_IMM || w.opcode == IBV_WR_SEND_WITH_IMM;
      const bool inv = w.opcode == IBV_WR_SEND_WITH_INV;
      using namespace wire::op;
      if (write) {
        f.opcode = first && last ? (imm ? kWriteOnlyImm : kWriteOnly)
                   : first       ? kWriteFirst
                   : last        ? (imm ? kWriteLastImm : kWriteLast)
                                 : kWriteMiddle;
        if (first) {
          f.reth_va = w.remote_addr;
          f.reth_rkey = w.rkey;
          f.reth_len = w.length;
        }
      } else {
        f.opcode = first && last ? (imm ? kSendOnlyImm : inv ? kSendOnlyInv : kSendOnly)
                   : first       ? kSendFirst
                   : last        ? (imm ? kSendLastImm : inv ? kSendLastInv : kSendLast)
                                 : kSendMiddle;
      }
      if (last) {
        f.imm = __builtin_bswap32(w.imm);  // posted in network order
        f.ieth_rkey = w.imm;
        f.se = (w.flags & IBV_SEND_SOLICITED) != 0 && (!write || imm);
        f.ack_req = true;
      }
      break;
    }
  }
  f.opcode = uint8_t(transport | f.opcode);
  // A packet sent again always asks for an ACK: with selective repeat it
  // may be the only packet resent.
  if (wire::psn_lt(psn, qp.req.sent_high) && qp.req.any_outstanding) f.ack_req = true;
  if (!uc && (++qp.req.pkts_since_ack_req >= cfg_.ack_req_every || f.ack_req)) {
    f.ack_req = !wire::opcode_info(f.opcode).any(wire::kOpRead | wire::kOpAtomic);
    qp.req.pkts_since_ack_req = 0;
  }
  if (uc) f.ack_req = false;
  (void)now;
  const uint32_t frame_len = wire::roce_frame_len(qp.path, f.opcode, len);
  // A WRITE or SEND from memory the engine maps, on a transport whose
  // completion waits for the receiver: the frame points at the payload
  // instead of holding a copy (common/engine/lazy_payload.h).
  const uint8_t* lent = nullptr;
  if (len >= dpdk::kLazyMinPayload && !w.is_inline && (qp.type == QpType::kRc || qp.type == QpType::kXrcSend) &&
      wire::opcode_info(f.opcode).any(wire::kOpPayload) && !qp.req.prefetch.holds(w.index, offset)) {
    HostPiece piece[kMaxSge];
    if (sge_pieces(qp, w, offset, len, piece) == 1) lent = qp.ctx->memory->lend(piece[0].addr, len);
  }
  // A message of several packets, sent for the first time, from a host
  // where each read is a system call: the payload is read ahead into the
  // next frames. (A resend reads just its own packet.)
  const bool ahead = lent == nullptr && len > 0 && len < w.length && !w.is_inline &&
                     !wire::psn_lt(psn, qp.req.sent_high) && qp.ctx->memory->batches();
  const uint32_t header_len = wire::roce_header_len(qp.path, f.opcode);
  rte_mbuf* m = nullptr;
  if (ahead) {
    bool failed = false;
    m = take_prefetched(qp, w, offset, failed);
    if (failed) {
      w.status = IBV_WC_LOC_PROT_ERR;
      return nullptr;
    }
    if (m != nullptr) m->data_off = uint16_t(kPayloadOff - header_len);
  } else {
    m = new_frame();
  }
  if (m == nullptr) return nullptr;
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const std::span<uint8_t> frame(data, frame_len);
  const uint32_t hdr = wire::write_roce_headers(frame, qp.path, f, len);
  if (lent != nullptr && hdr == header_len && !dpdk::make_lazy(m, data + hdr, lent, len)) lent = nullptr;
  if (hdr != header_len || (len > 0 && !ahead && lent == nullptr && !gather(qp, w, offset, data + hdr, len))) {
    rte_pktmbuf_free(m);
    w.status = IBV_WC_LOC_PROT_ERR;
    return nullptr;
  }
  wire::pad_roce(frame, len);
  rte_pktmbuf_append(m, uint16_t(frame_len));
  dpdk::meta(m).flags |= dpdk::kMetaCrossNode;  // ICRC: see dpdk::seal()
  return m;
}

rte_mbuf* Nic::make_ud_send(Qp& qp, SendWork& w, Time) {
  wire::RoceFields f;
  const bool imm = w.opcode == IBV_WR_SEND_WITH_IMM;
  f.opcode = wire::op::ud(imm ? wire::op::kSendOnlyImm : wire::op::kSendOnly);
  f.dest_qp = w.ud_remote_qpn;
  f.psn = qp.req.send_psn;
  f.se = (w.flags & IBV_SEND_SOLICITED) != 0;
  f.imm = __builtin_bswap32(w.imm);
  // A Q_Key with the high bit set means "use the QP's own" (IBA 10.2.5).
  f.deth_qkey = (w.ud_remote_qkey & 0x80000000u) ? qp.qkey : w.ud_remote_qkey;
  f.deth_src_qp = qp.qpn;
  rte_mbuf* m = new_frame();
  if (m == nullptr) return nullptr;
  const uint32_t frame_len = wire::roce_frame_len(qp.path, f.opcode, w.length);
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const std::span<uint8_t> frame(data, frame_len);
  const uint32_t hdr = wire::write_roce_headers(frame, qp.path, f, w.length);
  if (hdr == 0 || (w.length > 0 && !gather(qp, w, 0, data + hdr, w.length))) {
    rte_pktmbuf_free(m);
    w.status = IBV_WC_LOC_PROT_ERR;
    return nullptr;
  }
  wire::pad_roce(frame, w.length);
  rte_pktmbuf_append(m, uint16_t(frame_len));
  dpdk::meta(m).flags |= dpdk::kMetaCrossNode;  // ICRC: see dpdk::seal()
  return m;
}

rte_mbuf* Nic::requester_make_packet(Qp& qp, Time now) {
  // A single PSN the loss recovery asked for again (selective repeat does).
  while (!qp.lr.resend_psns.empty()) {
    const uint32_t psn = qp.lr.resend_psns.front();
    qp.lr.resend_psns.pop_front();
    if (wire::psn_lt(psn, qp.req.una_psn) || !wire::psn_lt(psn, qp.req.sent_high)) continue;  // acked meanwhile
    for (uint32_t i = qp.req.sq_head; i != qp.req.sq_send + 1 && i != qp.req.sq_fetched; i++) {
      SendWork& w = qp.work(i);
      if (!w.started || wire::psn_lt(psn, w.first_psn) || wire::psn_gt(psn, w.last_psn())) continue;
      if (w.done) break;
      uint32_t p = psn;
      if (w.is_read()) p = wire::psn_add(w.first_psn, w.resp_pkts);  // ask for what is missing
      else if (w.is_atomic()) p = w.first_psn;
      rte_mbuf* m = make_request(qp, w, p, now);
      if (m != nullptr) {
        qp.req.retransmitted++;
        counters_[NicCounters::retransmitted_packets]++;
        arm_retry_timer(qp, now);
      }
      return m;
    }
  }
  // Skip WQEs a rewind passed over that need nothing more (a READ or
  // atomic whose response is complete).
  while (qp.req.sq_send != qp.req.sq_fetched) {
    SendWork& w = qp.work(qp.req.sq_send);
    if (!(w.started && w.done && (w.needs_response() || w.is_local()))) break;
    qp.req.sq_send++;
    if (qp.req.sq_send != qp.req.sq_fetched && qp.work(qp.req.sq_send).started) qp.req.send_psn = qp.work(qp.req.sq_send).first_psn;
    else qp.req.send_psn = qp.req.next_new_psn;
  }
  if (qp.req.sq_send == qp.req.sq_fetched) return nullptr;
  SendWork& w = qp.work(qp.req.sq_send);
  if (qp.is_ud()) {
    rte_mbuf* m = make_ud_send(qp, w, now);
    if (m == nullptr) {
      if (w.status != IBV_WC_SUCCESS) complete_send_queue(qp, now);
      return nullptr;
    }
    w.started = true;
    w.first_psn = qp.req.send_psn;
    w.npkts = 1;
    w.done = true;
    qp.req.send_psn = qp.req.next_new_psn = wire::psn_add(qp.req.send_psn, 1);
    qp.req.sq_send++;
    complete_send_queue(qp, now);
    return m;
  }
  if (!w.started) {
    w.started = true;
    w.first_psn = qp.req.next_new_psn;
    w.npkts = w.is_atomic() ? 1 : packets_for(w.length, qp.mtu);
    qp.req.next_new_psn = wire::psn_add(qp.req.next_new_psn, w.npkts);
    qp.req.send_psn = w.first_psn;
    if (w.needs_response()) qp.req.rd_atomic_outstanding++;
  }
  // A go-back-N rewind may point at packets acknowledged since: skip them.
  if (!w.needs_response() && wire::psn_lt(qp.req.send_psn, qp.req.una_psn) && wire::psn_le(qp.req.una_psn, w.last_psn()))
    qp.req.send_psn = qp.req.una_psn;
  uint32_t psn = qp.req.send_psn;
  if (w.is_read() && wire::psn_lt(psn, wire::psn_add(w.first_psn, w.resp_pkts)))
    psn = wire::psn_add(w.first_psn, w.resp_pkts);  // part of it already arrived
  const bool resend = wire::psn_lt(psn, qp.req.sent_high);
  rte_mbuf* m = make_request(qp, w, psn, now);
  if (m == nullptr) {
    if (w.status != IBV_WC_SUCCESS) complete_send_queue(qp, now);
    return nullptr;
  }
  if (resend) {
    qp.req.retransmitted++;
    counters_[NicCounters::retransmitted_packets]++;
  }
  // Advance: a READ or atomic request stands for all its PSNs.
  const uint32_t after = w.needs_response() ? wire::psn_add(w.last_psn(), 1) : wire::psn_add(psn, 1);
  if (wire::psn_gt(after, qp.req.sent_high) || !qp.req.any_outstanding) qp.req.sent_high = after;
  qp.req.send_psn = after;
  if (after == wire::psn_add(w.last_psn(), 1)) {
    qp.req.sq_send++;
    if (qp.req.sq_send != qp.req.sq_fetched && qp.work(qp.req.sq_send).started) qp.req.send_psn = qp.work(qp.req.sq_send).first_psn;
  }
  if (qp.type == QpType::kUc) {
    // UC: nothing comes back; a message is done once its last packet left.
    qp.req.una_psn = qp.req.sent_high;
    if (after == wire::psn_add(w.last_psn(), 1)) {
      w.done = true;
      complete_send_queue(qp, now);
    }
    return m;
  }
  qp.req.any_outstanding = true;
  if (!qp.req.retry_timer.armed()) arm_retry_timer(qp, now);
  return m;
}

void Nic::arm_retry_timer(Qp& qp, Time now) {
  if (!qp.reliable() || !qp.req.any_outstanding) {
    timers().cancel(qp.req.retry_timer);
    return;
  }
  schedule_retry_timer(qp, recovery_->retransmit_deadline(qp, ack_timeout(qp.timeout), now));
}

void Nic::schedule_retry_timer(Qp& qp, Time at) {
  if (at == kTimeNever) {
    timers().cancel(qp.req.retry_timer);
    return;
  }
  timers().schedule(qp.req.retry_timer, at);
}

void Nic::rewind(Qp& qp, uint32_t psn, Time now) {
  // Go back to the WQE holding `psn` and send from there again.
  for (uint32_t i = qp.req.sq_head; i != qp.req.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.started) break;
    if (wire::psn_ge(psn, w.first_psn) && wire::psn_le(psn, w.last_psn())) {
      qp.req.sq_send = i;
      qp.req.send_psn = w.needs_response() ? w.first_psn : psn;
      qp.lr.resend_psns.clear();
      counters_[NicCounters::roce_adp_retrans]++;
      activate(qp, now);
      return;
    }
  }
}

void Nic::on_retry_timer(Qp& qp, Time now) {
  if (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD) return;
  if (!qp.req.any_outstanding || qp.req.una_psn == qp.req.sent_high) {
    qp.req.any_outstanding = false;
    return;
  }
  // Only an expiry of the Local ACK Timeout spends the QP's retry_cnt; the
  // loss recovery's own faster timer just resends.
  const LossRecoveryStrategy::Expiry e = recovery_->on_retransmit_timer(qp, ack_timeout(qp.timeout), now);
  counters_[NicCounters::roce_adp_retrans_to]++;
  if (e.ack_timeout) {
    counters_[NicCounters::local_ack_timeout_err]++;
    if (qp.req.retry_left == 0) {
      fail_send_queue(qp, IBV_WC_RETRY_EXC_ERR, now);
      return;
    }
    qp.req.retry_left--;
  }
  qp.req.read_rewind_pending = false;
  // A timeout means the NAKs did not tell the whole story (a tail loss, a
  // lost resend): in both modes send everything unacknowledged again, as
  // TCP and IRN do on a timeout; NAKs keep selective repeat selective.
  // Armed before the resend goes, so sending it does not start the timer
  // (and the Local ACK Timeout) afresh.
  schedule_retry_timer(qp, e.next);
  rewind(qp, qp.req.una_psn, now);
}

void Nic::on_rnr_timer(Qp& qp, Time now) {
  qp.req.rnr_waiting = false;
  activate(qp, now);
}

void Nic::sq_doorbell(Qp& qp, Time now) {
  if (qp.state == IBV_QPS_ERR) {
    fetch_send_wqes(qp, now);
    return;
  }
  activate(qp, now);
}

}  // namespace rocemu::nic
