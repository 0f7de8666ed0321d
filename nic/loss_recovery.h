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
//                      uses a short timeout when only a few are in flight.
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
  // The retransmit timeout for `qp` now, given the one its `timeout`
  // attribute asks for.
  virtual Duration retransmit_timeout(const Qp& qp, Duration timeout) const = 0;

  // ---- completer ----
  // A NAK-sequence-error for `psn` (the responder misses it).
  virtual void on_seq_nak(Qp& qp, uint32_t psn, Time now) = 0;
  // An RNR NAK for `psn`: it goes again once the RNR wait is over.
  virtual void on_rnr_nak(Qp& qp, uint32_t psn, Time now) = 0;
  // A READ response or atomic ACK from `psn` on was lost (a gap in the
  // responses, a trimmed response, an ACK implying the answer went
  // missing): ask for it again.
  virtual void on_response_lost(Qp& qp, uint32_t psn, Time now) = 0;

 protected:
  explicit LossRecoveryStrategy(Nic& nic) : nic_(nic) {}
  Nic& nic_;
};

class GoBackN final : public LossRecoveryStrategy {
 public:
  explicit GoBackN(Nic& nic) : LossRecoveryStrategy(nic) {}
  std::string_view name() const override { return "go-back-n"; }
  uint32_t send_window() const override { return 1u << 22; }  // well inside the 24-bit PSN space
  Duration retransmit_timeout(const Qp&, Duration timeout) const override { return timeout; }
  void on_seq_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_rnr_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_response_lost(Qp& qp, uint32_t psn, Time now) override;
};

class SelectiveRepeat final : public LossRecoveryStrategy {
 public:
  // `window`: packets in flight; `rto_low`: the timeout with at most 3
  // packets in flight.
  SelectiveRepeat(Nic& nic, uint32_t window, Duration rto_low)
      : LossRecoveryStrategy(nic), window_(window), rto_low_(rto_low) {}
  std::string_view name() const override { return "selective-repeat"; }
  uint32_t send_window() const override { return window_; }
  Duration retransmit_timeout(const Qp& qp, Duration timeout) const override;
  void on_seq_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_rnr_nak(Qp& qp, uint32_t psn, Time now) override;
  void on_response_lost(Qp& qp, uint32_t psn, Time now) override;

 private:
  uint32_t window_;
  Duration rto_low_;
};

// The strategy `cfg.recovery` names, for `nic`.
std::unique_ptr<LossRecoveryStrategy> make_loss_recovery(Nic& nic, const NicConfig& cfg);

}  // namespace rocemu::nic
