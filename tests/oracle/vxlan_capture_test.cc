// RoCEv2 through a VXLAN overlay, captured on the underlay and read by
// independent decoders: tshark must decode every frame as VXLAN ->
// Ethernet -> IP -> UDP 4791 -> InfiniBand without a malformed marker or an
// expert error, and tests/oracle/vxlan_check.py computes each inner ICRC
// itself (from the bytes, and with scapy) and compares it with the wire.
// The fabric is the sim scenarios' overlay (scenarios/topologies/
// vxlan-leaf-spine.yaml), the traffic the transport's own mixed RC
// workload between h1 (leaf1) and h4 (leaf2); once more with lossy
// trimming spines, whose trimmed VXLAN frames must pass the same checks.
// And the bridged overlay (vxlan-l2-leaf-spine.yaml, h1 and h2 in VLAN 10
// on two leaves): the ARP requests head-end replicated into VNI 10 and the
// answers tunnelled back decode as VXLAN -> Ethernet -> ARP, the bridged
// RoCE frames as above with their inner ICRCs valid.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <functional>
#include <sstream>

#include "common/config/topology.h"
#include "nic/nic_kind.h"
#include "switch/switch.h"
#include "switch/switch_kind.h"
#include "tests/nic/workload.h"
#include "tests/oracle/oracle_run.h"

using namespace rocemu;

namespace {

// What one overlay capture found: the VXLAN frames, and those whose outer
// and inner DSCP are both `trim_dscp` (trimmed on the way).
struct OverlayCapture {
  size_t vxlan_frames = 0, trimmed_frames = 0;
  size_t arp_frames = 0, arp_broadcasts = 0;  // VXLAN frames with an inner ARP (a broadcast request)
  uint64_t trims = 0, trim_drops = 0;  // the spines' counts
};

// Runs the transport's RC workload h1 -> h4 over the overlay fabric (after
// `tweak`), capturing the uplinks of `leaf` (ports from `first_uplink`),
// and checks every captured VXLAN frame with tshark and vxlan_check.py.
OverlayCapture check_overlay_capture(const std::function<void(Topology&)>& tweak, const std::string& leaf,
                                     uint16_t first_uplink, uint8_t trim_dscp,
                                     const std::string& topology = "vxlan-leaf-spine.yaml",
                                     const std::string& peer = "h4") {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  nic::register_nic_kind(reg);
  register_switch_kinds(reg);
  auto t = load_topology(std::string(ROCEMU_SOURCE_DIR) + "/scenarios/topologies/" + topology, reg);
  INFO(t.status().message());
  REQUIRE(t.ok());
  if (tweak) tweak(*t);
  test::require_eal();
  auto e = Engine::create(t->engine);
  REQUIRE(e.ok());
  Engine& engine = *e.value();
  REQUIRE(build_fabric(*t, engine).ok());
  // Both of the leaf's uplinks (the QPs' outer source ports spread over them).
  std::vector<std::string> files;
  for (const auto& l : engine.links()) {
    for (int side = 0; side < 2; side++) {
      if (l->end(side).owner()->name() != leaf || l->end(side).index() < first_uplink) continue;
      files.push_back(std::string(ROCEMU_ORACLE_OUT) + "/vxlan-" + leaf + "-uplink" +
                      std::to_string(l->end(side).index()) + ".pcapng");
      REQUIRE(engine.capture_link(*l, files.back()).ok());
    }
  }
  REQUIRE(files.size() == 2);
  engine.start();
  auto* h1 = dynamic_cast<nic::Nic*>(engine.find_node("h1"));
  auto* h4 = dynamic_cast<nic::Nic*>(engine.find_node(peer));
  REQUIRE(h1 != nullptr);
  REQUIRE(h4 != nullptr);
  test::TwoNics g{test::TwoNics::Adopt{}, std::move(e.value()), h1, h4};
  test::WorkloadSpec spec;
  spec.max_len = 20000;
  const auto r = test::run_rc_workload(g, spec);
  REQUIRE(r.failure == "");
  g.engine->flush_captures();
  auto* vtep = dynamic_cast<sw::Switch*>(g.engine->find_node(leaf));
  const uint64_t encapsulated = vtep->vtep_counters()[sw::VtepCounters::encap_packets];
  const uint64_t decapsulated = vtep->vtep_counters()[sw::VtepCounters::decap_packets];
  REQUIRE(encapsulated + decapsulated > 120);  // data one way, ACKs and READ responses the other
  OverlayCapture out;
  for (const char* spine : {"spine1", "spine2"}) {
    auto* s = dynamic_cast<sw::Switch*>(g.engine->find_node(spine));
    for (uint16_t p = 0; p < 2; p++) {
      out.trims += s->counters(p)[sw::PortCounters::trim_packets];
      out.trim_drops += s->counters(p)[sw::PortCounters::trim_drop_packets];
    }
  }

  // tshark: every frame, no malformed marker, no expert error; the VXLAN
  // ones carry VNI 10 and an InfiniBand BTH inside.
  const std::string dscp = std::to_string(trim_dscp);
  for (const std::string& f : files) {
    const auto run_t = test::run_tshark(
        f, {"vxlan.vni", "udp.dstport", "infiniband.bth.opcode", "frame.protocols", "ip.dsfield.dscp", "arp.opcode",
            "eth.dst"});
    INFO(f << ": " << run_t.stderr_text);
    REQUIRE(run_t.status == 0);
    for (size_t i = 0; i < run_t.frames.size(); i++) {
      const test::TsharkFrame& fr = run_t.frames[i];
      INFO(f << " frame " << i);
      CHECK(!fr.malformed);
      for (const auto& err : fr.errors) FAIL_CHECK("expert error: " << err);
      if (fr.values[0].empty()) continue;  // PFC, ARP
      out.vxlan_frames++;
      CHECK(fr.values[0] == std::vector<std::string>{"10"});
      if (!fr.values[5].empty()) {  // a bridged ARP: VXLAN -> Ethernet -> ARP
        out.arp_frames++;
        REQUIRE(fr.values[3].size() == 1);
        CHECK_THAT(fr.values[3][0], Catch::Contains("eth:ethertype:ip:udp:vxlan:eth:ethertype:arp"));
        REQUIRE(fr.values[6].size() == 2);  // outer, inner destination
        if (fr.values[5] == std::vector<std::string>{"1"} && fr.values[6][1] == "ff:ff:ff:ff:ff:ff")
          out.arp_broadcasts++;
        continue;
      }
      CHECK(fr.values[1] == std::vector<std::string>({"4789", "4791"}));
      CHECK(fr.values[2].size() == 1);
      REQUIRE(fr.values[3].size() == 1);
      CHECK_THAT(fr.values[3][0], Catch::Contains("eth:ethertype:ip:udp:vxlan:eth:ethertype:ip:udp:infiniband"));
      if (fr.values[4] == std::vector<std::string>{dscp, dscp}) out.trimmed_frames++;
    }
  }
  // Both directions cross the uplinks: what the leaf sent and what it received.
  CHECK(out.vxlan_frames == encapsulated + decapsulated);

  // The inner ICRCs, computed independently.
  std::string cmd = "/usr/bin/python3 " + std::string(ROCEMU_ORACLE_DIR) + "/vxlan_check.py 10";
  for (const auto& f : files) cmd += " " + f;
  std::string text;
  const int status = test::run_command(cmd + " 2>&1", text);
  INFO(text);
  CHECK(status == 0);
  CHECK(text.find("FAIL") == std::string::npos);
  CHECK(text.find("CHECKED " + std::to_string(out.vxlan_frames - out.arp_frames) + " 2") != std::string::npos);
  CHECK(text.find("ARP " + std::to_string(out.arp_frames)) != std::string::npos);
  return out;
}

}  // namespace

