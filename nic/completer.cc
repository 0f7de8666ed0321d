// Completer: ACKs, NAKs, READ responses and atomic ACKs coming back to a
// requester, each through named steps (CompState, nic/transport_states.h);
// marks WQEs done and completes them in send-queue order; errors move the
// QP to ERR and flush what is left.
#include <algorithm>
#include <iterator>

#include "common/engine/lazy_payload.h"
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
    case IBV_WR_ATOMIC_WRITE:
      return IBV_WC_ATOMIC_WRITE;
    case IBV_WR_BIND_MW:
      return IBV_WC_BIND_MW;
    case IBV_WR_LOCAL_INV:
      return IBV_WC_LOCAL_INV;
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
  // An error lets the application reuse its buffers before later WRs were
  // acknowledged: frames still in flight get their bytes first.
  if (status != IBV_WC_SUCCESS) dpdk::materialize_all();
  Cqe cqe{};
  cqe.wr_id = w.wr_id;
  cqe.status = status;
  cqe.opcode = wc_opcode(w.opcode);
  cqe.byte_len = (w.is_read() || w.is_atomic() || w.is_atomic_write()) ? w.length : 0;  // atomics: 8, as rxe
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
  while (qp.req.sq_head != qp.req.sq_fetched && qp.state != IBV_QPS_ERR) {
    SendWork& w = qp.work(qp.req.sq_head);
    if (w.status != IBV_WC_SUCCESS) {
      write_send_cqe(qp, w, w.status);
      qp.req.sq_head++;
      qp_to_error(qp, now);
      return;
    }
    if (!w.done) break;
    if (w.signaled(qp.sq_sig_all)) write_send_cqe(qp, w, IBV_WC_SUCCESS);
    if (qp.req.sq_send == qp.req.sq_head) {
      // A rewind pointed here, but it is all acknowledged: skip it.
      qp.req.sq_send = qp.req.sq_head + 1;
      qp.req.send_psn = qp.req.sq_send != qp.req.sq_fetched && qp.work(qp.req.sq_send).started ? qp.work(qp.req.sq_send).first_psn
                                                                                : qp.req.next_new_psn;
    }
    qp.req.sq_head++;
    if (qp.send_cq->overflowed()) {
      qp_to_error(qp, now);
      return;
    }
  }
  if (qp.req.sq_head == qp.req.sq_send && qp.req.una_psn == qp.req.sent_high) {
    qp.req.any_outstanding = false;
    timers().cancel(qp.req.retry_timer);
  }
}

