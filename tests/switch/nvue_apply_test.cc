// What an `nv config apply` must leave alone, and what a change made
// outside NVUE (rocemu fault, a scenario's port fault) must carry into the
// pending copy: configured fault state, XOFF being asserted when a change
// is rolled back, the pending copy after a fault clear, and every port of
// an `nv action clear`.
#include <catch2/catch.hpp>

#include "switch/nvue_yaml.h"
#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

// As `rocemu fault clear sw1:swpN` does it: the stage emptied, and the
// port's configured faults and storm taken out of the running config.
Status clear_port_faults(sw::Switch& s, uint16_t port) {
  s.port_faults(port).clear();
  sw::SwitchConfig cfg = s.config();
  cfg.interfaces[port].faults = FaultConfig{};
  cfg.interfaces[port].pfc_storm = sw::PfcStorm{};
  return s.apply(cfg);
}

}  // namespace

TEST_CASE("A fault change outside NVUE is carried into the pending copy: diff and apply do not undo it",
          "[sim][switch]") {
  sw::SwitchConfig cfg = star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless));
  cfg.interfaces[1].faults.delay = us(1);
  Star s = make_star(cfg, 91);
  // Staged before the fault change: the pending copy still has the delay.
  REQUIRE(s.sw->nv({"set", "qos", "roce", "mode", "lossy"}).ok());
  REQUIRE(clear_port_faults(*s.sw, 1).ok());
  // A storm added at run time (rocemu fault add sw1:swp3 pfc-storm prio 5).
  sw::SwitchConfig storm = s.sw->config();
  storm.interfaces[2].pfc_storm.enable = true;
  storm.interfaces[2].pfc_storm.priorities = 0x20;
  REQUIRE(s.sw->apply(storm).ok());

  const std::string diff = nv_text(*s.sw, {"config", "diff"});
  INFO(diff);
  CHECK_THAT(diff, Catch::Contains("mode: lossy"));
  CHECK_THAT(diff, !Catch::Contains("faults") && !Catch::Contains("delay") && !Catch::Contains("pfc-storm"));
  CHECK(nv_text(*s.sw, {"config", "apply"}) == "applied");
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossy);
  CHECK(!s.sw->config().interfaces[1].faults.any());
  CHECK(!s.sw->port_faults(1).configured().any());
  CHECK(s.sw->config().interfaces[2].pfc_storm.enable);

  // A change staged on the same port is kept (the user's), the rest rebased.
  REQUIRE(s.sw->nv({"set", "interface", "swp2", "fault", "loss", "0.25"}).ok());
  REQUIRE(clear_port_faults(*s.sw, 1).ok());
  const std::string kept = nv_text(*s.sw, {"config", "diff"});
  INFO(kept);
  CHECK_THAT(kept, Catch::Contains("loss: 0.25") && !Catch::Contains("pfc-storm"));
  // A pending copy the outside change makes equal to the running one is no change.
  REQUIRE(s.sw->nv({"config", "detach"}).ok());
  REQUIRE(s.sw->nv({"set", "interface", "swp1", "fault", "delay", "1us"}).ok());
  sw::SwitchConfig same = s.sw->config();
  same.interfaces[0].faults.delay = us(1);
  REQUIRE(s.sw->apply(same).ok());
  CHECK(nv_text(*s.sw, {"config", "diff"}).empty());
}

TEST_CASE("A fault setting changed outside NVUE follows the running config beside one staged on the same port",
          "[sim][switch]") {
  Star s = make_star(star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless)), 94);
  // rocemu fault ... link down on swp1, before anything is staged.
  sw::SwitchConfig down = s.sw->config();
  down.interfaces[0].faults.link_down = true;
  REQUIRE(s.sw->apply(down).ok());
  REQUIRE(s.sw->nv({"set", "interface", "swp1", "fault", "loss", "0.25"}).ok());
  // rocemu fault ... link up on swp1: link_down cleared outside NVUE.
  sw::SwitchConfig up = s.sw->config();
  up.interfaces[0].faults.link_down = false;
  REQUIRE(s.sw->apply(up).ok());
  const std::string diff = nv_text(*s.sw, {"config", "diff"});
  INFO(diff);
  CHECK_THAT(diff, Catch::Contains("loss: 0.25") && !Catch::Contains("link_down"));
  CHECK(nv_text(*s.sw, {"config", "apply"}) == "applied");
  CHECK(s.sw->config().interfaces[0].faults.loss == 0.25);
  CHECK(!s.sw->config().interfaces[0].faults.link_down);
  CHECK(!s.sw->port_faults(0).configured().link_down);
}

