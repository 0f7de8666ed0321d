// Completion events against a CQ armed while the engine writes a
// completion: the application arms (ibv_req_notify_cq), then polls once
// more; the engine writes the completion, then looks whether the CQ is
// armed. Whatever the interleaving, the application must see the
// completion in that poll or get the event -- otherwise it waits in
// ibv_get_cq_event for an event that never comes (seen as a hung
// `ib_send_bw -e`). On x86 a load may pass an earlier store of the same
// thread (the store buffer), so both sides need a full barrier between
// their store and their load (Dekker): this test runs the two sides on
// two threads, round after round, and counts rounds where both missed.
#include <catch2/catch.hpp>

#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "nic/host_queue.h"
#include "nic/objects.h"

using namespace rocemu::nic;

namespace {

// Spins until `flag` holds `want`, yielding now and then (the two threads
// may share one core).
void wait_for(const std::atomic<uint32_t>& flag, uint32_t want) {
  for (uint32_t i = 0; flag.load(std::memory_order_acquire) != want; i++)
    if ((i & 0xff) == 0xff) sched_yield();
}

}  // namespace

TEST_CASE("A CQ armed while a completion is written: the poll after arming sees it or the event fires",
          "[unit][cq]") {
  constexpr uint32_t kRounds = 200000;
  constexpr uint32_t kEntries = 4;
  std::vector<uint8_t> mem(ring_bytes(kEntries, sizeof(Cqe)) + 64);
  void* base = mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64) % 64;
  Ring ring(base, kEntries, sizeof(Cqe), true);
  Cq cq(1, nullptr, ring);
  std::atomic<uint32_t> events{0};
  cq.on_event = [&] { events.fetch_add(1, std::memory_order_relaxed); };
  CqShadow app;
  app.ring = ring;

  std::atomic<uint32_t> go{0}, done{0};
  std::thread engine([&] {
    for (uint32_t r = 1; r <= kRounds; r++) {
      wait_for(go, r);
      Cqe c{};
      c.wr_id = r;
      cq.push(c, false);
      done.store(r, std::memory_order_release);
    }
  });
  uint32_t lost = 0;
  for (uint32_t r = 1; r <= kRounds; r++) {
    const uint32_t events_before = events.load(std::memory_order_relaxed);
    go.store(r, std::memory_order_release);
    // The engine sees `go` some time later; sweep the arming across that
    // moment so that, round after round, the two meet in every order.
    for (uint32_t i = (r * 7) % 256; i > 0; i--) __builtin_ia32_pause();
    arm_cq(app, false);
    ibv_wc wc[2];
    const int got = poll_cq_ring(app, 2, wc, [](uint32_t, uint32_t) {});
    wait_for(done, r);
    const bool event = events.load(std::memory_order_relaxed) != events_before;
    if (got == 0 && !event) lost++;
    // The next round starts empty (a completion left here would be taken
    // by the next round's poll and hide a loss there).
    poll_cq_ring(app, 2, wc, [](uint32_t, uint32_t) {});
    // Disarm for the next round, as after an event the engine did.
    ring.header()->arm.store(0, std::memory_order_relaxed);
  }
  engine.join();
  INFO("rounds where neither the poll nor an event saw the completion: " << lost);
  CHECK(lost == 0);
}
