// Responder: requests arriving at a QP. Checks the PSN (duplicates are
// answered again; gaps and trimmed packets are the loss recovery's, see
// nic/loss_recovery.h), the opcode sequence, the rkey/range/access of
// RDMA and atomic requests and the receive WQE of a SEND; writes memory,
// posts receive completions, and queues ACK/NAKs, READ responses and
// atomic ACKs.
#include <algorithm>
#include <utility>

#include "nic/nic.h"

namespace rocemu::nic {

namespace {

bool is_send(uint8_t op) { return wire::opcode_info(op).any(wire::kOpSend); }
bool is_write(uint8_t op) { return wire::opcode_info(op).any(wire::kOpWrite); }

}  // namespace

Mr* Nic::check_rkey(Qp& qp, uint32_t rkey, uint64_t va, uint64_t len, int access) {
  Mr* mr = mrs_.find(rkey);
  if (mr == nullptr || mr->invalidated || mr->pd != qp.pd || !(mr->access & access) || !(qp.access & access) ||
      !mr->contains(va, len)) {
    counters_[NicCounters::resp_remote_access_errors]++;
    return nullptr;
  }
  return mr;
}

bool Nic::take_recv(Qp& qp, RecvEntry& out) {
  if (qp.srq != nullptr) {
    Srq& srq = *qp.srq;
    if (!srq.rq.pop(out)) return false;
    if (srq.armed && srq.rq.available() < srq.limit) {
      srq.armed = false;
      if (qp.ctx->on_async_event) {
        ibv_async_event ev{};
        ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
        ev.element.srq = nullptr;
        qp.ctx->on_async_event(ev);
      }
    }
    return true;
  }
  return qp.rq.valid() && qp.rq.pop(out);
}

void Nic::rq_doorbell(Srq*, Time) {}

bool Nic::scatter(Qp& qp, RecvEntry& r, uint64_t offset, const uint8_t* src, uint32_t len, ibv_wc_status& err) {
  if (r.num_sge == UINT32_MAX) {
    err = IBV_WC_LOC_QP_OP_ERR;
    return false;
  }
  if (offset + len > r.length) {
    err = IBV_WC_LOC_LEN_ERR;
    return false;
  }
  Pd* pd = qp.srq != nullptr ? qp.srq->pd : qp.pd;
  for (uint32_t i = 0; i < r.num_sge && len > 0; i++) {
    const Sge& s = r.sge[i];
    if (offset >= s.length) {
      offset -= s.length;
      continue;
    }
    const uint32_t n = uint32_t(std::min<uint64_t>(len, s.length - offset));
    Mr* mr = mrs_.find(s.lkey);
    if (mr == nullptr || mr->pd != pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) || !mr->contains(s.addr + offset, n)) {
      err = IBV_WC_LOC_PROT_ERR;
      return false;
    }
    if (!dma_write(DmaOwner::responder(qp), mr->host(s.addr + offset), src, n)) {
      err = IBV_WC_LOC_PROT_ERR;
      return false;
    }
    src += n;
    len -= n;
    offset = 0;
  }
  return true;
}

void Nic::write_recv_cqe(Qp& qp, const RecvEntry& r, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t byte_len,
                         uint32_t imm, int wc_flags, uint32_t src_qp, bool solicited) {
  flush_dma();  // the data of a completion is in place before the completion
  if (std::exchange(qp.message_data_lost, false) && status == IBV_WC_SUCCESS) status = IBV_WC_LOC_PROT_ERR;  // ... or not
  Cqe cqe{};
  cqe.wr_id = r.wr_id;
  cqe.status = status;
  cqe.opcode = opcode;
  cqe.byte_len = byte_len;
  cqe.imm = imm;
  cqe.qp_num = qp.qpn;
  cqe.src_qp = src_qp;
  cqe.wc_flags = uint32_t(wc_flags);
  if (status == IBV_WC_WR_FLUSH_ERR) {
    counters_[NicCounters::resp_cqe_flush_error]++;
  } else if (status != IBV_WC_SUCCESS) {
    counters_[NicCounters::resp_cqe_error]++;
  }
  if (!qp.recv_cq->push(cqe, solicited)) {
    counters_[NicCounters::cq_overflow]++;
    if (qp.ctx->on_async_event) {
      ibv_async_event ev{};
      ev.event_type = IBV_EVENT_CQ_ERR;
      qp.ctx->on_async_event(ev);
    }
  }
}