TEST_CASE("nv config apply of a QoS change keeps a port's drop rule where it was", "[sim][switch]") {
  sw::SwitchConfig cfg = star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless));
  DropRule r;
  r.qpn = 0x700;
  r.times = 3;  // drops the first three matching packets, then none
  cfg.interfaces[0].faults.drop.push_back(r);
  Star s = make_star(cfg, 92);
  FlowSpec f;
  f.dst = host_ip(1);
  f.qpn = 0x700;
  f.count = 20;
  f.rate_bps = 1'000'000'000ull;  // one packet every ~8.6 us
  f.start = us(10);
  s.host(0).add_flow(f);
  // The rule has used its three drops and packets pass again: apply then.
  REQUIRE(s.engine->run_until([&] { return s.host(1).received(0x700).packets >= 3; }, ms(5)));
  REQUIRE(s.sw->port_faults(0).find(0)->stats.dropped == 3);
  REQUIRE(s.host(1).received(0x700).packets < 10);
  REQUIRE(s.sw->nv({"set", "qos", "congestion-control", "traffic-class", "3", "probability", "50"}).ok());
  REQUIRE(s.sw->nv({"config", "apply"}).ok());
  s.engine->run_to_idle(ms(5));
  // The apply did not give the rule its three drops back.
  CHECK(s.host(1).received(0x700).packets == 17);
  CHECK(s.sw->port_faults(0).find(0)->stats.dropped == 3);
}

TEST_CASE("A change rolled back past validation leaves the XOFF being asserted asserted", "[sim][switch]") {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.buffer.size = 2'000'000;
  Star s = make_star(star_config(3, q), 93);
  for (int i = 0; i < 2; i++) {
    FlowSpec f;
    f.dst = host_ip(2);
    f.qpn = 0x30 + uint32_t(i);
    f.payload = 4096;
    f.start = us(30);
    f.stop = us(2000);
    s.host(i).add_flow(f);
  }
  REQUIRE(s.engine->run_until([&] { return s.sw->xoff_asserted(0, 3); }, us(1000)));
  const uint64_t frames = s.sw->pfc_tx_frames(0, 3);
  // Valid, but more host routes than the route table's tbl8 groups hold:
  // it fails past validation, after the QoS part was applied.
  sw::SwitchConfig bad = s.sw->config();
  bad.qos = sw::qos_roce_profile(sw::RoceMode::kLossy, bad.qos.buffer);
  for (int i = 0; i < 300; i++) {
    sw::Route r;
    r.prefix = *sw::IpPrefix::parse("172." + std::to_string(16 + i / 250) + "." + std::to_string(i % 250) + ".1/32");
    r.port = 2;
    bad.routes.push_back(r);
  }
  REQUIRE(bad.validate().ok());
  const Status st = s.sw->apply(bad);
  INFO(st.message());
  REQUIRE(!st.ok());
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossless);
  CHECK(s.sw->xoff_asserted(0, 3));
  CHECK(s.sw->xoff_asserted(1, 3));
  // No XON went out for the rolled-back change.
  s.engine->run_until(s.now() + ns(200));
  CHECK(s.sw->pfc_tx_frames(0, 3) == frames);
  CHECK(s.sw->xoff_asserted(0, 3));
}

TEST_CASE("nv action clear qos counters clears every port and says which", "[sim][switch]") {
  Star s = make_star(star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless)), 94);
  for (int i = 0; i < 3; i++) {
    FlowSpec f;
    f.dst = host_ip((i + 1) % 3);
    f.qpn = 0x40 + uint32_t(i);
    f.count = 20;
    f.start = us(10);
    s.host(i).add_flow(f);
  }
  s.engine->run_to_idle(ms(5));
  for (uint16_t p = 0; p < 3; p++) REQUIRE(s.sw->counters(p)[sw::PortCounters::tx_roce_packets] == 20);
  const std::string out = nv_text(*s.sw, {"action", "clear", "qos", "counters"});
  CHECK(out == "swp1: counters cleared\nswp2: counters cleared\nswp3: counters cleared\nAction succeeded");
  for (uint16_t p = 0; p < 3; p++) {
    CHECK(s.sw->counters(p)[sw::PortCounters::tx_roce_packets] == 0);
    CHECK(s.sw->counters(p)[sw::PortCounters::rx_roce_packets] == 0);
  }
  CHECK(nv_text(*s.sw, {"action", "clear", "interface", "swp2-3", "qos", "roce", "counters"}) ==
        "swp2: counters cleared\nswp3: counters cleared\nAction succeeded");
}
