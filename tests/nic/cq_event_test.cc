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

// A 4-entry CQ ring in 64-byte aligned memory, as the engine shares one.
struct CqRing {
  static constexpr uint32_t kEntries = 4;
  std::vector<uint8_t> mem = std::vector<uint8_t>(ring_bytes(kEntries, sizeof(Cqe)) + 64);
  Ring ring{mem.data() + (64 - reinterpret_cast<uintptr_t>(mem.data()) % 64) % 64, kEntries, sizeof(Cqe), true};
};

// The engine's side: round after round, once `go` says so, one completion
// on `cq`, then `done`.
std::thread engine_pushing(Cq& cq, std::atomic<uint32_t>& go, std::atomic<uint32_t>& done, uint32_t rounds) {
  return std::thread([&cq, &go, &done, rounds] {
    for (uint32_t r = 1; r <= rounds; r++) {
      wait_for(go, r);
      Cqe c{};
      c.wr_id = r;
      cq.push(c, false);
      done.store(r, std::memory_order_release);
    }
  });
}

}  // namespace

TEST_CASE("A CQ armed while a completion is written: the poll after arming sees it or the event fires",
          "[unit][cq]") {
  constexpr uint32_t kRounds = 200000;
  CqRing rig;
  Ring& ring = rig.ring;
  Cq cq(1, nullptr, ring);
  std::atomic<uint32_t> events{0};
  cq.on_event = [&] { events.fetch_add(1, std::memory_order_relaxed); };
  CqShadow app{ring};

  std::atomic<uint32_t> go{0}, done{0};
  std::thread engine = engine_pushing(cq, go, done, kRounds);
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

// ibv_get_cq_event polls the event count with the CQ marked `polling`
// (the engine then raises the event without writing the channel's fd),
// and before it sleeps on the fd clears the mark and looks once more.
// Whatever the interleaving with the engine's completion, it must either
// see the event in that last look or find the fd written: otherwise it
// sleeps with an event raised and nobody to wake it.
TEST_CASE("An application that stops polling for events sees the event or gets the fd written", "[unit][cq]") {
  constexpr uint32_t kRounds = 200000;
  CqRing rig;
  Ring& ring = rig.ring;
  Cq cq(1, nullptr, ring);
  std::atomic<uint32_t> writes{0};
  cq.on_event = [&] { writes.fetch_add(1, std::memory_order_relaxed); };
  CqShadow app{ring};

  std::atomic<uint32_t> go{0}, done{0};
  std::thread engine = engine_pushing(cq, go, done, kRounds);
  uint32_t lost = 0, seen = 0, written = 0;
  for (uint32_t r = 1; r <= kRounds; r++) {
    const uint32_t events_before = ring.header()->events.load(std::memory_order_relaxed);
    const uint32_t writes_before = writes.load(std::memory_order_relaxed);
    arm_cq(app, false);
    begin_event_poll(app);
    go.store(r, std::memory_order_release);
    // Sweep the end of polling across the engine's completion (it takes
    // the engine a while to see `go`: the sweep is wider than the first
    // test's).
    for (uint32_t i = (r * 7) % 1024; i > 0; i--) __builtin_ia32_pause();
    end_event_poll(app);
    const bool saw = ring.header()->events.load(std::memory_order_acquire) != events_before;
    wait_for(done, r);
    const bool wrote = writes.load(std::memory_order_relaxed) != writes_before;
    if (!saw && !wrote) lost++;
    seen += saw;
    written += wrote;
    ibv_wc wc[2];
    poll_cq_ring(app, 2, wc, [](uint32_t, uint32_t) {});
  }
  engine.join();
  INFO("rounds: event seen in the last look " << seen << ", fd written " << written << ", neither " << lost);
  CHECK(lost == 0);
  // On a loaded machine the two threads may share a core all along, and
  // then they never race (seen failing with the barrier removed: 42, 34
  // and 1 lost rounds in three of four runs; the fourth never raced).
  if (seen == 0 || written == 0) WARN("the two sides did not race this time: seen " << seen << ", written " << written);
}

TEST_CASE("A completion on an armed CQ that the application polls for events raises it without a wake-up",
          "[unit][cq]") {
  CqRing rig;
  Ring& ring = rig.ring;
  Cq cq(1, nullptr, ring);
  uint32_t writes = 0;
  cq.on_event = [&] { writes++; };
  CqShadow app{ring};
  ibv_wc wc[4];
  auto drain = [&] { poll_cq_ring(app, 4, wc, [](uint32_t, uint32_t) {}); };

  arm_cq(app, false);
  begin_event_poll(app);
  CHECK(cq.push(Cqe{}, false));
  CHECK(ring.header()->events.load() == 1);  // raised...
  CHECK(writes == 0);                        // ...without writing the fd
  CHECK(cq.push(Cqe{}, false));              // not armed: nothing
  CHECK(ring.header()->events.load() == 1);
  drain();

  end_event_poll(app);
  arm_cq(app, false);
  CHECK(cq.push(Cqe{}, false));
  CHECK(ring.header()->events.load() == 2);
  CHECK(writes == 1);  // asleep (or about to be): woken
  drain();

  // Solicited-only arming is unchanged by polling.
  arm_cq(app, true);
  begin_event_poll(app);
  CHECK(cq.push(Cqe{}, false));
  CHECK(ring.header()->events.load() == 2);
  CHECK(cq.push(Cqe{}, true));
  CHECK(ring.header()->events.load() == 3);
  CHECK(writes == 1);
}