void Nic::schedule_ack(Qp& qp, uint8_t syndrome, uint32_t psn, Time now) {
  // Coalescing: one pending ACK per QP, moved forward by later requests
  // until the QP gets its turn on the wire. A NAK is never replaced by an
  // ACK.
  if (qp.ack_pending && wire::aeth_kind(qp.ack_syndrome) != wire::AethKind::kAck &&
      wire::aeth_kind(syndrome) == wire::AethKind::kAck)
    return;
  qp.ack_pending = true;
  qp.ack_syndrome = syndrome;
  qp.ack_psn = psn;
  if (wire::aeth_kind(syndrome) == wire::AethKind::kNak && wire::aeth_value(syndrome) == 0)
    counters_[NicCounters::nak_seq_sent]++;
  if (wire::aeth_kind(syndrome) == wire::AethKind::kRnrNak) counters_[NicCounters::rnr_nak_sent]++;
  activate(qp, now);
}

void Nic::responder_error(Qp& qp, ibv_wc_status status, uint8_t nak_syndrome, uint32_t psn, Time now) {
  // The host's process is gone (it died and the engine has not heard yet):
  // its QPs are gone with it, so nothing is answered.
  if (qp.ctx->memory->gone()) {
    qp.ctx->dead = true;
    counters_[NicCounters::rx_not_for_us]++;
    return;
  }
  // Class C/D errors: NAK the request, complete any receive in progress
  // with the error, and take the QP to ERR (IBA 9.9.3).
  schedule_ack(qp, nak_syndrome, psn, now);
  if (qp.recv_valid) {
    write_recv_cqe(qp, qp.recv, status, IBV_WC_RECV, 0, 0, 0, 0, false);
    qp.recv_valid = false;
  }
  if (qp.ctx->on_async_event) {
    ibv_async_event ev{};
    ev.event_type = status == IBV_WC_REM_ACCESS_ERR ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR;
    qp.ctx->on_async_event(ev);
  }
  qp_to_error(qp, now);
}

void Nic::handle_request(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) {
  if (!qp.can_receive()) {
    counters_[NicCounters::rx_wrong_state]++;
    rte_pktmbuf_free(m);
    return;
  }
  const uint32_t psn = v.bth().psn();
  const int32_t d = wire::psn_diff(psn, qp.epsn);
  const bool rc = qp.type == QpType::kRc;

  if (v.dscp == cfg_.trim_dscp && v.op().any(wire::kOpPayload)) {
    // Trimmed by a switch: the payload is gone. A NAK is cumulative (it
    // says every PSN before it arrived), so only the expected PSN can be
    // NAKed: at once if this is it, else as soon as the PSNs before it are
    // in -- no waiting for the requester's timer either way.
    counters_[NicCounters::rx_trimmed]++;
    if (rc && d == 0) {
      recovery_->on_trimmed_expected(qp, now);
    } else if (rc && d > 0) {
      counters_[NicCounters::out_of_sequence]++;
      recovery_->on_trimmed_ahead(qp, psn, now);
    }
    rte_pktmbuf_free(m);
    return;
  }

  if (d < 0) {
    if (rc) handle_duplicate(qp, v, now);
    rte_pktmbuf_free(m);
    return;
  }
  if (d > 0) {
    counters_[NicCounters::out_of_sequence]++;
    if (!rc) {
      // UC: the message in progress is lost; start again at a FIRST/ONLY.
      counters_[NicCounters::rx_discards_uc]++;
      qp.in_message = false;
      qp.write_rkey = 0;
      qp.epsn = psn;
      if (v.op().any(wire::kOpFirst)) process_request(qp, v, now);
      else qp.epsn = wire::psn_add(psn, 1);
      rte_pktmbuf_free(m);
      return;
    }
    recovery_->on_out_of_order(qp, m, v, now);
    return;
  }
  process_request(qp, v, now);
  rte_pktmbuf_free(m);
  if (rc) recovery_->on_in_order(qp, now);
}

