// rocemu topo: the generated leaf-spine and fat-tree files load as
// topologies, carry RoCE between hosts on different leaves over the
// leaves' ECMP groups, and the library's generated topology is what the
// generator writes today.
#include <catch2/catch.hpp>

#include <any>

#include "apps/topo_gen.h"
#include "switch/switch_config.h"
#include "tests/sim/support.h"
#include "tests/support/eal.h"

using namespace rocemu;
using namespace rocemu::test;

TEST_CASE("rocemu topo: options are checked, oversubscription is HOSTS:UPLINKS", "[unit][sim]") {
  CHECK(app::parse_oversubscription("1:1") == 1.0);
  CHECK(app::parse_oversubscription("3:1") == 3.0);
  CHECK(app::parse_oversubscription("2.5:1") == 2.5);
  for (const char* bad : {"1", "0:1", "1:0", ":1", "a:b", "1:1:1", "-1:1"}) {
    INFO(bad);
    CHECK(!app::parse_oversubscription(bad));
  }
  app::LeafSpineOptions o;
  o.spines = 0;
  CHECK_THAT(app::leaf_spine_topology(o, "t").status().message(), Catch::Contains("--spines"));
  o = {};
  o.hosts_per_leaf = 8;
  o.spines = 1;  // 8 x 400G on one uplink: 3.2T
  CHECK_THAT(app::leaf_spine_topology(o, "t").status().message(), Catch::Contains("more spines"));
  CHECK_THAT(app::fat_tree_topology(5, {}, "t").status().message(), Catch::Contains("--k"));
}

TEST_CASE("rocemu topo leaf-spine 4x2x4 at 400G: loads, ECMP groups on every leaf, traffic across the spines",
          "[sim]") {
  app::LeafSpineOptions o;  // 4 leaves, 2 spines, 4 hosts per leaf, 400G, 1:1
  auto text = app::leaf_spine_topology(o, "rocemu topo leaf-spine");
  REQUIRE(text.ok());
  auto topo = parse_topology(text.value(), "ls.yaml", sim_registry());
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  CHECK(topo->nodes.size() == 16 + 4 + 2);
  CHECK(topo->links.size() == 16 + 8);
  for (const NodeSpec& n : topo->nodes) {
    if (n.name.rfind("leaf", 0) != 0) continue;
    const auto& cfg = std::any_cast<const sw::SwitchConfig&>(n.config);
    INFO(n.name);
    CHECK(cfg.routes.size() == 3 * 2);  // 3 other leaves x 2 spines
    CHECK(cfg.qos.roce.mode == sw::RoceMode::kLossless);
  }
  for (const LinkSpec& l : topo->links) {
    const bool uplink = l.a.rfind("leaf", 0) == 0;
    CHECK(l.params.rate_bps == (uplink ? 800'000'000'000ull : 400'000'000'000ull));  // 4 x 400G over 2 spines
  }

  // A short scenario on it: hosts of leaf1 to hosts of leaf4 and back.
  const std::string dir = fresh_dir("topo-gen");
  write_file(dir + "/ls.yaml", text.value());
  const std::string scenario = R"(name: leaf-spine-smoke
description: generated 4x2x4 leaf-spine, WRITEs between leaves
duration: 2ms
topology_file: ls.yaml
workloads:
  - {name: across, from: [h1, h2], to: h16, message_size: 64KiB, count: 8, qps: 4, mtu: 4096}
  - {name: back, from: [h13], to: h3, message_size: 64KiB, count: 8, qps: 4, mtu: 4096}
expectations:
  - {name: every flow completes, metric: flow_stats.all_completed, op: "==", value: true}
  - {name: no drops, metric: drops.total, op: "==", value: 0}
  - {name: leaf1 spreads over both uplinks, metric: ecmp.switches.leaf1.idle_ports, op: "==", value: 0}
  - {name: leaf4 too, metric: ecmp.switches.leaf4.idle_ports, op: "==", value: 0}
)";
  write_file(dir + "/s.yaml", scenario);
  auto s = sim::load_scenario(dir + "/s.yaml", sim_registry());
  INFO(s.status().message());
  REQUIRE(s.ok());
  require_eal();
  auto r = sim::run_scenario(s.value());
  INFO(r.status().message());
  REQUIRE(r.ok());
  INFO(sim::format_verdict(s->name, r->verdict));
  CHECK(r->verdict.pass());
  CHECK(r->summary["ecmp"]["switches"]["leaf1"]["bytes"].get<uint64_t>() > 2 * 8 * 65536);
}

TEST_CASE("rocemu topo fat-tree --k 4 is the leaf-spine of 4-port switches", "[unit][sim]") {
  auto text = app::fat_tree_topology(4, {}, "rocemu topo fat-tree --k 4");
  REQUIRE(text.ok());
  auto topo = parse_topology(text.value(), "ft.yaml", sim_registry());
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  size_t leaves = 0, spines = 0, hosts = 0;
  for (const NodeSpec& n : topo->nodes) {
    leaves += n.name.rfind("leaf", 0) == 0;
    spines += n.name.rfind("spine", 0) == 0;
    hosts += n.kind->name() == "nic";
    if (n.kind->name() == "switch") CHECK(n.ports == 4);
  }
  CHECK(leaves == 4);
  CHECK(spines == 2);
  CHECK(hosts == 8);
}

TEST_CASE("The library's leaf-spine topologies are what rocemu topo writes", "[unit][sim]") {
  // scenarios/topologies/leaf-spine-*.yaml: regenerate them with the
  // command each header names when the generator changes.
  struct Library {
    const char* file;
    uint32_t leaves, spines, hosts;
  };
  for (const Library& lib : {Library{"leaf-spine-2x2.yaml", 2, 2, 2}, Library{"leaf-spine-4x2.yaml", 4, 2, 2}}) {
    INFO(lib.file);
    const std::string committed = read_file(std::string(ROCEMU_SOURCE_DIR) + "/scenarios/topologies/" + lib.file);
    const std::string cmd = "rocemu topo leaf-spine --leaves " + std::to_string(lib.leaves) + " --spines " +
                            std::to_string(lib.spines) + " --hosts-per-leaf " + std::to_string(lib.hosts) +
                            " --rate 100G -o scenarios/topologies/" + lib.file;
    REQUIRE(committed.find("# Made by: " + cmd + "\n") != std::string::npos);
    app::LeafSpineOptions o;
    o.leaves = lib.leaves;
    o.spines = lib.spines;
    o.hosts_per_leaf = lib.hosts;
    o.rate_bps = 100'000'000'000ull;
    auto text = app::leaf_spine_topology(o, cmd);
    REQUIRE(text.ok());
    CHECK(text.value() == committed);
  }
}
