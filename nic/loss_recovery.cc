// Go-back-N and selective repeat: what each does where they differ.
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

// ---- selective repeat ----

Duration SelectiveRepeat::retransmit_timeout(const Qp& qp, Duration timeout) const {
  // IRN: a short timeout when only a few packets are in flight, so a tail
  // loss costs little.
  const int32_t in_flight = wire::psn_diff(qp.sent_high, qp.una_psn);
  return in_flight <= 3 && rto_low_ < timeout ? rto_low_ : timeout;
}

}  // namespace rocemu::nic