void Nic::handle_duplicate(Qp& qp, const wire::PacketView& v, Time now) {
  counters_[NicCounters::duplicate_request]++;
  const uint32_t psn = v.bth().psn();
  const wire::OpcodeInfo& info = v.op();
  if (info.any(wire::kOpRead) || info.any(wire::kOpAtomic)) {
    // Answer again: READs are executed again, atomics answered from the
    // saved result, in PSN order among the responses still owed (loss
    // recovery may drop those first).
    recovery_->on_duplicate_read(qp, psn);
    ResponderTask task;
    if (info.any(wire::kOpRead)) {
      const wire::Reth& reth = v.reth();
      const uint32_t len = reth.dma_length.get();
      if (len > 0 && check_rkey(qp, reth.rkey.get(), reth.va.get(), len, IBV_ACCESS_REMOTE_READ) == nullptr) return;
      task = {ResponderTask::kReadResponse, psn, reth.va.get(), len, len, reth.rkey.get(), true, 0, 0};
    } else {
      const auto it = std::find_if(qp.atomic_log.begin(), qp.atomic_log.end(),
                                   [psn](const AtomicReplay& a) { return a.valid && a.psn == psn; });
      if (it == qp.atomic_log.end()) return;  // too old to answer
      task = {ResponderTask::kAtomicAck, psn, 0, 0, 0, 0, true, it->orig, 0};
    }
    auto pos = std::find_if(qp.tasks.begin(), qp.tasks.end(),
                            [psn](const ResponderTask& t) { return wire::psn_gt(t.psn, psn); });
    qp.tasks.insert(pos, task);
    activate(qp, now);
    return;
  }
  // SEND/WRITE: acknowledge again, up to what has arrived.
  if (v.bth().ack_req() || info.any(wire::kOpLast)) schedule_ack(qp, wire::aeth_ack(), wire::psn_add(qp.epsn, -1), now);
}

