// Lossy RoCE with real NICs: a 4:1 incast of RDMA WRITEs through the
// switch in `qos roce mode lossy`, with packet trimming on TC3 (trimmed
// headers reach the receiver, which NAKs at once) and without (plain tail
// drops, recovered by retransmission).
#include <catch2/catch.hpp>

#include <sstream>

#include "tests/integration/incast.h"

using namespace rocemu;
using namespace rocemu::test;
using NC = nic::NicCounters;
using QC = sw::QueueCounters;
using PC = sw::PortCounters;

namespace {

constexpr uint16_t kBottleneck = 4;  // swp5 leads to the receiver, h4
constexpr uint8_t kRoceTc = 3;
constexpr uint8_t kTrimTc = 0;       // trim switch-priority 4 -> TC0 in the RoCE profile

struct LossyRun {
  std::unique_ptr<Star> star;
  IncastResult result;
  Time first_trim = kTimeNever;  // the switch trimmed its first packet
  Time first_nak = kTimeNever;   // the receiver scheduled its first NAK

  uint64_t trims() const { return star->sw->queue_counters(kBottleneck, kRoceTc)[QC::trim_packets]; }
  uint64_t drops() const { return star->sw->queue_counters(kBottleneck, kRoceTc)[QC::drop_packets]; }
  uint64_t ingress_drops() const {
    uint64_t n = 0;
    for (uint16_t p = 0; p < 4; p++)
      n += star->sw->counters(p)[PC::rx_roce_no_buffer_discard] + star->sw->counters(p)[PC::rx_non_roce_no_buffer_discard];
    return n;
  }
  uint64_t senders(NC::Id id) const { return star->nic_sum(0, 4, id); }
  uint64_t receiver(NC::Id id) const { return star->nic_counter(4, id); }
  std::string summary() const {
    std::ostringstream o;
    o << "completion " << to_seconds(result.completion()) * 1e6 << " us, trims " << trims() << ", TC3 drops "
      << drops() << ", ingress drops " << ingress_drops() << ", rx_trimmed " << receiver(NC::rx_trimmed)
      << ", nak_seq_sent " << receiver(NC::nak_seq_sent) << ", packet_seq_err " << senders(NC::packet_seq_err)
      << ", local_ack_timeout_err " << senders(NC::local_ack_timeout_err) << ", retransmitted "
      << senders(NC::retransmitted_packets) << ", failure '" << result.failure << "'";
    return o.str();
  }
};

// 4 senders x 4 x 256 KiB WRITEs into a 1 MB buffer: TC3 overflows.
LossyRun lossy_incast(const std::string& recovery, bool trim, uint64_t seed = 1) {
  StarSpec sp;
  sp.seed = seed;
  sp.roce_mode = "lossy";
  sp.buffer_size = "1MB";
  sp.loss_recovery = recovery;
  LossyRun run;
  run.star = make_star(sp);
  Star& s = *run.star;
  if (trim) {
    // As an operator would: NVUE commands on the running switch.
    REQUIRE(s.sw->nv({"set", "system", "forwarding", "packet-trim", "state", "enabled"}).ok());
    REQUIRE(s.sw->nv({"set", "system", "forwarding", "packet-trim", "traffic-class", "3"}).ok());
    REQUIRE(s.sw->nv({"config", "apply"}).ok());
    REQUIRE(s.sw->config().qos.trim.enable);
  }
  IncastSpec is;
  is.observe = [&run, &s] {
    if (run.first_trim == kTimeNever && run.trims() > 0) run.first_trim = s.now();
    if (run.first_nak == kTimeNever && run.receiver(NC::nak_seq_sent) > 0) run.first_nak = s.now();
  };
  run.result = run_incast(s, is);
  return run;
}

}  // namespace

