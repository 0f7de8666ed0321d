#include "sim/summary.h"

#include <algorithm>
#include <cmath>

#include "switch/pfc.h"
#include "switch/scheduler.h"
#include "switch/switch_counters.h"
#include "switch/vxlan.h"

namespace rocemu::sim {
namespace {


// Fixed precision: the same value always prints the same digits.
double fixed(double v, int decimals) {
  const double f = std::pow(10.0, decimals);
  const double r = std::round(v * f) / f;
  return r == 0 ? 0.0 : r;  // no "-0"
}
double us_value(Duration d) { return fixed(to_us(d), 3); }

// Counter access by name: cumulative counters as the change over the run,
// gauges as their final value; a counter nobody reports reads 0.
class Counters {
 public:
  explicit Counters(const Measurements& m) : m_(m) {}
  uint64_t delta(std::string_view scope, std::string_view name) const {
    const std::string key = std::string(scope) + "/" + std::string(name);
    const uint64_t end = get(m_.final, key), begin = get(m_.start, key);
    return end >= begin ? end - begin : 0;
  }
  uint64_t gauge(std::string_view scope, std::string_view name) const {
    return get(m_.final, std::string(scope) + "/" + std::string(name));
  }
  bool has(std::string_view scope, std::string_view name) const {
    return m_.final.count(std::string(scope) + "/" + std::string(name)) > 0;
  }

