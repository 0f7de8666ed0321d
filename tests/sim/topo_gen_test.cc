// rocemu topo: the generated leaf-spine and fat-tree files load as
// topologies, carry RoCE between hosts on different leaves over the
// leaves' ECMP groups, and the library's generated topology is what the
// generator writes today.
#include <catch2/catch.hpp>

#include <any>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

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
  for (const char* bad : {"1", "0:1", "1:0", ":1", "a:b", "1:1:1", "-1:1", "abc", "3:", "0:0", "3:1x"}) {
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

namespace topo_gen_test {

// A leaf's links in a generated topology: to its hosts and to the spines.
struct LeafLinks {
  std::vector<uint64_t> host_rates, uplink_rates;
  std::set<std::string> spines;
};

std::map<std::string, LeafLinks> leaf_links(const Topology& t) {
  std::map<std::string, LeafLinks> out;
  for (const LinkSpec& l : t.links) {
    if (l.b.rfind("leaf", 0) == 0) out[l.b].host_rates.push_back(l.params.rate_bps);  // host -- leaf
    if (l.a.rfind("leaf", 0) != 0) continue;
    out[l.a].uplink_rates.push_back(l.params.rate_bps);  // leaf -- spine
    out[l.a].spines.insert(l.b);
  }
  return out;
}

}  // namespace topo_gen_test

TEST_CASE("rocemu topo leaf-spine: a leaf's uplinks carry hosts-per-leaf x rate / oversubscription in all",
          "[unit][sim]") {
  // HOSTS:UPLINKS as the user writes it, and the fabric's other inputs.
  struct Case {
    uint64_t hosts_share, uplinks_share;
    uint32_t leaves, spines, hosts;
    uint64_t rate;
  };
  const Case cases[] = {
      {1, 1, 4, 2, 4, 400'000'000'000ull}, {2, 1, 4, 2, 4, 400'000'000'000ull},
      {3, 1, 3, 2, 6, 100'000'000'000ull}, {3, 1, 2, 4, 8, 100'000'000'000ull},
      {3, 1, 4, 2, 4, 400'000'000'000ull},  // 1600G / 3 over 2 spines: 266.67G each, not a whole Mbit/s
      {1, 2, 2, 2, 2, 100'000'000'000ull},  // more uplink than host bandwidth
  };
  for (const Case& c : cases) {
    const std::string ratio = std::to_string(c.hosts_share) + ":" + std::to_string(c.uplinks_share);
    INFO(ratio << ", " << c.leaves << " leaves, " << c.spines << " spines, " << c.hosts << " hosts per leaf at "
               << c.rate);
    const auto parsed = app::parse_oversubscription(ratio);
    REQUIRE(parsed);
    app::LeafSpineOptions o;
    o.leaves = c.leaves;
    o.spines = c.spines;
    o.hosts_per_leaf = c.hosts;
    o.rate_bps = c.rate;
    o.oversubscription = *parsed;
    auto text = app::leaf_spine_topology(o, "t");
    REQUIRE(text.ok());
    auto topo = parse_topology(text.value(), "ls.yaml", sim_registry());
    INFO(topo.status().message());
    REQUIRE(topo.ok());
    // The leaf's uplink bandwidth, all spines together, from the inputs.
    const double uplinks_bps = double(c.hosts) * double(c.rate) * double(c.uplinks_share) / double(c.hosts_share);
    const auto leaves = topo_gen_test::leaf_links(topo.value());
    REQUIRE(leaves.size() == c.leaves);
    for (const auto& [leaf, links] : leaves) {
      INFO(leaf);
      CHECK(links.host_rates == std::vector<uint64_t>(c.hosts, c.rate));
      REQUIRE(links.uplink_rates.size() == c.spines);  // one uplink to each spine
      CHECK(links.spines.size() == c.spines);
      for (const uint64_t r : links.uplink_rates) {
        CHECK(r == links.uplink_rates[0]);  // the same rate on every uplink
        // Rounded to a whole Mbit/s, the rates' unit.
        CHECK(r % 1'000'000 == 0);
        CHECK(std::abs(double(r) - uplinks_bps / c.spines) <= 500'000);
      }
    }
    // What the header says of the fabric, the ratio reduced to N:1.
    std::ostringstream header;
    header << "(oversubscription " << double(c.hosts_share) / double(c.uplinks_share) << ":1)";
    CHECK_THAT(text.value(), Catch::Contains(header.str()));
  }
}

TEST_CASE("rocemu topo leaf-spine and fat-tree, run as commands, write files that load as their fabric", "[sim]") {
  const std::string dir = fresh_dir("topo-cli");
  // 3 leaves x 2 spines, 3 hosts of 100G each at 3:1: 100G of uplink a
  // leaf, 50G to each spine.
  const std::string args =
      "topo leaf-spine --leaves 3 --spines 2 --hosts-per-leaf 3 --rate 100G --oversubscription 3:1 -o " + dir +
      "/ls.yaml";
  REQUIRE(run_rocemu(args, dir + "/ls.log") == 0);
  CHECK_THAT(read_file(dir + "/ls.log"), Catch::Contains("wrote " + dir + "/ls.yaml"));
  const std::string text = read_file(dir + "/ls.yaml");
  CHECK_THAT(text, Catch::Contains("# Made by: rocemu " + args + "\n"));
  auto topo = parse_topology(text, dir + "/ls.yaml", sim_registry());
  INFO(text);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  size_t hosts = 0, leaves = 0, spines = 0;
  for (const NodeSpec& n : topo->nodes) {
    hosts += n.kind->name() == "nic";
    if (n.kind->name() != "switch") continue;
    const auto& cfg = std::any_cast<const sw::SwitchConfig&>(n.config);
    INFO(n.name);
    CHECK(cfg.validate().ok());
    if (n.name.rfind("leaf", 0) == 0) {
      leaves++;
      CHECK(n.ports == 3 + 2);
      CHECK(cfg.routes.size() == 2 * 2);  // 2 other leaves x 2 spines
    } else {
      spines++;
      CHECK(n.ports == 3);
      CHECK(cfg.routes.size() == 3);  // one per leaf
    }
  }
  CHECK(hosts == 9);
  CHECK(leaves == 3);
  CHECK(spines == 2);
  CHECK(topo->links.size() == 9 + 3 * 2);
  for (const auto& [leaf, links] : topo_gen_test::leaf_links(topo.value())) {
    INFO(leaf);
    CHECK(links.host_rates == std::vector<uint64_t>(3, 100'000'000'000ull));
    CHECK(links.uplink_rates == std::vector<uint64_t>(2, 50'000'000'000ull));
  }

  REQUIRE(run_rocemu("topo fat-tree --k 4 --rate 25G -o " + dir + "/ft.yaml", dir + "/ft.log") == 0);
  auto ft = parse_topology(read_file(dir + "/ft.yaml"), dir + "/ft.yaml", sim_registry());
  INFO(ft.status().message());
  REQUIRE(ft.ok());
  CHECK(ft->nodes.size() == 8 + 4 + 2);
  for (const auto& [leaf, links] : topo_gen_test::leaf_links(ft.value()))
    CHECK(links.uplink_rates == std::vector<uint64_t>(2, 25'000'000'000ull));  // 1:1

  // A bad ratio is a usage error (exit 2) naming the option, and writes nothing.
  for (const char* bad : {"0:1", "abc", "1:0"}) {
    INFO(bad);
    const std::string out = dir + "/bad.yaml";
    CHECK(run_rocemu(std::string("topo leaf-spine --oversubscription ") + bad + " -o " + out, dir + "/bad.log") == 2);
    CHECK_THAT(read_file(dir + "/bad.log"),
               Catch::Contains("rocemu topo: --oversubscription: '" + std::string(bad) +
                               "' is not HOSTS:UPLINKS (e.g. 1:1, 3:1)"));
    CHECK(!std::filesystem::exists(out));
  }
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
