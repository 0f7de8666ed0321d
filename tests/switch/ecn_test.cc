// ECN marking follows the WRED line: the receiver holds the switch's TC3
// paused with PFC so the queue grows packet by packet to known depths,
// then lets it drain and reads the CE marks in order.
#include <catch2/catch.hpp>

#include <cmath>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

TEST_CASE("ECN: mark fraction at fixed queue depths follows the WRED line", "[sim][switch]") {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.congestion[3].wred = {150000, 1500000, 40};  // a band whose line is not 0/1 everywhere
  Star s = make_star(star_config(2, q), 21);
  TestHost& tx = s.host(0);
  TestHost& rx = s.host(1);
  rx.record_marks(true);

  const uint32_t payload = 1024;
  wire::PathHeaders path;
  const uint32_t frame = wire::roce_frame_len(path, wire::op::kWriteMiddle, payload);
  const int per_cycle = 1800;  // up to 1.95 MB: past max-threshold
  const int cycles = 12;
  uint64_t expected = 0;
  for (int c = 0; c < cycles; c++) {
    const Time t = s.now();
    rx.hold_pause(0x08, t);  // XOFF priority 3 toward the switch
    FlowSpec f;
    f.dst = host_ip(1);
    f.qpn = 0x300;
    f.payload = payload;
    f.count = per_cycle;
    f.start = t + us(5);
    tx.add_flow(f);
    expected += per_cycle;
    s.engine->run_until(t + us(5) + serialization_time(wire_bytes(frame), 100'000'000'000ull) * per_cycle +
                        us(5));
    REQUIRE(s.sw->queue_length(1, 3) == uint32_t(per_cycle));
    rx.release_pause(s.now());
    REQUIRE(s.engine->run_until([&] { return rx.has_received(0x300) && rx.received(0x300).packets == expected; },
                                s.now() + ms(5)));
  }
  const auto& marks = rx.received(0x300).marks;
  REQUIRE(marks.size() == size_t(per_cycle) * cycles);

  // Packet k of a cycle saw k packets ahead of it in the queue.
  const sw::WredProfile& w = q.congestion[3].wred;
  constexpr int kBins = 12;
  const double bin_bytes = 150000.0;
  double n[kBins + 1] = {}, marked[kBins + 1] = {}, expect[kBins + 1] = {};
  for (size_t i = 0; i < marks.size(); i++) {
    const uint64_t depth = uint64_t(i % per_cycle) * frame;
    const int b = std::min(kBins, int(double(depth) / bin_bytes));
    n[b]++;
    marked[b] += marks[i];
    expect[b] += w.probability_at(depth);
  }
  CHECK(marked[0] == 0);  // below min-threshold nothing is marked
  for (int b = 0; b <= kBins; b++) {
    if (n[b] == 0) continue;
    const double p = expect[b] / n[b];
    const double got = marked[b] / n[b];
    const double sigma = std::sqrt(std::max(p * (1 - p), 1e-6) / n[b]);
    INFO("depth " << b * bin_bytes << ".. samples " << n[b] << " expected " << p << " got " << got);
    CHECK(std::abs(got - p) <= 4 * sigma + 1e-9);
  }
  // Beyond max-threshold every ECT packet is marked.
  CHECK(marked[kBins] == n[kBins]);
  CHECK(s.sw->counters(1)[sw::PortCounters::tx_ecn_marked_packets] == rx.received(0x300).ce);
  CHECK(s.sw->queue_counters(1, 3)[sw::QueueCounters::ecn_marked_packets] == rx.received(0x300).ce);
}
