// Runs a scenario: builds its fabric in a new virtual-time engine, puts an
// in-process verbs host on every NIC, sets up the flows, waits for ARP
// (time 0 of the scenario is when every flow's next hop is known), then
// drives virtual time: completions, the fault schedule, flow starts and
// on/off periods, and a sample every sample_interval. The result is the
// summary, the time series and the verdict; write_outputs() puts the
// first two in a directory.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/expect.h"
#include "sim/scenario.h"
#include "sim/series.h"
#include "sim/summary.h"

namespace rocemu::sim {

struct Progress {
  Duration now{0};       // virtual time reached, since time 0
  Duration duration{0};  // the scenario's
  double wall_seconds = 0;
  uint64_t events = 0;  // engine events so far
};

struct RunOptions {
  // Called about five times per wall second (a terminal's progress line).
  std::function<void(const Progress&)> progress;
  // The process exits right after this run (the `rocemu sim` command):
  // leave the fabric standing rather than take it down. Freeing DPDK's
  // packet pool zeroes every byte of it, a fifth of a second for 65,536
  // mbufs, and the process's exit frees it all anyway (compilers skip
  // freeing their trees at exit for the same reason). It stays reachable,
  // so leak checkers do not report it.
  bool keep_at_exit = false;
};

struct RunResult {
  Json summary;
  std::vector<Series> series;
  Verdict verdict;
  double wall_seconds = 0;   // from time 0 to the end; never in summary.json or the CSVs
  double setup_seconds = 0;  // building the fabric, QPs and ARP before time 0
  uint64_t events = 0;       // engine events from time 0
};

// The EAL must be running (dpdk::init_eal) with room for the topology's mbufs.
Result<RunResult> run_scenario(const Scenario& s, const RunOptions& o = {});

// summary.json and <series>.csv into `dir` (created if needed).
Status write_outputs(const RunResult& r, const std::string& dir);

}  // namespace rocemu::sim
