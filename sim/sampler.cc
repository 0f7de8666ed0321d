#include "sim/sampler.h"

#include <algorithm>

#include "nic/nic.h"
#include "switch/pfc.h"
#include "switch/scheduler.h"
#include "switch/switch.h"

namespace rocemu::sim {
namespace {

constexpr std::string_view kBytesSuffix = "_bytes";

Distribution distribution(const Column& c, size_t rows) {
  Distribution d;
  if (rows == 0) return d;
  std::vector<double> v(rows);
  double sum = 0;
  for (size_t r = 0; r < rows; r++) sum += v[r] = c.at(r);
  std::sort(v.begin(), v.end());
  // Nearest rank; samples are evenly spaced, so the mean is time-weighted.
  auto pct = [&](double p) {
    return v[std::min(rows - 1, size_t(std::max(1.0, std::ceil(p / 100 * double(rows)))) - 1)];
  };
  d.mean = sum / double(rows);
  d.p50 = pct(50);
  d.p90 = pct(90);
  d.p99 = pct(99);
  d.max = v.back();
  return d;
}

}  // namespace

class Sampler::NicProbe final : public CounterSink {
 public:
  explicit NicProbe(Sampler& s) : s_(s) {}
  uint64_t cnp_sent = 0, cnp_handled = 0;

  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    const bool qp = scope.find('/') != std::string_view::npos;
    if (!qp) {
      if (name == "np_cnp_sent") cnp_sent = value;
      else if (name == "rp_cnp_handled") cnp_handled = value;
      return;
    }
    const bool rate = name == "cc_rate_kbps";
    if (!rate && name != "cc_alpha_ppm") return;
    auto it = s_.qp_index_.find(std::string(scope));
    if (it == s_.qp_index_.end()) return;
    QpProbe& q = s_.qps_[it->second];
    q.seen = true;
    (rate ? q.rate_kbps : q.alpha_ppm) = double(value);
  }

 private:
  Sampler& s_;
};

Sampler::Sampler(Engine& engine, const Scenario& s, const Layout& layout,
                 const std::vector<std::unique_ptr<Flow>>& flows)
    : flows_(flows), interval_(s.sample_interval) {
  for (const auto& f : flows) flow_rate_.emplace_back(f->name() + "_gbps", 3);
  last_bytes_.assign(flows.size(), 0);
  for (const auto& sp : layout.switches) add_switch(dynamic_cast<const sw::Switch*>(engine.find_node(sp.name)), sp);
  for (const auto& n : layout.nics) nics_.push_back(dynamic_cast<const nic::Nic*>(engine.find_node(n)));
  last_cnp_sent_.assign(nics_.size(), 0);
  last_cnp_handled_.assign(nics_.size(), 0);
  for (size_t f = 0; f < flows.size(); f++) {
    const FlowQps q = flows[f]->qp_scopes();
    for (size_t i = 0; i < q.data_sender.size(); i++) {
      qp_index_[q.data_sender[i]] = qps_.size();
      qps_.push_back({q.data_sender[i], f});
      const std::string col = flows[f]->name() + "/qp" + std::to_string(i);
      qp_rate_.emplace_back(col + "_rate_gbps", 3);
      qp_alpha_.emplace_back(col + "_alpha", 6);
    }
  }
}

void Sampler::add_switch(const sw::Switch* sw, const Layout::SwitchPorts& sp) {
  SwitchProbe p{sw, sp.name, sp.interfaces, queues_.size(), pfc_.size(), {}, {}};
  for (const auto& f : sp.interfaces) {
    const std::string base = sp.name + "/" + f + "/";
    for (int tc = 0; tc < sw::kNumTc; tc++)
      queues_.emplace_back(base + "tc" + std::to_string(tc) + std::string(kBytesSuffix), 0);
    for (int prio = 0; prio < sw::kNumPriorities; prio++) {
      pfc_.emplace_back(base + "prio" + std::to_string(prio) + "_paused", 4);
      pfc_.emplace_back(base + "prio" + std::to_string(prio) + "_xoff", 4);
    }
  }
  p.last_paused.assign(sp.interfaces.size() * sw::kNumPriorities, Duration(0));
  p.last_xoff.assign(sp.interfaces.size() * sw::kNumPriorities, Duration(0));
  switches_.push_back(std::move(p));
}

void Sampler::sample(Time now) {
  if (time_us_.empty()) t0_ = now;
  const size_t row = time_us_.size();
  time_us_.push_back(to_us(now - t0_));
  const double secs = row == 0 ? 0 : to_seconds(interval_);
  sample_flows(row, secs);
  sample_switches(row, now, secs);
  sample_nics(row, secs);
}

void Sampler::sample_flows(size_t row, double secs) {
  for (size_t f = 0; f < flows_.size(); f++) {
    const uint64_t bytes = flows_[f]->progress_bytes();
    flow_rate_[f].set(row, secs > 0 ? double(bytes - last_bytes_[f]) * 8 / secs / 1e9 : 0);
    last_bytes_[f] = bytes;
  }
}