void Nic::process_request(Qp& qp, const wire::PacketView& v, Time now) {
  const bool rc = qp.type == QpType::kRc;
  const uint32_t psn = v.bth().psn();
  const wire::OpcodeInfo& info = v.op();
  const uint8_t op = v.opcode;
  const uint8_t nak_inv = wire::aeth_nak(wire::NakCode::kInvalidRequest);
  const uint8_t nak_access = wire::aeth_nak(wire::NakCode::kRemoteAccessError);
  const uint8_t nak_op = wire::aeth_nak(wire::NakCode::kRemoteOperationalError);

  // Opcode sequence: MIDDLE/LAST only inside a message of the same kind.
  const bool continues = info.any(wire::kOpMiddle) || (info.any(wire::kOpLast) && !info.any(wire::kOpFirst));
  if (continues != qp.in_message ||
      (continues && (is_send(op) != is_send(qp.last_req_opcode) || is_write(op) != is_write(qp.last_req_opcode)))) {
    if (rc) {
      responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
    } else {
      counters_[NicCounters::rx_discards_uc]++;
      qp.in_message = false;
      qp.epsn = wire::psn_add(psn, 1);
    }
    return;
  }
  // Payload size: FIRST and MIDDLE carry exactly one MTU.
  if ((info.any(wire::kOpMiddle) || (info.any(wire::kOpFirst) && !info.any(wire::kOpLast))) &&
      v.payload_len != qp.mtu) {
    if (rc) responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
    return;
  }
  if (v.payload_len > qp.mtu) {
    if (rc) responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
    return;
  }

  if (info.any(wire::kOpRead)) {  // RC only (table)
    counters_[NicCounters::rx_read_requests]++;
    const wire::Reth& reth = v.reth();
    const uint32_t len = reth.dma_length.get();
    if (len > 0x80000000u) {
      responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
      return;
    }
    if (len > 0 && check_rkey(qp, reth.rkey.get(), reth.va.get(), len, IBV_ACCESS_REMOTE_READ) == nullptr) {
      responder_error(qp, IBV_WC_REM_ACCESS_ERR, nak_access, psn, now);
      return;
    }
    if (qp.tasks.size() >= std::max<uint32_t>(qp.max_dest_rd_atomic, 1)) {
      responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
      return;
    }
    qp.tasks.push_back({ResponderTask::kReadResponse, psn, reth.va.get(), len, len, reth.rkey.get(), true, 0, 0});
    qp.epsn = wire::psn_add(qp.epsn, len == 0 ? 1 : (len + qp.mtu - 1) / qp.mtu);
    qp.nak_sent = false;
    activate(qp, now);
    return;
  }
  if (info.any(wire::kOpAtomic)) {
    counters_[NicCounters::rx_atomic_requests]++;
    const wire::AtomicEth& a = v.atomic_eth();
    const uint64_t va = a.va.get();
    if ((va & 7) != 0) {
      responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
      return;
    }
    Mr* amr = check_rkey(qp, a.rkey.get(), va, 8, IBV_ACCESS_REMOTE_ATOMIC);
    if (amr == nullptr) {
      responder_error(qp, IBV_WC_REM_ACCESS_ERR, nak_access, psn, now);
      return;
    }
    if (qp.tasks.size() >= std::max<uint32_t>(qp.max_dest_rd_atomic, 1)) {
      responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
      return;
    }
    uint64_t orig = 0;
    if (!qp.ctx->memory->read(amr->host(va), &orig, 8)) {
      responder_error(qp, IBV_WC_REM_OP_ERR, nak_op, psn, now);
      return;
    }
    uint64_t result = orig;
    if (op == wire::op::kCmpSwap) {
      if (orig == a.compare.get()) result = a.swap_add.get();
    } else {
      result = orig + a.swap_add.get();
    }
    if (result != orig && !qp.ctx->memory->write(amr->host(va), &result, 8)) {
      responder_error(qp, IBV_WC_REM_OP_ERR, nak_op, psn, now);
      return;
    }
    qp.atomic_log[qp.atomic_log_next++ % kMaxRdAtomic] = {true, psn, orig};
    qp.tasks.push_back({ResponderTask::kAtomicAck, psn, 0, 0, 0, 0, true, orig, 0});
    qp.epsn = wire::psn_add(qp.epsn, 1);
    qp.nak_sent = false;
    activate(qp, now);
    return;
  }

  const bool first = info.any(wire::kOpFirst);
  const bool last = info.any(wire::kOpLast);
  const bool imm = info.any(wire::kOpImm);
  if (first) start_message(qp, psn);
  if (is_write(op)) {
    if (first) {
      counters_[NicCounters::rx_write_requests]++;
      const wire::Reth& reth = v.reth();
      const uint32_t len = reth.dma_length.get();
      qp.write_va = reth.va.get();
      qp.write_remaining = len;
      qp.write_total = len;
      qp.write_rkey = reth.rkey.get();
      if (len > 0) {
        if (check_rkey(qp, qp.write_rkey, qp.write_va, len, IBV_ACCESS_REMOTE_WRITE) == nullptr) {
          if (rc) {
            responder_error(qp, IBV_WC_REM_ACCESS_ERR, nak_access, psn, now);
          } else {
            counters_[NicCounters::rx_discards_uc]++;
            qp.epsn = wire::psn_add(psn, 1);
          }
          return;
        }
      }
    }
    if (v.payload_len > qp.write_remaining || (last && v.payload_len != qp.write_remaining)) {
      if (rc) {
        responder_error(qp, IBV_WC_REM_INV_REQ_ERR, nak_inv, psn, now);
      } else {
        qp.in_message = false;
        qp.epsn = wire::psn_add(psn, 1);
      }
      return;
    }
    // WRITE with immediate consumes a receive WQE: make sure there is one
    // before touching memory, so an RNR retry finds things unchanged.
    RecvEntry r;
    if (last && imm && !take_recv(qp, r)) {
      if (rc) {
        schedule_ack(qp, wire::aeth_rnr_nak(qp.min_rnr_timer), psn, now);
      } else {
        qp.in_message = false;
        qp.epsn = wire::psn_add(psn, 1);
      }
      qp.in_message = !first && rc;
      qp.last_req_opcode = op;
      return;
    }
    if (v.payload_len > 0) {
      Mr* mr = mrs_.find(qp.write_rkey);
      if (mr == nullptr || !mr->contains(qp.write_va, v.payload_len) ||
          !dma_write(DmaOwner::responder(qp), mr->host(qp.write_va), v.data + v.payload_off, v.payload_len)) {
        if (rc) responder_error(qp, IBV_WC_REM_OP_ERR, nak_op, psn, now);
        return;
      }
      qp.write_va += v.payload_len;
      qp.write_remaining -= v.payload_len;
    }
    if (last && imm) {
      write_recv_cqe(qp, r, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, qp.write_total,
                     __builtin_bswap32(v.imm().imm.get()), IBV_WC_WITH_IMM, 0, v.bth().se());
    }
  } else {  // SEND
    if (first && qp.recv_valid && !rc) {
      // UC: the receive WQE of a message lost halfway takes the next one.
      qp.recv_offset = 0;
    } else if (first) {
      if (!take_recv(qp, qp.recv)) {
        if (rc) schedule_ack(qp, wire::aeth_rnr_nak(qp.min_rnr_timer), psn, now);
        else {
          counters_[NicCounters::rx_discards_uc]++;
          qp.epsn = wire::psn_add(psn, 1);
        }
        return;
      }
      qp.recv_valid = true;
      qp.recv_offset = 0;
    }
    ibv_wc_status err = IBV_WC_SUCCESS;
    if (v.payload_len > 0 && !scatter(qp, qp.recv, qp.recv_offset, v.data + v.payload_off, v.payload_len, err)) {
      if (rc) {
        if (err == IBV_WC_LOC_LEN_ERR) counters_[NicCounters::resp_local_length_error]++;
        responder_error(qp, err, err == IBV_WC_LOC_LEN_ERR ? nak_inv : nak_op, psn, now);
      } else {
        write_recv_cqe(qp, qp.recv, err, IBV_WC_RECV, 0, 0, 0, 0, false);
        qp.recv_valid = false;
        qp.in_message = false;
        qp.epsn = wire::psn_add(psn, 1);
      }
      return;
    }
    qp.recv_offset += v.payload_len;
    if (last) {
      int flags = 0;
      uint32_t imm_or_rkey = 0;
      if (imm) {
        flags |= IBV_WC_WITH_IMM;
        imm_or_rkey = __builtin_bswap32(v.imm().imm.get());
      }
      if (info.any(wire::kOpInv)) {
        flags |= IBV_WC_WITH_INV;
        imm_or_rkey = v.ieth().rkey.get();
        if (Mr* mr = mrs_.find(imm_or_rkey); mr != nullptr && mr->pd == qp.pd) mr->invalidated = true;
      }
      write_recv_cqe(qp, qp.recv, IBV_WC_SUCCESS, IBV_WC_RECV, uint32_t(qp.recv_offset), imm_or_rkey, flags, 0,
                     v.bth().se());
      qp.recv_valid = false;
    }
  }
  qp.in_message = !last;
  qp.last_req_opcode = op;
  recovery_->on_intact(qp);
  qp.epsn = wire::psn_add(qp.epsn, 1);
  qp.nak_sent = false;
  if (last) qp.msn = (qp.msn + 1) & 0xffffff;
  if (rc && (v.bth().ack_req() || last)) schedule_ack(qp, wire::aeth_ack(), psn, now);
}

