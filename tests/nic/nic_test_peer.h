// Nic's friend for tests: what a test may read or set of a NIC's insides
// that no verb reaches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>

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
  // Each MR's and QP's count of the windows bound to it (Mr::windows;
  // Qp::windows, type 2 only) against a recount from the NIC's windows:
  // empty if all agree, else a line for each that does not, and for
  // windows bound to an MR or QP that is gone.
  static std::string window_count_errors(const Nic& n) {
    std::map<uint32_t, uint32_t> by_mr, by_qp;
    n.mws_.for_each([&](const Mw& w) {
      if (!w.bound) return;
      by_mr[w.mr_key]++;
      if (w.type == IBV_MW_TYPE_2) by_qp[w.qpn]++;
    });
    std::ostringstream out;
    n.mrs_.for_each([&](const Mr& m) {
      const auto it = by_mr.find(m.key);
      const uint32_t bound = it != by_mr.end() ? it->second : 0;
      if (m.windows.size() != bound)
        out << "MR " << m.key << ": windows " << m.windows.size() << ", bound " << bound << "\n";
      if (it != by_mr.end()) by_mr.erase(it);
    });
    for (const auto& [key, k] : by_mr) out << k << " window(s) bound to MR " << key << ", which is gone\n";
    for (const auto& [qpn, qp] : n.qps_) {
      const auto it = by_qp.find(qpn);
      const uint32_t bound = it != by_qp.end() ? it->second : 0;
      if (qp->windows.size() != bound)
        out << "QP " << qpn << ": windows " << qp->windows.size() << ", bound " << bound << "\n";
      if (it != by_qp.end()) by_qp.erase(it);
    }
    for (const auto& [qpn, k] : by_qp) out << k << " window(s) bound through QP " << qpn << ", which is gone\n";
    return out.str();
  }
};

}  // namespace rocemu::nic