void Sampler::sample_switches(size_t row, Time now, double secs) {
  uint64_t marks = 0;
  for (SwitchProbe& p : switches_) {
    for (uint16_t port = 0; port < p.interfaces.size(); port++) {
      marks += p.sw->counters(port)[sw::PortCounters::tx_ecn_marked_packets];
      for (uint8_t tc = 0; tc < sw::kNumTc; tc++)
        queues_[p.first_queue + port * sw::kNumTc + tc].set(row, double(p.sw->mmu().queue(port, tc).total()));
      for (uint8_t prio = 0; prio < sw::kNumPriorities; prio++) {
        const size_t k = size_t(port) * sw::kNumPriorities + prio;
        const Duration paused = p.sw->rx_pause_duration(port, prio, now);
        const Duration xoff = p.sw->tx_pause_duration(port, prio, now);
        Column* c = &pfc_[p.first_pfc + 2 * k];
        c[0].set(row, secs > 0 ? to_seconds(paused - p.last_paused[k]) / secs : 0);
        c[1].set(row, secs > 0 ? to_seconds(xoff - p.last_xoff[k]) / secs : 0);
        p.last_paused[k] = paused;
        p.last_xoff[k] = xoff;
      }
    }
  }
  ecn_marked_.set(row, secs > 0 ? double(marks - last_marks_) / secs : 0);
  last_marks_ = marks;
}

void Sampler::sample_nics(size_t row, double secs) {
  uint64_t sent = 0, handled = 0;
  for (size_t i = 0; i < nics_.size(); i++) {
    NicProbe probe(*this);
    nics_[i]->report_counters(probe);
    sent += probe.cnp_sent - last_cnp_sent_[i];
    handled += probe.cnp_handled - last_cnp_handled_[i];
    last_cnp_sent_[i] = probe.cnp_sent;
    last_cnp_handled_[i] = probe.cnp_handled;
  }
  cnp_sent_.set(row, secs > 0 ? double(sent) / secs : 0);
  cnp_handled_.set(row, secs > 0 ? double(handled) / secs : 0);
  for (size_t q = 0; q < qps_.size(); q++) {
    qp_rate_[q].set(row, qps_[q].rate_kbps / 1e6);
    qp_alpha_[q].set(row, qps_[q].alpha_ppm / 1e6);
  }
}

std::vector<Series> Sampler::series() const {
  auto moved = [](const std::vector<Column>& cols) {
    std::vector<Column> out;
    for (const Column& c : cols)
      if (c.moved()) out.push_back(c);
    return out;
  };
  std::vector<Series> out;
  out.push_back({"flows", time_us_, flow_rate_});
  out.push_back({"queues", time_us_, moved(queues_)});
  out.push_back({"cnp", time_us_, {cnp_sent_, cnp_handled_, ecn_marked_}});
  out.push_back({"pfc", time_us_, moved(pfc_)});
  std::vector<Column> cc;
  for (size_t q = 0; q < qps_.size(); q++)
    if (qps_[q].seen) cc.push_back(qp_rate_[q]), cc.push_back(qp_alpha_[q]);
  if (!cc.empty()) out.push_back({"dcqcn", time_us_, cc});
  return out;
}

std::map<std::string, Distribution> Sampler::queue_stats() const {
  std::map<std::string, Distribution> out;
  for (const Column& c : queues_) {
    if (!c.moved()) continue;
    const std::string& n = c.name();
    out[n.substr(0, n.size() - kBytesSuffix.size())] = distribution(c, rows());
  }
  return out;
}

std::vector<FlowCc> Sampler::flow_cc(const std::vector<FlowResult>& results) const {
  std::vector<FlowCc> out(results.size());
  std::vector<std::vector<size_t>> by_flow(results.size());
  for (size_t q = 0; q < qps_.size(); q++)
    if (qps_[q].seen) by_flow[qps_[q].flow].push_back(q);
  for (size_t f = 0; f < results.size(); f++) {
    if (by_flow[f].empty() || rows() == 0) continue;
    auto rate = [&](size_t row) {
      double g = 0;
      for (size_t q : by_flow[f]) g += qp_rate_[q].at(row);
      return g;
    };
    const double from = to_us(results[f].start), to = to_us(results[f].finish);
    double lo = -1;
    for (size_t row = 0; row < rows(); row++)
      if (time_us_[row] >= from && time_us_[row] <= to) lo = lo < 0 ? rate(row) : std::min(lo, rate(row));
    double alpha = 0;
    for (size_t q : by_flow[f]) alpha += qp_alpha_[q].at(rows() - 1);
    out[f] = {std::max(lo, 0.0), rate(rows() - 1), alpha / double(by_flow[f].size())};
  }
  return out;
}

}  // namespace rocemu::sim