void Nic::responder_ud(Qp& qp, const wire::PacketView& v, Time now) {
  (void)now;
  if (!qp.can_receive()) {
    counters_[NicCounters::rx_wrong_state]++;
    return;
  }
  const wire::Deth& deth = v.deth();
  if (deth.qkey.get() != qp.qkey) {  // Q_Key violation: silently dropped (IBA 10.2.5)
    counters_[NicCounters::rx_ud_qkey_violation]++;
    return;
  }
  start_message(qp, qp.epsn);
  RecvEntry r;
  if (!take_recv(qp, r)) {  // UD: no receive WQE, no message
    counters_[NicCounters::out_of_buffer]++;
    return;
  }
  // The first 40 bytes take the GRH: the IPv6 header, or for IPv4 twenty
  // zero bytes and the IPv4 header (as mlx5 and rxe deliver it).
  uint8_t grh[40] = {};
  if (v.is_ipv6()) std::memcpy(grh, v.data + v.l3_off, 40);
  else std::memcpy(grh + 20, v.data + v.l3_off, 20);
  ibv_wc_status err = IBV_WC_SUCCESS;
  const uint32_t total = 40 + v.payload_len;
  if (!scatter(qp, r, 0, grh, 40, err) ||
      (v.payload_len > 0 && !scatter(qp, r, 40, v.data + v.payload_off, v.payload_len, err))) {
    write_recv_cqe(qp, r, err, IBV_WC_RECV, 0, 0, 0, deth.src_qp(), false);
    return;
  }
  int flags = IBV_WC_GRH;
  uint32_t imm = 0;
  if (v.op().any(wire::kOpImm)) {
    flags |= IBV_WC_WITH_IMM;
    imm = __builtin_bswap32(v.imm().imm.get());
  }
  write_recv_cqe(qp, r, IBV_WC_SUCCESS, IBV_WC_RECV, total, imm, flags, deth.src_qp(), v.bth().se());
}

