// The most common RoCE misconfiguration: hosts mark DSCP 24 instead of
// 26. The switch puts the traffic in TC0: no PFC protection, drops under
// incast, and the counters call it non-RoCE.
#include <catch2/catch.hpp>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

struct IncastResult {
  uint64_t sent = 0, received = 0;
};

IncastResult run_incast(Star& s, uint8_t dscp) {
  for (int i = 0; i < 2; i++) {
    FlowSpec f;
    f.dst = host_ip(2);
    f.qpn = 0x400 + uint32_t(i);
    f.dscp = dscp;
    f.payload = 4096;
    f.start = us(30);
    f.stop = us(1030);
    s.host(i).add_flow(f);
  }
  s.engine->run_to_idle(ms(20));
  IncastResult r;
  for (int i = 0; i < 2; i++) {
    r.sent += s.host(i).sent(0);
    if (s.host(2).has_received(0x400 + uint32_t(i))) r.received += s.host(2).received(0x400 + uint32_t(i)).packets;
  }
  return r;
}

}  // namespace

TEST_CASE("DSCP mismatch: RoCE marked 24 lands in TC0, unprotected, counted as non-RoCE", "[sim][switch]") {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.buffer.size = 4'000'000;

  Star bad = make_star(star_config(3, q), 41);
  const IncastResult r = run_incast(bad, 24);
  sw::Switch& sw = *bad.sw;
  INFO("sent " << r.sent << " received " << r.received);
  for (uint16_t p = 0; p < 2; p++) {
    CHECK(sw.counters(p)[sw::PortCounters::rx_roce_packets] == 0);
    CHECK(sw.counters(p)[sw::PortCounters::rx_non_roce_packets] == bad.host(p).sent(0));
    CHECK(sw.pfc_tx_frames(p, 3) == 0);  // no PFC: TC0 is lossy
    CHECK(bad.host(p).pfc_received() == 0);
  }
  const uint64_t drops = sw.queue_counters(2, 0)[sw::QueueCounters::drop_packets];
  CHECK(drops > 0);
  CHECK(r.received + drops == r.sent);
  CHECK(sw.queue_counters(2, 3)[sw::QueueCounters::packets] == 0);
  CHECK(sw.counters(2)[sw::PortCounters::tx_roce_packets] == 0);
  CHECK(sw.counters(2)[sw::PortCounters::tx_non_roce_packets] == r.received);
  CHECK(sw.counters(2)[sw::PortCounters::tx_non_roce_no_buffer_discard] == drops);
  const auto c = sw.show_roce_counters(0);
  CHECK(c["rx-roce-stats"]["roce-packets"] == 0);
  CHECK(c["rx-non-roce-stats"]["non-roce-packets"].get<uint64_t>() == bad.host(0).sent(0));

  // The same hosts marking 26: RoCE, lossless, PFC, nothing lost.
  Star good = make_star(star_config(3, q), 41);
  const IncastResult g = run_incast(good, 26);
  CHECK(g.received == g.sent);
  CHECK(good.sw->pfc_tx_frames(0, 3) > 0);
  CHECK(good.sw->counters(0)[sw::PortCounters::rx_roce_packets] == good.host(0).sent(0));
  CHECK(good.sw->queue_counters(2, 3)[sw::QueueCounters::drop_packets] == 0);
}