void Nic::fail_send_queue(Qp& qp, ibv_wc_status status, Time now) {
  // The error completions let the application change its buffers: the
  // frames still in flight must carry the bytes sent (lazy_payload.h).
  dpdk::materialize_all();
  // The oldest unfinished WQE takes the error; the rest are flushed.
  for (uint32_t i = qp.req.sq_head; i != qp.req.sq_fetched; i++) {
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
  dpdk::materialize_all();  // before the flush errors (fail_send_queue)
  qp.state = IBV_QPS_ERR;
  timers().cancel(qp.req.retry_timer);
  timers().cancel(qp.req.rnr_timer);
  qp.req.rnr_waiting = false;
  qp.lr.resend_psns.clear();
  for (rte_mbuf*& m : qp.lr.ooo)
    if (m != nullptr) {
      rte_pktmbuf_free(m);
      m = nullptr;
    }
  qp.lr.ooo_count = 0;
  drop_prefetch(qp);
  flush_qp(qp, now);
  // A pending NAK still goes out.
  if (qp.resp.ack_pending) activate(qp, now);
}

void Nic::flush_qp(Qp& qp, Time now) {
  (void)now;
  fetch_send_wqes(qp, now);
  while (qp.req.sq_head != qp.req.sq_fetched) {
    SendWork& w = qp.work(qp.req.sq_head);
    write_send_cqe(qp, w, IBV_WC_WR_FLUSH_ERR);
    qp.req.sq_head++;
  }
  qp.req.sq_send = qp.req.sq_head;
  qp.resp.tasks.clear();
  if (qp.resp.recv_valid) {
    write_recv_cqe(qp, qp.resp.recv, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0, 0, false);
    qp.resp.recv_valid = false;
  }
  if (qp.srq == nullptr && qp.rq.valid()) {
    RecvEntry r;
    while (qp.rq.pop(r)) write_recv_cqe(qp, r, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0, 0, false);
  }
}

void Nic::ack_up_to(Qp& qp, uint32_t psn, Time now, bool from_response) {
  // Cumulative: every request PSN up to `psn` arrived. Ignore ACKs older
  // than what is already acknowledged and ACKs for PSNs never sent.
  if (!qp.req.any_outstanding) return;
  if (wire::psn_lt(psn, wire::psn_add(qp.req.una_psn, -1)) || !wire::psn_lt(psn, qp.req.sent_high)) return;
  const bool progress = wire::psn_ge(psn, qp.req.una_psn);
  for (uint32_t i = qp.req.sq_head; i != qp.req.sq_fetched; i++) {
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
        if (!(qp.req.read_rewind_pending && qp.req.read_rewind_psn == missing)) {
          qp.req.read_rewind_pending = true;
          qp.req.read_rewind_psn = missing;
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
  if (wire::psn_ge(psn, qp.req.una_psn)) qp.req.una_psn = wire::psn_add(psn, 1);
  if (progress) {
    qp.req.retry_left = qp.retry_cnt;
    qp.req.rnr_left = qp.rnr_retry;
    if (!qp.lr.resend_psns.empty())
      std::erase_if(qp.lr.resend_psns, [&](uint32_t p) { return wire::psn_lt(p, qp.req.una_psn); });
  }
  complete_send_queue(qp, now);
  if (qp.state == IBV_QPS_ERR) return;
  if (qp.req.una_psn == qp.req.sent_high) {
    qp.req.any_outstanding = qp.req.rd_atomic_outstanding > 0;
    if (!qp.req.any_outstanding) timers().cancel(qp.req.retry_timer);
  } else if (progress) {
    arm_retry_timer(qp, now);
  }
  activate(qp, now);
}

// ---- a response's steps ----

// One response packet (ACK, NAK, READ response, atomic ACK) on its way
// through the steps.
struct Nic::Response {
  Qp& qp;
  const wire::PacketView& v;
  Time now;
  uint32_t psn;
  SendWork* wqe = nullptr;  // the READ or atomic it answers
  Response(Qp& q, const wire::PacketView& view, Time t) : qp(q), v(view), now(t), psn(view.bth().psn()) {}
};

const char* comp_state_name(CompState s) {
  static constexpr const char* kNames[] = {
#define ROCEMU_STATE_NAME(name, text) text,
      ROCEMU_COMP_STATES(ROCEMU_STATE_NAME)
#undef ROCEMU_STATE_NAME
  };
  return size_t(s) < std::size(kNames) ? kNames[size_t(s)] : "?";
}

RxDisposition Nic::handle_response(Qp& qp, const wire::PacketView& v, Time now) {
  Response r(qp, v, now);
  CompState s = CompState::kCheckState;
  while (s != CompState::kDone) {
    switch (s) {
      case CompState::kCheckState: s = check_response_state(r); break;
      case CompState::kCheckTrimmed: s = check_response_trimmed(r); break;
      case CompState::kCheckAck: s = check_ack(r); break;
      case CompState::kAck: s = on_ack(r); break;
      case CompState::kRnrNak: s = on_rnr_nak(r); break;
      case CompState::kNak: s = on_nak(r); break;
      case CompState::kFindWqe: s = find_response_wqe(r); break;
      case CompState::kAtomicAck: s = on_atomic_ack(r); break;
      case CompState::kCheckReadPsn: s = check_read_psn(r); break;
      case CompState::kCheckReadShape: s = check_read_shape(r); break;
      case CompState::kReadResponse: s = on_read_response(r); break;
      case CompState::kErrBadResponse:
        // The WQE answered fails (or the oldest unfinished one, whose
        // error comes first); everything after it is flushed.
        if (r.wqe != nullptr) r.wqe->status = IBV_WC_BAD_RESP_ERR;
        fail_send_queue(qp, IBV_WC_BAD_RESP_ERR, now);
        s = CompState::kDone;
        break;
      case CompState::kDone: break;
    }
  }
  return RxDisposition::kFree;
}

CompState Nic::check_response_state(Response& r) {
  const Qp& qp = r.qp;
  if (!qp.reliable() || (qp.state != IBV_QPS_RTS && qp.state != IBV_QPS_SQD)) {
    counters_[NicCounters::rx_wrong_state]++;
    return CompState::kDone;
  }
  return CompState::kCheckTrimmed;
}

CompState Nic::check_response_trimmed(Response& r) {
  // Only a packet marked as trimmed, with a payload, may be: ACKs and
  // unmarked responses go on without looking at the send queue.
  if (!may_be_trimmed(r.v)) return CompState::kCheckAck;
  // The READ whose next response this would be, if any: it says how long
  // the packet must be, so a trimmed one is told from data.
  Qp& qp = r.qp;
  SendWork* awaiting = nullptr;
  for (uint32_t i = qp.req.sq_head; i != qp.req.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.started) break;
    if ((w.is_read() || w.is_atomic_write()) && !w.done && r.psn == wire::psn_add(w.first_psn, w.resp_pkts)) {
      awaiting = &w;
      break;
    }
  }
  uint32_t expected_len = kUnknownLength;
  if (awaiting != nullptr && awaiting->is_atomic_write()) expected_len = 0;  // its answer is empty
  else if (awaiting != nullptr)
    expected_len = std::min(qp.mtu, awaiting->length - std::min(awaiting->length, awaiting->resp_pkts * qp.mtu));
  if (!is_trimmed(qp, r.v, expected_len)) return CompState::kCheckAck;
  // A READ response whose payload a switch cut: lost, ask again at once.
  counters_[NicCounters::rx_trimmed]++;
  if (awaiting != nullptr) {
    qp.req.read_rewind_pending = true;
    qp.req.read_rewind_psn = r.psn;
    recovery_->on_response_lost(qp, r.psn, r.now);
  }
  return CompState::kDone;
}

CompState Nic::check_ack(Response& r) {
  if (wire::op::base(r.v.opcode) != wire::op::kAck) return CompState::kFindWqe;
  switch (wire::aeth_kind(r.v.aeth().syndrome())) {
    case wire::AethKind::kAck:
      return CompState::kAck;
    case wire::AethKind::kRnrNak:
      return CompState::kRnrNak;
    case wire::AethKind::kNak:
      return CompState::kNak;
    default:
      return CompState::kDone;
  }
}

CompState Nic::on_ack(Response& r) {
  ack_up_to(r.qp, r.psn, r.now);
  return CompState::kDone;
}

CompState Nic::on_rnr_nak(Response& r) {
  Qp& qp = r.qp;
  const Time now = r.now;
  const uint8_t syn = r.v.aeth().syndrome();
  counters_[NicCounters::rnr_nak_retry_err]++;
  ack_up_to(qp, wire::psn_add(r.psn, -1), now);
  if (qp.state == IBV_QPS_ERR) return CompState::kDone;
  if (qp.rnr_retry != 7) {
    if (qp.req.rnr_left == 0) {
      fail_send_queue(qp, IBV_WC_RNR_RETRY_EXC_ERR, now);
      return CompState::kDone;
    }
    qp.req.rnr_left--;
  }
  recovery_->on_rnr_nak(qp, r.psn, now);
  qp.req.rnr_waiting = true;
  const Time until = now + Duration(int64_t(wire::rnr_timer_ns(wire::aeth_value(syn))) * 1000);
  timers().schedule(qp.req.rnr_timer, until);
  arm_retry_timer(qp, until);
  return CompState::kDone;
}

CompState Nic::on_nak(Response& r) {
  Qp& qp = r.qp;
  const uint32_t psn = r.psn;
  const auto code = wire::NakCode(wire::aeth_value(r.v.aeth().syndrome()));
  ack_up_to(qp, wire::psn_add(psn, -1), r.now);
  if (qp.state == IBV_QPS_ERR) return CompState::kDone;
  if (code == wire::NakCode::kPsnSeqError) {
    counters_[NicCounters::packet_seq_err]++;
    if (!wire::psn_lt(psn, qp.req.sent_high) || wire::psn_lt(psn, qp.req.una_psn)) return CompState::kDone;
    recovery_->on_seq_nak(qp, psn, r.now);
    arm_retry_timer(qp, r.now);
    return CompState::kDone;
  }
  if (code == wire::NakCode::kRemoteAccessError) counters_[NicCounters::req_remote_access_errors]++;
  if (code == wire::NakCode::kInvalidRequest) counters_[NicCounters::req_remote_invalid_request]++;
  // The NAKed request fails; everything after it is flushed.
  for (uint32_t i = qp.req.sq_head; i != qp.req.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.started) break;
    if (wire::psn_ge(psn, w.first_psn) && wire::psn_le(psn, w.last_psn())) {
      w.status = nak_status(code);
      break;
    }
  }
  fail_send_queue(qp, nak_status(code), r.now);
  return CompState::kDone;
}

CompState Nic::find_response_wqe(Response& r) {
  // READ responses and atomic ACKs answer the oldest unanswered READ/atomic.
  Qp& qp = r.qp;
  for (uint32_t i = qp.req.sq_head; i != qp.req.sq_fetched; i++) {
    SendWork& w = qp.work(i);
    if (!w.started) break;
    if (w.needs_response() && !w.done) {
      r.wqe = &w;
      break;
    }
  }
  if (r.wqe == nullptr || wire::psn_lt(r.psn, r.wqe->first_psn) || wire::psn_gt(r.psn, r.wqe->last_psn()))
    return CompState::kDone;  // stale or duplicate
  if (wire::op::base(r.v.opcode) == wire::op::kAtomicAck) return r.wqe->is_atomic() ? CompState::kAtomicAck : CompState::kErrBadResponse;
  // An ATOMIC WRITE is answered by an empty READ response ONLY (rxe's
  // check_ack: COMPST_WRITE_SEND for it).
  return r.wqe->is_read() || r.wqe->is_atomic_write() ? CompState::kCheckReadPsn : CompState::kErrBadResponse;
}

CompState Nic::on_atomic_ack(Response& r) {
  Qp& qp = r.qp;
  SendWork& w = *r.wqe;
  const uint64_t orig = r.v.atomic_ack().orig.get();
  const Sge& s = w.sge[0];
  Mr* mr = lkey_writable(qp.pd, s.lkey, s.addr, 8);
  if (mr == nullptr || !qp.ctx->memory->write(mr->host(s.addr), &orig, 8)) {
    fail_send_queue(qp, IBV_WC_LOC_PROT_ERR, r.now);
    return CompState::kDone;
  }
  w.resp_pkts = 1;
  w.done = true;
  qp.req.rd_atomic_outstanding--;
  if (qp.req.read_rewind_pending && qp.req.read_rewind_psn == r.psn) qp.req.read_rewind_pending = false;
  ack_up_to(qp, r.psn, r.now, true);
  return CompState::kDone;
}

CompState Nic::check_read_psn(Response& r) {
  Qp& qp = r.qp;
  const uint32_t expected = wire::psn_add(r.wqe->first_psn, r.wqe->resp_pkts);
  if (r.psn == expected) return CompState::kCheckReadShape;
  if (wire::psn_gt(r.psn, expected)) {
    // A response went missing: ask again from the first one missing.
    counters_[NicCounters::out_of_sequence]++;
    if (!(qp.req.read_rewind_pending && qp.req.read_rewind_psn == expected)) {
      qp.req.read_rewind_pending = true;
      qp.req.read_rewind_psn = expected;
      recovery_->on_response_lost(qp, expected, r.now);
    }
  }
  return CompState::kDone;
}

CompState Nic::check_read_shape(Response& r) {
  // In order: FIRST/MIDDLE carry an MTU, the LAST what is left; the first
  // response of a READ is a FIRST or ONLY. (A FIRST later on is fine: it
  // answers a READ asked again from the middle.)
  const SendWork& w = *r.wqe;
  const wire::OpcodeInfo& info = r.v.op();
  const uint32_t offset = w.resp_pkts * r.qp.mtu;
  const bool last = info.any(wire::kOpLast);
  const uint32_t expected = w.is_atomic_write() ? 0 : w.length;  // nothing comes back for an ATOMIC WRITE
  const uint32_t remaining = expected - std::min(expected, offset);
  const uint32_t len = r.v.payload_len;
  if ((last && len != remaining) || (!last && len != r.qp.mtu) || len > remaining ||
      (w.resp_pkts == 0 && !info.any(wire::kOpFirst)))
    return CompState::kErrBadResponse;
  return CompState::kReadResponse;
}

CompState Nic::on_read_response(Response& r) {
  Qp& qp = r.qp;
  SendWork& w = *r.wqe;
  if (qp.req.read_rewind_pending && qp.req.read_rewind_psn == r.psn) qp.req.read_rewind_pending = false;
  // Scatter into the local SGEs, each held to its key again (it may have
  // been invalidated or deregistered since the WQE was fetched): a refusal
  // fails the READ and the QP, nothing more lands.
  uint32_t off = w.resp_pkts * qp.mtu, len = r.v.payload_len;
  const uint8_t* src = r.v.data + r.v.payload_off;
  for (uint32_t i = 0; i < w.num_sge && len > 0; i++) {
    const Sge& s = w.sge[i];
    if (off >= s.length) {
      off -= s.length;
      continue;
    }
    const uint32_t n = std::min(len, s.length - off);
    Mr* mr = lkey_writable(qp.pd, s.lkey, s.addr + off, n);
    if (mr == nullptr) {
      fail_send_queue(qp, IBV_WC_LOC_PROT_ERR, r.now);
      return CompState::kDone;
    }
    // A write that fails when the batch is flushed fails this READ alone.
    if (!dma_write(DmaOwner::read_response_for(qp, w.index), mr->host(s.addr + off), src, n)) {
      w.status = IBV_WC_LOC_PROT_ERR;
      break;
    }
    src += n;
    len -= n;
    off = 0;
  }
  w.resp_pkts++;
  if (r.v.op().any(wire::kOpLast)) {
    w.done = true;
    qp.req.rd_atomic_outstanding--;
  }
  ack_up_to(qp, r.psn, r.now, true);
  return CompState::kDone;
}

}  // namespace rocemu::nic
