// Head-of-line blocking and congestion spreading across two switches:
// PFC from a congested port backs up into the upstream switch and from
// there into the hosts, slowing an innocent flow that shares the paused
// priority but goes elsewhere; a flow on another priority is untouched.
//
//   A ---swp1\                       /swp2--- R1  (congested)
//             sw1 swp3 ===== swp1 sw2
//   B ---swp2/                       \swp3--- R2  (innocent destination)
//                                     \swp4--- C, swp5--- D
#include <catch2/catch.hpp>

#include <array>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

sw::IpPrefix prefix(const char* s) { return *sw::IpPrefix::parse(s); }

}  // namespace

TEST_CASE("HOL blocking and congestion spreading: the innocent TC3 flow slows, TC0 does not", "[sim][switch]") {
  auto engine = make_engine(51, 32768);
  sw::QosConfig qos = sw::qos_roce_profile(sw::RoceMode::kLossless);
  qos.buffer.size = 2'000'000;  // reach the steady state in a few hundred microseconds

  sw::SwitchConfig c1 = sw::SwitchConfig::with_ports(3);
  c1.mac = *wire::MacAddr::parse("02:53:57:01:00:00");
  c1.qos = qos;
  sw::SwitchConfig c2 = sw::SwitchConfig::with_ports(5);
  c2.mac = *wire::MacAddr::parse("02:53:57:02:00:00");
  c2.qos = qos;
  c1.interfaces[0].address = prefix("10.0.0.254/24");
  c1.interfaces[1].address = prefix("10.0.1.254/24");
  c2.interfaces[1].address = prefix("10.0.2.254/24");
  c2.interfaces[2].address = prefix("10.0.3.254/24");
  c2.interfaces[3].address = prefix("10.0.4.254/24");
  c2.interfaces[4].address = prefix("10.0.5.254/24");
  // The inter-switch link: static routes with the peer's port MAC.
  for (const char* p : {"10.0.2.0/24", "10.0.3.0/24", "10.0.4.0/24", "10.0.5.0/24"})
    c1.routes.push_back(sw::Route{prefix(p), 2, {}, c2.port_mac(0)});
  for (const char* p : {"10.0.0.0/24", "10.0.1.0/24"}) c2.routes.push_back(sw::Route{prefix(p), 0, {}, c1.port_mac(2)});

  auto& sw1 = engine->add<sw::Switch>("sw1", c1);
  auto& sw2 = engine->add<sw::Switch>("sw2", c2);
  auto host = [&](const char* name, int subnet, sw::Switch& s, uint16_t port) -> TestHost& {
    auto& h = engine->add<TestHost>(name, host_ip(subnet), host_mac(subnet), gateway_ip(subnet));
    REQUIRE(engine->connect(h, 0, s, port, LinkParams{}).ok());
    return h;
  };
  TestHost& a = host("A", 0, sw1, 0);
  TestHost& b = host("B", 1, sw1, 1);
  TestHost& r1 = host("R1", 2, sw2, 1);
  TestHost& r2 = host("R2", 3, sw2, 2);
  TestHost& c = host("C", 4, sw2, 3);
  TestHost& d = host("D", 5, sw2, 4);
  REQUIRE(engine->connect(sw1, 2, sw2, 0, LinkParams{}).ok());
  engine->run_until(us(20));

  const Time start = us(50), stop = us(3050);
  auto flow = [&](TestHost& h, int dst, uint32_t qpn, uint8_t dscp, uint64_t rate) {
    FlowSpec f;
    f.dst = host_ip(dst);
    f.qpn = qpn;
    f.dscp = dscp;
    f.payload = 4096;
    f.rate_bps = rate;
    f.start = start;
    f.stop = stop;
    return h.add_flow(f);
  };
  constexpr uint64_t G = 1'000'000'000ull;
  flow(c, 2, 0x501, 26, 0);                  // C -> R1 at line rate
  flow(d, 2, 0x505, 26, 0);                  // D -> R1 at line rate
  flow(a, 2, 0x502, 26, 0);                  // A -> R1 at line rate, through sw1
  const size_t b3 = flow(b, 3, 0x503, 26, 40 * G);  // B -> R2, RoCE TC3: innocent
  const size_t b0 = flow(b, 3, 0x504, 0, 20 * G);   // B -> R2, DSCP 0: TC0
  // Measure delivered rates over a window after the queues have filled.
  const Time t1 = us(1050), t2 = stop;
  engine->run_until(t1);
  auto delivered = [&] {
    return std::array<uint64_t, 4>{r2.received(0x503).packets, r2.received(0x504).packets,
                                   r1.received(0x502).packets, r1.received(0x501).packets};
  };
  const auto before = delivered();
  engine->run_until(t2);
  const auto after = delivered();
  engine->run_to_idle(ms(30));

  wire::PathHeaders path;
  const double frame_bits = double(wire_bytes(wire::roce_frame_len(path, wire::op::kWriteMiddle, 4096))) * 8;
  const double secs = to_seconds(t2 - t1);
  auto gbps = [&](int i) { return double(after[size_t(i)] - before[size_t(i)]) * frame_bits / secs / 1e9; };
  const double rate_b3 = gbps(0);
  const double rate_b0 = gbps(1);
  INFO("delivered: B on TC3 " << rate_b3 << " Gb/s, B on TC0 " << rate_b0 << " Gb/s, A " << gbps(2) << ", C "
                              << gbps(3));
  // sw2 pauses the inter-switch link's TC3 for all of it, though only A's
  // packets are stuck behind R1.
  CHECK(gbps(2) + rate_b3 < 75);
  CHECK(to_seconds(sw1.rx_pause_duration(2, 3, t2)) > 0.2 * to_seconds(t2 - start));
  // R1's 100G is shared by C, D and the inter-switch link; B's TC3 flow
  // to the idle R2 waits behind A's in sw1's paused queue.
  CHECK(rate_b3 < 0.8 * 40);          // slowed: paused with A's congested traffic
  CHECK(rate_b0 > 0.97 * 20);         // another priority: full rate
  CHECK(b.paused_for(3, stop) > us(500));
  CHECK(b.paused_for(0, stop) == Duration(0));
  // Congestion spread hop by hop: sw2 paused sw1, sw1 paused A and B.
  CHECK(sw2.pfc_tx_frames(0, 3) > 0);
  CHECK(sw1.pfc_rx_frames(2, 3) > 0);
  CHECK(sw1.pfc_tx_frames(0, 3) > 0);
  CHECK(sw1.pfc_tx_frames(1, 3) > 0);
  // Lossless all the way: every TC3 packet arrived.
  CHECK(r2.received(0x503).packets == b.sent(b3));
  CHECK(r2.received(0x504).packets == b.sent(b0));
  CHECK(r1.received(0x501).packets == c.sent(0));
  CHECK(r1.received(0x505).packets == d.sent(0));
  CHECK(r1.received(0x502).packets == a.sent(0));
  CHECK(sw1.queue_counters(2, 3)[sw::QueueCounters::drop_packets] == 0);
  CHECK(sw2.queue_counters(1, 3)[sw::QueueCounters::drop_packets] == 0);
}
