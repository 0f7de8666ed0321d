// summary.json: what a scenario run measured, from the counters every node
// reports (read by name, so counters a NIC does not have yet read as 0),
// the flows' results and the sampled time series. Every number is rounded
// to a fixed precision and nothing depends on the wall clock, so two runs
// with the same seed give the same bytes.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/layout.h"
#include "sim/scenario.h"

namespace rocemu::sim {

using Json = nlohmann::ordered_json;
using CounterMap = std::map<std::string, uint64_t, std::less<>>;  // "scope/name" -> value

struct FlowResult {
  uint64_t messages_posted = 0;
  uint64_t messages_completed = 0;
  uint64_t bytes = 0;   // payload of the completed messages
  uint64_t errors = 0;  // completions with an error status
  bool completed = false;
  Time start{0}, finish{0};  // since the scenario's time 0
};

// Queue depth (bytes) over the samples.
struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// Congestion control state of a flow's QPs, from the sampled gauges.
struct FlowCc {
  double rate_min_gbps = 0;    // lowest sampled sum of its QPs' rates
  double rate_final_gbps = 0;  // sum of its QPs' rates at the end
  double alpha_final = 0;      // mean alpha of its QPs at the end
};

struct FlowQps {
  std::vector<std::string> requester;    // counter scopes "<nic>/qp<N>" of the QPs that post
  std::vector<std::string> data_sender;  // ... of the QPs that send the data (DCQCN's RP)
};

struct Measurements {
  Duration end{0};  // virtual time run, from the scenario's time 0
  uint64_t samples = 0;
  CounterMap start, final;        // every counter at time 0 and at the end
  std::vector<FlowResult> flows;  // by Scenario::flows index
  std::vector<FlowCc> cc;
  std::vector<FlowQps> qps;
  std::map<std::string, Distribution> queues;  // "sw1/swp4/3": switch/interface/tc

  // Empty results with the shape of `s` (for checking metric paths).
  static Measurements empty_for(const Scenario& s);
};

Json build_summary(const Scenario& s, const Layout& layout, const Measurements& m);

// Resolves a dotted path ("flows.incast-h0.fct_us"); keys may themselves
// contain dots. nullptr if there is no such entry.
const Json* find_metric(const Json& summary, std::string_view path);
// For an error message: the keys where resolving `path` stopped.
std::string metric_hint(const Json& summary, std::string_view path);

// Numeric value of a metric (booleans as 0/1); nullopt if absent or not a number.
std::optional<double> metric_value(const Json& summary, std::string_view path);

}  // namespace rocemu::sim
