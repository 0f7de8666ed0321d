// Scenario files for `rocemu sim`: a topology, workloads (flows of RDMA
// WRITEs, SENDs or READs between hosts), a fault schedule and
// expectations, run in virtual time. A bad file is rejected whole, before
// anything runs, with every error naming the file, line and field.
//
//   name: lossless-incast
//   description: 4:1 incast of WRITEs, qos roce lossless
//   topology_file: topologies/star5.yaml   # or `topology:` inline
//   seed: 7
//   duration: 2ms                   # at most this much virtual time
//   sample_interval: 10us
//   workloads:
//     - {name: incast, from: [h0, h1, h2, h3], to: h4, verb: write,
//        message_size: 64KB, count: 16, qps: 1, dscp: 26}
//   faults:
//     - {at: 500us, link: h0, set: {loss: 0.01}}
//     - {at: 1ms, link: h0, clear: true}
//   nv:
//     - {at: 0, switch: sw1, command: "set qos roce mode lossy"}
//   expectations:
//     - {name: nothing dropped, metric: drops.total, op: "==", value: 0}
//
// Every key, its meaning and default is in the key tables of scenario.cc
// and in the README's "Scenarios" section.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config/topology.h"
#include "common/engine/fault.h"
#include "common/status.h"
#include "switch/switch_config.h"

namespace rocemu::sim {

enum class Verb : uint8_t { kWrite, kSend, kRead };
std::string_view verb_name(Verb v);

struct OnOff {
  Duration on{0};
  Duration off{0};
};

// One entry of `workloads`: a flow from every host of `from` to `to`.
struct Workload {
  std::string name;
  std::vector<std::string> from;
  std::string to;
  Verb verb = Verb::kWrite;
  uint64_t message_size = 65536;
  // Exactly one of count, bytes (rounded up to whole messages), duration.
  uint64_t count = 0;
  uint64_t bytes = 0;
  Duration duration{0};
  Duration start{0};
  uint32_t qps = 1;
  uint8_t traffic_class = 0;  // 0: the NIC's default (DSCP 26, ECT(0))
  uint32_t mtu = 1024;        // path MTU in bytes (256 .. 4096)
  uint32_t window = 8;        // messages outstanding per QP
  std::optional<OnOff> on_off;
  uint8_t timeout = 14;  // local ACK timeout, 4.096 us x 2^timeout
  uint8_t retry_cnt = 7;
};

// One flow: data from `src` to `dst` (for READ, `dst` posts the READs).
struct FlowSpec {
  std::string name;     // the workload's, or "<workload>-<src>" if it has several sources
  size_t workload = 0;  // index into Scenario::workloads
  std::string src, dst;
  uint64_t messages = 0;  // 0: as many as `duration` allows
};

// An entry of `faults` or `nv`, at time `at`: set or clear the fault stage
// of the link at NODE:PORT (`link`) or of a switch port (`port`, which also
// takes a PFC storm), or run an NVUE set/unset command on a switch.
struct ScheduledEvent {
  enum class Kind : uint8_t { kLinkFault, kPortFault, kNv };
  Duration at{0};
  Kind kind = Kind::kLinkFault;
  std::string node;
  uint16_t port = 0;
  bool out = true, in = true;   // link directions (out: what NODE:PORT sends)
  FaultConfig faults;           // empty when clearing
  sw::PfcStorm storm;           // switch ports only
  std::vector<std::string> nv;  // kNv: the words after `nv`, e.g. set qos roce mode lossy
};

enum class Op : uint8_t { kLt, kLe, kGt, kGe, kEq, kWithin };

struct Expectation {
  std::string name;
  std::string metric;  // a path into summary.json, e.g. flow_stats.jain_fairness
  Op op = Op::kEq;
  double value = 0;
  double within_percent = 0;  // Op::kWithin
  std::string text;           // the operator as written, for the verdict
};

struct Scenario {
  std::string file;
  std::string name;
  std::string description;
  Topology topology;
  uint64_t seed = 1;
  Duration duration = ms(10);
  Duration sample_interval = us(10);
  bool until_done = true;  // stop once every flow is done (and no fault is due)
  std::string bottleneck;  // NODE:PORT; empty: the busiest port
  std::vector<Workload> workloads;
  std::vector<FlowSpec> flows;           // the workloads expanded
  std::vector<ScheduledEvent> schedule;  // faults and nv commands, by time
  std::vector<Expectation> expectations;
};

Result<Scenario> parse_scenario(const std::string& text, const std::string& file, const NodeKindRegistry& reg);
Result<Scenario> load_scenario(const std::string& path, const NodeKindRegistry& reg);

// Parses an operator: <, <=, >, >=, ==, or "within X% of".
bool parse_op(std::string_view text, Op& op, double& within_percent);

}  // namespace rocemu::sim
