// Completer: ACKs, NAKs, READ responses and atomic ACKs coming back to a
// requester; marks WQEs done and completes them in send-queue order;
// errors move the QP to ERR and flush what is left.
#include <algorithm>

#include "nic/nic.h"

namespace rocemu::nic {

namespace {

ibv_wc_opcode wc_opcode(uint8_t wr_opcode) {
  switch (wr_opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
      return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return IBV_WC_FETCH_ADD;
    default:
      return IBV_WC_SEND;
  }
}

ibv_wc_status nak_status(wire::NakCode code) {
  switch (code) {
    case wire::NakCode::kInvalidRequest:
      return IBV_WC_REM_INV_REQ_ERR;
    case wire::NakCode::kRemoteAccessError:
      return IBV_WC_REM_ACCESS_ERR;
    case wire::NakCode::kRemoteOperationalError:
      return IBV_WC_REM_OP_ERR;
    case wire::NakCode::kInvalidRdRequest:
      return IBV_WC_REM_INV_RD_REQ_ERR;
    default:
      return IBV_WC_BAD_RESP_ERR;
  }
}

}  // namespace

void Nic::write_send_cqe(Qp& qp, const SendWork& w, ibv_wc_status status) {
  if (read_responses_pending(qp)) flush_dma();  // the data of a completion is in place before it
  Cqe cqe{};
  cqe.wr_id = w.wr_id;
  cqe.status = status;
  cqe.opcode = wc_opcode(w.opcode);
  cqe.byte_len = (w.is_read() || w.is_atomic()) ? w.length : 0;
  cqe.qp_num = qp.qpn;
  cqe.is_send = 1;
  cqe.wqe_index = w.index;
  if (status == IBV_WC_WR_FLUSH_ERR) {
    counters_[NicCounters::req_cqe_flush_error]++;
  } else if (status != IBV_WC_SUCCESS) {
    counters_[NicCounters::req_cqe_error]++;
  }
  if (!qp.send_cq->push(cqe, false)) {
    counters_[NicCounters::cq_overflow]++;
    if (qp.ctx->on_async_event) {
      ibv_async_event ev{};
      ev.event_type = IBV_EVENT_CQ_ERR;
      ev.element.cq = nullptr;
      qp.ctx->on_async_event(ev);
    }
  }
}

void Nic::complete_send_queue(Qp& qp, Time now) {
  // A READ whose data did not land fails (note_dma_failure) before
  // completions are decided; other completions have no local data.
  if (read_responses_pending(qp)) flush_dma();
  while (qp.sq_head != qp.sq_fetched && qp.state != IBV_QPS_ERR) {
    SendWork& w = qp.work(qp.sq_head);
    if (w.status != IBV_WC_SUCCESS) {
      write_send_cqe(qp, w, w.status);
      qp.sq_head++;
      qp_to_error(qp, now);
      return;
    }
    if (!w.done) break;
    if (w.signaled(qp.sq_sig_all)) write_send_cqe(qp, w, IBV_WC_SUCCESS);
    if (qp.sq_send == qp.sq_head) {
      // A rewind pointed here, but it is all acknowledged: skip it.
      qp.sq_send = qp.sq_head + 1;
      qp.send_psn = qp.sq_send != qp.sq_fetched && qp.work(qp.sq_send).started ? qp.work(qp.sq_send).first_psn
                                                                                : qp.next_new_psn;
    }
    qp.sq_head++;
    if (qp.send_cq->overflowed()) {
      qp_to_error(qp, now);
      return;
    }
  }
  if (qp.sq_head == qp.sq_send && qp.una_psn == qp.sent_high) {
    qp.any_outstanding = false;
    timers().cancel(qp.retry_timer);
  }
}

void Nic::fail_send_queue(Qp& qp, ibv_wc_status status, Time now) {
  // The oldest unfinished WQE takes the error; the rest are flushed.
  for (uint32_t i = qp.sq_head; i != qp.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.done) {
      w.status = status;
      break;
    }
  }
  complete_send_queue(qp, now);
  if (qp.state != IBV_QPS_ERR) qp_to_error(qp, now);
}

