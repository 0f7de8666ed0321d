// CNPs ride their own strict-priority class (DSCP 48 -> SP6 -> TC6) that
// PFC does not pause: crossing a port whose TC3 is full, a CNP waits only
// for the frame already on the wire.
#include <catch2/catch.hpp>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

TEST_CASE("A CNP crossing a port with a full TC3 is delayed only by serialisation", "[sim][switch]") {
  Star s = make_star(star_config(4, sw::qos_roce_profile(sw::RoceMode::kLossless)), 31);
  // Hosts 0 and 1 fill TC3 toward host 2 (2:1, line rate, no CC).
  for (int i = 0; i < 2; i++) {
    FlowSpec f;
    f.dst = host_ip(2);
    f.qpn = 0x200 + uint32_t(i);
    f.payload = 4096;
    f.start = us(30);
    f.stop = us(1500);
    s.host(i).add_flow(f);
  }
  s.engine->run_until(us(800));
  const uint64_t backlog = s.sw->mmu().queue(2, 3).total();
  REQUIRE(backlog > 500000);

  wire::PathHeaders path;
  const uint32_t data_frame = wire::roce_frame_len(path, wire::op::kWriteMiddle, 4096);
  const uint32_t cnp_frame = wire::roce_frame_len(path, wire::op::kCnp, wire::kCnpPadLen);
  const Duration prop = us(1);  // the fixture's links
  const Duration ser_cnp = serialization_time(wire_bytes(cnp_frame), k100G);
  const Duration ser_data = serialization_time(wire_bytes(data_frame), k100G);
  // host 3 -> wire -> switch -> (wait for the frame on the wire) -> wire -> host 2
  const Duration bound = ser_cnp + prop + ser_data + ser_cnp + prop;

  auto send_cnp = [&](uint32_t qpn, Time at) {
    FlowSpec c;
    c.dst = host_ip(2);
    c.qpn = qpn;
    c.cnp = true;
    c.count = 1;
    c.start = at;
    s.host(3).add_flow(c);
    REQUIRE(s.engine->run_until([&] { return s.host(2).has_received(qpn); }, at + ms(1)));
    return s.host(2).received(qpn).first - at;
  };
  const Duration cnp_delay = send_cnp(0x900, us(900));
  INFO("CNP " << to_us(cnp_delay) << " us, bound " << to_us(bound) << " us, TC3 backlog " << backlog << " B");
  CHECK(cnp_delay <= bound);
  CHECK(cnp_delay >= ser_cnp + prop + ser_cnp + prop);
  // The data behind which it overtook waited for the whole TC3 queue.
  const Duration data_delay = s.host(2).received(0x200).latency_max;
  CHECK(data_delay > us(40));
  CHECK(cnp_delay * 10 < data_delay);

  // PFC on priority 3 from the receiver stops TC3, not the CNP class.
  s.host(2).hold_pause(0x08, us(1000));
  const Duration paused_delay = send_cnp(0x901, us(1010));
  CHECK(paused_delay <= bound);
  CHECK(s.sw->queue_length(2, 3) > 0);
  s.host(2).release_pause(us(1100));
  s.engine->run_to_idle(ms(10));
  CHECK(s.sw->counters(2)[sw::PortCounters::tx_cnp_packets] == 2);
  CHECK(s.sw->show_roce_counters(2)["tx-cnp-stats"]["cnp-packets"] == 2);
  CHECK(s.sw->queue_counters(2, 6)[sw::QueueCounters::packets] == 2);
}

TEST_CASE("A receiver's CNPs for CE-marked packets reach the senders on the CNP class", "[sim][switch]") {
  Star s = make_star(star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless)), 32);
  s.host(2).cnp_on_ce = true;
  for (int i = 0; i < 2; i++) {
    FlowSpec f;
    f.dst = host_ip(2);
    f.qpn = 0x210 + uint32_t(i);
    f.payload = 4096;
    f.start = us(30);
    f.stop = us(500);
    s.host(i).add_flow(f);
  }
  s.engine->run_to_idle(ms(10));
  uint64_t ce = 0;
  for (int i = 0; i < 2; i++) ce += s.host(2).received(0x210 + uint32_t(i)).ce;
  CHECK(ce > 0);
  CHECK(s.host(2).cnps_sent() == ce);
  uint64_t cnps = 0;
  for (uint16_t p = 0; p < 2; p++) {
    const uint32_t qpn = 0x210 + p;
    REQUIRE(s.host(p).has_received(qpn));
    cnps += s.host(p).received(qpn).packets;
    CHECK(s.sw->counters(p)[sw::PortCounters::tx_cnp_packets] == s.host(p).received(qpn).packets);
  }
  CHECK(cnps == ce);
  CHECK(s.sw->counters(2)[sw::PortCounters::rx_non_roce_packets] == ce);  // CNPs are not the RoCE PG
}
