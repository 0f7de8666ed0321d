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
  // Each MR's and QP's list of the windows bound to it (Mr::windows;
  // Qp::windows, type 2 only) against a recount from the NIC's windows:
  // empty if all agree, else a line for each that does not (a list whose
  // size or links are wrong, or holds a window not bound there), and for
  // windows bound to an MR or QP that is gone.
  static std::string window_count_errors(const Nic& n) {
    std::map<uint32_t, uint32_t> by_mr, by_qp;
    n.mws_.for_each([&](const Mw& w) {
      if (!w.bound) return;
      by_mr[w.mr_key]++;
      if (w.type == IBV_MW_TYPE_2) by_qp[w.qpn]++;
    });
    std::ostringstream out;
    // The list of MR or QP `id` (`links`: the windows' links for it) holds
    // `bound` windows, each bound there.
    auto check = [&](const char* what, uint32_t id, const MwList& list, MwLinks Mw::*links, auto bound_here,
                     std::map<uint32_t, uint32_t>& recount) {
      const auto it = recount.find(id);
      const uint32_t bound = it != recount.end() ? it->second : 0;
      if (it != recount.end()) recount.erase(it);
      uint32_t walked = 0;
      const Mw* prev = nullptr;
      for (const Mw* w = list.head; w != nullptr && walked <= bound; prev = w, w = (w->*links).next, walked++)
        if ((w->*links).prev != prev || !bound_here(*w)) out << what << " " << id << ": a window wrongly on its list\n";
      if (list.size != bound || walked != bound)
        out << what << " " << id << ": list size " << list.size << ", walked " << walked << ", bound " << bound << "\n";
    };
    n.mrs_.for_each([&](const Mr& m) {
      check("MR", m.key, m.windows, &Mw::on_mr, [&](const Mw& w) { return w.bound && w.mr_key == m.key; }, by_mr);
    });
    for (const auto& [qpn, qp] : n.qps_) {
      const uint32_t q = qpn;
      check("QP", q, qp->windows, &Mw::on_qp,
            [&](const Mw& w) { return w.bound && w.type == IBV_MW_TYPE_2 && w.qpn == q; }, by_qp);
    }
    for (const auto& [key, k] : by_mr) out << k << " window(s) bound to MR " << key << ", which is gone\n";
    for (const auto& [qpn, k] : by_qp) out << k << " window(s) bound through QP " << qpn << ", which is gone\n";
    return out.str();
  }
};

}  // namespace rocemu::nic