rte_mbuf* Nic::responder_make_packet(Qp& qp, Time now) {
  wire::RoceFields f;
  f.dest_qp = qp.dest_qpn;
  uint32_t len = 0;
  uint64_t host = 0;
  bool pop = false;
  rte_mbuf* m = nullptr;  // taken before anything moves on: without a frame, nothing is owed less
  bool prefetched = false;
  uint32_t prefetch_hdr = 0;
  // Responses go out in PSN order before any ACK: an ACK beyond a READ
  // would tell the requester the READ's answer was lost.
  if (!qp.tasks.empty() && qp.state != IBV_QPS_ERR) {
    ResponderTask& t = qp.tasks.front();
    f.psn = t.psn;
    if (t.kind == ResponderTask::kAtomicAck) {
      if ((m = new_frame()) == nullptr) return nullptr;
      f.opcode = wire::op::kAtomicAck;
      f.aeth_syndrome = wire::aeth_ack();
      f.aeth_msn = qp.msn = (qp.msn + 1) & 0xffffff;
      f.atomic_orig = t.orig;
      pop = true;
    } else {
      len = std::min(t.remaining, qp.mtu);
      const bool last = t.remaining == len;
      using namespace wire::op;
      f.opcode = t.first && last ? kReadRespOnly : t.first ? kReadRespFirst : last ? kReadRespLast : kReadRespMiddle;
      // The MR is looked up again: it may have been deregistered meanwhile.
      if (len > 0) {
        Mr* mr = mrs_.find(t.rkey);
        if (mr == nullptr || !mr->contains(t.va, len)) {
          qp.tasks.clear();
          responder_error(qp, IBV_WC_REM_ACCESS_ERR, wire::aeth_nak(wire::NakCode::kRemoteAccessError), t.psn, now);
          return nullptr;
        }
        host = mr->host(t.va);
      }
      // The frame first: without one nothing moves on.
      if (len > 0 && qp.ctx->memory->batches()) {
        bool failed = false;
        // A READ executed again, or one answered out of turn, finds other frames.
        m = take_ahead(qp.response_prefetch, t.psn, t.va, failed,
                       [&](bool more) { return fill_response_prefetch(qp, more); });
        if (failed) {
          qp.tasks.clear();
          return nullptr;
        }
        prefetch_hdr = wire::roce_header_len(qp.path, f.opcode);
        if (m != nullptr) m->data_off = uint16_t(ReadAhead::kPayloadOff - prefetch_hdr);
        prefetched = m != nullptr;
      } else {
        m = new_frame();
      }
      if (m == nullptr) return nullptr;
      if (last) qp.msn = (qp.msn + 1) & 0xffffff;
      f.aeth_syndrome = wire::aeth_ack();
      f.aeth_msn = qp.msn;
      t.va += len;
      t.remaining -= len;
      t.psn = wire::psn_add(t.psn, 1);
      t.first = false;
      pop = last;
    }
  } else if (qp.ack_pending) {
    if ((m = new_frame()) == nullptr) return nullptr;
    f.opcode = wire::op::kAck;
    f.psn = qp.ack_psn;
    f.aeth_syndrome = qp.ack_syndrome;
    f.aeth_msn = qp.msn;
    qp.ack_pending = false;
  } else {
    return nullptr;
  }
  const uint32_t frame_len = wire::roce_frame_len(qp.path, f.opcode, len);
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const std::span<uint8_t> frame(data, frame_len);
  const uint32_t hdr = wire::write_roce_headers(frame, qp.path, f, len);
  // (A read-ahead frame's payload sits where headers of the expected length end.)
  if (hdr == 0 || (prefetched && hdr != prefetch_hdr) ||
      (len > 0 && !prefetched && !qp.ctx->memory->read(host, data + hdr, len))) {
    rte_pktmbuf_free(m);
    qp.tasks.clear();
    drop_prefetch(qp.response_prefetch);
    return nullptr;
  }
  wire::pad_roce(frame, len);
  rte_pktmbuf_append(m, uint16_t(frame_len));
  dpdk::meta(m).flags |= dpdk::kMetaCrossNode;  // ICRC: see dpdk::seal()
  if (pop) qp.tasks.pop_front();
  return m;
}

