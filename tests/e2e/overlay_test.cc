// Debian's ib_write_bw between hosts on two leaves through a VXLAN overlay
// over a routed underlay (scenarios/topologies/vxlan-leaf-spine.yaml, in
// real time under `rocemu up`): the traffic is encapsulated by leaf1 and
// decapsulated by leaf2, with the inner DSCP 26 copied to the outer header
// it crosses the spines in the RoCE TC; with the copy off (`nv set nve vxlan
// encapsulation dscp action set`, value 0) it falls into the default TC.
#include <map>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

const std::string kOverlay = std::string(ROCEMU_SOURCE_DIR) + "/scenarios/topologies/vxlan-leaf-spine.yaml";

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