 private:
  static uint64_t get(const CounterMap& c, const std::string& key) {
    auto it = c.find(key);
    return it == c.end() ? 0 : it->second;
  }
  const Measurements& m_;
};

template <typename F>
uint64_t sum_nics(const Layout& l, F&& value) {
  uint64_t n = 0;
  for (const auto& nic : l.nics) n += value(nic);
  return n;
}
template <typename F>
uint64_t sum_switch_ports(const Layout& l, F&& value) {
  uint64_t n = 0;
  for (const auto& s : l.switches)
    for (const auto& f : s.interfaces) n += value(s.name + "/" + f);
  return n;
}

// ---- flows ----

double throughput_gbps(const FlowResult& f, Duration end) {
  const Duration until = f.completed ? f.finish : end;
  const double secs = to_seconds(until - f.start);
  return secs > 0 ? double(f.bytes) * 8 / secs / 1e9 : 0;
}

Duration fct(const FlowResult& f, Duration end) { return (f.completed ? f.finish : end) - f.start; }

Json flow_json(const Scenario& s, size_t i, const Measurements& m, const Counters& c) {
  const FlowSpec& spec = s.flows[i];
  const Workload& w = s.workloads[spec.workload];
  const FlowResult& r = m.flows[i];
  uint64_t retrans = 0, cuts = 0, cnps = 0;
  for (const auto& q : m.qps[i].requester) retrans += c.delta(q, "retransmitted_packets");
  for (const auto& q : m.qps[i].data_sender) {
    cuts += c.delta(q, "cc_rate_cuts");
    cnps += c.delta(q, "cc_cnps");
  }
  const FlowCc& cc = m.cc[i];
  Json j;
  j["workload"] = w.name;
  j["src"] = spec.src;
  j["dst"] = spec.dst;
  j["verb"] = verb_name(w.verb);
  j["qps"] = w.qps;
  j["message_bytes"] = w.message_size;
  j["messages_posted"] = r.messages_posted;
  j["messages_completed"] = r.messages_completed;
  j["bytes"] = r.bytes;
  j["completed"] = r.completed;
  j["errors"] = r.errors;
  j["start_us"] = us_value(r.start);
  j["finish_us"] = us_value(r.completed ? r.finish : m.end);
  j["fct_us"] = us_value(fct(r, m.end));
  j["throughput_gbps"] = fixed(throughput_gbps(r, m.end), 3);
  j["retransmitted_packets"] = retrans;
  j["dcqcn"] = Json{{"rate_cuts", cuts},
                    {"cnps", cnps},
                    {"rate_min_gbps", fixed(cc.rate_min_gbps, 3)},
                    {"rate_final_gbps", fixed(cc.rate_final_gbps, 3)},
                    {"alpha_final", fixed(cc.alpha_final, 6)}};
  return j;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = size_t(std::ceil(p / 100 * double(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// Aggregates over a set of flows: throughput, FCT, Jain's fairness index.
Json flow_stats(const std::vector<size_t>& idx, const Measurements& m) {
  std::vector<double> tput, fcts;
  uint64_t completed = 0, errors = 0;
  for (size_t i : idx) {
    const FlowResult& r = m.flows[i];
    tput.push_back(throughput_gbps(r, m.end));
    fcts.push_back(to_us(fct(r, m.end)));
    completed += r.completed ? 1 : 0;
    errors += r.errors;
  }
  double sum = 0, sq = 0;
  for (double x : tput) sum += x, sq += x * x;
  const double n = double(tput.size());
  auto stat = [](const std::vector<double>& v, int decimals, bool pct) {
    Json j;
    j["min"] = fixed(v.empty() ? 0 : *std::min_element(v.begin(), v.end()), decimals);
    double total = 0;
    for (double x : v) total += x;
    j["mean"] = fixed(v.empty() ? 0 : total / double(v.size()), decimals);
    if (pct) {
      j["p50"] = fixed(percentile(v, 50), decimals);
      j["p99"] = fixed(percentile(v, 99), decimals);
    }
    j["max"] = fixed(v.empty() ? 0 : *std::max_element(v.begin(), v.end()), decimals);
    if (!pct) j["total"] = fixed(total, decimals);
    return j;
  };
  Json j;
  j["flows"] = idx.size();
  j["completed"] = completed;
  j["all_completed"] = completed == idx.size();
  j["errors"] = errors;
  j["throughput_gbps"] = stat(tput, 3, false);
  j["fct_us"] = stat(fcts, 3, true);
  j["jain_fairness"] = fixed(sq > 0 ? sum * sum / (n * sq) : 0, 4);
  return j;
}

// ---- ports and the bottleneck ----

// The flows' busy period: first start to last finish.
std::pair<Duration, Duration> active_window(const Measurements& m) {
  if (m.flows.empty()) return {Duration(0), m.end};
  Duration first = m.end, last{0};
  for (const FlowResult& f : m.flows) {
    first = std::min(first, f.start);
    last = std::max(last, f.completed ? f.finish : m.end);
  }
  return {first, std::max(last, first)};
}

Json ports_json(const Layout& l, const Measurements& m, const Counters& c, std::string& busiest) {
  const auto [from, to] = active_window(m);
  const double secs = to_seconds(to - from);
  Json j = Json::object();
  double best = -1;
  for (const Layout::PortInfo& p : l.ports) {
    const uint64_t wire = c.delta(p.name, "tx_bytes") + uint64_t(kEthWireOverhead) * c.delta(p.name, "tx_packets");
    const double gbps = secs > 0 ? double(wire) * 8 / secs / 1e9 : 0;
    const double util = p.rate_bps > 0 ? gbps * 1e9 / double(p.rate_bps) : 0;
    j[p.name] = Json{{"rate_gbps", fixed(double(p.rate_bps) / 1e9, 3)},
                     {"tx_packets", c.delta(p.name, "tx_packets")},
                     {"tx_gbps", fixed(gbps, 3)},
                     {"utilization", fixed(util, 4)}};
    if (util > best) best = util, busiest = p.name;
  }
  return j;
}

// ---- queues ----

Json queues_json(const Layout& l, const Measurements& m, const Counters& c) {
  Json j = Json::object();
  for (const auto& s : l.switches) {
    for (const auto& f : s.interfaces) {
      const std::string scope = s.name + "/" + f;
      Json port;
      for (int tc = 0; tc < sw::kNumTc; tc++) {
        const std::string q = "queue" + std::to_string(tc) + ".";
        auto it = m.queues.find(scope + "/tc" + std::to_string(tc));
        const Distribution d = it == m.queues.end() ? Distribution{} : it->second;
        port["tc" + std::to_string(tc)] = Json{{"mean_bytes", fixed(d.mean, 1)},
                                               {"p50_bytes", fixed(d.p50, 0)},
                                               {"p90_bytes", fixed(d.p90, 0)},
                                               {"p99_bytes", fixed(d.p99, 0)},
                                               {"max_bytes", fixed(d.max, 0)},
                                               {"watermark_bytes", c.gauge(scope, q + "watermark-bytes")},
                                               {"packets", c.delta(scope, q + "packets")},
                                               {"ecn_marked_packets", c.delta(scope, q + "ecn-marked-packets")},
                                               {"drop_packets", c.delta(scope, q + "drop-packets")}};
      }
      j[scope] = port;
    }
  }
  return j;
}

// The bottleneck port's utilisation and, if it is a switch port, the
// depth of its busiest queue (the TC that sent the most packets).
Json bottleneck_json(const Layout& l, const Json& ports, const Json& queues, const std::string& port) {
  Json b{{"port", port}};
  for (const char* k : {"rate_gbps", "tx_packets", "tx_gbps", "utilization"})
    b[k] = ports.contains(port) ? ports[port][k] : Json(0.0);
  const Json* q = nullptr;
  const auto colon = port.rfind(':');
  for (const auto& sw : l.switches) {
    if (colon == std::string::npos || port.substr(0, colon) != sw.name) continue;
    const size_t idx = std::stoul(port.substr(colon + 1));
    if (idx < sw.interfaces.size()) q = &queues[sw.name + "/" + sw.interfaces[idx]];
  }
  int tc = 0;
  for (int t = 1; q != nullptr && t < sw::kNumTc; t++)
    if ((*q)["tc" + std::to_string(t)]["packets"].get<uint64_t>() >
        (*q)["tc" + std::to_string(tc)]["packets"].get<uint64_t>())
      tc = t;
  b["queue_tc"] = tc;
  for (const char* k : {"mean_bytes", "p99_bytes", "max_bytes", "watermark_bytes"})
    b[std::string("queue_") + k] = q != nullptr ? (*q)["tc" + std::to_string(tc)][k] : Json(0);
  return b;
}

// ---- congestion signals ----

Json ecn_json(const Layout& l, const Counters& c) {
  return Json{
      {"marked_packets",
       sum_switch_ports(l, [&](const std::string& p) { return c.delta(p, "tx-ecn-stats.ecn-marked-packets"); })},
      {"received_marked_packets",
       sum_nics(l, [&](const std::string& n) { return c.delta(n, "np_ecn_marked_roce_packets"); })}};
}

Json cnp_json(const Layout& l, const Counters& c) {
  auto nic = [&](std::string_view name) { return sum_nics(l, [&](const std::string& n) { return c.delta(n, name); }); };
  return Json{{"sent", nic("np_cnp_sent")},
              {"suppressed", nic("np_cnp_suppressed")},
              {"handled", nic("rp_cnp_handled")},
              {"ignored", nic("rp_cnp_ignored")},
              {"switch_forwarded",
               sum_switch_ports(l, [&](const std::string& p) { return c.delta(p, "tx-cnp-stats.cnp-packets"); })}};
}

Json dcqcn_json(const Measurements& m, const Counters& c) {
  uint64_t cuts = 0, incs = 0, cnps = 0, qps = 0;
  for (const FlowQps& f : m.qps)
    for (const auto& q : f.data_sender) {
      qps += c.has(q, "cc_rate_kbps") ? 1 : 0;
      cuts += c.delta(q, "cc_rate_cuts");
      incs += c.delta(q, "cc_increases");
      cnps += c.delta(q, "cc_cnps");
    }
  return Json{{"qps_reporting", qps}, {"rate_cuts", cuts}, {"increases", incs}, {"cnps", cnps}};
}

Json pfc_json(const Layout& l, const Counters& c) {
  Json j;
  Json prios;
  uint64_t sent = 0, received = 0, xoff_us = 0, paused_us = 0;
  for (int p = 0; p < sw::kNumPriorities; p++) {
    const std::string pfx = "pfc" + std::to_string(p) + ".";
    auto sw = [&](const std::string& name) {
      return sum_switch_ports(l, [&](const std::string& port) { return c.delta(port, pfx + name); });
    };
    const uint64_t s = sw("tx-pause-packets"), r = sw("rx-pause-packets");
    const uint64_t x = sw("tx-pause-duration-us"), d = sw("rx-pause-duration-us");
    prios["prio" + std::to_string(p)] =
        Json{{"sent", s}, {"received", r}, {"switch_xoff_us", x}, {"switch_paused_us", d}};
    sent += s, received += r, xoff_us += x, paused_us += d;
  }
  // Per switch interface, every priority together: where pauses start
  // and how far up the fabric they spread.
  Json ports = Json::object();
  for (const auto& sw : l.switches)
    for (const auto& f : sw.interfaces) {
      const std::string scope = sw.name + "/" + f;
      uint64_t ps = 0, pr = 0, px = 0, pd = 0;
      for (int p = 0; p < sw::kNumPriorities; p++) {
        const std::string pfx = "pfc" + std::to_string(p) + ".";
        ps += c.delta(scope, pfx + "tx-pause-packets");
        pr += c.delta(scope, pfx + "rx-pause-packets");
        px += c.delta(scope, pfx + "tx-pause-duration-us");
        pd += c.delta(scope, pfx + "rx-pause-duration-us");
      }
      ports[scope] = Json{{"sent", ps}, {"received", pr}, {"xoff_us", px}, {"paused_us", pd}};
    }
  const uint64_t nic_rx = sum_nics(l, [&](const std::string& n) { return c.delta(n, "rx_pfc_frames"); });
  const uint64_t nic_ps = sum_nics(l, [&](const std::string& n) { return c.delta(n, "tx_pfc_paused_time_ps"); });
  j["sent"] = sent;
  j["received"] = received + nic_rx;
  j["received_by_switches"] = received;
  j["received_by_nics"] = nic_rx;
  j["switch_xoff_us"] = xoff_us;
  j["switch_paused_us"] = paused_us;
  j["nic_paused_us"] = fixed(double(nic_ps) / 1e6, 3);
  for (auto& [k, v] : prios.items()) j[k] = v;
  j["ports"] = std::move(ports);
  return j;
}

Json watchdog_json(const Layout& l, const Counters& c) {
  Json j;
  for (std::string_view name : sw::WatchdogCounters::kNames) {
    std::string key(name);
    std::replace(key.begin(), key.end(), '-', '_');
    uint64_t n = 0;
    for (int tc = 0; tc < sw::kNumTc; tc++)
      n += sum_switch_ports(l, [&](const std::string& p) {
        return c.delta(p, "queue" + std::to_string(tc) + ".pfcwd." + std::string(name));
      });
    j[key] = n;
  }
  return j;
}

// ---- ECMP ----

// Per switch with ECMP groups: what load balancing sent to each member
// port (bytes over every group), each port's share and Jain's index of the
// bytes across them (1: even; 1/n: all on one port).
Json ecmp_json(const Layout& l, const Counters& c) {
  Json switches = Json::object();
  double min_jain = 1, max_share = 0;
  uint64_t idle = 0;
  for (const auto& s : l.switches) {
    if (s.ecmp_ports.empty()) continue;
    std::vector<uint64_t> bytes;
    for (const auto& f : s.ecmp_ports) bytes.push_back(c.delta(s.name + "/" + f, "ecmp.tx-bytes"));
    double total = 0, sq = 0;
    for (uint64_t b : bytes) total += double(b), sq += double(b) * double(b);
    Json ports = Json::object();
    double top = 0;
    uint64_t zero = 0;
    for (size_t i = 0; i < bytes.size(); i++) {
      const std::string scope = s.name + "/" + s.ecmp_ports[i];
      const double share = total > 0 ? double(bytes[i]) / total : 0;
      top = std::max(top, share);
      zero += bytes[i] == 0 ? 1 : 0;
      ports[s.ecmp_ports[i]] =
          Json{{"packets", c.delta(scope, "ecmp.tx-packets")}, {"bytes", bytes[i]}, {"share", fixed(share, 4)}};
    }
    const double jain = sq > 0 ? total * total / (double(bytes.size()) * sq) : 0;
    if (total > 0) {
      min_jain = std::min(min_jain, jain);
      max_share = std::max(max_share, top);
      idle += zero;
    }
    switches[s.name] = Json{{"bytes", uint64_t(total)},
                            {"jain_bytes", fixed(jain, 4)},
                            {"max_share", fixed(top, 4)},
                            {"idle_ports", zero},
                            {"ports", ports}};
  }
  // Over the switches whose groups carried something.
  return Json{{"min_jain_bytes", fixed(min_jain, 4)},
              {"max_share", fixed(max_share, 4)},
              {"idle_ports", idle},
              {"switches", switches}};
}

// ---- VXLAN ----

// Per VTEP: what it encapsulated and decapsulated, and its drops by
// reason; totals over every VTEP.
Json vxlan_json(const Layout& l, const Counters& c) {
  Json switches = Json::object();
  Json total = Json::object();
  for (const auto& s : l.switches) {
    if (!s.vtep) continue;
    Json one = Json::object();
    for (std::string_view name : sw::VtepCounters::kNames) {
      std::string key(name.substr(6));  // without "vxlan."
      if (key.starts_with("discards.")) key = "drop_" + key.substr(9);
      std::replace(key.begin(), key.end(), '-', '_');
      const uint64_t v = c.delta(s.name, name);
      one[key] = v;
      total[key] = (total.contains(key) ? total[key].get<uint64_t>() : 0) + v;
    }
    switches[s.name] = one;
  }
  total["switches"] = switches;
  return total;
}

// ---- losses ----

// Every way a packet is lost, by reason: the switch's discards.* list,
// buffer admission at ingress and egress, trimmed packets that still did
// not fit, link fault stages and the NICs' ICRC check.
Json drops_json(const Layout& l, const Counters& c) {
  Json by;
  auto swsum = [&](std::string_view name) {
    return sum_switch_ports(l, [&](const std::string& p) { return c.delta(p, name); });
  };
  uint64_t ingress = 0, egress = 0;
  for (std::string_view name : sw::PortCounters::kNames) {
    if (name.ends_with("no-buffer-discard")) (name.starts_with("rx-") ? ingress : egress) += swsum(name);
  }
  by["ingress_no_buffer"] = ingress;
  by["egress_no_buffer"] = egress;
  for (std::string_view name : sw::PortCounters::kNames) {
    if (!name.starts_with("discards.")) continue;
    std::string key(name.substr(9));
    std::replace(key.begin(), key.end(), '-', '_');
    by[key] = swsum(name);
  }
  by["trim_dropped"] = swsum("trim.trim-drop-packets");
  for (std::string_view name : sw::VtepCounters::kNames) {  // vxlan.discards.* of every VTEP
    if (!name.starts_with("vxlan.discards.")) continue;
    std::string key = "vxlan_" + std::string(name.substr(15));
    std::replace(key.begin(), key.end(), '-', '_');
    uint64_t n = 0;
    for (const auto& s : l.switches) n += s.vtep ? c.delta(s.name, name) : 0;
    by[key] = n;
  }
  auto ports = [&](std::string_view name) {
    uint64_t n = 0;
    for (const auto& p : l.ports) n += c.delta(p.name, name);
    return n;
  };
  by["link_fault"] = ports("tx_drop_fault");
  by["link_down"] = by["link_down"].get<uint64_t>() + ports("tx_drop_link_down");
  by["link_oversize"] = ports("tx_drop_oversize");
  by["no_mbuf"] = ports("rx_no_mbuf");
  by["nic_icrc_error"] = sum_nics(l, [&](const std::string& n) { return c.delta(n, "rx_icrc_error"); });
  uint64_t total = 0;
  for (const auto& [k, v] : by.items()) total += v.get<uint64_t>();
  return Json{{"total", total}, {"by_reason", by}};
}

Json trims_json(const Layout& l, const Counters& c) {
  auto swsum = [&](std::string_view name) {
    return sum_switch_ports(l, [&](const std::string& p) { return c.delta(p, name); });
  };
  return Json{{"trimmed", swsum("trim.trim-packets")},
              {"sent", swsum("trim.trim-sent-packets")},
              {"dropped", swsum("trim.trim-drop-packets")},
              {"received_by_nics", sum_nics(l, [&](const std::string& n) { return c.delta(n, "rx_trimmed"); })}};
}

Json retransmissions_json(const Layout& l, const Counters& c) {
  auto nic = [&](std::string_view name) { return sum_nics(l, [&](const std::string& n) { return c.delta(n, name); }); };
  return Json{{"packets", nic("retransmitted_packets")},        {"timeouts", nic("local_ack_timeout_err")},
              {"seq_err_naks", nic("packet_seq_err")},          {"out_of_sequence", nic("out_of_sequence")},
              {"duplicate_requests", nic("duplicate_request")}, {"ooo_buffered", nic("rx_ooo_buffered")},
              {"rnr_naks", nic("rnr_nak_retry_err")}};
}

}  // namespace

Measurements Measurements::empty_for(const Scenario& s) {
  Measurements m;
  m.flows.resize(s.flows.size());
  m.cc.resize(s.flows.size());
  m.qps.resize(s.flows.size());
  return m;
}

Json build_summary(const Scenario& s, const Layout& l, const Measurements& m) {
  const Counters c(m);
  Json j;
  j["scenario"] = s.name;
  j["description"] = s.description;
  j["seed"] = s.seed;
  j["duration_us"] = us_value(s.duration);
  j["sample_interval_us"] = us_value(s.sample_interval);
  j["end_us"] = us_value(m.end);
  j["samples"] = m.samples;
  Json flows = Json::object();
  for (size_t i = 0; i < s.flows.size(); i++) flows[s.flows[i].name] = flow_json(s, i, m, c);
  j["flows"] = flows;
  std::vector<size_t> all(s.flows.size());
  for (size_t i = 0; i < all.size(); i++) all[i] = i;
  j["flow_stats"] = flow_stats(all, m);
  Json wl = Json::object();
  for (size_t w = 0; w < s.workloads.size(); w++) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < s.flows.size(); i++)
      if (s.flows[i].workload == w) idx.push_back(i);
    wl[s.workloads[w].name] = flow_stats(idx, m);
  }
  j["workloads"] = wl;
  std::string busiest;
  Json ports = ports_json(l, m, c, busiest);
  Json queues = queues_json(l, m, c);
  j["bottleneck"] = bottleneck_json(l, ports, queues, s.bottleneck.empty() ? busiest : s.bottleneck);
  j["ports"] = ports;
  j["queues"] = queues;
  j["ecn"] = ecn_json(l, c);
  j["cnp"] = cnp_json(l, c);
  j["dcqcn"] = dcqcn_json(m, c);
  j["pfc"] = pfc_json(l, c);
  j["pfc_watchdog"] = watchdog_json(l, c);
  j["ecmp"] = ecmp_json(l, c);
  j["vxlan"] = vxlan_json(l, c);
  j["drops"] = drops_json(l, c);
  j["trims"] = trims_json(l, c);
  j["retransmissions"] = retransmissions_json(l, c);
  return j;
}

namespace {

// Where the next key of `path` may end: at its end, or before a dot
// (keys may contain dots, so every candidate is tried, longest first).
std::vector<size_t> key_ends(std::string_view path) {
  std::vector<size_t> ends{path.size()};
  for (size_t i = path.size(); i-- > 0;)
    if (path[i] == '.') ends.push_back(i);
  return ends;
}

}  // namespace

const Json* find_metric(const Json& summary, std::string_view path) {
  if (path.empty()) return &summary;
  if (!summary.is_object()) return nullptr;
  for (size_t end : key_ends(path)) {
    auto it = summary.find(std::string(path.substr(0, end)));
    if (it == summary.end()) continue;
    if (end == path.size()) return &*it;
    if (const Json* r = find_metric(*it, path.substr(end + 1))) return r;
  }
  return nullptr;
}

std::string metric_hint(const Json& summary, std::string_view path) {
  const Json* at = &summary;
  std::string where;
  while (at->is_object() && !path.empty()) {
    const Json* next = nullptr;
    for (size_t end : key_ends(path)) {
      auto it = at->find(std::string(path.substr(0, end)));
      if (it == at->end()) continue;
      next = &*it;
      where += (where.empty() ? "" : ".") + std::string(path.substr(0, end));
      path = end < path.size() ? path.substr(end + 1) : std::string_view();
      break;
    }
    if (next == nullptr) break;
    at = next;
  }
  if (!at->is_object()) return where + " is a value, not a section";
  std::string keys;
  size_t n = 0;
  for (const auto& [k, v] : at->items()) {
    if (n++ == 12) {
      keys += ", ...";
      break;
    }
    keys += (keys.empty() ? "" : ", ") + k;
  }
  return (where.empty() ? "the top level" : where) + " has: " + keys;
}

std::optional<double> metric_value(const Json& summary, std::string_view path) {
  const Json* v = find_metric(summary, path);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>() ? 1.0 : 0.0;
  if (v->is_number()) return v->get<double>();
  return std::nullopt;
}

}  // namespace rocemu::sim
