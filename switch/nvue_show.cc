// `nv show interface <if> counters qos [egress-queue-stats|ingress-buffer-stats|pfc-stats]`
// as NVUE prints them: a table per view, columns in NVUE's order; bytes
// humanised in the table, integers with -o json|yaml; with no view, all
// of them under their titles. Pause durations are in microseconds (NVUE
// does not document its unit; mlx5's rx_prio*_pause_duration is µs).
#include <algorithm>

#include "switch/switch.h"

namespace rocemu::sw {

Status Switch::view_counters_qos(uint16_t port, const std::vector<std::string>& rest, NvView& out) const {
  static constexpr std::string_view kViews[] = {"egress-queue-stats", "ingress-buffer-stats", "pfc-stats"};
  std::string_view only;
  for (const std::string& w : rest) {
    const bool known = std::find(std::begin(kViews), std::end(kViews), w) != std::end(kViews);
    if (!only.empty() || !known)
      return Status::error("nv show interface " + cfg_.interfaces[port].name +
                           " counters qos: expected egress-queue-stats, ingress-buffer-stats or pfc-stats, got '" +
                           w + "'");
    only = w;
  }
  const auto wanted = [&](std::string_view v) { return only.empty() || only == v; };
  const PortRuntime& p = *ports_.at(port);
  const Time now = current_time();
  NvView v(NvView::Columns::kOperational);
  if (wanted("egress-queue-stats")) {
    auto& t = v.table("egress-queue-stats",
                      {"traffic-class", "tx-frames", "tx-bytes", "tx-uc-buffer-discards", "wred-discards"});
    for (int tc = 0; tc < kNumTc; tc++) {
      const QueueCounters& q = p.queue_counters[tc];
      const uint64_t wred = q[QueueCounters::wred_dropped_packets];
      const uint64_t drops = q[QueueCounters::drop_packets];
      t.rows.push_back({tc, q[QueueCounters::packets], nv_bytes(q[QueueCounters::bytes]),
                        drops - std::min(drops, wred), wred});
    }
  }
  if (wanted("ingress-buffer-stats")) {
    auto& t = v.table("ingress-buffer-stats",
                      {"priority-group", "rx-frames", "rx-buffer-discards", "rx-shared-buffer-discards"});
    for (int pg = 0; pg < kNumPg; pg++) {
      const PgCounters& c = p.pg_counters[pg];
      t.rows.push_back({pg, c[PgCounters::rx_frames], c[PgCounters::rx_buffer_discards],
                        c[PgCounters::rx_shared_buffer_discards]});
    }
  }
  if (wanted("pfc-stats")) {
    auto& t = v.table("pfc-stats", {"switch-priority", "rx-pause-frames", "rx-pause-duration", "tx-pause-frames",
                                    "tx-pause-duration"});
    for (int prio = 0; prio < kNumPriorities; prio++)
      t.rows.push_back({prio, p.pfc_rx[prio], uint64_t(to_ns(p.pause[prio].duration(now)) / 1000), p.pfc_tx[prio],
                        uint64_t(to_ns(p.xoff[prio].duration(now)) / 1000)});
  }
  out = std::move(v);
  return {};
}

}  // namespace rocemu::sw
