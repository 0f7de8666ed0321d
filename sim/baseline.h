// Baselines: saved summary metrics with a tolerance each, so CI notices a
// change in behaviour that no expectation names. `--write-baseline` saves
// the headline metrics (and every expectation's) with a default tolerance;
// edit the file to choose metrics and tolerances.
//
//   scenario: lossless-incast
//   seed: 7
//   metrics:
//     "flow_stats.throughput_gbps.min": {value: 24.61, tolerance: 5%}   # relative
//     "drops.total": {value: 0, tolerance: 0}                           # absolute
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "sim/expect.h"
#include "sim/scenario.h"
#include "sim/summary.h"

namespace rocemu::sim {

struct BaselineMetric {
  std::string metric;
  double value = 0;
  double tolerance = 0;
  bool relative = true;  // tolerance is a fraction of |value|
};

struct Baseline {
  std::string scenario;
  uint64_t seed = 0;
  std::vector<BaselineMetric> metrics;
};

Result<Baseline> parse_baseline(const std::string& text, const std::string& file);
Result<Baseline> load_baseline(const std::string& path);
// The baseline file for a run; `tolerance_percent` for every metric.
std::string baseline_yaml(const Scenario& s, const Json& summary, double tolerance_percent = 5);
Verdict compare_baseline(const Baseline& b, const Json& summary);

}  // namespace rocemu::sim
