// Responder: requests arriving at a QP. Each packet goes through named
// check steps (nic/transport_states.h, as kernel rxe's responder): the PSN
// (duplicates are answered again; gaps and trimmed packets are the loss
// recovery's, see nic/loss_recovery.h), the opcode sequence, the length,
// the rkey (of every packet that touches memory) and the resources (READs
// and atomics owed, receive WQEs); each returns the next step or a named
// error state. Then it writes memory, posts receive completions, and
// queues ACK/NAKs, READ responses and atomic ACKs.
#include <algorithm>
#include <iterator>
#include <utility>

#include "common/engine/lazy_payload.h"
#include "nic/nic.h"

namespace rocemu::nic {

namespace {

bool is_send(uint8_t op) { return wire::opcode_info(op).any(wire::kOpSend); }
bool is_write(uint8_t op) { return wire::opcode_info(op).any(wire::kOpWrite); }

// An 8-byte atomic's target: aligned as the requester names it and in the
// memory behind it (an MR registered with an iova that differs from its
// address modulo 8 maps an aligned address to a misaligned one; rxe checks
// the host address, so no store there is reported atomic).
bool atomic_target_aligned(const Mr& mr, uint64_t va) { return ((va | mr.host(va)) & 7) == 0; }

}  // namespace

Mr* Nic::rkey_grants(const Qp& qp, const Pd* pd, uint32_t rkey, uint64_t va, uint64_t len, int access) const {
  if (pd == nullptr) return nullptr;  // an XRC target's SRQ that is gone
  if (rkey & kMwKeyBit) return mw_grants(qp, pd, rkey, va, len, access);  // a memory window's
  Mr* mr = mrs_.find(rkey);  // key and generation
  if (mr == nullptr || mr->invalidated || mr->pd != pd || !(mr->access & access) || !(qp.access & access) ||
      !mr->contains(va, len))
    return nullptr;
  return mr;
}

Mr* Nic::lkey_writable(const Pd* pd, uint32_t lkey, uint64_t addr, uint64_t len) const {
  Mr* mr = mrs_.find(lkey);  // key and generation
  if (mr == nullptr || mr->invalidated || mr->pd != pd || !(mr->access & IBV_ACCESS_LOCAL_WRITE) ||
      !mr->contains(addr, len))
    return nullptr;
  return mr;
}

Mr* Nic::check_rkey(Qp& qp, const Pd* pd, uint32_t rkey, uint64_t va, uint64_t len, int access) {
  Mr* mr = rkey_grants(qp, pd, rkey, va, len, access);
  if (mr == nullptr) counters_[NicCounters::resp_remote_access_errors]++;
  return mr;
}

bool Nic::may_be_trimmed(const wire::PacketView& v) const {
  return v.dscp == cfg_.trim_dscp && v.op().any(wire::kOpPayload) && v.bth().pad_count() == 0;
}

bool Nic::is_trimmed(const Qp& qp, const wire::PacketView& v, uint32_t expected) const {
  // A switch remarks a trimmed packet's DSCP, cuts its payload to whole
  // words and clears the pad count. The DSCP alone proves nothing (an
  // application may pick any traffic class): a packet is trimmed only if it
  // carries less than it must -- `expected` bytes when the receiver knows
  // them, else less than an MTU.
  if (!may_be_trimmed(v)) return false;
  const uint32_t full = expected != kUnknownLength ? expected : qp.mtu;
  return v.payload_len < full;
}

bool Nic::take_recv(Qp& qp, RecvEntry& out) {
  if (qp.srq != nullptr) {
    Srq& srq = *qp.srq;
    if (!srq.rq.pop(out)) return false;
    if (srq.armed && srq.rq.available() < srq.limit) {
      srq.armed = false;
      if (HostContext* owner = srq.pd->ctx; owner->on_async_event) {  // the SRQ's (an XRC target may be another's)
        ibv_async_event ev{};
        ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
        ev.element.srq = nullptr;
        owner->on_async_event(ev);
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
    Mr* mr = lkey_writable(pd, s.lkey, s.addr + offset, n);
    if (mr == nullptr) {
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
                         uint32_t imm, int wc_flags, uint32_t src_qp, bool solicited, uint8_t sl) {
  flush_dma();  // the data of a completion is in place before the completion
  if (std::exchange(qp.resp.message_data_lost, false) && status == IBV_WC_SUCCESS) status = IBV_WC_LOC_PROT_ERR;  // ... or not
  // An error ends the QP, and the application may reuse the buffers of its
  // sends and READ responses in flight: they get their bytes first.
  if (status != IBV_WC_SUCCESS) dpdk::materialize_all();
  Cqe cqe{};
  cqe.wr_id = r.wr_id;
  cqe.status = status;
  cqe.opcode = opcode;
  cqe.byte_len = byte_len;
  cqe.imm = imm;
  cqe.qp_num = qp.qpn;
  cqe.src_qp = src_qp;
  cqe.wc_flags = uint32_t(wc_flags);
  cqe.sl = sl;
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
  if (qp.resp.ack_pending && wire::aeth_kind(qp.resp.ack_syndrome) != wire::AethKind::kAck &&
      wire::aeth_kind(syndrome) == wire::AethKind::kAck)
    return;
  qp.resp.ack_pending = true;
  qp.resp.ack_syndrome = syndrome;
  qp.resp.ack_psn = psn;
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
  if (qp.resp.recv_valid) {
    write_recv_cqe(qp, qp.resp.recv, status, IBV_WC_RECV, 0, 0, 0, 0, false);
    qp.resp.recv_valid = false;
  }
  if (qp.ctx->on_async_event) {
    ibv_async_event ev{};
    ev.event_type = status == IBV_WC_REM_ACCESS_ERR ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR;
    qp.ctx->on_async_event(ev);
  }
  qp_to_error(qp, now);
}

// ---- a request's steps ----

// One request packet on its way through the steps.
struct Nic::Request {
  Qp& qp;
  rte_mbuf* m;
  const wire::PacketView& v;
  Time now;
  uint32_t psn;
  bool rc;
  bool first, last, imm;
  bool in_order = false;                   // arrived at the expected PSN (RC)
  bool kept = false;                       // the frame went to the loss recovery
  const RdAtomicReplay* replay = nullptr;  // a duplicate: the READ or atomic it repeats
  const Pd* pd;                            // memory is checked against it: the QP's, an XRC target's SRQ's
  Mr* mr = nullptr;                        // what check_rkey found for the payload or the atomic
  RecvEntry imm_recv;                      // WRITE with immediate: the receive WQE it takes
  bool imm_recv_taken = false;
  bool invalidate_refused = false;         // SEND with invalidate of a window it may not free
  ibv_wc_status local_status = IBV_WC_SUCCESS;  // kErrLocal*: what the receive completes with

  Request(Qp& q, rte_mbuf* frame, const wire::PacketView& view, Time t)
      : qp(q),
        m(frame),
        v(view),
        now(t),
        psn(view.bth().psn()),
        rc(q.reliable()),
        first(view.op().any(wire::kOpFirst)),
        last(view.op().any(wire::kOpLast)),
        imm(view.op().any(wire::kOpImm)),
        pd(q.pd) {}
  const wire::OpcodeInfo& info() const { return v.op(); }
  bool read() const { return info().any(wire::kOpRead); }
  bool atomic() const { return info().any(wire::kOpAtomic); }
  bool atomic_write() const { return info().any(wire::kOpAtomicWrite); }
  bool write() const { return is_write(v.opcode); }
};

const char* resp_state_name(RespState s) {
  static constexpr const char* kNames[] = {
#define ROCEMU_STATE_NAME(name, text) text,
      ROCEMU_RESP_STATES(ROCEMU_STATE_NAME)
#undef ROCEMU_STATE_NAME
  };
  return size_t(s) < std::size(kNames) ? kNames[size_t(s)] : "?";
}

RxDisposition Nic::handle_request(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) {
  if (!qp.can_receive()) {
    counters_[NicCounters::rx_wrong_state]++;
    return RxDisposition::kFree;
  }
  Request r(qp, m, v, now);
  run_request(r, RespState::kCheckPsn);
  if (r.in_order) recovery_->on_in_order(qp, now);
  return r.kept ? RxDisposition::kKept : RxDisposition::kFree;
}

void Nic::process_request(Qp& qp, const wire::PacketView& v, Time now) {
  Request r(qp, nullptr, v, now);
  run_request(r, RespState::kCheckXrcSrq);
}

RespState Nic::run_request(Request& r, RespState s) {
  for (;;) {
    switch (s) {
      case RespState::kCheckPsn: s = check_psn(r); break;
      case RespState::kCheckXrcSrq: s = check_xrc_srq(r); break;
      case RespState::kCheckOpSeq: s = check_op_seq(r); break;
      case RespState::kCheckLength: s = check_length(r); break;
      case RespState::kCheckRkey: s = check_request_rkey(r); break;
      case RespState::kCheckResources: s = check_resources(r); break;
      case RespState::kExecute: s = execute(r); break;
      case RespState::kComplete: s = complete_request(r); break;
      case RespState::kTrimmed: s = on_trimmed_request(r); break;
      case RespState::kDuplicate: s = check_duplicate(r); break;
      case RespState::kOutOfSequence: s = on_out_of_sequence(r); break;
      case RespState::kUcResync: s = uc_resync(r); break;
      case RespState::kDone: return s;
      default:
        request_error(r, s);
        return s;
    }
  }
}

RespState Nic::check_psn(Request& r) {
  const int32_t d = wire::psn_diff(r.psn, r.qp.resp.epsn);
  if (is_trimmed(r.qp, r.v, request_length(r.qp, r.v, d))) return RespState::kTrimmed;
  if (d < 0) return r.rc ? RespState::kDuplicate : RespState::kDone;
  if (d > 0) {
    counters_[NicCounters::out_of_sequence]++;
    return r.rc ? RespState::kOutOfSequence : RespState::kUcResync;
  }
  r.in_order = r.rc;
  return RespState::kCheckXrcSrq;
}

RespState Nic::check_xrc_srq(Request& r) {
  // An XRC target delivers each request to the SRQ its XRCETH names, if
  // that SRQ is in the target's XRC domain; its memory is checked against
  // that SRQ's PD, its completions go to that SRQ's CQ. Else (no such SRQ,
  // another domain's, another SRQ halfway through a message) the request
  // is refused as an access violation: NAK remote access error and the
  // target to the error state (hns reports XRCD_VIOLATION and
  // INVALID_XRCETH as IB_EVENT_QP_ACCESS_ERR).
  Qp& qp = r.qp;
  if (qp.xrcd == nullptr) return RespState::kCheckOpSeq;
  Srq* srq = xrc_srq_for(qp, r.v.xrceth().srqn());
  if (srq == nullptr || (qp.resp.in_message && srq != qp.srq)) {
    counters_[NicCounters::resp_remote_access_errors]++;
    return RespState::kErrXrcSrq;
  }
  qp.srq = srq;
  r.pd = qp.pd = srq->pd;
  qp.recv_cq = srq->cq;
  return RespState::kCheckOpSeq;
}

Srq* Nic::xrc_srq_for(const Qp& qp, uint32_t srqn) const {
  const auto it = xrc_srqs_.find(srqn);
  if (it == xrc_srqs_.end() || qp.xrcd == nullptr || it->second->xrcd->xrcd != qp.xrcd->xrcd) return nullptr;
  return it->second;
}

const Pd* Nic::response_pd(const Qp& qp, const ResponderTask& t) const {
  if (qp.xrcd == nullptr) return qp.pd;
  const Srq* srq = xrc_srq_for(qp, t.xrc_srqn);
  return srq != nullptr ? srq->pd : nullptr;
}

RespState Nic::on_trimmed_request(Request& r) {
  // Trimmed by a switch: the payload is gone. A NAK is cumulative (it
  // says every PSN before it arrived), so only the expected PSN can be
  // NAKed: at once if this is it, else as soon as the PSNs before it are
  // in -- no waiting for the requester's timer either way.
  counters_[NicCounters::rx_trimmed]++;
  const int32_t d = wire::psn_diff(r.psn, r.qp.resp.epsn);
  if (r.rc && d == 0) {
    recovery_->on_trimmed_expected(r.qp, r.now);
  } else if (r.rc && d > 0) {
    counters_[NicCounters::out_of_sequence]++;
    recovery_->on_trimmed_ahead(r.qp, r.psn, r.now);
  }
  return RespState::kDone;
}

RespState Nic::on_out_of_sequence(Request& r) {
  recovery_->on_out_of_order(r.qp, r.m, r.v, r.now);  // takes the frame
  r.kept = true;
  return RespState::kDone;
}

RespState Nic::uc_resync(Request& r) {
  // UC: the message in progress is lost; start again at a FIRST/ONLY.
  Qp& qp = r.qp;
  counters_[NicCounters::rx_discards_uc]++;
  qp.resp.in_message = false;
  qp.resp.write_rkey = 0;
  qp.resp.epsn = r.psn;
  if (r.first) return RespState::kCheckOpSeq;
  qp.resp.epsn = wire::psn_add(r.psn, 1);
  return RespState::kDone;
}

uint32_t Nic::request_length(const Qp& qp, const wire::PacketView& v, int32_t d) const {
  const wire::OpcodeInfo& info = v.op();
  const bool first = info.any(wire::kOpFirst), last = info.any(wire::kOpLast);
  if (info.any(wire::kOpMiddle) || (first && !last)) return qp.mtu;
  if (first && last && is_write(v.opcode)) return std::min(v.reth().dma_length.get(), qp.mtu);
  if (info.any(wire::kOpAtomicWrite)) return 8;
  if (last && d == 0 && qp.resp.in_message && is_write(v.opcode) && is_write(qp.resp.last_req_opcode))
    return uint32_t(std::min<uint64_t>(qp.resp.write_remaining, qp.mtu));
  return kUnknownLength;
}

RespState Nic::check_duplicate(Request& r) {
  Qp& qp = r.qp;
  counters_[NicCounters::duplicate_request]++;
  if (!r.read() && !r.atomic() && !r.atomic_write()) {
    // SEND/WRITE: acknowledge again, up to what has arrived.
    if (r.v.bth().ack_req() || r.last) schedule_ack(qp, wire::aeth_ack(), wire::psn_add(qp.resp.epsn, -1), r.now);
    return RespState::kDone;
  }
  // READ/atomic: answered again only if it repeats one the responder
  // accepted (a READ re-reads only bytes of that READ, from the PSN on; an
  // atomic gets the saved result), after the resource checks of a new
  // request. A READ reads memory again, so its rkey is checked again; an
  // atomic is not executed again, so not (IBA 9.7.5.1.3: its first
  // execution modified memory, a NAK now would tell the requester it had
  // not). Its answer takes the place of one to the same request
  // still owed (and, go-back-N, of those to later ones: they all come
  // again).
  // (An ATOMIC WRITE is an atomic here: executed once, then only answered.)
  const bool atomic_write = r.atomic_write(), atomic = r.atomic() || atomic_write;
  const uint32_t psn = r.psn;
  const auto it = std::find_if(qp.resp.rd_atomic_log.begin(), qp.resp.rd_atomic_log.end(), [&](const RdAtomicReplay& a) {
    return a.valid && a.atomic == atomic && a.atomic_write == atomic_write && wire::psn_ge(psn, a.psn) &&
           wire::psn_diff(psn, a.psn) < int32_t(a.npkts);
  });
  if (it == qp.resp.rd_atomic_log.end()) return RespState::kDone;  // too old to answer, or never accepted
  if (qp.xrcd != nullptr) {
    // An XRC target checks it against the PD of the SRQ it names (as the
    // first time), without taking that SRQ for the message in progress.
    const Srq* srq = xrc_srq_for(qp, r.v.xrceth().srqn());
    if (srq == nullptr) return RespState::kDone;
    r.pd = srq->pd;
  }
  if (atomic_write) {
    const wire::Reth& reth = r.v.reth();
    if (reth.rkey.get() != it->rkey || reth.va.get() != it->va) return RespState::kDone;  // not that ATOMIC WRITE
  } else if (atomic) {
    const wire::AtomicEth& a = r.v.atomic_eth();
    if (a.rkey.get() != it->rkey || a.va.get() != it->va) return RespState::kDone;  // not that atomic
  } else {
    const wire::Reth& reth = r.v.reth();
    const uint64_t from = it->va + uint64_t(wire::psn_diff(psn, it->psn)) * qp.mtu;
    if (reth.rkey.get() != it->rkey || reth.va.get() != from || reth.dma_length.get() > it->length - (from - it->va))
      return RespState::kDone;  // not that READ
  }
  r.replay = &*it;
  recovery_->on_duplicate_read(qp, psn);
  std::erase_if(qp.resp.tasks, [&](const ResponderTask& t) { return t.req_psn == it->psn; });
  return atomic ? RespState::kCheckResources : RespState::kCheckRkey;
}

RespState Nic::check_op_seq(Request& r) {
  // MIDDLE/LAST only inside a message of the same kind.
  const Qp& qp = r.qp;
  const uint8_t op = r.v.opcode;
  const bool continues = r.info().any(wire::kOpMiddle) || (r.last && !r.first);
  if (continues != qp.resp.in_message ||
      (continues && (is_send(op) != is_send(qp.resp.last_req_opcode) || is_write(op) != is_write(qp.resp.last_req_opcode)))) {
    // A peer's protocol violation (rxe's renumbered resend, say). On UC a
    // message whose FIRST was lost looks the same and is plain loss.
    if (r.rc) counters_[NicCounters::resp_opcode_sequence_err]++;
    return RespState::kErrOpSeq;
  }
  return RespState::kCheckLength;
}

RespState Nic::check_length(Request& r) {
  // Payload size: FIRST and MIDDLE carry exactly one MTU, none more.
  const Qp& qp = r.qp;
  const uint32_t payload = r.v.payload_len;
  if ((r.info().any(wire::kOpMiddle) || (r.first && !r.last)) && payload != qp.mtu) return RespState::kErrLength;
  if (payload > qp.mtu) return RespState::kErrLength;
  if (r.read()) {
    counters_[NicCounters::rx_read_requests]++;
    if (r.v.reth().dma_length.get() > 0x80000000u) return RespState::kErrLength;
  } else if (r.atomic()) {
    counters_[NicCounters::rx_atomic_requests]++;
  } else if (r.atomic_write()) {
    counters_[NicCounters::rx_atomic_write_requests]++;  // its length is checked after the key, as rxe does
  } else if (r.write()) {
    // A WRITE's packets carry exactly the bytes its RETH announced.
    if (r.first) counters_[NicCounters::rx_write_requests]++;
    const uint64_t remaining = r.first ? r.v.reth().dma_length.get() : qp.resp.write_remaining;
    if (payload > remaining || (r.last && payload != remaining)) return RespState::kErrLength;
  }
  return RespState::kCheckRkey;
}

RespState Nic::check_request_rkey(Request& r) {
  // Every packet that touches memory is held to the rkey's rights as they
  // are now (key and generation, PD, access of MR and QP, invalidation,
  // range): the MR may have been deregistered or invalidated, the QP's
  // rights changed, since the message's first packet.
  Qp& qp = r.qp;
  if (r.read()) {
    const wire::Reth& reth = r.v.reth();
    const uint32_t len = reth.dma_length.get();
    if (len > 0 && check_rkey(qp, r.pd, reth.rkey.get(), reth.va.get(), len, IBV_ACCESS_REMOTE_READ) == nullptr)
      return RespState::kErrRkey;
  } else if (r.atomic()) {
    const wire::AtomicEth& a = r.v.atomic_eth();
    if ((a.va.get() & 7) != 0) return RespState::kErrMisalignedAtomic;
    if ((r.mr = check_rkey(qp, r.pd, a.rkey.get(), a.va.get(), 8, IBV_ACCESS_REMOTE_ATOMIC)) == nullptr)
      return RespState::kErrRkey;
    if (!atomic_target_aligned(*r.mr, a.va.get())) return RespState::kErrMisalignedAtomic;
  } else if (r.atomic_write()) {
    // In rxe's order: the key, remote write access (as a WRITE) and the
    // range the RETH announces (check_rkey); then exactly 8 bytes,
    // announced and carried (IBA 1.5 9.4.7); then the alignment
    // (atomic_write_reply).
    const wire::Reth& reth = r.v.reth();
    const uint32_t len = reth.dma_length.get();
    if ((r.mr = check_rkey(qp, r.pd, reth.rkey.get(), reth.va.get(), len, IBV_ACCESS_REMOTE_WRITE)) == nullptr)
      return RespState::kErrRkey;
    if (len != 8 || r.v.payload_len != 8) return RespState::kErrLength;
    if (!atomic_target_aligned(*r.mr, reth.va.get())) return RespState::kErrMisalignedAtomic;
  } else if (r.write()) {
    if (r.first) {
      const wire::Reth& reth = r.v.reth();
      const uint32_t len = reth.dma_length.get();
      if (len > 0 && (r.mr = check_rkey(qp, r.pd, reth.rkey.get(), reth.va.get(), len, IBV_ACCESS_REMOTE_WRITE)) == nullptr)
        return RespState::kErrRkey;
    } else if (r.v.payload_len > 0 &&
               (r.mr = check_rkey(qp, r.pd, qp.resp.write_rkey, qp.resp.write_va, r.v.payload_len, IBV_ACCESS_REMOTE_WRITE)) ==
                   nullptr) {
      return RespState::kErrRkey;
    }
  }
  return RespState::kCheckResources;
}

RespState Nic::check_resources(Request& r) {
  // READs, atomics and ATOMIC WRITEs owed: at most max_dest_rd_atomic. A
  // SEND's first packet and a WRITE with immediate's last take a receive
  // WQE -- before memory is touched, so an RNR retry finds things unchanged.
  Qp& qp = r.qp;
  if (r.read() || r.atomic() || r.atomic_write()) {
    if (qp.resp.tasks.size() >= std::max<uint32_t>(qp.max_dest_rd_atomic, 1)) return RespState::kErrTooManyRdAtomic;
  } else if (r.write()) {
    if (r.last && r.imm) {
      if (!take_recv(qp, r.imm_recv)) return RespState::kErrRnr;
      r.imm_recv_taken = true;
    }
  } else if (r.first) {  // SEND
    if (qp.resp.recv_valid && !r.rc) {
      // UC: the receive WQE of a message lost halfway takes the next one.
      qp.resp.recv_offset = 0;
    } else {
      if (!take_recv(qp, qp.resp.recv)) return RespState::kErrRnr;
      qp.resp.recv_valid = true;
      qp.resp.recv_offset = 0;
    }
  }
  return RespState::kExecute;
}

RespState Nic::execute(Request& r) {
  if (r.replay != nullptr) return replay_duplicate(r);
  // A failed write fails the message it belonged to (note_dma_failure).
  if (r.first) start_message(r.qp, r.psn);
  if (r.read()) return execute_read(r);
  if (r.atomic()) return execute_atomic(r);
  if (r.atomic_write()) return execute_atomic_write(r);
  if (r.write()) return execute_write(r);
  return execute_send(r);
}

RespState Nic::replay_duplicate(Request& r) {
  Qp& qp = r.qp;
  const RdAtomicReplay& a = *r.replay;
  ResponderTask task;
  if (a.atomic_write) {
    task = {ResponderTask::kReadResponse, r.psn, a.psn, 0, 0, 0, true, 0};  // empty: nothing is read
  } else if (a.atomic) {
    task = {ResponderTask::kAtomicAck, r.psn, a.psn, 0, 0, 0, true, a.orig};
  } else {
    const wire::Reth& reth = r.v.reth();
    const uint32_t len = reth.dma_length.get();
    task = {ResponderTask::kReadResponse, r.psn, a.psn, reth.va.get(), len, reth.rkey.get(), true, 0};
  }
  if (qp.xrcd != nullptr) task.xrc_srqn = r.v.xrceth().srqn();
  // In PSN order among the responses still owed.
  const uint32_t psn = r.psn;
  auto pos = std::find_if(qp.resp.tasks.begin(), qp.resp.tasks.end(),
                          [psn](const ResponderTask& t) { return wire::psn_gt(t.psn, psn); });
  qp.resp.tasks.insert(pos, task);
  activate(qp, r.now);
  return RespState::kDone;
}

RespState Nic::execute_read(Request& r) {
  Qp& qp = r.qp;
  const wire::Reth& reth = r.v.reth();
  const uint32_t len = reth.dma_length.get();
  const uint32_t npkts = len == 0 ? 1 : uint32_t((uint64_t(len) + qp.mtu - 1) / qp.mtu);
  qp.resp.rd_atomic_log[qp.resp.rd_atomic_log_next++ % kMaxRdAtomic] = {true, false, r.psn, npkts, reth.va.get(), len,
                                                              reth.rkey.get(), 0};
  qp.resp.tasks.push_back({ResponderTask::kReadResponse, r.psn, r.psn, reth.va.get(), len, reth.rkey.get(), true, 0});
  if (qp.xrcd != nullptr) qp.resp.tasks.back().xrc_srqn = r.v.xrceth().srqn();
  qp.resp.epsn = wire::psn_add(qp.resp.epsn, npkts);
  qp.lr.nak_sent = false;
  activate(qp, r.now);
  return RespState::kDone;
}

RespState Nic::execute_atomic(Request& r) {
  Qp& qp = r.qp;
  const wire::AtomicEth& a = r.v.atomic_eth();
  const uint64_t va = a.va.get();
  uint64_t orig = 0;
  if (!qp.responder_memory()->read(r.mr->host(va), &orig, 8)) return RespState::kErrRemoteOp;
  uint64_t result = orig;
  if (wire::op::base(r.v.opcode) == wire::op::kCmpSwap) {
    if (orig == a.compare.get()) result = a.swap_add.get();
  } else {
    result = orig + a.swap_add.get();
  }
  if (result != orig && !qp.responder_memory()->write(r.mr->host(va), &result, 8)) return RespState::kErrRemoteOp;
  qp.resp.rd_atomic_log[qp.resp.rd_atomic_log_next++ % kMaxRdAtomic] = {true, true, r.psn, 1, va, 8, a.rkey.get(), orig};
  qp.resp.tasks.push_back({ResponderTask::kAtomicAck, r.psn, r.psn, 0, 0, 0, true, orig});
  qp.resp.epsn = wire::psn_add(qp.resp.epsn, 1);
  qp.lr.nak_sent = false;
  activate(qp, r.now);
  return RespState::kDone;
}

RespState Nic::execute_atomic_write(Request& r) {
  // One aligned 8-byte store, after everything before it has landed;
  // answered by a READ response without payload (IBA 1.5, rxe's
  // send_read_response_ack). The deferred writes are flushed first and
  // their failures handled now: if one of this QP's did not land, its
  // request is NAKed and the QP is in ERR, and the store -- typically a
  // flag saying the data is there -- is not made.
  Qp& qp = r.qp;
  flush_dma();
  handle_dma_failures(r.now);
  if (qp.state == IBV_QPS_ERR) return RespState::kDone;
  const wire::Reth& reth = r.v.reth();
  const uint64_t va = reth.va.get();
  uint64_t value;
  std::memcpy(&value, r.v.data + r.v.payload_off, 8);
  if (!qp.ctx->memory->store64(r.mr->host(va), value)) return RespState::kErrRemoteOp;
  qp.resp.rd_atomic_log[qp.resp.rd_atomic_log_next++ % kMaxRdAtomic] = {true, true, r.psn, 1, va, 8, reth.rkey.get(), 0,
                                                                         true};
  qp.resp.tasks.push_back({ResponderTask::kReadResponse, r.psn, r.psn, 0, 0, 0, true, 0});
  qp.resp.epsn = wire::psn_add(qp.resp.epsn, 1);
  qp.lr.nak_sent = false;
  activate(qp, r.now);
  return RespState::kDone;
}

RespState Nic::execute_write(Request& r) {
  Qp& qp = r.qp;
  const wire::PacketView& v = r.v;
  if (r.first) {
    const wire::Reth& reth = v.reth();
    qp.resp.write_va = reth.va.get();
    qp.resp.write_remaining = qp.resp.write_total = reth.dma_length.get();
    qp.resp.write_rkey = reth.rkey.get();
  }
  if (v.payload_len > 0) {
    if (!dma_write(DmaOwner::responder(qp), r.mr->host(qp.resp.write_va), v.data + v.payload_off, v.payload_len))
      return RespState::kErrRemoteOp;
    qp.resp.write_va += v.payload_len;
    qp.resp.write_remaining -= v.payload_len;
  }
  if (r.last && r.imm) {
    r.imm_recv_taken = false;
    write_recv_cqe(qp, r.imm_recv, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, qp.resp.write_total,
                   __builtin_bswap32(v.imm().imm.get()), IBV_WC_WITH_IMM, 0, v.bth().se());
  }
  return RespState::kComplete;
}

RespState Nic::execute_send(Request& r) {
  Qp& qp = r.qp;
  const wire::PacketView& v = r.v;
  if (v.payload_len > 0 && !scatter(qp, qp.resp.recv, qp.resp.recv_offset, v.data + v.payload_off, v.payload_len, r.local_status))
    return r.local_status == IBV_WC_LOC_LEN_ERR ? RespState::kErrLocalLength : RespState::kErrLocalAccess;
  qp.resp.recv_offset += v.payload_len;
  if (r.last) {
    int flags = 0;
    uint32_t imm_or_rkey = 0;
    if (r.imm) {
      flags |= IBV_WC_WITH_IMM;
      imm_or_rkey = __builtin_bswap32(v.imm().imm.get());
    }
    ibv_wc_status status = IBV_WC_SUCCESS;
    if (r.info().any(wire::kOpInv)) {
      flags |= IBV_WC_WITH_INV;
      imm_or_rkey = v.ieth().rkey.get();
      if (imm_or_rkey & kMwKeyBit) {
        // A window: only a type 2 one of this PD, by its key now. Else
        // (IBA class J, as rxe): the message is acknowledged, its receive
        // fails and the QP goes to the error state.
        r.invalidate_refused = !remote_invalidate_mw(qp, imm_or_rkey);
        if (r.invalidate_refused) status = IBV_WC_REM_INV_REQ_ERR;
      } else if (Mr* mr = mrs_.find(imm_or_rkey); mr != nullptr && mr->pd == qp.pd) {
        mr->invalidated = true;
      }
    }
    write_recv_cqe(qp, qp.resp.recv, status, IBV_WC_RECV, uint32_t(qp.resp.recv_offset), imm_or_rkey, flags, 0,
                   v.bth().se());
    qp.resp.recv_valid = false;
  }
  return RespState::kComplete;
}

RespState Nic::complete_request(Request& r) {
  // A SEND or WRITE packet applied: the next PSN is expected, and the
  // message's last packet (or one asking for it) is acknowledged.
  Qp& qp = r.qp;
  qp.resp.in_message = !r.last;
  qp.resp.last_req_opcode = r.v.opcode;
  recovery_->on_intact(qp);
  qp.resp.epsn = wire::psn_add(qp.resp.epsn, 1);
  qp.lr.nak_sent = false;
  if (r.last) qp.resp.msn = (qp.resp.msn + 1) & 0xffffff;
  if (r.rc && (r.v.bth().ack_req() || r.last)) schedule_ack(qp, wire::aeth_ack(), r.psn, r.now);
  if (r.invalidate_refused) {
    counters_[NicCounters::resp_remote_access_errors]++;
    qp_to_error(qp, r.now);
  }
  return RespState::kDone;
}

namespace {

// What each error state does: the completion status and NAK of an RC
// error (IBA 9.9.3 class C/D), and whether a UC drop counts as a discard.
struct RequestErrorRow {
  RespState state;
  ibv_wc_status status;
  wire::NakCode nak;
  bool uc_discard_counted;
};
constexpr RequestErrorRow kRequestErrors[] = {
    {RespState::kErrOpSeq, IBV_WC_REM_INV_REQ_ERR, wire::NakCode::kInvalidRequest, true},
    {RespState::kErrLength, IBV_WC_REM_INV_REQ_ERR, wire::NakCode::kInvalidRequest, false},
    {RespState::kErrMisalignedAtomic, IBV_WC_REM_INV_REQ_ERR, wire::NakCode::kInvalidRequest, false},
    {RespState::kErrTooManyRdAtomic, IBV_WC_REM_INV_REQ_ERR, wire::NakCode::kInvalidRequest, false},
    {RespState::kErrRkey, IBV_WC_REM_ACCESS_ERR, wire::NakCode::kRemoteAccessError, true},
    {RespState::kErrRemoteOp, IBV_WC_REM_OP_ERR, wire::NakCode::kRemoteOperationalError, false},
    {RespState::kErrLocalLength, IBV_WC_LOC_LEN_ERR, wire::NakCode::kInvalidRequest, false},
    {RespState::kErrLocalAccess, IBV_WC_LOC_PROT_ERR, wire::NakCode::kRemoteOperationalError, false},
    {RespState::kErrXrcSrq, IBV_WC_REM_ACCESS_ERR, wire::NakCode::kRemoteAccessError, false},
};

}  // namespace

void Nic::request_error(Request& r, RespState error) {
  Qp& qp = r.qp;
  if (error == RespState::kErrRnr) {  // not an error: the requester tries again
    if (r.rc) {
      schedule_ack(qp, wire::aeth_rnr_nak(qp.min_rnr_timer), r.psn, r.now);
    } else {
      counters_[NicCounters::rx_discards_uc]++;
      qp.resp.in_message = false;
      qp.resp.epsn = wire::psn_add(r.psn, 1);
    }
    return;
  }
  const RequestErrorRow* row = nullptr;
  for (const RequestErrorRow& e : kRequestErrors)
    if (e.state == error) row = &e;
  if (row == nullptr) return;
  const bool local = error == RespState::kErrLocalLength || error == RespState::kErrLocalAccess;
  const ibv_wc_status status = local ? r.local_status : row->status;
  // A receive WQE a WRITE with immediate took completes with the error.
  if (r.imm_recv_taken) write_recv_cqe(qp, r.imm_recv, status, IBV_WC_RECV, 0, 0, 0, 0, false);
  if (r.rc) {
    if (error == RespState::kErrLocalLength) counters_[NicCounters::resp_local_length_error]++;
    responder_error(qp, status, wire::aeth_nak(row->nak), r.psn, r.now);
    return;
  }
  // UC: no NAK; the message is dropped (a receive in progress completes
  // with the error) and the next one starts afresh.
  if (local) {
    write_recv_cqe(qp, qp.resp.recv, status, IBV_WC_RECV, 0, 0, 0, 0, false);
    qp.resp.recv_valid = false;
  }
  if (row->uc_discard_counted) counters_[NicCounters::rx_discards_uc]++;
  qp.resp.in_message = false;
  qp.resp.epsn = wire::psn_add(r.psn, 1);
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
  start_message(qp, qp.resp.epsn);
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
  // A UD completion on RoCE says in sl what carried the packet, as mlx5
  // does (its PRM; IBA annex A17.4.5.1 asks for the L3 type): bit 3 a UDP
  // header (RoCEv2), bits 2:0 the L3 header, 1 IPv6, 2 IPv4. UCX's
  // ud_verbs reads it to find the destination GID in the GRH area.
  const uint8_t roce_packet_type = 0x8 | (v.is_ipv6() ? 0x1 : 0x2);
  write_recv_cqe(qp, r, IBV_WC_SUCCESS, IBV_WC_RECV, total, imm, flags, deth.src_qp(), v.bth().se(), roce_packet_type);
}

rte_mbuf* Nic::responder_make_packet(Qp& qp, Time now) {
  wire::RoceFields f;
  f.dest_qp = qp.dest_qpn;
  const uint8_t transport = qp.opcode_transport();  // an XRC target answers with XRC opcodes
  uint32_t len = 0;
  uint64_t host = 0;
  bool pop = false;
  rte_mbuf* m = nullptr;  // taken before anything moves on: without a frame, nothing is owed less
  bool prefetched = false;
  uint32_t prefetch_hdr = 0;
  HostMemory* read_from = qp.ctx->memory;  // a READ response's host
  const uint8_t* lent = nullptr;          // where a lazy frame's payload is
  // Responses go out in PSN order before any ACK: an ACK beyond a READ
  // would tell the requester the READ's answer was lost.
  if (!qp.resp.tasks.empty() && qp.state != IBV_QPS_ERR) {
    ResponderTask& t = qp.resp.tasks.front();
    f.psn = t.psn;
    if (t.kind == ResponderTask::kAtomicAck) {
      if ((m = new_frame()) == nullptr) return nullptr;
      f.opcode = uint8_t(transport | wire::op::kAtomicAck);
      f.aeth_syndrome = wire::aeth_ack();
      f.aeth_msn = qp.resp.msn = (qp.resp.msn + 1) & 0xffffff;
      f.atomic_orig = t.orig;
      pop = true;
    } else {
      len = std::min(t.remaining, qp.mtu);
      const bool last = t.remaining == len;
      using namespace wire::op;
      f.opcode = t.first && last ? kReadRespOnly : t.first ? kReadRespFirst : last ? kReadRespLast : kReadRespMiddle;
      f.opcode = uint8_t(transport | f.opcode);
      // Every response is checked as the request was: the MR may have been
      // deregistered or invalidated meanwhile, the QP's rights changed.
      const Pd* pd = response_pd(qp, t);
      HostMemory* mem = pd != nullptr ? pd->ctx->memory : qp.ctx->memory;
      if (len > 0) {
        Mr* mr = check_rkey(qp, pd, t.rkey, t.va, len, IBV_ACCESS_REMOTE_READ);
        if (mr == nullptr) {
          qp.resp.tasks.clear();
          responder_error(qp, IBV_WC_REM_ACCESS_ERR, wire::aeth_nak(wire::NakCode::kRemoteAccessError), t.psn, now);
          return nullptr;
        }
        host = mr->host(t.va);
      }
      // The frame first: without one nothing moves on.
      read_from = mem;
      // From memory the engine maps: the frame points at the bytes
      // (common/engine/lazy_payload.h).
      if (len >= dpdk::kLazyMinPayload && !qp.resp.response_prefetch.holds(t.psn, t.va)) lent = mem->lend(host, len);
      if (lent == nullptr && len > 0 && mem->batches()) {
        bool failed = false;
        // A READ executed again, or one answered out of turn, finds other frames.
        m = take_ahead(qp.resp.response_prefetch, t.psn, t.va, failed,
                       [&](bool more) { return fill_response_prefetch(qp, more); });
        if (failed) {
          qp.resp.tasks.clear();
          return nullptr;
        }
        prefetch_hdr = wire::roce_header_len(qp.path, f.opcode);
        if (m != nullptr) m->data_off = uint16_t(ReadAhead::kPayloadOff - prefetch_hdr);
        prefetched = m != nullptr;
      } else {
        m = new_frame();
      }
      if (m == nullptr) return nullptr;
      if (last) qp.resp.msn = (qp.resp.msn + 1) & 0xffffff;
      f.aeth_syndrome = wire::aeth_ack();
      f.aeth_msn = qp.resp.msn;
      t.va += len;
      t.remaining -= len;
      t.psn = wire::psn_add(t.psn, 1);
      t.first = false;
      pop = last;
    }
  } else if (qp.resp.ack_pending) {
    if ((m = new_frame()) == nullptr) return nullptr;
    f.opcode = uint8_t(transport | wire::op::kAck);
    f.psn = qp.resp.ack_psn;
    f.aeth_syndrome = qp.resp.ack_syndrome;
    f.aeth_msn = qp.resp.msn;
    qp.resp.ack_pending = false;
  } else {
    return nullptr;
  }
  const uint32_t frame_len = wire::roce_frame_len(qp.path, f.opcode, len);
  uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
  const std::span<uint8_t> frame(data, frame_len);
  const uint32_t hdr = wire::write_roce_headers(frame, qp.path, f, len);
  if (lent != nullptr && hdr != 0 && !dpdk::make_lazy(m, data + hdr, lent, len)) lent = nullptr;
  // (A read-ahead frame's payload sits where headers of the expected length end.)
  if (hdr == 0 || (prefetched && hdr != prefetch_hdr) ||
      (len > 0 && !prefetched && lent == nullptr && !read_from->read(host, data + hdr, len))) {
    rte_pktmbuf_free(m);
    qp.resp.tasks.clear();
    drop_prefetch(qp.resp.response_prefetch);
    return nullptr;
  }
  wire::pad_roce(frame, len);
  rte_pktmbuf_append(m, uint16_t(frame_len));
  dpdk::meta(m).flags |= dpdk::kMetaCrossNode;  // ICRC: see dpdk::seal()
  if (pop) qp.resp.tasks.pop_front();
  return m;
}

// Reads ahead the payload of the READ responses owed, from the next packet
// of the first task on (with `more`, on into the READs queued behind it),
// each frame keyed by its PSN and address. False if the first cannot be
// read.
bool Nic::fill_response_prefetch(Qp& qp, bool more) {
  auto& p = qp.resp.response_prefetch;
  p.next = p.count = 0;
  const uint32_t ahead = read_ahead_limit();
  iovec dst[ReadAhead::kFrames];
  HostPiece pieces[ReadAhead::kFrames];
  size_t n_pieces = 0;
  for (size_t ti = 0; ti < qp.resp.tasks.size() && p.count < ahead && (ti == 0 || more); ti++) {
    const ResponderTask& t = qp.resp.tasks[ti];
    if (t.kind != ResponderTask::kReadResponse) break;
    if (t.remaining == 0) continue;
    // One read from one host: an XRC target's READs of another SRQ's PD wait their turn.
    if (ti > 0 && response_pd(qp, t) != response_pd(qp, qp.resp.tasks[0])) break;
    Mr* mr = rkey_grants(qp, response_pd(qp, t), t.rkey, t.va, t.remaining, IBV_ACCESS_REMOTE_READ);
    if (mr == nullptr) {
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