TEST_CASE("Encapsulated RoCEv2 decodes in tshark (VXLAN, Ethernet, IP, UDP 4791, InfiniBand); every inner ICRC is valid",
          "[oracle][switch]") {
  const OverlayCapture c = check_overlay_capture({}, "leaf1", 3, 11);
  CHECK(c.vxlan_frames > 0);
  CHECK(c.trims == 0);
  CHECK(c.arp_frames == 0);  // a routed VNI carries IP alone
}

TEST_CASE("A bridged VNI in tshark: the flooded ARP request and the tunnelled reply decode as VXLAN, Ethernet, ARP; "
          "bridged RoCEv2 as VXLAN, Ethernet, IP, UDP 4791, InfiniBand with every inner ICRC valid",
          "[oracle][switch]") {
  const OverlayCapture c = check_overlay_capture({}, "leaf1", 2, 11, "vxlan-l2-leaf-spine.yaml", "h2");
  INFO("VXLAN frames " << c.vxlan_frames << ", of them ARP " << c.arp_frames << " (broadcast requests "
                       << c.arp_broadcasts << ")");
  CHECK(c.arp_broadcasts >= 1);            // h1's request for h2, replicated to leaf2's VTEP
  CHECK(c.arp_frames > c.arp_broadcasts);  // and h2's unicast reply, tunnelled back to leaf1 alone
  CHECK(c.vxlan_frames - c.arp_frames > 120);
}

TEST_CASE("VXLAN frames trimmed by a spine decode in tshark with both DSCPs remarked; every inner ICRC is valid",
          "[oracle][switch]") {
  // Lossy spines with packet trimming and 10G links down to leaf2: leaf1's
  // data for h4 overflows the spines' egress queues and is trimmed there.
  auto lossy_trim = [](Topology& t) {
    for (NodeSpec& n : t.nodes) {
      if (n.name != "spine1" && n.name != "spine2") continue;
      auto& cfg = std::any_cast<sw::SwitchConfig&>(n.config);
      cfg.qos = sw::qos_roce_profile(sw::RoceMode::kLossy);
      cfg.qos.buffer.size = 100'000;
      cfg.qos.buffer.egress_lossy_alpha = 1;
      cfg.qos.trim.enable = true;
    }
    for (LinkSpec& l : t.links)
      if (l.a == "leaf2" && l.a_port != 0) l.params.rate_bps = 10'000'000'000ull;
  };
  const OverlayCapture c = check_overlay_capture(lossy_trim, "leaf2", 1, sw::PacketTrim{}.remark_dscp);
  INFO("trimmed " << c.trims << ", of them dropped " << c.trim_drops << ", seen trimmed " << c.trimmed_frames);
  CHECK(c.trims > 0);
  // Trimmed frames that left a spine were captured on their way to leaf2
  // and decoded (a frame already within the trim size is queued whole, not
  // remarked: hence at most).
  CHECK(c.trimmed_frames > 0);
  CHECK(c.trimmed_frames <= c.trims - c.trim_drops);
}