void Nic::qp_to_error(Qp& qp, Time now) {
  qp.state = IBV_QPS_ERR;
  timers().cancel(qp.retry_timer);
  timers().cancel(qp.rnr_timer);
  qp.rnr_waiting = false;
  qp.resend_psns.clear();
  for (rte_mbuf*& m : qp.ooo)
    if (m != nullptr) {
      rte_pktmbuf_free(m);
      m = nullptr;
    }
  qp.ooo_count = 0;
  drop_prefetch(qp);
  flush_qp(qp, now);
  // A pending NAK still goes out.
  if (qp.ack_pending) activate(qp, now);
}

void Nic::flush_qp(Qp& qp, Time now) {
  (void)now;
  fetch_send_wqes(qp, now);
  while (qp.sq_head != qp.sq_fetched) {
    SendWork& w = qp.work(qp.sq_head);
    write_send_cqe(qp, w, IBV_WC_WR_FLUSH_ERR);
    qp.sq_head++;
  }
  qp.sq_send = qp.sq_head;
  qp.tasks.clear();
  if (qp.recv_valid) {
    write_recv_cqe(qp, qp.recv, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0, 0, false);
    qp.recv_valid = false;
  }
  if (qp.srq == nullptr && qp.rq.valid()) {
    RecvEntry r;
    while (qp.rq.pop(r)) write_recv_cqe(qp, r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0, 0, false);
  }
}

void Nic::ack_up_to(Qp& qp, uint32_t psn, Time now, bool from_response) {
  // Cumulative: every request PSN up to `psn` arrived. Ignore ACKs older
  // than what is already acknowledged and ACKs for PSNs never sent.
  if (!qp.any_outstanding) return;
  if (wire::psn_lt(psn, wire::psn_add(qp.una_psn, -1)) || !wire::psn_lt(psn, qp.sent_high)) return;
  const bool progress = wire::psn_ge(psn, qp.una_psn);
  for (uint32_t i = qp.sq_head; i != qp.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.started) break;
    if (wire::psn_lt(psn, w.first_psn)) break;
    if (w.needs_response()) {
      // An ACK covering a READ or atomic whose response has not (all) come
      // means the responder answered and the answer was lost: ask again.
      // (A response packet acknowledges up to itself: not a loss.)
      if (!w.done && from_response && wire::psn_le(psn, w.last_psn())) break;
      if (!w.done) {
        counters_[NicCounters::implied_nak_seq_err]++;
        const uint32_t missing = wire::psn_add(w.first_psn, w.resp_pkts);
        if (!(qp.read_rewind_pending && qp.read_rewind_psn == missing)) {
          qp.read_rewind_pending = true;
          qp.read_rewind_psn = missing;
          recovery_->on_response_lost(qp, missing, now);
        }
        psn = wire::psn_add(missing, -1);
        break;
      }
    } else if (wire::psn_ge(psn, w.last_psn())) {
      w.done = true;
    }
    if (wire::psn_lt(psn, w.last_psn())) break;
  }
  if (wire::psn_ge(psn, qp.una_psn)) qp.una_psn = wire::psn_add(psn, 1);
  if (progress) {
    qp.retry_left = qp.retry_cnt;
    qp.rnr_left = qp.rnr_retry;
    std::erase_if(qp.resend_psns, [&](uint32_t p) { return wire::psn_lt(p, qp.una_psn); });
  }
  complete_send_queue(qp, now);
  if (qp.state == IBV_QPS_ERR) return;
  if (qp.una_psn == qp.sent_high) {
    qp.any_outstanding = qp.rd_atomic_outstanding > 0;
    if (!qp.any_outstanding) timers().cancel(qp.retry_timer);
  } else if (progress) {
    arm_retry_timer(qp, now);
  }
  activate(qp, now);
}

