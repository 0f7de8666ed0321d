// `rocemu fault clear` on the engine (apps/cmd_fault.cc) when a switch
// refuses the change: every other link and switch is still cleared, and
// the one that failed is named (exit 1 on the command line).
#include <rte_lpm.h>

#include <catch2/catch.hpp>

#include <algorithm>

#include "apps/engine_handlers.h"
#include "apps/fabric.h"
#include "switch/route.h"
#include "switch/switch.h"
#include "tests/support/eal.h"

using namespace rocemu;

namespace {

constexpr const char* kTwoSwitches = R"(
engine: {time: virtual, seed: 1, mbufs: 4096}
nodes:
  sw1:
    kind: switch
    ports: 2
    interfaces:
      swp1: {address: 10.0.1.254/24, faults: {loss: 0.01}}
      swp2: {address: 10.0.9.1/24}
  sw2:
    kind: switch
    ports: 2
    interfaces:
      swp1: {address: 10.0.2.254/24, faults: {delay: 5us}}
      swp2: {address: 10.0.9.2/24}
  h1: {kind: nic, mac: "02:00:00:00:01:01", ip: 10.0.1.1, prefix: 24, gateway: 10.0.1.254}
  h2: {kind: nic, mac: "02:00:00:00:02:01", ip: 10.0.2.1, prefix: 24, gateway: 10.0.2.254}
links:
  - {a: h1, b: "sw1:0"}
  - {a: "sw1:1", b: "sw2:1"}
  - {a: h2, b: "sw2:0"}
)";

int fault(Engine& e, std::vector<std::string> w, std::string& out) {
  w.insert(w.begin(), "fault");
  out.clear();
  return app::handle_fault(e, w, out);
}

}  // namespace

TEST_CASE("fault clear tries every link and switch, and names the switch that refused", "[sim][fault]") {
  test::require_eal();
  // The first switch built cannot make its route table (its DPDK name is
  // taken), so every change to it fails; the second works.
  std::string next_table;
  {
    sw::Switch probe("probe", sw::SwitchConfig::with_ports(1));
    REQUIRE(probe.routes() != nullptr);
    const std::string& n = probe.routes()->name();  // swrtK
    next_table = "swrt" + std::to_string(std::stoul(n.substr(4)) + 1);
  }
  rte_lpm_config lc{};
  lc.max_rules = 16;
  lc.number_tbl8s = 16;
  rte_lpm* squat = rte_lpm_create(next_table.c_str(), SOCKET_ID_ANY, &lc);
  REQUIRE(squat != nullptr);

  auto topo = parse_topology(kTwoSwitches, "two.yaml", app::registry());
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  auto created = Engine::create(topo->engine);
  REQUIRE(created.ok());
  Engine& e = *created.value();
  REQUIRE(build_fabric(*topo, e).ok());
  e.start();
  auto* sw1 = dynamic_cast<sw::Switch*>(e.find_node("sw1"));
  auto* sw2 = dynamic_cast<sw::Switch*>(e.find_node("sw2"));
  REQUIRE(sw1 != nullptr);
  REQUIRE(sw2 != nullptr);
  REQUIRE(sw1->routes() == nullptr);  // the one that refuses, first in the engine's order
  REQUIRE(sw2->routes() != nullptr);

  std::string out;
  REQUIRE(fault(e, {"add", "h1", "loss", "1%"}, out) == 0);
  REQUIRE(fault(e, {"add", "h2", "delay", "10us"}, out) == 0);
  REQUIRE(fault(e, {"add", "sw2:swp2", "pfc-storm", "prio", "3"}, out) == 0);
  REQUIRE(sw2->config().interfaces[1].pfc_storm.enable);
  REQUIRE(sw2->config().interfaces[0].faults.any());

  const int rc = fault(e, {"clear"}, out);
  INFO(out);
  CHECK(rc == EIO);
  CHECK_THAT(out, Catch::StartsWith("every fault cleared but: sw1: run-time faults removed, configured faults stay: "
                                    "route table " +
                                    next_table));
  CHECK_THAT(out, !Catch::Contains("sw2"));
  // Everything else is clear: the links, sw2's configured faults and its storm.
  for (const auto& l : e.links())
    for (int side = 0; side < 2; side++) {
      INFO(l->name() << " side " << side);
      CHECK(l->faults(side).entries().size() == 1);  // the configured set alone
      CHECK_FALSE(l->faults(side).active());
    }
  CHECK_FALSE(sw2->config().interfaces[0].faults.any());
  CHECK_FALSE(sw2->config().interfaces[1].pfc_storm.enable);
  CHECK_FALSE(sw2->port_faults(0).active());
  // sw1 could not change its configuration, so its configured faults are
  // still in force, as its configuration says.
  CHECK(sw1->config().interfaces[0].faults.loss == 0.01);
  CHECK(sw1->port_faults(0).configured().loss == 0.01);
  CHECK(sw1->port_faults(0).active());
  // Nothing added is left to list: the header and sw1's configured fault
  // (no id), which stays in force.
  REQUIRE(fault(e, {"list"}, out) == 0);
  CHECK(std::count(out.begin(), out.end(), '\n') == 2);
  CHECK_THAT(out, Catch::Contains("sw1:swp1"));
  CHECK_THAT(out, !Catch::Contains("sw2"));

  // One port of the switch that refuses: a run-time fault goes, the
  // configured ones stay in force.
  REQUIRE(fault(e, {"add", "sw1:swp1", "delay", "10us"}, out) == 0);
  CHECK(fault(e, {"clear", "sw1:swp1"}, out) == EIO);
  CHECK_THAT(out, Catch::Contains("run-time faults removed, configured faults stay"));
  CHECK(sw1->port_faults(0).entries().size() == 1);
  CHECK(sw1->port_faults(0).configured().loss == 0.01);
  CHECK(sw1->port_faults(0).active());
  REQUIRE(fault(e, {"list"}, out) == 0);
  CHECK(std::count(out.begin(), out.end(), '\n') == 2);  // the configured fault alone

  // A switch that takes the change: exit 0.
  REQUIRE(fault(e, {"add", "h1", "loss", "1%"}, out) == 0);
  CHECK(fault(e, {"clear", "h1"}, out) == 0);
  rte_lpm_free(squat);
}
