// Go-back-N and selective repeat: what each does where they differ. The
// transport calls these; they act through the NIC's own steps (rewind,
// activate, schedule_ack, process_request).
#include "nic/loss_recovery.h"

#include <algorithm>

#include "nic/nic.h"

namespace rocemu::nic {

namespace {

// `now + d`, kTimeNever for a d that never comes.
Time after(Time now, Duration d) { return d == kTimeNever || now > kTimeNever - d ? kTimeNever : now + d; }

}  // namespace

std::unique_ptr<LossRecoveryStrategy> make_loss_recovery(Nic& nic, const NicConfig& cfg) {
  switch (cfg.recovery) {
    case LossRecovery::kSelectiveRepeat:
      return std::make_unique<SelectiveRepeat>(nic, cfg.sr_window, cfg.sr_rto_low, cfg.sr_renak_packets);
    case LossRecovery::kGoBackN:
      break;
  }
  return std::make_unique<GoBackN>(nic);
}

// ---- go-back-N ----

// The requester goes back to the WQE holding the PSN and sends everything
// from there again.
// Classic RoCE: the one timer is the Local ACK Timeout.
Time GoBackN::retransmit_deadline(Qp&, Duration timeout, Time now) const { return after(now, timeout); }

LossRecoveryStrategy::Expiry GoBackN::on_retransmit_timer(Qp&, Duration timeout, Time now) const {
  return {true, after(now, timeout)};
}

void GoBackN::on_seq_nak(Qp& qp, uint32_t psn, Time now) { nic_.rewind(qp, psn, now); }

void GoBackN::on_rnr_nak(Qp& qp, uint32_t psn, Time now) { nic_.rewind(qp, psn, now); }

void GoBackN::on_response_lost(Qp& qp, uint32_t psn, Time now) { nic_.rewind(qp, psn, now); }

// The responder NAKs the expected PSN once per gap (nak_sent, cleared when
// the expected PSN moves on) and drops everything after it.
void GoBackN::nak_gap(Qp& qp, Time now) {
  qp.lr.nak_sent = true;
  nic_.schedule_ack(qp, wire::aeth_nak(wire::NakCode::kPsnSeqError), qp.resp.epsn, now);
}

void GoBackN::on_out_of_order(Qp& qp, rte_mbuf* m, const wire::PacketView&, Time now) {
  if (!qp.lr.nak_sent) nak_gap(qp, now);
  rte_pktmbuf_free(m);
}

void GoBackN::on_trimmed_expected(Qp& qp, Time now) { nak_gap(qp, now); }

void GoBackN::on_trimmed_ahead(Qp& qp, uint32_t psn, Time now) {
  // The lowest trimmed PSN ahead is remembered and NAKed as soon as the
  // PSNs before it are in.
  if (!qp.lr.trim_lost_valid || wire::psn_lt(psn, qp.lr.trim_lost_psn)) {
    qp.lr.trim_lost_valid = true;
    qp.lr.trim_lost_psn = psn;
  }
  if (!qp.lr.nak_sent) nak_gap(qp, now);
}

void GoBackN::on_in_order(Qp& qp, Time now) {
  // A trimmed packet seen ahead of the expected PSN: once everything before
  // it has arrived, NAK it without waiting for anything else to arrive.
  if (qp.state == IBV_QPS_ERR || !qp.lr.trim_lost_valid) return;
  if (wire::psn_lt(qp.lr.trim_lost_psn, qp.resp.epsn)) {
    qp.lr.trim_lost_valid = false;  // an intact copy came meanwhile
  } else if (qp.lr.trim_lost_psn == qp.resp.epsn) {
    qp.lr.trim_lost_valid = false;
    nak_gap(qp, now);
  }
}

void GoBackN::on_duplicate_read(Qp& qp, uint32_t psn) {
  // The requester sends every request after this one again, so responses
  // queued for later PSNs go.
  std::erase_if(qp.resp.tasks, [&](const ResponderTask& t) { return wire::psn_ge(t.psn, psn); });
}

// ---- selective repeat ----

// IRN: a short timeout when only a few packets are in flight, so a tail
// loss costs little. It runs beside the Local ACK Timeout (ack_timeout_at),
// never past it, and doubles at each expiry without progress
// (rto_backoff), so a peer that answers late, or an engine that handles
// the answer late, sees a few resends at growing intervals.
Time SelectiveRepeat::fast_deadline(const Qp& qp, Time now) const {
  const int32_t in_flight = wire::psn_diff(qp.req.sent_high, qp.req.una_psn);
  if (in_flight > 3) return qp.lr.ack_timeout_at;
  const Duration fast =
      rto_low_.count() > (kTimeNever.count() >> qp.lr.rto_backoff) ? kTimeNever : rto_low_ * (int64_t(1) << qp.lr.rto_backoff);
  return std::min(after(now, fast), qp.lr.ack_timeout_at);
}

Time SelectiveRepeat::retransmit_deadline(Qp& qp, Duration timeout, Time now) const {
  qp.lr.ack_timeout_at = after(now, timeout);
  qp.lr.rto_backoff = 0;
  return fast_deadline(qp, now);
}

LossRecoveryStrategy::Expiry SelectiveRepeat::on_retransmit_timer(Qp& qp, Duration timeout, Time now) const {
  const bool ack_timeout = now >= qp.lr.ack_timeout_at;
  if (ack_timeout) qp.lr.ack_timeout_at = after(now, timeout);
  if (qp.lr.rto_backoff < 62) qp.lr.rto_backoff++;  // past the Local ACK Timeout long before
  return {ack_timeout, fast_deadline(qp, now)};
}

// The requester sends the one PSN asked for again (resend_psns), ahead of
// new packets.
void SelectiveRepeat::on_seq_nak(Qp& qp, uint32_t psn, Time now) {
  if (std::find(qp.lr.resend_psns.begin(), qp.lr.resend_psns.end(), psn) == qp.lr.resend_psns.end()) {
    nic_.counters()[NicCounters::roce_adp_retrans]++;
    qp.lr.resend_psns.push_back(psn);
  }
  nic_.activate(qp, now);
}

void SelectiveRepeat::on_rnr_nak(Qp& qp, uint32_t psn, Time) { qp.lr.resend_psns.push_back(psn); }

void SelectiveRepeat::on_response_lost(Qp& qp, uint32_t psn, Time now) {
  qp.lr.resend_psns.push_back(psn);
  nic_.activate(qp, now);
}

// The responder keeps up to a window of packets beyond the expected PSN
// (ooo) and remembers every trimmed PSN in it (ooo_trimmed), both indexed
// by PSN modulo the window.
void SelectiveRepeat::prepare_receive(Qp& qp) {
  qp.lr.ooo.assign(window_, nullptr);
  qp.lr.ooo_trimmed.assign(window_, 0);
}

// Tells the requester the expected PSN is missing; sr_nak_psn and
// sr_ooo_since_nak say which hole was NAKed last, and how many packets
// arrived behind it since.
void SelectiveRepeat::nak_hole(Qp& qp, Time now) {
  qp.lr.sr_nak_psn = qp.resp.epsn;
  qp.lr.sr_ooo_since_nak = 0;
  nic_.schedule_ack(qp, wire::aeth_nak(wire::NakCode::kPsnSeqError), qp.resp.epsn, now);
}

void SelectiveRepeat::on_out_of_order(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) {
  const uint32_t psn = v.bth().psn();
  const uint32_t d = uint32_t(wire::psn_diff(psn, qp.resp.epsn));
  const uint32_t window = uint32_t(qp.lr.ooo.size());
  if (d >= window) {
    nic_.counters()[NicCounters::rx_ooo_dropped]++;
    rte_pktmbuf_free(m);
  } else {
    rte_mbuf*& slot = qp.lr.ooo[psn % window];
    if (slot != nullptr) {
      rte_pktmbuf_free(m);  // already have it
    } else {
      slot = m;
      qp.lr.ooo_count++;
      nic_.counters()[NicCounters::rx_ooo_buffered]++;
    }
  }
  // Tell the requester which PSN is missing, once per hole -- and again
  // if the hole outlives many more arrivals: its resend was lost too.
  if (qp.lr.sr_nak_psn != qp.resp.epsn || ++qp.lr.sr_ooo_since_nak >= renak_packets_) nak_hole(qp, now);
}

void SelectiveRepeat::on_trimmed_expected(Qp& qp, Time now) { nak_hole(qp, now); }

void SelectiveRepeat::on_trimmed_ahead(Qp& qp, uint32_t psn, Time now) {
  // Every trimmed PSN in the window is remembered: each is NAKed when the
  // PSNs before it are in, even with nothing arriving after it.
  const uint32_t d = uint32_t(wire::psn_diff(psn, qp.resp.epsn));
  if (d < qp.lr.ooo_trimmed.size()) qp.lr.ooo_trimmed[psn % qp.lr.ooo_trimmed.size()] = 1;
  if (qp.lr.sr_nak_psn != qp.resp.epsn) nak_hole(qp, now);
}

void SelectiveRepeat::on_intact(Qp& qp) {
  if (!qp.lr.ooo_trimmed.empty()) qp.lr.ooo_trimmed[qp.resp.epsn % qp.lr.ooo_trimmed.size()] = 0;
}

void SelectiveRepeat::on_in_order(Qp& qp, Time now) {
  if (qp.lr.ooo_count > 0) drain_reorder_buffer(qp, now);
  // A trimmed packet seen ahead of the expected PSN: once everything before
  // it has arrived, NAK it without waiting for anything else to arrive.
  if (qp.state == IBV_QPS_ERR || qp.lr.ooo_trimmed.empty()) return;
  uint8_t& mark = qp.lr.ooo_trimmed[qp.resp.epsn % qp.lr.ooo_trimmed.size()];
  if (mark != 0) {
    mark = 0;
    nak_hole(qp, now);
  }
}

void SelectiveRepeat::drain_reorder_buffer(Qp& qp, Time now) {
  const uint32_t window = uint32_t(qp.lr.ooo.size());
  // Packets that fell behind epsn (covered by a READ's PSN range, or a
  // duplicate) are dropped; in-order ones are processed.
  const uint32_t before = qp.resp.epsn;
  while (qp.lr.ooo_count > 0 && qp.state != IBV_QPS_ERR) {
    rte_mbuf*& slot = qp.lr.ooo[qp.resp.epsn % window];
    if (slot == nullptr) break;
    rte_mbuf* m = slot;
    slot = nullptr;
    qp.lr.ooo_count--;
    wire::PacketView v;
    if (wire::decode(dpdk::bytes(m), v) == wire::DecodeError::kOk && v.bth().psn() == qp.resp.epsn) {
      rte_mbuf* outer = nic_.rx_frame_;
      nic_.rx_frame_ = m;
      nic_.process_request(qp, v, now);
      nic_.rx_frame_ = outer;
    }
    rte_pktmbuf_free(m);
  }
  // Drop anything now behind epsn.
  if (qp.lr.ooo_count > 0) {
    for (rte_mbuf*& slot : qp.lr.ooo) {
      if (slot == nullptr) continue;
      wire::PacketView v;
      if (wire::decode(dpdk::bytes(slot), v) != wire::DecodeError::kOk ||
          wire::psn_lt(v.bth().psn(), qp.resp.epsn)) {
        rte_pktmbuf_free(slot);
        slot = nullptr;
        qp.lr.ooo_count--;
      }
    }
  }
  // A hole filled: tell the requester how far we are, whether or not the
  // packets kept had AckReq set.
  if (qp.resp.epsn != before && qp.state != IBV_QPS_ERR)
    nic_.schedule_ack(qp, wire::aeth_ack(), wire::psn_add(qp.resp.epsn, -1), now);
  if (qp.lr.ooo_count > 0 && qp.lr.sr_nak_psn != qp.resp.epsn && qp.state != IBV_QPS_ERR) nak_hole(qp, now);
}

}  // namespace rocemu::nic
