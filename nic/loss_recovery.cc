// Go-back-N and selective repeat: what each does where they differ. The
// transport calls these; they act through the NIC's own steps (rewind,
// activate).
#include "nic/loss_recovery.h"

#include <algorithm>

#include "nic/nic.h"

namespace rocemu::nic {

std::unique_ptr<LossRecoveryStrategy> make_loss_recovery(Nic& nic, const NicConfig& cfg) {
  switch (cfg.recovery) {
    case LossRecovery::kSelectiveRepeat:
      return std::make_unique<SelectiveRepeat>(nic, cfg.sr_window, cfg.sr_rto_low);
    case LossRecovery::kGoBackN:
      break;
  }
  return std::make_unique<GoBackN>(nic);
}

// ---- go-back-N ----

// The requester goes back to the WQE holding the PSN and sends everything
// from there again.
void GoBackN::on_seq_nak(Qp& qp, uint32_t psn, Time now) { nic_.rewind(qp, psn, now); }

void GoBackN::on_rnr_nak(Qp& qp, uint32_t psn, Time now) { nic_.rewind(qp, psn, now); }

void GoBackN::on_response_lost(Qp& qp, uint32_t psn, Time now) { nic_.rewind(qp, psn, now); }

// ---- selective repeat ----

Duration SelectiveRepeat::retransmit_timeout(const Qp& qp, Duration timeout) const {
  // IRN: a short timeout when only a few packets are in flight, so a tail
  // loss costs little.
  const int32_t in_flight = wire::psn_diff(qp.sent_high, qp.una_psn);
  return in_flight <= 3 && rto_low_ < timeout ? rto_low_ : timeout;
}

// The requester sends the one PSN asked for again (sr_resend), ahead of
// new packets.
void SelectiveRepeat::on_seq_nak(Qp& qp, uint32_t psn, Time now) {
  if (std::find(qp.sr_resend.begin(), qp.sr_resend.end(), psn) == qp.sr_resend.end()) {
    nic_.counters()[NicCounters::roce_adp_retrans]++;
    qp.sr_resend.push_back(psn);
  }
  nic_.activate(qp, now);
}

void SelectiveRepeat::on_rnr_nak(Qp& qp, uint32_t psn, Time) { qp.sr_resend.push_back(psn); }

void SelectiveRepeat::on_response_lost(Qp& qp, uint32_t psn, Time now) {
  qp.sr_resend.push_back(psn);
  nic_.activate(qp, now);
}

}  // namespace rocemu::nic
