// The most common RoCE misconfiguration, with real NICs: hosts mark DSCP 24
// instead of 26. On a switch in `qos roce mode lossless` their RoCE lands
// in TC0 -- lossy, no PFC -- and is counted as non-RoCE; under incast it
// drops and the NICs retransmit, where DSCP 26 loses nothing.
#include <catch2/catch.hpp>

#include "tests/integration/incast.h"

using namespace rocemu;
using namespace rocemu::test;
using NC = nic::NicCounters;
using QC = sw::QueueCounters;
using PC = sw::PortCounters;

namespace {

constexpr uint8_t kDscp24Ect0 = 24 << 2 | 2;

}  // namespace

TEST_CASE("DSCP mismatch with real NICs: DSCP 24 is non-RoCE in TC0, unprotected by PFC, and drops",
          "[sim][integration][dscp]") {
  // The mark comes from the NIC's default traffic class (as mlx5's
  // trust/dscp configuration would give) or from the QP's own attribute.
  const bool per_qp = GENERATE(false, true);
  INFO((per_qp ? "traffic_class on the QP (ah_attr.grh.traffic_class)" : "traffic_class of the NIC"));
  StarSpec sp;
  sp.seed = 31;
  sp.roce_mode = "lossless";
  if (!per_qp) sp.traffic_class = kDscp24Ect0;
  auto star = make_star(sp);
  Star& s = *star;
  IncastSpec is = big_incast();
  if (per_qp) is.connect.traffic_class = kDscp24Ect0;
  const IncastResult r = run_incast(s, is);
  const uint64_t tc0_drops = s.sw->queue_counters(kIncastBottleneck, 0)[QC::drop_packets];
  INFO("completion " << to_seconds(r.completion()) * 1e6 << " us, TC0 drops " << tc0_drops << ", retransmitted "
                     << s.nic_sum(0, 4, NC::retransmitted_packets) << ", timeouts "
                     << s.nic_sum(0, 4, NC::local_ack_timeout_err));
  // The NICs still recover every byte ...
  REQUIRE(r.finished);
  REQUIRE(r.failure.empty());
  // ... but the switch saw no RoCE: all of it was non-RoCE, in and out.
  for (uint16_t p = 0; p < 4; p++) {
    INFO(sw::port_name(p));
    CHECK(s.sw->counters(p)[PC::rx_roce_packets] == 0);
    CHECK(s.sw->counters(p)[PC::rx_non_roce_packets] > 0);
  }
  CHECK(s.sw->counters(kIncastBottleneck)[PC::tx_roce_packets] == 0);
  CHECK(s.sw->counters(kIncastBottleneck)[PC::tx_non_roce_packets] > 0);
  const auto c = s.sw->show_roce_counters(0);
  CHECK(c["rx-roce-stats"]["roce-packets"] == 0);
  CHECK(c["rx-non-roce-stats"]["non-roce-packets"].get<uint64_t>() > 0);
  // TC0 is lossy: it dropped, and nobody was paused.
  CHECK(tc0_drops > 0);
  CHECK(s.sw->counters(kIncastBottleneck)[PC::tx_non_roce_no_buffer_discard] == tc0_drops);
  CHECK(s.sw->queue_counters(kIncastBottleneck, 3)[QC::drop_packets] == 0);
  for (uint16_t p = 0; p < 5; p++)
    for (uint8_t prio = 0; prio < 8; prio++) CHECK(s.sw->pfc_tx_frames(p, prio) == 0);
  CHECK(s.nic_sum(0, 5, NC::rx_pfc_frames) == 0);
  // The NICs paid in retransmissions.
  CHECK(s.nic_sum(0, 4, NC::retransmitted_packets) >= tc0_drops);
  CHECK(s.nic_sum(0, 4, NC::local_ack_timeout_err) > 0);

  // The same hosts marking DSCP 26: RoCE, PFC, nothing lost.
  StarSpec good = sp;
  good.traffic_class = -1;
  auto ok = make_star(good);
  const IncastResult r26 = run_incast(*ok, big_incast());
  REQUIRE(r26.failure.empty());
  uint64_t drops = 0, pfc = 0;
  for (uint8_t tc = 0; tc < 8; tc++) drops += ok->sw->queue_counters(kIncastBottleneck, tc)[QC::drop_packets];
  for (uint16_t p = 0; p < 4; p++) pfc += ok->sw->pfc_tx_frames(p, 3);
  CHECK(drops == 0);
  CHECK(pfc > 0);
  CHECK(ok->nic_sum(0, 4, NC::retransmitted_packets) == 0);
  CHECK(ok->sw->counters(0)[PC::rx_non_roce_packets] == 0);
  CHECK(r26.completion() < r.completion());
}
