// 4:1 incast at line rate with no congestion control in the hosts:
// lossless (PFC keeps TC3 drop-free) versus lossy (drops, or trimming).
#include <catch2/catch.hpp>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

// Hosts 0..3 send to host 4 from `start` until `stop`.
void start_incast(Star& s, Time start, Time stop, uint32_t payload = 4096, uint8_t dscp = 26) {
  for (int i = 0; i < 4; i++) {
    FlowSpec f;
    f.dst = host_ip(4);
    f.qpn = 0x100 + uint32_t(i);
    f.dscp = dscp;
    f.payload = payload;
    f.start = start;
    f.stop = stop;
    s.host(i).add_flow(f);
  }
}

uint64_t total_sent(Star& s) {
  uint64_t n = 0;
  for (int i = 0; i < 4; i++) n += s.host(i).sent(0);
  return n;
}

uint64_t total_received(Star& s, bool trimmed_only = false) {
  uint64_t n = 0;
  for (int i = 0; i < 4; i++) {
    const auto& st = s.host(4).received(0x100 + uint32_t(i));
    n += trimmed_only ? st.trimmed : st.packets;
  }
  return n;
}

}  // namespace

TEST_CASE("4:1 incast, lossless: PFC upstream, no TC3 drop, pauses match fill and drain", "[sim][switch]") {
  Star s = make_star(star_config(5, sw::qos_roce_profile(sw::RoceMode::kLossless)), 11);
  const Time start = us(50), stop = us(2050);
  start_incast(s, start, stop);
  s.engine->run_until(stop);
  const uint64_t queued_at_stop = s.sw->mmu().queue(4, 3).total();
  s.engine->run_to_idle(ms(20));

  const uint64_t sent = total_sent(s);
  INFO("sent " << sent << ", queued at stop " << queued_at_stop);
  // Nothing lost: every packet sent arrived, and the switch counted no drop.
  CHECK(total_received(s) == sent);
  CHECK(s.sw->queue_counters(4, 3)[sw::QueueCounters::drop_packets] == 0);
  for (uint16_t p = 0; p < 4; p++) {
    CHECK(s.sw->counters(p)[sw::PortCounters::rx_roce_no_buffer_discard] == 0);
    CHECK(s.sw->counters(p)[sw::PortCounters::rx_roce_packets] == s.host(p).sent(0));
  }
  CHECK(s.sw->counters(4)[sw::PortCounters::tx_roce_packets] == sent);

  // PFC went upstream on priority 3 only, and the hosts paused.
  const double active = to_seconds(stop - start);
  for (uint16_t p = 0; p < 4; p++) {
    INFO("port " << p);
    CHECK(s.sw->pfc_tx_frames(p, 3) >= 2);
    CHECK(s.sw->pfc_tx_frames(p, 0) == 0);
    CHECK(s.host(p).pfc_received() == s.sw->pfc_tx_frames(p, 3));
    // Four senders share one 100G port: each may send a quarter of the
    // time, so XOFF is asserted about three quarters of the run.
    const double xoff = to_seconds(s.sw->tx_pause_duration(p, 3, stop)) / active;
    CHECK(xoff == Approx(0.75).margin(0.06));
    // The switch's count and the host's pause agree.
    CHECK(to_seconds(s.host(p).paused_for(3, stop)) / active == Approx(xoff).margin(0.02));
  }
  // The egress port ran at line rate while the queue was backlogged ...
  const auto& first = s.host(4).received(0x100);
  Time last{0}, begin = kTimeNever;
  uint64_t bytes = 0;
  for (int i = 0; i < 4; i++) {
    const auto& st = s.host(4).received(0x100 + uint32_t(i));
    last = std::max(last, st.last);
    begin = std::min(begin, st.first);
    bytes += st.bytes;
  }
  (void)first;
  const double gbps = double(bytes + 24 * sent) * 8 / to_seconds(last - begin) / 1e9;
  CHECK(gbps == Approx(100).margin(1.5));
  // ... and drained what it held at `stop` at line rate.
  const double drain = to_seconds(last - stop);
  const double expect = double(queued_at_stop) * (4096.0 + 24 + 62) / (4096.0 + 62) * 8 / double(k100G);
  CHECK(drain == Approx(expect).epsilon(0.05));
  // The queue stayed within the four PGs' thresholds plus headroom.
  const auto& q = s.sw->mmu().queue(4, 3);
  uint64_t bound = 0;
  for (uint16_t p = 0; p < 4; p++) bound += s.sw->mmu().pg(p, 3).headroom_size;
  bound += s.sw->mmu().ingress_pool(sw::kLosslessPool).size;
  CHECK(q.watermark > 150000);
  CHECK(q.watermark < bound);
  // NVUE counters tell the same story.
  const auto c = s.sw->show_roce_counters(0);
  CHECK(c["tx-pfc-stats"]["pause-packets"] == s.sw->pfc_tx_frames(0, 3));
  CHECK(c["rx-roce-stats"]["no-buffer-discard"] == 0);
  CHECK(c["rx-roce-stats"]["pg-max-usage"].get<uint64_t>() > 0);
  CHECK(s.sw->show_roce_counters(4)["tx-roce-stats"]["roce-packets"] == sent);
}

