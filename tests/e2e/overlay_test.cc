// Debian's ib_write_bw between hosts on two leaves through a VXLAN overlay
// over a routed underlay (scenarios/topologies/vxlan-leaf-spine.yaml, in
// real time under `rocemu up`): the traffic is encapsulated by leaf1 and
// decapsulated by leaf2, with the inner DSCP 26 copied to the outer header
// it crosses the spines in the RoCE TC; with the copy off (`nv set nve vxlan
// encapsulation dscp action set`, value 0) it falls into the default TC.
// Then the bridged overlay (vxlan-l2-leaf-spine.yaml): h1 and h2 in VLAN
// 10 on two leaves, one subnet, ARP head-end replicated through VNI 10,
// remote MACs learned from decapsulated frames; ib_write_bw and
// rocemu-verify (every byte checked) between them.
#include <map>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

const std::string kOverlay = std::string(ROCEMU_SOURCE_DIR) + "/scenarios/topologies/vxlan-leaf-spine.yaml";
const std::string kBridgedOverlay = std::string(ROCEMU_SOURCE_DIR) + "/scenarios/topologies/vxlan-l2-leaf-spine.yaml";

// Packets the spines sent toward leaf2 from traffic class `tc`.
uint64_t spines_to_leaf2(const std::map<std::string, uint64_t>& c, int tc) {
  const std::string q = " queue" + std::to_string(tc) + ".packets";
  return counter_at(c, "spine1/swp2" + q) + counter_at(c, "spine2/swp2" + q);
}

void write_bw(const Fabric& f) {
  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-n", "2000",
                                        "--report_gbits", "-p", std::to_string(port)};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h4", "h1", srv, cli, port);
  INFO("--- client ---\n" << r.client_out << "\n--- server ---\n" << r.server_out);
  REQUIRE(r.client == 0);
  REQUIRE(r.server == 0);
  CHECK(r.client_out.find("65536      2000") != std::string::npos);
}

}  // namespace

TEST_CASE("ib_write_bw across a VXLAN overlay; DSCP 26 in the RoCE TC on the underlay, in TC0 with the copy off",
          "[e2e][perftest]") {
  Fabric f(kOverlay);
  write_bw(f);
  const auto a = f.counters();
  // 2000 x 64 KiB at the 4096-byte MTU: 32,000 data packets at least.
  CHECK(counter_at(a, "leaf1 vxlan.encap-packets") >= 32000);
  CHECK(counter_at(a, "leaf2 vxlan.decap-packets") >= 32000);
  CHECK(counter_at(a, "leaf2 vxlan.encap-packets") > 0);  // ACKs back
  CHECK(counter_at(a, "leaf1 vxlan.discards.underlay-mtu-exceeded") == 0);
  CHECK(spines_to_leaf2(a, 3) >= 32000);
  CHECK(spines_to_leaf2(a, 0) == 0);
  CHECK(counter_at(a, "leaf2/swp1 queue3.packets") >= 32000);

  for (const std::string sw : {"leaf1", "leaf2"}) {
    auto [st, out] = f.rocemu({"nv", "--switch", sw, "set", "nve", "vxlan", "encapsulation", "dscp", "action", "set"});
    INFO(out);
    REQUIRE(st == 0);
    std::tie(st, out) = f.rocemu({"nv", "--switch", sw, "config", "apply", "-y"});
    INFO(out);
    REQUIRE(st == 0);
  }
  auto [st, shown] = f.rocemu({"nv", "--switch", "leaf1", "show", "nve", "vxlan", "-o", "json"});
  INFO(shown);
  REQUIRE(st == 0);
  CHECK(shown.find("\"action\": \"set\"") != std::string::npos);
  write_bw(f);
  const auto b = f.counters();
  CHECK(counter_at(b, "leaf1 vxlan.encap-packets") - counter_at(a, "leaf1 vxlan.encap-packets") >= 32000);
  CHECK(spines_to_leaf2(b, 0) - spines_to_leaf2(a, 0) >= 32000);
  CHECK(spines_to_leaf2(b, 3) == spines_to_leaf2(a, 3));
  CHECK(counter_at(b, "leaf2/swp1 queue0.packets") - counter_at(a, "leaf2/swp1 queue0.packets") >= 32000);
}

TEST_CASE("ib_write_bw and rocemu-verify between two hosts of VLAN 10 on two leaves, through a bridged VNI",
          "[e2e][perftest]") {
  Fabric f(kBridgedOverlay);
  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-n", "2000",
                                        "--report_gbits", "-p", std::to_string(port)};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult w = run_pair(f, "h2", "h1", srv, cli, port);
  INFO("--- ib_write_bw client ---\n" << w.client_out << "\n--- server ---\n" << w.server_out);
  REQUIRE(w.client == 0);
  REQUIRE(w.server == 0);
  CHECK(w.client_out.find("65536      2000") != std::string::npos);
  const int vport = pick_port();
  const PairResult v =
      run_pair(f, "h2", "h1", {bin("rocemu-verify"), "--server", "--port", std::to_string(vport), "--iters", "20"},
               {bin("rocemu-verify"), "--connect", "127.0.0.1", "--port", std::to_string(vport), "--iters", "20"},
               vport);
  INFO("--- rocemu-verify client ---\n" << v.client_out << "\n--- server ---\n" << v.server_out);
  CHECK(v.client == 0);
  CHECK(v.server == 0);
  CHECK_THAT(v.server_out, Catch::Contains("all good"));

  const auto c = f.counters();
  // h1's ARP request for h2 was replicated to leaf2's VTEP; both leaves learned the far host behind the other VTEP.
  CHECK(counter_at(c, "leaf1 vxlan.head-end-replication-copies") >= 1);
  CHECK(counter_at(c, "leaf2 bridge.mac-learned") >= 2);
  // 2000 x 64 KiB at the 4096-byte MTU: 32,000 data packets at least, in the RoCE TC across the spines.
  CHECK(counter_at(c, "leaf1 vxlan.vni10.encap-packets") >= 32000);
  CHECK(counter_at(c, "leaf2 vxlan.vni10.decap-packets") >= 32000);
  CHECK(spines_to_leaf2(c, 3) >= 32000);
  CHECK(counter_at(c, "leaf2/swp1 queue3.packets") >= 32000);
  CHECK(counter_at(c, "leaf2 bridge.discards.split-horizon") == 0);
  auto [st, table] = f.rocemu({"nv", "--switch", "leaf2", "show", "bridge", "domain", "br_default", "mac-table"});
  INFO(table);
  REQUIRE(st == 0);
  CHECK_THAT(table, Catch::Contains("10.10.10.1"));  // h1 (and h3, from its gratuitous ARP) behind leaf1
  CHECK_THAT(table, Catch::Contains("swp1"));        // h2
}
