// RoCEv2 through a VXLAN overlay, captured on the underlay and read by
// independent decoders: tshark must decode every frame as VXLAN ->
// Ethernet -> IP -> UDP 4791 -> InfiniBand without a malformed marker or an
// expert error, and tests/oracle/vxlan_check.py computes each inner ICRC
// itself (from the bytes, and with scapy) and compares it with the wire.
// The fabric is the sim scenarios' overlay (scenarios/topologies/
// vxlan-leaf-spine.yaml), the traffic the transport's own mixed RC
// workload between h1 (leaf1) and h4 (leaf2).
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <sstream>

#include "common/config/topology.h"
#include "nic/nic_kind.h"
#include "switch/switch.h"
#include "switch/switch_kind.h"
#include "tests/nic/workload.h"
#include "tests/oracle/oracle_run.h"

using namespace rocemu;

namespace {

std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

}  // namespace

TEST_CASE("Encapsulated RoCEv2 decodes in tshark (VXLAN, Ethernet, IP, UDP 4791, InfiniBand); every inner ICRC is valid",
          "[oracle][switch]") {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  nic::register_nic_kind(reg);
  register_switch_kinds(reg);
  auto t = load_topology(std::string(ROCEMU_SOURCE_DIR) + "/scenarios/topologies/vxlan-leaf-spine.yaml", reg);
  INFO(t.status().message());
  REQUIRE(t.ok());
  test::require_eal();
  auto e = Engine::create(t->engine);
  REQUIRE(e.ok());
  Engine& engine = *e.value();
  REQUIRE(build_fabric(*t, engine).ok());
  // Both of leaf1's uplinks (the QPs' outer source ports spread over them).
  std::vector<std::string> files;
  for (const auto& l : engine.links()) {
    for (int side = 0; side < 2; side++) {
      if (l->end(side).owner()->name() != "leaf1" || l->end(side).index() < 3) continue;
      files.push_back(std::string(ROCEMU_ORACLE_OUT) + "/vxlan-uplink" + std::to_string(l->end(side).index()) +
                      ".pcapng");
      REQUIRE(engine.capture_link(*l, files.back()).ok());
    }
  }
  REQUIRE(files.size() == 2);
  engine.start();
  auto* h1 = dynamic_cast<nic::Nic*>(engine.find_node("h1"));
  auto* h4 = dynamic_cast<nic::Nic*>(engine.find_node("h4"));
  REQUIRE(h1 != nullptr);
  REQUIRE(h4 != nullptr);
  test::TwoNics g{test::TwoNics::Adopt{}, std::move(e.value()), h1, h4};
  test::WorkloadSpec spec;
  spec.max_len = 20000;
  const auto r = test::run_rc_workload(g, spec);
  REQUIRE(r.failure == "");
  g.engine->flush_captures();
  auto* leaf1 = dynamic_cast<sw::Switch*>(g.engine->find_node("leaf1"));
  const uint64_t encapsulated = leaf1->vtep_counters()[sw::VtepCounters::encap_packets];
  const uint64_t decapsulated = leaf1->vtep_counters()[sw::VtepCounters::decap_packets];
  REQUIRE(encapsulated > 100);
  REQUIRE(decapsulated > 20);  // ACKs and READ responses

  // tshark: every frame, no malformed marker, no expert error; the VXLAN
  // ones carry VNI 10 and an InfiniBand BTH inside.
  size_t vxlan_frames = 0;
  for (const std::string& f : files) {
    const auto run_t = test::run_tshark(f, {"vxlan.vni", "udp.dstport", "infiniband.bth.opcode", "frame.protocols"});
    INFO(f << ": " << run_t.stderr_text);
    REQUIRE(run_t.status == 0);
    for (size_t i = 0; i < run_t.frames.size(); i++) {
      const test::TsharkFrame& fr = run_t.frames[i];
      INFO(f << " frame " << i);
      CHECK(!fr.malformed);
      for (const auto& err : fr.errors) FAIL_CHECK("expert error: " << err);
      if (fr.values[0].empty()) continue;  // PFC, ARP
      vxlan_frames++;
      CHECK(fr.values[0] == std::vector<std::string>{"10"});
      CHECK(fr.values[1] == std::vector<std::string>({"4789", "4791"}));
      CHECK(fr.values[2].size() == 1);
      REQUIRE(fr.values[3].size() == 1);
      CHECK_THAT(fr.values[3][0], Catch::Contains("eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:udp:infiniband"));
    }
  }
  // Both directions cross leaf1's uplinks: what it sent and what it received.
  CHECK(vxlan_frames == encapsulated + decapsulated);

  // The inner ICRCs, computed independently.
  std::string cmd = "/usr/bin/python3 " + std::string(ROCEMU_ORACLE_DIR) + "/vxlan_check.py 10";
  for (const auto& f : files) cmd += " " + f;
  int status = -1;
  const std::string out = run(cmd + " 2>&1", status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("FAIL") == std::string::npos);
  CHECK(out.find("CHECKED " + std::to_string(vxlan_frames) + " 2") != std::string::npos);
}
