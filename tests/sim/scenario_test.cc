// Scenario files: a bad file is rejected whole, before anything runs, each
// error naming the file, the line and the field; a good one reads into
// what the runner needs; metric paths resolve as summary.json nests.
#include <catch2/catch.hpp>
#include <filesystem>

#include "sim/summary.h"
#include "tests/sim/support.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

// Every kind of mistake, one per line where the line matters.
const char* const kBad = R"(name: bad one
duraton: 2ms
sample_interval: 10ps
topology:
  nodes:
    h0: {kind: nic, ip: 10.0.0.1, prefix: 24, gateway: 10.0.0.254}
    h1: {kind: nic, ip: 10.0.1.1, prefix: 24, gateway: 10.0.1.254}
    sw1:
      kind: switch
      ports: 2
      interfaces:
        swp1: {address: 10.0.0.254/24}
        swp2: {address: 10.0.1.254/24}
  links:
    - {a: h0, b: "sw1:0", rate: 100X}
    - {a: h1, b: "sw1:1"}
workloads:
  - {from: h0, to: h9, count: 3}
  - {from: sw1, to: h1, verb: wrte, message_size: 1Q, bytes: 1MB, count: 2}
  - {from: h0, to: h1, count: 1, mtu: 1000, dscp: 64, on_off: {on: 0us, off: 5us}}
faults:
  - {at: 1ms, link: "h0:3", set: {loss: 2}}
  - {at: 1ms, port: "sw1:swp8", clear: true}
  - {link: h0, set: {delay: 5us}, pfc_storm: {switch-priority: [3]}}
nv:
  - {switch: sw1, command: "set qos roce mode lossles"}
  - {switch: h0, command: "set qos roce mode lossy"}
expectations:
  - {metric: flow_stats.jian, op: ">=", value: 0.9}
  - {metric: drops.total, op: "about", value: 0}
  - {metric: flows, op: "==", value: 0}
  - {metric: drops.total, op: "==", value: many}
)";

}  // namespace

TEST_CASE("A bad scenario file is rejected whole, every error naming file:line:field", "[sim][scenario]") {
  auto s = sim::parse_scenario(kBad, "bad.yaml", sim_registry());
  REQUIRE(!s.ok());
  const std::string msg = s.status().message();
  INFO(msg);
  const char* const expected[] = {
      "bad.yaml:1: name: 'bad one' is not a name",
      "bad.yaml:2: duraton: unknown field",
      "bad.yaml:3: sample_interval: must be at least 100ns",
      // the inline topology's own errors, with its fields under topology.
      "bad.yaml:15: topology.links[0].rate: '100X' is not a rate",
      "bad.yaml:18: workloads[0].to: no node named 'h9' in the topology",
      "bad.yaml:19: workloads[1].from: 'sw1' is a switch, not a nic",
      "bad.yaml:19: workloads[1].verb: 'wrte' is not one of: write, send, read",
      "bad.yaml:19: workloads[1].message_size: '1Q' is not a size",
      "bad.yaml:19: workloads[1]: give exactly one of count, bytes and duration",
      "bad.yaml:20: workloads[2].mtu: must be 256, 512, 1024, 2048 or 4096",
      "bad.yaml:20: workloads[2].dscp: 64 is out of range [0, 63]",
      "bad.yaml:20: workloads[2].on_off.on: must be longer than 0",
      "bad.yaml:22: faults[0].link: no link at 'h0:3'",
      "bad.yaml:22: faults[0].set.loss: 2 is out of range [0, 1]",
      "bad.yaml:23: faults[1].port: sw1 has no interface 'swp8'",
      "bad.yaml:24: faults[2].at: every fault needs a time",
      "bad.yaml:24: faults[2].pfc_storm: only a switch port",
      "bad.yaml:26: nv[0].command: ",  // the switch's own message follows
      "bad.yaml:27: nv[1].switch: no switch named 'h0'",
      "bad.yaml:29: expectations[0].metric: 'flow_stats.jian' is not in summary.json (flow_stats has: flows,",
      "bad.yaml:30: expectations[1].op: 'about' is not <, <=, >, >=, == or \"within X% of\"",
      "bad.yaml:31: expectations[2].metric: 'flows' is a section, not a number",
      "bad.yaml:32: expectations[3].value: 'many' is not a number",
  };
  for (const char* e : expected) {
    INFO("expected: " << e);
    CHECK(msg.find(e) != std::string::npos);
  }
  // Errors only: nothing else, one per line.
  size_t lines = 1 + size_t(std::count(msg.begin(), msg.end(), '\n'));
  CHECK(lines == std::size(expected));
}

