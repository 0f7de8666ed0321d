// rocemu's counters through DPDK telemetry (dpdk-telemetry.py -f PREFIX,
// or any client of the EAL's telemetry socket):
//   /rocemu/nodes              the nodes, an array of names
//   /rocemu/scopes             every scope that has counters (h1, h1:0, sw1/swp1, h1/qp17, ...)
//   /rocemu/counters,SCOPE[,PREFIX]
//                              that scope's counters (those whose name starts with PREFIX)
// Counter names are the `rocemu counters` ones, written as telemetry
// allows a key (letters, digits, _ and /): `-` becomes `_`, `.` becomes `/`.
//
// Telemetry answers on its own thread: each request hands a job to the
// engine thread (Engine::post) that takes the counters, and waits for
// it at most kDeadline; the engine never waits for a client.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "apps/metrics.h"
#include "common/status.h"

namespace rocemu::app {

class Telemetry {
 public:
  // Runs a job on the engine thread.
  using Post = std::function<void(std::function<void()>)>;
  // Takes every counter (called on the engine thread).
  using Collect = std::function<std::vector<CounterSample>()>;
  // A request the engine has not answered within this gets an error.
  static constexpr std::chrono::milliseconds kDeadline{2000};

  // Registers the commands (once per process: DPDK cannot unregister
  // them) and serves this engine's counters until stop().
  static Status start(Post post, Collect collect);
  // The engine is going: requests from now on get an error.
  static void stop();

  // How a counter's name is written as a telemetry key.
  static std::string key(std::string_view counter_name);
};

}  // namespace rocemu::app