// Reads ahead the payload of the READ responses owed, from the next packet
// of the first task on (with `more`, on into the READs queued behind it),
// each frame keyed by its PSN and address. False if the first cannot be
// read.
bool Nic::fill_response_prefetch(Qp& qp, bool more) {
  auto& p = qp.response_prefetch;
  p.next = p.count = 0;
  const uint32_t ahead = read_ahead_limit();
  iovec dst[ReadAhead::kFrames];
  HostPiece pieces[ReadAhead::kFrames];
  size_t n_pieces = 0;
  for (size_t ti = 0; ti < qp.tasks.size() && p.count < ahead && (ti == 0 || more); ti++) {
    const ResponderTask& t = qp.tasks[ti];
    if (t.kind != ResponderTask::kReadResponse) break;
    if (t.remaining == 0) continue;
    Mr* mr = mrs_.find(t.rkey);
    if (mr == nullptr || !mr->contains(t.va, t.remaining)) {
      if (ti == 0) return false;
      break;
    }
    uint32_t psn = t.psn, bytes = 0;
    while (bytes < t.remaining && p.count < ahead) {
      const uint32_t k = std::min(t.remaining - bytes, qp.mtu);
      if (!add_ahead_frame(p, dst, k, psn, t.va + bytes)) break;
      psn = wire::psn_add(psn, 1);
      bytes += k;
    }
    if (bytes == 0) break;
    pieces[n_pieces++] = {mr->host(t.va), bytes};
  }
  return read_ahead(qp, p, pieces, n_pieces, dst);
}

}  // namespace rocemu::nic