TEST_CASE("4:1 incast, lossless with the cable length set too short: no-buffer-discard", "[sim][switch]") {
  // 10 us of fibre (about 2 km) each way, but headroom sized for 1 m.
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.pfc.cable_length = 1;
  Star s = make_star(star_config(5, q), 12, LinkParams{.delay = us(10)});
  start_incast(s, us(50), us(1050));
  s.engine->run_to_idle(ms(20));
  uint64_t discards = 0;
  for (uint16_t p = 0; p < 4; p++) discards += s.sw->counters(p)[sw::PortCounters::rx_roce_no_buffer_discard];
  CHECK(discards > 0);
  CHECK(total_received(s) + discards == total_sent(s));

  // Sized for the real cable (2 km), the same run loses nothing.
  q.pfc.cable_length = 2100;
  Star ok = make_star(star_config(5, q), 12, LinkParams{.delay = us(10)});
  start_incast(ok, us(50), us(1050));
  ok.engine->run_to_idle(ms(20));
  for (uint16_t p = 0; p < 4; p++) CHECK(ok.sw->counters(p)[sw::PortCounters::rx_roce_no_buffer_discard] == 0);
  CHECK(total_received(ok) == total_sent(ok));
}

TEST_CASE("4:1 incast, lossy: TC3 drops and counts; with trimming the receiver gets the headers", "[sim][switch]") {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossy);
  q.buffer.size = 4'000'000;
  {
    Star s = make_star(star_config(5, q), 13);
    start_incast(s, us(50), us(1050));
    s.engine->run_to_idle(ms(20));
    const auto& qc = s.sw->queue_counters(4, 3);
    const uint64_t drops = qc[sw::QueueCounters::drop_packets];
    INFO("drops " << drops << " sent " << total_sent(s));
    CHECK(drops > 0);
    CHECK(s.sw->counters(4)[sw::PortCounters::tx_roce_no_buffer_discard] == drops);
    CHECK(total_received(s) + drops == total_sent(s));
    for (uint16_t p = 0; p < 5; p++) CHECK(s.sw->pfc_tx_frames(p, 3) == 0);
    CHECK(s.sw->show_roce_counters(4)["tx-roce-stats"]["unicast-no-buffer-discard"] == drops);
    CHECK(total_received(s, true) == 0);
  }
  {
    q.trim.enable = true;
    Star s = make_star(star_config(5, q), 13);
    start_incast(s, us(50), us(1050));
    s.engine->run_to_idle(ms(20));
    const auto& qc = s.sw->queue_counters(4, 3);
    const uint64_t trimmed = qc[sw::QueueCounters::trim_packets];
    INFO("trimmed " << trimmed);
    CHECK(trimmed > 0);
    CHECK(qc[sw::QueueCounters::trim_drop_packets] == 0);
    // Trimmed packets leave from the trim priority's queue (SP4 -> TC0 here).
    CHECK(s.sw->queue_counters(4, 0)[sw::QueueCounters::trim_sent_packets] == trimmed);
    CHECK(s.sw->counters(4)[sw::PortCounters::trim_sent_packets] == trimmed);
    // Every packet arrives, whole or as a trimmed header with a good ICRC.
    // Every packet arrives, whole or as a trimmed header with a good ICRC,
    // except those the ingress PG refused (trimming acts at egress
    // admission, as SONiC's queue discard action does).
    uint64_t ingress_drops = 0;
    for (uint16_t p = 0; p < 4; p++) ingress_drops += s.sw->counters(p)[sw::PortCounters::rx_roce_no_buffer_discard];
    CHECK(total_received(s) + ingress_drops == total_sent(s));
    CHECK(ingress_drops < trimmed / 10);
    CHECK(total_received(s, true) == trimmed);
    for (int i = 0; i < 4; i++) CHECK(s.host(4).received(0x100 + uint32_t(i)).icrc_errors == 0);
    // (With the transport issue: trimmed packets trigger immediate NAKs.)
  }
}
