// The fault stage links and switch ports share (common/engine/fault_stage.h).
#include <catch2/catch.hpp>

#include <cstring>

#include "common/engine/basic_nodes.h"
#include "common/engine/fault_stage.h"
#include "tests/support/eal.h"

using namespace rocemu;

namespace {

std::vector<uint8_t> frame(uint32_t len) {
  std::vector<uint8_t> f(len, 0xab);
  f[12] = 0x88;  // a local experimental ethertype: not RoCE
  f[13] = 0xb5;
  return f;
}

rte_mbuf* packet(Engine& e, uint8_t tag) {
  std::vector<uint8_t> f = frame(100);
  f[20] = tag;
  rte_mbuf* m = e.pool().alloc_copy(f);
  REQUIRE(m != nullptr);
  return m;
}

}  // namespace

TEST_CASE("A fault stage's queue gives frames back by due time, ties in the order they came", "[unit][engine]") {
  auto engine = test::make_engine();
  DelayQueue q;
  const int dues[] = {5, 3, 7, 3, 1, 9, 9, 2};
  for (uint8_t i = 0; i < 8; i++) q.push(packet(*engine, i), us(dues[i]));
  CHECK(q.size() == 8);
  std::vector<std::pair<int64_t, int>> out;
  while (!q.empty()) {
    const DelayQueue::Held h = q.pop();
    out.emplace_back(h.due.count() / 1'000'000, rte_pktmbuf_mtod(h.pkt, const uint8_t*)[20]);
    rte_pktmbuf_free(h.pkt);
  }
  const std::vector<std::pair<int64_t, int>> want = {{1, 4}, {2, 7}, {3, 1}, {3, 3}, {5, 0}, {7, 2}, {9, 5}, {9, 6}};
  CHECK(out == want);
}

TEST_CASE("Faults added to a stage add up, each with its own counters", "[unit][engine]") {
  auto engine = test::make_engine();
  FaultStage stage(7);
  uint64_t dropped = 0, delayed = 0, duplicated = 0, corrupted = 0;
  stage.bind({.dropped = &dropped, .corrupted = &corrupted, .duplicated = &duplicated, .delayed = &delayed});
  CHECK_FALSE(stage.active());

  FaultConfig delay;
  delay.delay = us(100);
  stage.add(1, delay);
  FaultConfig loss;
  loss.loss = 0.25;
  stage.add(2, loss);
  FaultConfig slow;
  slow.rate_bps = 10'000'000'000ull;
  stage.add(3, slow);
  FaultConfig slower;
  slower.rate_bps = 1'000'000'000ull;
  stage.add(4, slower);
  CHECK(stage.active());
  REQUIRE(stage.rate_bps());
  CHECK(*stage.rate_bps() == 1'000'000'000ull);  // the lowest rate set

  constexpr int kFrames = 4000;
  int kept = 0;
  for (int i = 0; i < kFrames; i++) {
    const FaultStage::Outcome o = stage.apply(packet(*engine, 0), engine->pool());
    if (o.pkt == nullptr) continue;
    kept++;
    CHECK(o.delayed);
    CHECK(o.extra == us(100));  // the delay stays while the loss drops
    CHECK(o.copy == nullptr);
    rte_pktmbuf_free(o.pkt);
  }
  // 25 % loss of 4000: 1000 +- 4 sigma (27)
  CHECK(kFrames - kept > 1000 - 4 * 28);
  CHECK(kFrames - kept < 1000 + 4 * 28);
  CHECK(dropped == uint64_t(kFrames - kept));
  CHECK(delayed == uint64_t(kept));
  CHECK(stage.find(1)->stats.delayed == uint64_t(kept));
  CHECK(stage.find(1)->stats.dropped == 0);
  CHECK(stage.find(2)->stats.dropped == dropped);
  CHECK(stage.find(2)->stats.delayed == 0);

  REQUIRE(stage.remove(4));
  CHECK(*stage.rate_bps() == 10'000'000'000ull);
  REQUIRE(stage.remove(2));
  CHECK_FALSE(stage.remove(2));
  for (int i = 0; i < 100; i++) {
    const FaultStage::Outcome o = stage.apply(packet(*engine, 0), engine->pool());
    REQUIRE(o.pkt != nullptr);
    rte_pktmbuf_free(o.pkt);
  }
  CHECK(dropped == uint64_t(kFrames - kept));

  // The configured set (a topology's faults) is one more entry: setting it
  // leaves the added ones, clear() takes everything.
  FaultConfig down;
  down.link_down = true;
  stage.configure(down);
  CHECK(stage.link_down());
  CHECK(stage.find(1) != nullptr);
  stage.configure(FaultConfig{});
  CHECK_FALSE(stage.link_down());
  stage.clear();
  CHECK_FALSE(stage.active());
  CHECK_FALSE(stage.rate_bps());
  CHECK(stage.entries().size() == 1);
}

TEST_CASE("A duplicate and a corruption are counted once, by the fault that made them", "[unit][engine]") {
  auto engine = test::make_engine();
  FaultStage stage(3);
  uint64_t duplicated = 0, corrupted = 0;
  stage.bind({.dropped = nullptr, .corrupted = &corrupted, .duplicated = &duplicated, .delayed = nullptr});
  FaultConfig dup;
  dup.duplicate = 1;
  stage.add(1, dup);
  FaultConfig dup_corrupt;
  dup_corrupt.duplicate = 1;
  dup_corrupt.corrupt = 1;
  stage.add(2, dup_corrupt);
  const std::vector<uint8_t> original = frame(100);
  const FaultStage::Outcome o = stage.apply(engine->pool().alloc_copy(original), engine->pool());
  REQUIRE(o.pkt != nullptr);
  REQUIRE(o.copy != nullptr);
  CHECK_FALSE(o.delayed);
  const std::span<const uint8_t> got = dpdk::bytes(o.pkt);
  CHECK_FALSE(std::equal(got.begin(), got.end(), original.begin(), original.end()));  // corrupted ...
  const std::span<const uint8_t> copy = dpdk::bytes(o.copy);
  CHECK(std::equal(got.begin(), got.end(), copy.begin(), copy.end()));  // ... before it was copied
  rte_pktmbuf_free(o.pkt);
  rte_pktmbuf_free(o.copy);
  CHECK(duplicated == 1);
  CHECK(corrupted == 1);
  CHECK(stage.find(1)->stats.duplicated == 1);
  CHECK(stage.find(2)->stats.duplicated == 0);
  CHECK(stage.find(2)->stats.corrupted == 1);
}
