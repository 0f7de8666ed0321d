// DCQCN on real NICs through the real switch, in virtual time: CNPs flow
// from the receiver to the senders of an incast, the senders slow down, the
// queue and PFC shrink against the same incast without congestion control,
// and a single flow on an idle path keeps its line rate.
#include <catch2/catch.hpp>

#include "tests/integration/incast.h"

using namespace rocemu;
using namespace rocemu::test;
using NC = nic::NicCounters;
using QC = sw::QueueCounters;
using PC = sw::PortCounters;

namespace {

IncastSpec incast(int senders, int messages, uint32_t len) {
  IncastSpec is;
  is.senders = senders;
  is.messages = messages;
  is.message_len = len;
  return is;
}

struct DcqcnOutcome {
  IncastResult r;
  uint64_t cnp_sent = 0, cnp_handled = 0, cnp_suppressed = 0, ce_seen = 0;
  uint64_t pfc_frames = 0, tc3_watermark = 0, tc3_marked = 0, cnp_tx_switch = 0;
};

DcqcnOutcome run(const std::string& cc, int senders, int messages, uint32_t len, const std::string& lag = "") {
  StarSpec sp;
  sp.hosts = senders + 1;
  sp.seed = 5;
  sp.cc = cc;
  sp.virtual_lag = lag;
  auto star = make_star(sp);
  Star& s = *star;
  DcqcnOutcome o;
  o.r = run_incast(s, incast(senders, messages, len));
  o.cnp_sent = s.nic_counter(senders, NC::np_cnp_sent);
  o.cnp_suppressed = s.nic_counter(senders, NC::np_cnp_suppressed);
  o.ce_seen = s.nic_counter(senders, NC::np_ecn_marked_roce_packets);
  o.cnp_handled = s.nic_sum(0, senders, NC::rp_cnp_handled);
  for (uint16_t p = 0; p < uint16_t(senders); p++) o.pfc_frames += s.sw->pfc_tx_frames(p, 3);
  const auto bottleneck = uint16_t(senders);  // the receiver's port
  o.tc3_watermark = s.sw->mmu().queue(bottleneck, 3).watermark;
  o.tc3_marked = s.sw->queue_counters(bottleneck, 3)[QC::ecn_marked_packets];
  // CNPs cross the switch towards the senders on the strict CNP class.
  for (uint16_t p = 0; p < uint16_t(senders); p++) o.cnp_tx_switch += s.sw->counters(p)[PC::tx_cnp_packets];
  return o;
}

}  // namespace

TEST_CASE("DCQCN incast: the receiver sends CNPs, the senders handle them, PFC and the queue shrink",
          "[sim][integration][dcqcn]") {
  // 4 senders x 4 x 1 MiB into one 100 Gbit/s port, lossless RoCE profile
  // (ECN on TC3 from 150 KB to 1.5 MB), mlx5's DCQCN against none.
  const DcqcnOutcome off = run("none", 4, 4, 1 << 20);
  const DcqcnOutcome on = run("dcqcn", 4, 4, 1 << 20);
  INFO("none: completion " << to_us(off.r.completion()) << " us, PFC " << off.pfc_frames << ", TC3 watermark "
                           << off.tc3_watermark << " B, marked " << off.tc3_marked << ", CNPs " << off.cnp_sent);
  INFO("dcqcn: completion " << to_us(on.r.completion()) << " us, PFC " << on.pfc_frames << ", TC3 watermark "
                            << on.tc3_watermark << " B, marked " << on.tc3_marked << ", CE seen " << on.ce_seen
                            << ", CNPs sent " << on.cnp_sent << " (suppressed " << on.cnp_suppressed
                            << "), handled " << on.cnp_handled << ", at the switch " << on.cnp_tx_switch);
  REQUIRE(off.r.failure.empty());
  REQUIRE(on.r.failure.empty());  // every completion good, every byte in place
  // Without congestion control the NICs see marks but say nothing.
  CHECK(off.ce_seen > 0);
  CHECK(off.cnp_sent == 0);
  CHECK(off.cnp_handled == 0);
  // With DCQCN every CE-marked packet asks for a CNP; each is sent or
  // suppressed by min_time_between_cnps, and every CNP sent is handled.
  CHECK(on.cnp_sent > 0);
  CHECK(on.cnp_sent + on.cnp_suppressed == on.ce_seen);
  CHECK(on.cnp_tx_switch == on.cnp_sent);
  CHECK(on.cnp_handled == on.cnp_sent);
  // The NP paces CNPs (min_time_between_cnps, 2 us): marks that come
  // closer than that to a QP's last CNP get none.
  CHECK(on.cnp_suppressed > 0);
  // The senders slowed down before PFC had to stop them: fewer pauses and
  // a lower peak queue than with no congestion control.
  CHECK(on.pfc_frames < off.pfc_frames);
  CHECK(on.tc3_watermark < off.tc3_watermark);
}

TEST_CASE("DCQCN: one flow on an idle path keeps its line rate and gets no CNP", "[sim][integration][dcqcn]") {
  const DcqcnOutcome o = run("dcqcn", 1, 8, 1 << 20);
  REQUIRE(o.r.failure.empty());
  INFO("completion " << to_us(o.r.completion()) << " us, goodput " << o.r.goodput_gbps() << " Gbit/s, CE "
                     << o.ce_seen << ", CNPs " << o.cnp_sent);
  CHECK(o.ce_seen == 0);
  CHECK(o.cnp_sent == 0);
  CHECK(o.cnp_handled == 0);
  CHECK(o.pfc_frames == 0);
  // Payload rate within 3 % of 100 Gbit/s less the headers of 4 KB packets.
  CHECK(o.r.goodput_gbps() > 0.97 * 4096.0 / (4096 + 82) * 100);
}


TEST_CASE("DCQCN: an engine that falls behind invents no congestion", "[sim][integration][dcqcn]") {
  // The engine wakes only every 20 us, as a busy real-time one does, and
  // the links run 50 us ahead as in real time: bursts arrive at the switch
  // late, together. The modelled fabric still has one flow on an idle
  // path: no queue beyond a few packets, no mark, no CNP, line rate.
  for (const char* lag : {"7us", "20us"}) {
    const DcqcnOutcome o = run("dcqcn", 1, 8, 1 << 20, lag);
    INFO("lag " << lag << ": completion " << to_us(o.r.completion()) << " us, goodput " << o.r.goodput_gbps()
                << " Gbit/s, TC3 watermark " << o.tc3_watermark << " B, marked " << o.tc3_marked << ", CNPs "
                << o.cnp_sent);
    REQUIRE(o.r.failure.empty());
    CHECK(o.tc3_watermark < 150'000);  // below the ECN band's Kmin
    CHECK(o.tc3_marked == 0);
    CHECK(o.cnp_sent == 0);
    CHECK(o.pfc_frames == 0);
    // Completions are seen up to one lag late; the wire itself loses nothing.
    CHECK(o.r.goodput_gbps() > 0.92 * 4096.0 / (4096 + 82) * 100);
  }
}

