// Nic's friend for tests: what a test may read or set of a NIC's insides
// that no verb reaches.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nic/nic.h"

namespace rocemu::nic {

class NicTestPeer {
 public:
  // The loss recovery strategy the NIC was built with.
  static const LossRecoveryStrategy& recovery(const Nic& n) { return *n.recovery_; }
  // The QPN the next QP gets (QPNs come round only after 2^24 QPs).
  static void set_next_qpn(Nic& n, uint32_t qpn) { n.next_qpn_ = qpn; }
  // How many MRs and memory windows the NIC holds, of every context.
  static size_t mrs(const Nic& n) { return n.mrs_.size(); }
  static size_t mws(const Nic& n) { return n.mws_.size(); }
};

}  // namespace rocemu::nic
