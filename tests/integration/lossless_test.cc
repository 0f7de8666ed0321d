// Lossless RoCE with real NICs: a 4:1 incast of RDMA WRITEs through the
// switch in `qos roce mode lossless`. The switch sends PFC upstream, the
// NICs pause the priority of their QPs, nothing is lost and the
// bottleneck runs at line rate; the switch's ECN marks reach the
// receiving NIC; and the run is deterministic for a seed.
#include <catch2/catch.hpp>

#include "tests/integration/incast.h"

using namespace rocemu;
using namespace rocemu::test;
using NC = nic::NicCounters;
using QC = sw::QueueCounters;
using PC = sw::PortCounters;

namespace {

constexpr double kLinkGbps = 100;

}  // namespace

TEST_CASE("Lossless incast with real NICs: PFC pauses the NICs, nothing is lost, the bottleneck runs at line rate",
          "[sim][integration][pfc]") {
  StarSpec sp;
  sp.seed = 21;
  sp.roce_mode = "lossless";
  auto star = make_star(sp);
  Star& s = *star;
  const IncastResult r = run_incast(s, big_incast());
  REQUIRE(r.finished);
  REQUIRE(r.failure.empty());  // every completion good, every byte in place

  // Nothing dropped on TC3, nowhere.
  CHECK(s.sw->queue_counters(kIncastBottleneck, 3)[QC::drop_packets] == 0);
  for (uint16_t p = 0; p < 5; p++) {
    INFO(sw::port_name(p));
    CHECK(s.sw->counters(p)[PC::rx_roce_no_buffer_discard] == 0);
    CHECK(s.sw->counters(p)[PC::tx_roce_no_buffer_discard] == 0);
    CHECK(s.sw->counters(p)[PC::rx_non_roce_packets] == 0);  // the NICs mark DSCP 26
  }
  CHECK(s.sw->show_roce_counters(kIncastBottleneck)["tx-roce-stats"]["unicast-no-buffer-discard"] == 0);
  // ... so no retransmission, NAK or timeout at the NICs.
  CHECK(s.nic_sum(0, 4, NC::retransmitted_packets) == 0);
  CHECK(s.nic_sum(0, 4, NC::local_ack_timeout_err) == 0);
  CHECK(s.nic_sum(0, 4, NC::packet_seq_err) == 0);
  CHECK(s.nic_counter(4, NC::out_of_sequence) == 0);
  CHECK(s.nic_counter(4, NC::nak_seq_sent) == 0);
  // Every data packet the senders sent crossed the switch to the receiver.
  uint64_t rx_data = 0;
  for (uint16_t p = 0; p < 4; p++) rx_data += s.sw->counters(p)[PC::rx_roce_packets];
  CHECK(rx_data == s.nic_sum(0, 4, NC::tx_roce_packets));
  CHECK(s.sw->counters(kIncastBottleneck)[PC::tx_roce_packets] == rx_data);
  CHECK(s.nic_counter(4, NC::rx_roce_packets) == rx_data);

  // PFC went to every sender on priority 3 only, and each NIC honoured it:
  // it counted every frame and stayed paused as long as the switch held
  // XOFF for its port (the pause timer from the quanta, ended by XON).
  const double active = to_seconds(r.completion());
  for (int i = 0; i < 4; i++) {
    INFO("sender h" << i);
    const uint16_t port = uint16_t(i);
    CHECK(s.sw->pfc_tx_frames(port, 3) >= 2);
    for (uint8_t prio = 0; prio < 8; prio++)
      if (prio != 3) CHECK(s.sw->pfc_tx_frames(port, prio) == 0);
    CHECK(s.nic_counter(i, NC::rx_pfc_frames) == s.sw->pfc_tx_frames(port, 3));
    const double paused = double(s.nic_counter(i, NC::tx_pfc_paused_time_ps)) * 1e-12;
    const double xoff = to_seconds(s.sw->tx_pause_duration(port, 3, s.now()));
    INFO("paused " << paused * 1e6 << " us, switch XOFF " << xoff * 1e6 << " us of " << active * 1e6);
    CHECK(xoff > 0.2 * active);
    CHECK(paused == Approx(xoff).margin(0.01 * active));
    // ethtool's per-priority view of the same (mlx5 rx_prio3_pause ...):
    // the frames, the pause in microseconds, one XON transition at most
    // per frame; nothing on the other priorities.
    const nic::Nic& n = s.nic(i);
    using PC3 = nic::NicPrioCounters;
    CHECK(n.prio_counter(PC3::rx_pause, 3, s.now()) == s.sw->pfc_tx_frames(port, 3));
    const double paused_us = double(n.prio_counter(PC3::rx_pause_duration, 3, s.now()));
    CHECK(paused_us == Approx(xoff * 1e6).margin(0.01 * active * 1e6 + 1));
    CHECK(paused_us == Approx(paused * 1e6).margin(1));  // the pause has run out: all of it is past
    const uint64_t xon = n.prio_counter(PC3::rx_pause_transition, 3, s.now());
    CHECK(xon >= 1);
    CHECK(xon <= s.sw->pfc_tx_frames(port, 3));
    for (int prio = 0; prio < 8; prio++) {
      if (prio == 3) continue;
      CHECK(n.prio_counter(PC3::rx_pause, prio, s.now()) == 0);
      CHECK(n.prio_counter(PC3::rx_pause_duration, prio, s.now()) == 0);
    }
  }
  CHECK(s.nic_counter(4, NC::rx_pfc_frames) == 0);  // the receiver's link was never congested
  CHECK(s.sw->show_roce_counters(0)["tx-pfc-stats"]["pause-packets"] == s.sw->pfc_tx_frames(0, 3));

  // The bottleneck ran at line rate: frames on the wire (Ethernet preamble,
  // FCS and gap included) within 2 % of 100 Gbit/s from the first WRITE
  // posted to the last completion, and the payload within 3 %.
  const auto& c4 = s.sw->counters(kIncastBottleneck);
  const double wire_gbps = double(c4[PC::tx_roce_bytes] + 24 * c4[PC::tx_roce_packets]) * 8 / active / 1e9;
  INFO("completion " << active * 1e6 << " us, goodput " << r.goodput_gbps() << " Gbit/s, wire " << wire_gbps
                     << " Gbit/s, PFC frames to h0 " << s.sw->pfc_tx_frames(0, 3));
  CHECK(wire_gbps > 0.98 * kLinkGbps);
  CHECK(wire_gbps <= kLinkGbps);
  CHECK(r.goodput_gbps() > 0.97 * 4096.0 / (4096 + 82) * kLinkGbps);
}

