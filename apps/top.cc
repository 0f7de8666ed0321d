#include "apps/top.h"

#include <cstdarg>
#include <cstdio>

namespace rocemu::app {
namespace {

template <typename T>
T delta(T now, T before) {
  return now >= before ? now - before : now;  // counters cleared in between: since the clear
}

std::string top_row(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string top_row(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

std::string render_top(const FabricSnapshot& now, const FabricSnapshot& before) {
  const double secs = double(now.time_ns - before.time_ns) / 1e9;
  const auto gbps = [&](uint64_t bytes) { return secs > 0 ? double(bytes) * 8 / secs / 1e9 : 0.0; };
  std::string out = top_row("rocemu top: engine time %.3f s, interval %.3f s; counts are over the interval\n\n",
                        double(now.time_ns) / 1e9, secs);
  out += top_row("%-14s %8s %8s  %-31s %7s %7s %7s %6s %6s\n", "PORT", "RX Gb/s", "TX Gb/s", "QUEUE pkts TC0..TC7", "ECN",
             "PFC tx", "PFC rx", "CNP", "DROPS");
  for (const SwitchSnap& sw : now.switches) {
    const SwitchSnap* b = before.switch_named(sw.name);
    for (const SwitchPortSnap& p : sw.ports) {
      const SwitchPortSnap empty;
      const SwitchPortSnap& q = b != nullptr && p.index < b->ports.size() ? b->ports[p.index] : empty;
      std::string depth;
      uint64_t ecn = 0, pfc_tx = 0, pfc_rx = 0;
      for (int k = 0; k < 8; k++) {
        depth += top_row("%s%llu", k == 0 ? "" : " ", static_cast<unsigned long long>(p.queue_depth[k]));
        ecn += delta(p.tc_ecn_marked[k], q.tc_ecn_marked[k]);
        pfc_tx += delta(p.pfc_tx[k], q.pfc_tx[k]);
        pfc_rx += delta(p.pfc_rx[k], q.pfc_rx[k]);
      }
      out += top_row("%-14s %8.2f %8.2f  %-31s %7llu %7llu %7llu %6llu %6llu\n", (sw.name + ":" + p.name).c_str(),
                 gbps(delta(p.rx_bytes, q.rx_bytes)), gbps(delta(p.tx_bytes, q.tx_bytes)), depth.c_str(),
                 static_cast<unsigned long long>(ecn), static_cast<unsigned long long>(pfc_tx),
                 static_cast<unsigned long long>(pfc_rx),
                 static_cast<unsigned long long>(delta(p.cnp_packets, q.cnp_packets)),
                 static_cast<unsigned long long>(delta(p.drops, q.drops)));
    }
  }
  out += top_row("\n%-14s %8s %8s  %7s %8s %8s %7s %5s\n", "NIC", "RX Gb/s", "TX Gb/s", "ECN rx", "CNP sent", "CNP hndl",
             "PFC rx", "QPs");
  for (const NicSnap& n : now.nics) {
    const NicSnap* b = before.nic(n.name);
    const NicSnap empty;
    const NicSnap& q = b != nullptr ? *b : empty;
    uint32_t qps = 0;
    for (const QpClassSnap& c : n.qps) qps += c.count;
    out += top_row("%-14s %8.2f %8.2f  %7llu %8llu %8llu %7llu %5u\n", n.name.c_str(), gbps(delta(n.rx_bytes, q.rx_bytes)),
               gbps(delta(n.tx_bytes, q.tx_bytes)), static_cast<unsigned long long>(delta(n.ecn_marked, q.ecn_marked)),
               static_cast<unsigned long long>(delta(n.cnp_sent, q.cnp_sent)),
               static_cast<unsigned long long>(delta(n.cnp_handled, q.cnp_handled)),
               static_cast<unsigned long long>(delta(n.pfc_rx, q.pfc_rx)), qps);
  }
  return out;
}

}  // namespace rocemu::app
