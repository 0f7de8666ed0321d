// The fault stage links and switch ports share (common/engine/fault_stage.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <set>

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

// A frame's arrival number, in two bytes of its payload.
void set_seq(rte_mbuf* m, int seq) {
  uint16_t v = uint16_t(seq);
  std::memcpy(rte_pktmbuf_mtod_offset(m, uint8_t*, 20), &v, sizeof v);
}
int seq_of(const rte_mbuf* m) {
  uint16_t v = 0;
  std::memcpy(&v, rte_pktmbuf_mtod_offset(m, const uint8_t*, 20), sizeof v);
  return v;
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

TEST_CASE("A fault stage's queue keeps that order past its first ring, wrapped, with frames due early mixed in",
          "[unit][engine]") {
  // The in-order frames sit in a ring that starts at 64 and doubles; those
  // due before the last one go to a heap. Pops in between make the ring
  // wrap before it grows; equal due times in both must still leave in the
  // order they came. A sorted set of (due, arrival) is the model: every pop
  // must give its first element.
  auto engine = test::make_engine();
  struct In {
    int64_t due;
    int seq;
  };
  uint64_t rng = 12345;
  auto draw = [&rng](int n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return int((rng >> 33) % uint64_t(n));
  };
  int64_t tail = 0;
  {
    DelayQueue q;
    std::set<std::pair<int64_t, int>> model;
    int seq = 0;
    for (int round = 0; round < 6; round++) {
      for (int i = 0; i < 90; i++) {
        // Mostly in order (ties too), sometimes earlier than the tail.
        const int64_t due = draw(5) == 0 ? tail - draw(4) : tail + draw(2);
        tail = std::max(tail, due);
        rte_mbuf* m = packet(*engine, 0);
        set_seq(m, seq);
        q.push(m, us(due));
        model.insert({due, seq++});
      }
      CHECK(q.size() == model.size());
      for (int i = 0; i < 40; i++) {
        const DelayQueue::Held h = q.pop();
        INFO("round " << round << " pop " << i);
        CHECK(h.due.count() / 1'000'000 == model.begin()->first);
        CHECK(seq_of(h.pkt) == model.begin()->second);
        model.erase(model.begin());
        rte_pktmbuf_free(h.pkt);
      }
    }
    // clear() with frames in both: nothing left, every mbuf freed.
    const unsigned before = rte_mempool_avail_count(engine->pool().mempool());
    const uint64_t held = q.size();
    REQUIRE(held == model.size());
    q.clear();
    CHECK(q.empty());
    CHECK(q.size() == 0);
    CHECK(rte_mempool_avail_count(engine->pool().mempool()) == before + held);
  }
  // Without pops in between, the whole stream leaves in stable order.
  DelayQueue q2;
  std::vector<In> in2;
  for (int i = 0; i < 300; i++) {
    const int64_t due = draw(5) == 0 ? tail - draw(4) : tail + draw(2);
    tail = std::max(tail, due);
    rte_mbuf* m = packet(*engine, 0);
    set_seq(m, i);
    q2.push(m, us(due));
    in2.push_back({due, i});
  }
  std::stable_sort(in2.begin(), in2.end(), [](const In& a, const In& b) { return a.due < b.due; });
  for (const In& want : in2) {
    REQUIRE(!q2.empty());
    const DelayQueue::Held h = q2.pop();
    CHECK(h.due.count() / 1'000'000 == want.due);
    CHECK(seq_of(h.pkt) == want.seq);
    rte_pktmbuf_free(h.pkt);
  }
  CHECK(q2.empty());
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
