// Every counter of an engine in Prometheus's text exposition format
// (version 0.0.4): families rocemu_<kind>_<counter>_total with labels
// {node, port, priority, tc, qp}, values in base units (bytes, seconds,
// bit/s), HELP from the counters' own help text (the X-macro lists).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rocemu {
class Engine;
}

namespace rocemu::app {

// One counter as a node reported it, with the kind of what reported it
// ("nic", "switch", "port" for a port's own counters, ...).
struct CounterSample {
  std::string kind;
  std::string scope;  // "h1", "h1/qp17", "sw1/swp1", a port's name
  std::string name;   // as the node names it ("rx-roce-stats.roce-packets", "queue3.drop-packets")
  uint64_t value = 0;
};

// On the engine thread: every counter, zeros included.
std::vector<CounterSample> collect_counters(const Engine& engine);

// The exposition text of `samples`.
std::string prometheus_text(const std::vector<CounterSample>& samples);

}  // namespace rocemu::app
