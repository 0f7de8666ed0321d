// Real emulated NICs behind the real switch, in virtual time: a star of
// `hosts` NICs (host i is 10.0.i.1/24 behind gateway 10.0.i.254 on swp<i+1>),
// built from a topology file as `rocemu sim` would build it, with an
// in-process verbs host (SimHost) on every NIC.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "nic/nic.h"
#include "nic/sim_host.h"
#include "switch/switch.h"

namespace rocemu::test {

struct StarSpec {
  int hosts = 5;
  uint64_t seed = 1;
  std::string roce_mode = "lossless";  // qos.roce: lossless, lossy
  std::string buffer_size;             // qos.buffer.size, e.g. "1MB"; empty: the default
  std::string loss_recovery = "go-back-n";
  int traffic_class = -1;              // the NICs' traffic_class; -1: their default (DSCP 26, ECT(0))
  std::string rate = "100G";
  std::string delay = "1us";
  std::string extra_qos;               // more YAML lines under sw1.qos (indented by the caller)
  std::string nic_extra;               // more YAML lines under every NIC (indented by the caller)
  // The NICs' congestion control (their `cc` key). The PFC, trimming and
  // loss tests study the fabric without it; the DCQCN tests set it.
  std::string cc = "none";
  // engine.virtual_lag: the engine wakes late, as a real-time one does.
  std::string virtual_lag;
};

// The topology file for `spec`.
std::string star_yaml(const StarSpec& spec);

struct Star {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  std::vector<nic::Nic*> nics;
  std::vector<std::unique_ptr<nic::SimHost>> hosts;

  ~Star();
  nic::Nic& nic(int i) { return *nics[size_t(i)]; }
  nic::SimHost& host(int i) { return *hosts[size_t(i)]; }
  uint64_t nic_counter(int i, nic::NicCounters::Id id) const { return nics[size_t(i)]->counters()[id]; }
  // Sum of a NIC counter over hosts [first, last).
  uint64_t nic_sum(int first, int last, nic::NicCounters::Id id) const;
  Time now() const { return engine->now(); }
};

// Parses, validates and builds the topology; fails the test on error.
std::unique_ptr<Star> make_star(const StarSpec& spec);

// Every counter every node reports ("scope/name" -> value).
std::map<std::string, uint64_t> all_counters(const Engine& engine);

}  // namespace rocemu::test