TEST_CASE("Lossy incast with trimming, go-back-N: trimmed WRITEs are NAKed at once and every byte arrives",
          "[sim][integration][trim]") {
  LossyRun t = lossy_incast("go-back-n", true);
  INFO("trimming: " << t.summary());
  Star& s = *t.star;
  REQUIRE(t.result.finished);
  REQUIRE(t.result.failure.empty());  // every completion good, every byte in place

  // The switch trimmed instead of dropping; the trimmed headers left from
  // the trim priority's queue and all of them reached the receiving NIC,
  // which recognised them by their DSCP.
  CHECK(t.trims() > 0);
  CHECK(t.drops() == 0);
  CHECK(t.ingress_drops() == 0);
  CHECK(s.sw->queue_counters(kBottleneck, kRoceTc)[QC::trim_drop_packets] == 0);
  CHECK(s.sw->queue_counters(kBottleneck, kTrimTc)[QC::trim_sent_packets] == t.trims());
  CHECK(s.sw->counters(kBottleneck)[PC::trim_sent_packets] == t.trims());
  CHECK(t.receiver(NC::rx_trimmed) == t.trims());
  CHECK(t.receiver(NC::rx_icrc_error) == 0);
  // The receiver answered with PSN-sequence NAKs, and at once: the first
  // NAK follows the first trim by the trimmed header's trip (a few us),
  // not by the TC3 queue it skipped.
  CHECK(t.receiver(NC::nak_seq_sent) > 0);
  CHECK(t.senders(NC::packet_seq_err) > 0);
  CHECK(t.senders(NC::packet_seq_err) <= t.receiver(NC::nak_seq_sent));
  REQUIRE(t.first_trim != kTimeNever);
  REQUIRE(t.first_nak != kTimeNever);
  CHECK(t.first_nak >= t.first_trim);
  CHECK(t.first_nak - t.first_trim < us(5));
  CHECK(t.senders(NC::retransmitted_packets) > 0);

  // Without trimming the same incast only drops: the receiver never learns
  // of a loss (they are tail drops), so every one waits for the timer.
  LossyRun d = lossy_incast("go-back-n", false);
  INFO("plain drops: " << d.summary());
  REQUIRE(d.result.failure.empty());
  CHECK(d.drops() > 0);
  CHECK(d.receiver(NC::nak_seq_sent) == 0);
  CHECK(d.senders(NC::local_ack_timeout_err) > 0);
  CHECK(t.result.completion() < d.result.completion());
}

TEST_CASE("Lossy incast without trimming, go-back-N: TC3 drops, the NICs retransmit, every byte arrives",
          "[sim][integration][lossy]") {
  LossyRun d = lossy_incast("go-back-n", false);
  INFO(d.summary());
  Star& s = *d.star;
  REQUIRE(d.result.finished);
  REQUIRE(d.result.failure.empty());
  // Drops on the RoCE queue of the bottleneck, counted as NVUE counts them.
  CHECK(d.drops() > 0);
  CHECK(s.sw->counters(kBottleneck)[PC::tx_roce_no_buffer_discard] == d.drops());
  CHECK(s.sw->show_roce_counters(kBottleneck)["tx-roce-stats"]["unicast-no-buffer-discard"] == d.drops());
  CHECK(d.trims() == 0);
  CHECK(d.receiver(NC::rx_trimmed) == 0);
  // Lossy: no PFC anywhere.
  for (uint16_t p = 0; p < 5; p++) CHECK(s.sw->pfc_tx_frames(p, 3) == 0);
  CHECK(d.senders(NC::rx_pfc_frames) == 0);
  // Everything the switch forwarded reached the NIC: data = sent - dropped.
  CHECK(d.receiver(NC::rx_roce_packets) == s.sw->counters(kBottleneck)[PC::tx_roce_packets]);
  uint64_t rx_data = 0;
  for (uint16_t p = 0; p < 4; p++) rx_data += s.sw->counters(p)[PC::rx_roce_packets];
  CHECK(rx_data == d.senders(NC::tx_roce_packets));
  CHECK(s.sw->counters(kBottleneck)[PC::tx_roce_packets] + d.drops() == rx_data);
  // The NICs recovered by retransmission; every loss was a tail drop that
  // only the retransmit timer could find.
  CHECK(d.senders(NC::retransmitted_packets) >= d.drops());
  CHECK(d.senders(NC::local_ack_timeout_err) > 0);
  CHECK(d.senders(NC::req_cqe_error) == 0);
}

// The point of trimming: no loss is left for the retransmit timer. (It
// once failed for two transport bugs, see nic_bugs_test.cc: go-back-N forgot
// a trimmed packet that arrived while a NAK was outstanding, and selective
// repeat took the NAK of a trimmed PSN as an acknowledgement of the PSNs
// before it.)
TEST_CASE("Trimming leaves no loss to the retransmit timer (go-back-N and selective repeat)",
          "[sim][integration][trim]") {
  for (std::string mode : {"go-back-n", "selective-repeat"}) {
    LossyRun t = lossy_incast(mode, true);
    INFO(mode << " with trimming: " << t.summary());
    CHECK(t.result.finished);
    CHECK(t.result.failure.empty());
    CHECK(t.trims() > 0);
    CHECK(t.receiver(NC::rx_trimmed) == t.trims());
    CHECK(t.receiver(NC::nak_seq_sent) > 0);
    CHECK(t.senders(NC::local_ack_timeout_err) == 0);
    CHECK(t.result.completion() < ms(10));
  }
}

// Selective repeat once recovered a tail loss one packet per retransmit
// timeout (nic_bugs_test.cc); now a timeout resends all that is unacknowledged.
TEST_CASE("Lossy incast without trimming, selective repeat: the NICs recover every byte",
          "[sim][integration][lossy]") {
  LossyRun d = lossy_incast("selective-repeat", false);
  INFO(d.summary());
  CHECK(d.drops() > 0);
  CHECK(d.result.finished);
  CHECK(d.result.failure.empty());
  CHECK(d.senders(NC::retransmitted_packets) >= d.drops());
}
