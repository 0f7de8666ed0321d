// PFC storms: a receiver that asserts PFC for ever, the watchdog that
// detects the stuck queue within the detection time and drops or forwards
// as configured, then restores it once the storm is over; and a switch
// port made to emit a storm by configuration.
#include <catch2/catch.hpp>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

struct StormRun {
  Time storm_start = ms(1), storm_end = ms(150);
  Time detected{0};
  uint64_t received_during_storm = 0, received_after_restore = 0, received_before = 0;
};

StormRun run_storm(Star& s) {
  StormRun r;
  TestHost& tx = s.host(0);
  TestHost& rx = s.host(1);
  FlowSpec f;
  f.dst = host_ip(1);
  f.qpn = 0x600;
  f.payload = 1024;
  f.rate_bps = 1'000'000'000ull;
  f.start = us(30);
  tx.add_flow(f);
  s.engine->run_until(r.storm_start);
  r.received_before = rx.received(0x600).packets;
  rx.hold_pause(0x08, r.storm_start);  // the storm: XOFF refreshed every 100 us
  s.engine->run_until([&] { return s.sw->watchdog_storm(1, 3); }, ms(100));
  r.detected = s.now();
  const uint64_t at_detect = rx.received(0x600).packets;
  s.engine->run_until(r.storm_end);
  r.received_during_storm = rx.received(0x600).packets - at_detect;
  rx.release_pause(r.storm_end);
  s.engine->run_until(ms(260));
  r.received_after_restore = rx.received(0x600).packets - at_detect - r.received_during_storm;
  return r;
}

sw::QosConfig watchdog_qos(sw::WatchdogAction action) {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.watchdog.enable = true;
  q.watchdog.detection_time = ms(20);
  q.watchdog.restoration_time = ms(20);
  q.watchdog.polling_interval = ms(5);
  q.watchdog.action = action;
  return q;
}

}  // namespace

TEST_CASE("PFC storm: the watchdog detects it in time, drops, and restores", "[sim][switch]") {
  Star s = make_star(star_config(2, watchdog_qos(sw::WatchdogAction::kDrop)), 61);
  const StormRun r = run_storm(s);
  const auto& wd = s.sw->watchdog_counters(1, 3);
  INFO("detected at " << to_us(r.detected) << " us");
  CHECK(r.received_before > 0);
  // Detected once stuck for the detection time, at the next poll.
  CHECK(r.detected >= r.storm_start + ms(20));
  CHECK(r.detected <= r.storm_start + ms(20) + ms(5) + us(10));
  CHECK(wd[sw::WatchdogCounters::storm_detected] == 1);
  // drop: the queue was flushed and new arrivals for it dropped; the
  // sender was released (XON) rather than held by the storm.
  CHECK(wd[sw::WatchdogCounters::tx_drop] > 100);
  CHECK(r.received_during_storm == 0);
  CHECK(s.sw->counters(1)[sw::PortCounters::drop_pfc_watchdog] + s.sw->counters(0)[sw::PortCounters::drop_pfc_watchdog] >
        0);
  CHECK(s.host(0).paused_for(3, ms(150)) < ms(40));
  // Restored once no PFC came for the restoration time, and traffic flows.
  CHECK(wd[sw::WatchdogCounters::storm_restored] == 1);
  CHECK(!s.sw->watchdog_storm(1, 3));
  CHECK(r.received_after_restore > 50);
  const auto show = s.sw->show_pfc_watchdog();
  REQUIRE(show["queues"].size() == 2);  // TC3 of swp1 and swp2
  const auto& q = show["queues"][1];
  CHECK(q["interface"] == "swp2");
  CHECK(q["traffic-class"] == 3);
  CHECK(q["storm-detected"] == 1);
  CHECK(q["status"] == "operational");
}

TEST_CASE("PFC storm with action forward: received PFC is ignored while in storm", "[sim][switch]") {
  Star s = make_star(star_config(2, watchdog_qos(sw::WatchdogAction::kForward)), 62);
  const StormRun r = run_storm(s);
  const auto& wd = s.sw->watchdog_counters(1, 3);
  CHECK(wd[sw::WatchdogCounters::storm_detected] == 1);
  CHECK(r.detected <= r.storm_start + ms(25) + us(10));
  CHECK(r.received_during_storm > 1000);  // 1 Gb/s kept flowing to the storming host
  CHECK(wd[sw::WatchdogCounters::tx_ok] >= r.received_during_storm);
  CHECK(wd[sw::WatchdogCounters::tx_drop] == 0);
  CHECK(wd[sw::WatchdogCounters::storm_restored] == 1);
}

TEST_CASE("Without the watchdog a storm stops the queue and backs up into the sender", "[sim][switch]") {
  sw::QosConfig q = watchdog_qos(sw::WatchdogAction::kDrop);
  q.watchdog.enable = false;
  q.buffer.size = 2'000'000;
  Star s = make_star(star_config(2, q), 63);
  const StormRun r = run_storm(s);
  CHECK(s.sw->watchdog_counters(1, 3)[sw::WatchdogCounters::storm_detected] == 0);
  CHECK(r.received_during_storm == 0);
  CHECK(s.host(0).paused_for(3, ms(150)) > ms(100));  // congestion spread to the sender
}

TEST_CASE("A switch port configured to storm emits PFC continuously", "[sim][switch]") {
  sw::SwitchConfig cfg = star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless));
  cfg.interfaces[0].pfc_storm.enable = true;
  cfg.interfaces[0].pfc_storm.priorities = 0x08;
  Star s = make_star(cfg, 64);
  FlowSpec f;
  f.dst = host_ip(1);
  f.qpn = 0x700;
  f.payload = 1024;
  f.start = us(30);
  s.host(0).add_flow(f);
  s.engine->run_until(ms(2));
  // 65535 quanta at 100G last 335.5 us; refreshed at half that.
  CHECK(s.sw->pfc_tx_frames(0, 3) >= 10);
  CHECK(s.host(0).pfc_received() == s.sw->pfc_tx_frames(0, 3));
  CHECK(s.host(0).sent(0) < 5);  // held off from the start (ARP and a packet or two)
  CHECK(s.host(0).paused_for(3, ms(2)) > ms(1));
  // Unset the storm through the NVUE path: the host resumes.
  REQUIRE(s.sw->nv({"unset", "interface", "swp1", "pfc-storm"}).ok());
  REQUIRE(s.sw->nv({"config", "apply"}).ok());
  s.engine->run_until(ms(3));
  CHECK(s.host(0).sent(0) > 1000);
}