TEST_CASE("ECN marks from the switch reach the receiving NIC", "[sim][integration][ecn]") {
  // The same lossless incast: TC3 sits far above the ECN band (150 KB ..
  // 1.5 MB, every ECT packet marked above it). The NICs run without
  // congestion control here (dcqcn_test.cc has it); what is checked is
  // that the receiver sees and counts the marks.
  StarSpec sp;
  sp.seed = 22;
  auto star = make_star(sp);
  Star& s = *star;
  const IncastResult r = run_incast(s, big_incast());
  REQUIRE(r.failure.empty());
  const uint64_t marked = s.sw->counters(kIncastBottleneck)[PC::tx_ecn_marked_packets];
  INFO("marked " << marked << " of " << s.sw->counters(kIncastBottleneck)[PC::tx_roce_packets]);
  CHECK(marked > 0);
  CHECK(s.sw->queue_counters(kIncastBottleneck, 3)[QC::ecn_marked_packets] == marked);
  CHECK(s.sw->show_roce_counters(kIncastBottleneck)["tx-ecn-stats"]["ecn-marked-packets"] == marked);
  // Every mark arrives: nothing is lost after marking in lossless mode.
  CHECK(s.nic_counter(4, NC::np_ecn_marked_roce_packets) == marked);
  // ACKs travel uncongested: the senders see no marks.
  CHECK(s.nic_sum(0, 4, NC::np_ecn_marked_roce_packets) == 0);

  // With ECN off on TC3 nothing is marked, and the NIC counts nothing.
  sp.extra_qos = "      congestion-control: {3: {ecn: false}}\n";
  auto off = make_star(sp);
  const IncastResult r2 = run_incast(*off, big_incast());
  REQUIRE(r2.failure.empty());
  CHECK(off->sw->counters(kIncastBottleneck)[PC::tx_ecn_marked_packets] == 0);
  CHECK(off->nic_counter(4, NC::np_ecn_marked_roce_packets) == 0);
}

namespace {

struct RecoveryOutcome {
  std::map<std::string, uint64_t> counters;
  std::vector<Time> done;
  std::string failure;
};

// The trimming scenario (lossy, 1 MB buffer, go-back-N): trims, NAKs,
// rewinds, timeouts and RNG-drawn ECN marks all depend on exact timing.
RecoveryOutcome trimming_run(uint64_t seed) {
  StarSpec sp;
  sp.seed = seed;
  sp.roce_mode = "lossy";
  sp.buffer_size = "1MB";
  sp.extra_qos = "      packet-trim: {state: enabled, traffic-class: [3]}\n";
  auto star = make_star(sp);
  IncastSpec is;
  const IncastResult r = run_incast(*star, is);
  RecoveryOutcome o;
  o.counters = all_counters(*star->engine);
  o.done = r.sender_done;
  for (Time& t : o.done) t = t - r.posted + Time{0};
  o.failure = r.failure;
  return o;
}

}  // namespace

TEST_CASE("A NIC and switch scenario is deterministic for a seed", "[sim][integration][determinism]") {
  const RecoveryOutcome a = trimming_run(7);
  const RecoveryOutcome b = trimming_run(7);
  REQUIRE(a.failure.empty());
  REQUIRE(b.failure.empty());
  CHECK(a.done == b.done);
  REQUIRE(a.counters.size() == b.counters.size());
  CHECK(a.counters.size() > 100);
  for (const auto& [name, value] : a.counters) {
    INFO(name);
    CHECK(b.counters.at(name) == value);
  }
  // The counters that make the scenario what it is are not all zero.
  CHECK(a.counters.at("sw1/swp5/queue3.trim-packets") > 0);
  CHECK(a.counters.at("h4/rx_trimmed") > 0);
  CHECK(a.counters.at("h4/nak_seq_sent") > 0);
  // The seed is what makes the two runs agree: with another one the
  // switch's WRED draws differ and so does the outcome.
  const RecoveryOutcome c = trimming_run(8);
  CHECK(c.counters != a.counters);
}
