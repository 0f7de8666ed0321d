// `nv show interface <if> counters qos [pfc-stats|egress-queue-stats]` as
// NVUE prints them: a table per view, columns in NVUE's order, by default;
// with `-o json` / `-o yaml` the same rows as plain values (a list of rows,
// each with NVUE's column names). Pause durations are in microseconds
// (NVUE does not document its unit; mlx5's rx_prio*_pause_duration is µs).
#include <algorithm>
#include <sstream>

#include "switch/switch.h"

namespace rocemu::sw {
namespace {

using nlohmann::json;

struct Table {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<uint64_t>> rows;

  json rows_json() const {
    json out = json::array();
    for (const auto& r : rows) {
      json o;
      for (size_t i = 0; i < columns.size(); i++) o[columns[i]] = r[i];
      out.push_back(std::move(o));
    }
    return out;
  }
  // Columns padded to their widest cell, a dashed line under the header.
  std::string text() const {
    std::vector<size_t> w(columns.size());
    for (size_t i = 0; i < columns.size(); i++) {
      w[i] = columns[i].size();
      for (const auto& r : rows) w[i] = std::max(w[i], std::to_string(r[i]).size());
    }
    std::ostringstream os;
    const auto line = [&](const auto& cell) {
      std::string l;
      for (size_t i = 0; i < columns.size(); i++) {
        std::string c = cell(i);
        if (i + 1 < columns.size()) c.resize(w[i] + 2, ' ');
        l += c;
      }
      os << l << "\n";
    };
    line([&](size_t i) { return columns[i]; });
    line([&](size_t i) { return std::string(w[i], '-'); });
    for (const auto& r : rows) line([&](size_t i) { return std::to_string(r[i]); });
    return os.str();
  }
};

}  // namespace

Status Switch::show_counters_qos(uint16_t port, const std::vector<std::string>& rest, json& out) const {
  std::string view, format = "table";
  for (size_t i = 0; i < rest.size(); i++) {
    if (rest[i] == "-o" && i + 1 < rest.size() && (rest[i + 1] == "json" || rest[i + 1] == "yaml")) {
      format = rest[++i];
    } else if (view.empty() && (rest[i] == "pfc-stats" || rest[i] == "egress-queue-stats")) {
      view = rest[i];
    } else {
      return Status::error("nv show interface " + cfg_.interfaces[port].name +
                           " counters qos: expected pfc-stats, egress-queue-stats or -o json|yaml, got '" + rest[i] +
                           "'");
    }
  }
  const PortRuntime& p = *ports_.at(port);
  const Time now = current_time();
  std::vector<Table> tables;
  if (view.empty() || view == "pfc-stats") {
    Table t{"pfc-stats",
            {"switch-priority", "rx-pause-frames", "rx-pause-duration", "tx-pause-frames", "tx-pause-duration"},
            {}};
    for (int prio = 0; prio < kNumPriorities; prio++)
      t.rows.push_back({uint64_t(prio), p.pfc_rx[prio], uint64_t(to_ns(p.pause[prio].duration(now)) / 1000),
                        p.pfc_tx[prio], uint64_t(to_ns(p.xoff[prio].duration(now)) / 1000)});
    tables.push_back(std::move(t));
  }
  if (view.empty() || view == "egress-queue-stats") {
    Table t{"egress-queue-stats",
            {"traffic-class", "tx-frames", "tx-bytes", "tx-uc-buffer-discards", "wred-discards"},
            {}};
    for (int tc = 0; tc < kNumTc; tc++) {
      const QueueCounters& q = p.queue_counters[tc];
      const uint64_t wred = q[QueueCounters::wred_dropped_packets];
      const uint64_t drops = q[QueueCounters::drop_packets];
      t.rows.push_back({uint64_t(tc), q[QueueCounters::packets], q[QueueCounters::bytes], drops - std::min(drops, wred),
                        wred});
    }
    tables.push_back(std::move(t));
  }
  if (format == "table") {
    std::string text;
    for (const Table& t : tables) {
      if (tables.size() > 1)
        text += (text.empty() ? "" : "\n") + t.title + "\n" + std::string(t.title.size(), '=') + "\n";
      text += t.text();
    }
    out = text;
    return {};
  }
  json j;
  for (const Table& t : tables) j[t.title] = t.rows_json();
  if (tables.size() == 1) j = j[tables.front().title];
  out = j;
  return {};
}

}  // namespace rocemu::sw
