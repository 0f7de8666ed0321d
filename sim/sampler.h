// The time series of a run, sampled every sample_interval of virtual time:
// per-flow rate (payload sent, see Flow::progress_bytes), per-queue depth of every switch
// egress queue, CNPs and ECN marks, PFC per switch port and priority (the
// XOFF it asserts, the pause it honours), and,
// where the NICs report them, each QP's DCQCN rate and alpha. (A NIC's
// tx_pfc_paused_time_ps counts a whole pause when it starts and takes the
// rest back at XON, so it makes a total, not a series.) Read-only:
// switches through their const accessors, NICs through their counters by
// name (so DCQCN's counters are picked up when they exist).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/engine/engine.h"
#include "sim/series.h"
#include "sim/summary.h"
#include "sim/workload.h"

namespace rocemu::nic {
class Nic;
}
namespace rocemu::sw {
class Switch;
}

namespace rocemu::sim {

class Sampler {
 public:
  Sampler(Engine& engine, const Scenario& s, const Layout& layout, const std::vector<std::unique_ptr<Flow>>& flows);
  // One row; the first call is time 0.
  void sample(Time now);
  size_t rows() const { return time_us_.size(); }

  // After the run.
  std::vector<Series> series() const;
  std::map<std::string, Distribution> queue_stats() const;
  std::vector<FlowCc> flow_cc(const std::vector<FlowResult>& results) const;

 private:
  struct SwitchProbe {
    const sw::Switch* sw;
    std::string name;
    std::vector<std::string> interfaces;
    size_t first_queue = 0;                        // index into queues_ of (port 0, tc 0)
    size_t first_pfc = 0;                          // index into pfc_ of (port 0, prio 0, paused) then xoff
    std::vector<Duration> last_paused, last_xoff;  // per port x priority
  };
  // NIC counters wanted by name: per NIC (CNPs) and per QP
  // (DCQCN rate and alpha), filled by each NIC's report_counters.
  class NicProbe;
  struct QpProbe {
    std::string scope;  // "<nic>/qp<N>"
    size_t flow = 0;
    double rate_kbps = 0, alpha_ppm = 0;
    bool seen = false;
  };

  void sample_flows(size_t row, double secs);
  void sample_switches(size_t row, Time now, double secs);
  void sample_nics(size_t row, double secs);
  void add_switch(const sw::Switch* sw, const Layout::SwitchPorts& sp);

  const std::vector<std::unique_ptr<Flow>>& flows_;
  Duration interval_;
  Time t0_{0};
  std::vector<double> time_us_;
  std::vector<Column> flow_rate_;
  std::vector<uint64_t> last_bytes_;
  std::vector<SwitchProbe> switches_;
  std::vector<Column> queues_;
  std::vector<Column> pfc_;
  std::vector<const nic::Nic*> nics_;
  std::vector<uint64_t> last_cnp_sent_, last_cnp_handled_;
  uint64_t last_marks_ = 0;
  Column cnp_sent_{"cnp_sent_per_s", 0}, cnp_handled_{"cnp_handled_per_s", 0}, ecn_marked_{"ecn_marked_per_s", 0};
  std::vector<QpProbe> qps_;
  std::unordered_map<std::string, size_t> qp_index_;
  std::vector<Column> qp_rate_, qp_alpha_;
};

}  // namespace rocemu::sim