TEST_CASE("Scenario files: topology_file, missing topology, YAML syntax", "[sim][scenario]") {
  SECTION("a scenario needs a topology") {
    auto s = sim::parse_scenario("workloads: []\n", "t.yaml", sim_registry());
    REQUIRE(!s.ok());
    CHECK(s.status().message().find("t.yaml:1: topology: a scenario needs a topology") != std::string::npos);
  }
  SECTION("topology_file is read relative to the scenario, and its errors name it") {
    const std::string dir = fresh_dir("topo");
    write_file(dir + "/t.yaml", "nodes:\n  h0: {kind: nic, ip: 10.0.0.300}\n");
    write_file(dir + "/s.yaml", "topology_file: t.yaml\n");
    auto s = sim::load_scenario(dir + "/s.yaml", sim_registry());
    REQUIRE(!s.ok());
    INFO(s.status().message());
    CHECK(s.status().message().find(dir + "/t.yaml:2: nodes.h0.ip: '10.0.0.300' is not an IPv4 or IPv6 address") !=
          std::string::npos);
    std::filesystem::remove_all(dir);
  }
  SECTION("a YAML syntax error names its line") {
    auto s = sim::parse_scenario("name: x\nworkloads: [\n", "y.yaml", sim_registry());
    REQUIRE(!s.ok());
    CHECK(s.status().message().rfind("y.yaml:", 0) == 0);
  }
}

TEST_CASE("A good scenario reads into flows, a sorted schedule and expectations", "[sim][scenario]") {
  const std::string extra = R"(faults:
  - {at: 300us, link: "sw1:2", direction: out, set: {loss: 0.5}}
  - {at: 100us, port: "sw1:swp1", pfc_storm: {switch-priority: [3]}}
nv:
  - {at: 200us, switch: sw1, command: "set qos roce mode lossy"}
)";
  auto s = sim::parse_scenario(
      small_scenario("  - {name: ok, metric: flows.incast-h1.fct_us, op: \"within 5% of\", value: 90}\n", 8, extra),
      "good.yaml", sim_registry());
  INFO(s.status().message());
  REQUIRE(s.ok());
  REQUIRE(s->flows.size() == 2);
  CHECK(s->flows[0].name == "incast-h0");
  CHECK(s->flows[1].src == "h1");
  CHECK(s->flows[1].messages == 8);
  CHECK(s->seed == 5);
  CHECK(s->topology.engine.seed == 5);
  CHECK(s->topology.engine.mode == TimeMode::kVirtual);
  REQUIRE(s->schedule.size() == 3);
  CHECK(s->schedule[0].kind == sim::ScheduledEvent::Kind::kPortFault);
  CHECK(s->schedule[0].storm.enable);
  CHECK(s->schedule[1].kind == sim::ScheduledEvent::Kind::kNv);
  CHECK(s->schedule[2].at == us(300));
  CHECK(s->schedule[2].out);
  CHECK(!s->schedule[2].in);
  REQUIRE(s->expectations.size() == 1);
  CHECK(s->expectations[0].op == sim::Op::kWithin);
  CHECK(s->expectations[0].within_percent == 5);
}

TEST_CASE("Metric paths: dotted, with keys that contain dots; hints say what is there", "[sim][scenario]") {
  const sim::Json j = {{"flows", {{"a.b", {{"fct_us", 3.5}}}, {"a", {{"x", 1}}}}}, {"ok", true}};
  REQUIRE(sim::find_metric(j, "flows.a.b.fct_us") != nullptr);
  CHECK(sim::metric_value(j, "flows.a.b.fct_us") == 3.5);
  CHECK(sim::metric_value(j, "flows.a.x") == 1);
  CHECK(sim::metric_value(j, "ok") == 1);
  CHECK(!sim::metric_value(j, "flows.a"));
  CHECK(!sim::metric_value(j, "flows.c.fct_us"));
  CHECK(sim::metric_hint(j, "flows.c.fct_us") == "flows has: a.b, a");
  sim::Op op;
  double pct = 0;
  CHECK(sim::parse_op("within 2.5% of", op, pct));
  CHECK(pct == 2.5);
  CHECK(!sim::parse_op("within % of", op, pct));
  CHECK(!sim::parse_op("=", op, pct));
}