void Nic::handle_response(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) {
  if (qp.type != QpType::kRc || (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD)) {
    counters_[NicCounters::rx_wrong_state]++;
    rte_pktmbuf_free(m);
    return;
  }
  const uint32_t psn = v.bth().psn();
  const wire::OpcodeInfo& info = v.op();
  if (v.dscp == cfg_.trim_dscp && info.any(wire::kOpPayload)) {
    // A READ response whose payload a switch cut: lost, ask again at once.
    counters_[NicCounters::rx_trimmed]++;
    for (uint32_t i = qp.sq_head; i != qp.sq_fetched; i++) {
      SendWork& w = qp.work(i);
      if (!w.started) break;
      if (w.is_read() && !w.done && psn == wire::psn_add(w.first_psn, w.resp_pkts)) {
        qp.read_rewind_pending = true;
        qp.read_rewind_psn = psn;
        recovery_->on_response_lost(qp, psn, now);
        break;
      }
    }
    rte_pktmbuf_free(m);
    return;
  }

  if (v.opcode == wire::op::kAck) {
    const uint8_t syn = v.aeth().syndrome();
    switch (wire::aeth_kind(syn)) {
      case wire::AethKind::kAck:
        ack_up_to(qp, psn, now);
        break;
      case wire::AethKind::kRnrNak: {
        counters_[NicCounters::rnr_nak_retry_err]++;
        ack_up_to(qp, wire::psn_add(psn, -1), now);
        if (qp.state == IBV_QPS_ERR) break;
        if (qp.rnr_retry != 7) {
          if (qp.rnr_left == 0) {
            fail_send_queue(qp, IBV_WC_RNR_RETRY_EXC_ERR, now);
            break;
          }
          qp.rnr_left--;
        }
        recovery_->on_rnr_nak(qp, psn, now);
        qp.rnr_waiting = true;
        timers().schedule(qp.rnr_timer, now + Duration(int64_t(wire::rnr_timer_ns(wire::aeth_value(syn))) * 1000));
        arm_retry_timer(qp, now + Duration(int64_t(wire::rnr_timer_ns(wire::aeth_value(syn))) * 1000));
        break;
      }
      case wire::AethKind::kNak: {
        const auto code = wire::NakCode(wire::aeth_value(syn));
        ack_up_to(qp, wire::psn_add(psn, -1), now);
        if (qp.state == IBV_QPS_ERR) break;
        if (code == wire::NakCode::kPsnSeqError) {
          counters_[NicCounters::packet_seq_err]++;
          if (!wire::psn_lt(psn, qp.sent_high) || wire::psn_lt(psn, qp.una_psn)) break;
          recovery_->on_seq_nak(qp, psn, now);
          arm_retry_timer(qp, now);
        } else {
          if (code == wire::NakCode::kRemoteAccessError) counters_[NicCounters::req_remote_access_errors]++;
          if (code == wire::NakCode::kInvalidRequest) counters_[NicCounters::req_remote_invalid_request]++;
          // The NAKed request fails; everything after it is flushed.
          for (uint32_t i = qp.sq_head; i != qp.sq_fetched; i++) {
            SendWork& w = qp.work(i);
            if (!w.started) break;
            if (wire::psn_ge(psn, w.first_psn) && wire::psn_le(psn, w.last_psn())) {
              w.status = nak_status(code);
              break;
            }
          }
          fail_send_queue(qp, nak_status(code), now);
        }
        break;
      }
      default:
        break;
    }
    rte_pktmbuf_free(m);
    return;
  }

  // READ responses and atomic ACKs answer the oldest unanswered READ/atomic.
  SendWork* target = nullptr;
  for (uint32_t i = qp.sq_head; i != qp.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.started) break;
    if (w.needs_response() && !w.done) {
      target = &w;
      break;
    }
  }
  if (target == nullptr || wire::psn_lt(psn, target->first_psn) || wire::psn_gt(psn, target->last_psn())) {
    rte_pktmbuf_free(m);  // stale or duplicate
    return;
  }
  SendWork& w = *target;
  if (v.opcode == wire::op::kAtomicAck) {
    if (!w.is_atomic()) {
      w.status = IBV_WC_BAD_RESP_ERR;
      fail_send_queue(qp, IBV_WC_BAD_RESP_ERR, now);
      rte_pktmbuf_free(m);
      return;
    }
    const uint64_t orig = v.atomic_ack().orig.get();
    const Sge& s = w.sge[0];
    Mr* mr = mrs_.find(s.lkey);
    if (mr == nullptr || !mr->contains(s.addr, 8) || !qp.ctx->memory->write(mr->host(s.addr), &orig, 8))
      w.status = IBV_WC_LOC_PROT_ERR;
    w.resp_pkts = 1;
    w.done = true;
    qp.rd_atomic_outstanding--;
    if (qp.read_rewind_pending && qp.read_rewind_psn == psn) qp.read_rewind_pending = false;
    ack_up_to(qp, psn, now, true);
    rte_pktmbuf_free(m);
    return;
  }
  if (!w.is_read()) {
    fail_send_queue(qp, IBV_WC_BAD_RESP_ERR, now);
    rte_pktmbuf_free(m);
    return;
  }
  const uint32_t expected = wire::psn_add(w.first_psn, w.resp_pkts);
  if (psn != expected) {
    if (wire::psn_gt(psn, expected)) {
      // A response went missing: ask again from the first one missing.
      counters_[NicCounters::out_of_sequence]++;
      if (!(qp.read_rewind_pending && qp.read_rewind_psn == expected)) {
        qp.read_rewind_pending = true;
        qp.read_rewind_psn = expected;
        recovery_->on_response_lost(qp, expected, now);
      }
    }
    rte_pktmbuf_free(m);
    return;
  }
  // In order: check the shape, then place the data.
  const uint32_t offset = w.resp_pkts * qp.mtu;
  const bool last = info.any(wire::kOpLast);
  const uint32_t remaining = w.length - std::min(w.length, offset);
  if ((last && v.payload_len != remaining) || (!last && v.payload_len != qp.mtu) || v.payload_len > remaining ||
      (w.resp_pkts == 0 && !info.any(wire::kOpFirst))) {
    // (A FIRST later on is fine: it answers a READ asked again from the
    // middle.)
    w.status = IBV_WC_BAD_RESP_ERR;
    fail_send_queue(qp, IBV_WC_BAD_RESP_ERR, now);
    rte_pktmbuf_free(m);
    return;
  }
  if (qp.read_rewind_pending && qp.read_rewind_psn == psn) qp.read_rewind_pending = false;
  // Scatter into the local SGEs (checked when the WQE was fetched).
  uint32_t off = offset, len = v.payload_len;
  const uint8_t* src = v.data + v.payload_off;
  for (uint32_t i = 0; i < w.num_sge && len > 0; i++) {
    const Sge& s = w.sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const uint32_t n = std::min(len, s.length - off);
    Mr* mr = mrs_.find(s.lkey);
    if (mr == nullptr || !mr->contains(s.addr + off, n) ||
        !dma_write(DmaOwner::read_response_for(qp, w.index), mr->host(s.addr + off), src, n)) {
      w.status = IBV_WC_LOC_PROT_ERR;
      break;
    }
    src += n;
    len -= n;
    off = 0;
  }
  w.resp_pkts++;
  if (last) {
    w.done = true;
    qp.rd_atomic_outstanding--;
  }
  ack_up_to(qp, psn, now, true);
  rte_pktmbuf_free(m);
}

}  // namespace rocemu::nic
