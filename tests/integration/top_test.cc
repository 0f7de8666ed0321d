// rocemu top's frame from two snapshots taken in virtual time around an
// incast: the numbers in the table are the fabric's, over the interval.
#include <catch2/catch.hpp>

#include <sstream>

#include "apps/snapshot.h"
#include "apps/top.h"
#include "tests/integration/incast.h"

using namespace rocemu;
using namespace rocemu::test;
using PC = sw::PortCounters;

namespace {

struct PortRow {
  double rx = -1, tx = -1;
  uint64_t depth[8] = {};
  uint64_t ecn = 0, pfc_tx = 0, pfc_rx = 0, cnp = 0, drops = 0;
};

// The row of `port` ("sw1:IFNAME") in a frame.
std::optional<PortRow> port_row(const std::string& frame, const std::string& port) {
  std::istringstream in(frame);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string name;
    w >> name;
    if (name != port) continue;
    PortRow r;
    w >> r.rx >> r.tx;
    for (auto& d : r.depth) w >> d;
    w >> r.ecn >> r.pfc_tx >> r.pfc_rx >> r.cnp >> r.drops;
    if (!w) return std::nullopt;
    return r;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("top: per port Gbit/s, PFC, ECN and drops over the interval, from two snapshots", "[sim][integration][top]") {
  StarSpec sp;
  sp.seed = 61;
  auto star = make_star(sp);
  const sw::Switch& s = *star->sw;
  const auto before = app::take_snapshot(*star->engine);
  IncastSpec is;
  is.messages = 4;
  is.message_len = 1 << 20;
  REQUIRE(run_incast(*star, is).finished);
  const auto now = app::take_snapshot(*star->engine);
  const std::string frame = app::render_top(now, before);
  INFO(frame);
  const double secs = double(now.time_ns - before.time_ns) / 1e9;
  const auto& c = s.counters(4);
  const double tx_gbps = double(c[PC::tx_roce_bytes] + c[PC::tx_cnp_bytes] + c[PC::tx_non_roce_bytes]) * 8 / secs / 1e9;
  const auto bottleneck = port_row(frame, "sw1:" + s.config().interfaces[4].name);
  REQUIRE(bottleneck);
  CHECK(bottleneck->tx == Approx(tx_gbps).margin(0.01));
  CHECK(bottleneck->tx > 1);
  uint64_t pfc = 0;
  for (uint16_t p = 0; p < 4; p++) {
    const auto r = port_row(frame, "sw1:" + s.config().interfaces[p].name);
    REQUIRE(r);
    CHECK(r->pfc_tx == s.pfc_tx_frames(p, 3));
    pfc += r->pfc_tx;
  }
  CHECK(pfc > 0);
  // The next frame, with nothing running, counts nothing.
  star->engine->run_for(ms(1));
  const std::string idle = app::render_top(app::take_snapshot(*star->engine), now);
  const auto quiet = port_row(idle, "sw1:" + s.config().interfaces[4].name);
  REQUIRE(quiet);
  CHECK(quiet->tx == 0);
  CHECK(quiet->pfc_tx == 0);
}
