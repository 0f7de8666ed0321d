// Loss recovery as a strategy chosen once per NIC (NicConfig::recovery):
// the transport (requester.cc, completer.cc, responder.cc, control.cc)
// calls it at each point where go-back-N and selective repeat differ, and
// never tests which one it has.
//
//   go-back-N          classic RoCE: the responder NAKs the first gap once
//                      and drops what follows; the requester rewinds and
//                      sends everything from the NAKed PSN again.
//   selective repeat   IRN-style (Mittal et al., SIGCOMM'18): the responder
//                      keeps out-of-order packets within a BDP-sized window
//                      and NAKs each hole; the requester resends single
//                      PSNs, keeps no more than the window in flight and
//                      uses a short timeout when only a few are in flight,
//                      doubled at each expiry without progress. Only the
//                      QP's own Local ACK Timeout spends its retry_cnt: a
//                      slow peer or a lagging engine costs resends, never
//                      the QP.
//
// A strategy belongs to one NIC and reaches into its transport as a friend
// of Nic. Its per-QP state lives in the Qp (the go-back-N and selective
// repeat fields of nic/qp.h). No call allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/engine/time.h"

struct rte_mbuf;

namespace rocemu::wire {
struct PacketView;
}

namespace rocemu::nic {

class Nic;
struct NicConfig;
struct Qp;

class LossRecoveryStrategy {
 public:
  virtual ~LossRecoveryStrategy() = default;
  LossRecoveryStrategy(const LossRecoveryStrategy&) = delete;
  LossRecoveryStrategy& operator=(const LossRecoveryStrategy&) = delete;

  // As the topology file spells it: "go-back-n", "selective-repeat".
  virtual std::string_view name() const = 0;

  // ---- requester ----
  // Packets a requester may have in flight past its oldest unacknowledged PSN.
  virtual uint32_t send_window() const = 0;
  // The retransmit timer of `qp` starts again at `now` (a packet went with
  // none outstanding, the QP made progress, a NAK came): when it fires,
  // given the QP's Local ACK Timeout `timeout` (4.096 us x 2^timeout,
  // kTimeNever for timeout 0), which starts again too.
  virtual Time retransmit_deadline(Qp& qp, Duration timeout, Time now) const = 0;
  // It fired at `now` with no progress since.
  struct Expiry {
    bool ack_timeout;  // the Local ACK Timeout expired: one of the QP's retry_cnt is spent
    Time next;         // when the timer fires again
  };
  virtual Expiry on_retransmit_timer(Qp& qp, Duration timeout, Time now) const = 0;

  // ---- completer ----
  // A NAK-sequence-error for `psn` (the responder misses it).
  virtual void on_seq_nak(Qp& qp, uint32_t psn, Time now) = 0;
  // An RNR NAK for `psn`: it goes again once the RNR wait is over.
  virtual void on_rnr_nak(Qp& qp, uint32_t psn, Time now) = 0;
  // A READ response or atomic ACK from `psn` on was lost (a gap in the
  // responses, a trimmed response, an ACK implying the answer went
  // missing): ask for it again.
  virtual void on_response_lost(Qp& qp, uint32_t psn, Time now) = 0;

  // ---- responder (RC) ----
  // What an RC QP sets up for receiving when it moves INIT -> RTR.
  virtual void prepare_receive(Qp& qp) = 0;
  // A request beyond the expected PSN; takes `m`.
  virtual void on_out_of_order(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) = 0;
  // A trimmed request (its payload cut by a switch) at the expected PSN,
  // or at `psn` beyond it.
  virtual void on_trimmed_expected(Qp& qp, Time now) = 0;
  virtual void on_trimmed_ahead(Qp& qp, uint32_t psn, Time now) = 0;
  // A SEND or WRITE packet at the expected PSN arrived intact (called
  // before the expected PSN moves past it).
  virtual void on_intact(Qp& qp) = 0;
  // An in-order request was handled: go on with what waited for it.
  virtual void on_in_order(Qp& qp, Time now) = 0;
  // A duplicate READ or atomic at `psn` is about to be answered again.
  virtual void on_duplicate_read(Qp& qp, uint32_t psn) = 0;

 protected:
  explicit LossRecoveryStrategy(Nic& nic) : nic_(nic) {}
  Nic& nic_;
};

class GoBackN final : public LossRecoveryStrategy {
 public:
  explicit GoBackN(Nic& nic) : LossRecoveryStrategy(nic) {}
  std::string_view name() const override { return "go-back-n"; }
  uint32_t send_window() const override { return 1u << 22; }  // well inside the 24-bit PSN space
  Time retransmit_deadline(Qp& qp, Duration timeout, Time now) const override;
  Expiry on_retransmit_timer(Qp& qp, Duration timeout, Time now) const override;
  void on_seq_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_rnr_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_response_lost(Qp& qp, uint32_t psn, Time now) override;
  void prepare_receive(Qp&) override {}
  void on_out_of_order(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) override;
  void on_trimmed_expected(Qp& qp, Time now) override;
  void on_trimmed_ahead(Qp& qp, uint32_t psn, Time now) override;
  void on_intact(Qp&) override {}
  void on_in_order(Qp& qp, Time now) override;
  void on_duplicate_read(Qp& qp, uint32_t psn) override;

 private:
  void nak_gap(Qp& qp, Time now);
};

class SelectiveRepeat final : public LossRecoveryStrategy {
 public:
  // `window`: packets in flight and kept out of order; `rto_low`: the
  // first timeout with at most 3 packets in flight (then 2x, 4x, ... up
  // to the QP's Local ACK Timeout); `renak_packets`: a hole is NAKed again
  // after this many later arrivals.
  SelectiveRepeat(Nic& nic, uint32_t window, Duration rto_low, uint32_t renak_packets)
      : LossRecoveryStrategy(nic), window_(window), rto_low_(rto_low), renak_packets_(renak_packets) {}
  std::string_view name() const override { return "selective-repeat"; }
  uint32_t send_window() const override { return window_; }
  Time retransmit_deadline(Qp& qp, Duration timeout, Time now) const override;
  Expiry on_retransmit_timer(Qp& qp, Duration timeout, Time now) const override;
  void on_seq_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_rnr_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_response_lost(Qp& qp, uint32_t psn, Time now) override;
  void prepare_receive(Qp& qp) override;
  void on_out_of_order(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now) override;
  void on_trimmed_expected(Qp& qp, Time now) override;
  void on_trimmed_ahead(Qp& qp, uint32_t psn, Time now) override;
  void on_intact(Qp& qp) override;
  void on_in_order(Qp& qp, Time now) override;
  void on_duplicate_read(Qp&, uint32_t) override {}

 private:
  void nak_hole(Qp& qp, Time now);
  Time fast_deadline(const Qp& qp, Time now) const;
  void drain_reorder_buffer(Qp& qp, Time now);

  uint32_t window_;
  Duration rto_low_;
  uint32_t renak_packets_;
};

// The strategy `cfg.recovery` names, for `nic`.
std::unique_ptr<LossRecoveryStrategy> make_loss_recovery(Nic& nic, const NicConfig& cfg);

}  // namespace rocemu::nic
