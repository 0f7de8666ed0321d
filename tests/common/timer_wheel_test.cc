#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

#include "common/engine/rng.h"
#include "common/engine/timer_wheel.h"

using namespace rocemu;

namespace {

struct WheelProbe {
  Timer timer;
  int id = 0;
  std::vector<std::pair<Time, int>>* log = nullptr;
  void fire(Time now) { log->push_back({now, id}); }
};

}  // namespace

TEST_CASE("Timer wheel fires in expiry order and reports the next expiry exactly", "[unit][engine]") {
  TimerWheel wheel;
  std::vector<std::pair<Time, int>> log;
  WheelProbe a, b, c;
  for (auto [p, id] : {std::pair{&a, 1}, {&b, 2}, {&c, 3}}) {
    p->id = id;
    p->log = &log;
    p->timer.bind<&WheelProbe::fire>(p);
  }
  wheel.schedule(a.timer, ps(5000));
  wheel.schedule(b.timer, ps(1234));
  wheel.schedule(c.timer, ms(3));
  CHECK(wheel.next_expiry() == ps(1234));
  CHECK(wheel.advance(ps(1233)) == 0);
  CHECK(wheel.advance(ps(1234)) == 1);
  CHECK(wheel.next_expiry() == ps(5000));
  wheel.cancel(a.timer);
  CHECK_FALSE(a.timer.armed());
  CHECK(wheel.next_expiry() == ms(3));
  CHECK(wheel.advance(ms(10)) == 1);
  REQUIRE(log.size() == 2);
  CHECK(log[0].second == 2);
  CHECK(log[1].second == 3);
  CHECK(wheel.size() == 0);
  CHECK(wheel.next_expiry() == kTimeNever);
}

TEST_CASE("Timer wheel agrees with a sorted reference under random load", "[unit][engine]") {
  // Differential test: random schedules, re-schedules, cancels and
  // advances over spans from picoseconds to hours (every level and the
  // overflow list), compared against an ordered set.
  Rng rng(42);
  TimerWheel wheel;
  constexpr int kN = 400;
  std::vector<std::pair<Time, int>> fired;
  std::vector<std::unique_ptr<WheelProbe>> probes;
  for (int i = 0; i < kN; i++) {
    probes.push_back(std::make_unique<WheelProbe>());
    probes[size_t(i)]->id = i;
    probes[size_t(i)]->log = &fired;
    probes[size_t(i)]->timer.bind<&WheelProbe::fire>(probes[size_t(i)].get());
  }
  std::set<std::tuple<Time, uint64_t, int>> ref;  // (expiry, seq, id)
  std::vector<std::tuple<Time, uint64_t>> key(kN);
  uint64_t seq = 0;
  Time now{0};
  const int64_t spans[] = {1, 4096, 1'000'000, 300'000'000, 70'000'000'000, 20'000'000'000'000,
                           5'000'000'000'000'000};
  for (int step = 0; step < 20000; step++) {
    const int id = int(rng.below(kN));
    WheelProbe& p = *probes[size_t(id)];
    const uint64_t action = rng.below(10);
    if (action < 6) {
      const Time when = now + Duration(int64_t(rng.below(uint64_t(spans[rng.below(7)]))));
      if (p.timer.armed()) ref.erase({std::get<0>(key[size_t(id)]), std::get<1>(key[size_t(id)]), id});
      wheel.schedule(p.timer, when);
      key[size_t(id)] = {when, seq};
      ref.insert({when, seq++, id});
    } else if (action < 7) {
      if (p.timer.armed()) ref.erase({std::get<0>(key[size_t(id)]), std::get<1>(key[size_t(id)]), id});
      wheel.cancel(p.timer);
    } else {
      const Time expect_next = ref.empty() ? kTimeNever : std::get<0>(*ref.begin());
      REQUIRE(wheel.next_expiry() == expect_next);
      const Time target = rng.below(2) && !ref.empty() ? expect_next
                                                       : now + Duration(int64_t(rng.below(uint64_t(spans[rng.below(7)]))));
      fired.clear();
      wheel.advance(target);
      std::vector<std::pair<Time, int>> want;
      while (!ref.empty() && std::get<0>(*ref.begin()) <= target) {
        want.push_back({target, std::get<2>(*ref.begin())});
        ref.erase(ref.begin());
      }
      REQUIRE(fired == want);
      now = target;
    }
    REQUIRE(wheel.size() == ref.size());
  }
}

TEST_CASE("A callback can arm a timer that is already due", "[unit][engine]") {
  TimerWheel wheel;
  std::vector<int> order;
  struct Chain {
    TimerWheel* w;
    Timer t1, t2;
    std::vector<int>* order;
    void first(Time now) {
      order->push_back(1);
      w->schedule(t2, now);  // due at once
    }
    void second(Time) { order->push_back(2); }
  } chain{&wheel, {}, {}, &order};
  chain.t1.bind<&Chain::first>(&chain);
  chain.t2.bind<&Chain::second>(&chain);
  wheel.schedule(chain.t1, us(1));
  CHECK(wheel.advance(us(2)) == 2);
  CHECK(order == std::vector<int>{1, 2});
}

TEST_CASE("A timer armed late with a reserved place fires as if armed when reserved", "[unit][engine]") {
  TimerWheel wheel;
  std::vector<std::pair<Time, int>> log;
  WheelProbe a, b, c;
  for (auto [p, id] : {std::pair{&a, 1}, {&b, 2}, {&c, 3}}) {
    p->id = id;
    p->log = &log;
    p->timer.bind<&WheelProbe::fire>(p);
  }
  // `b`'s place is taken before `a` is armed; all three are due at once.
  wheel.schedule(c.timer, us(1));
  const uint64_t place = wheel.reserve();
  wheel.schedule(a.timer, us(1));
  CHECK_FALSE(wheel.fired(us(1), place));
  wheel.schedule(b.timer, us(1), place);
  CHECK(wheel.next_expiry() == us(1));
  CHECK(wheel.advance(us(1)) == 3);
  CHECK(log == std::vector<std::pair<Time, int>>{{us(1), 3}, {us(1), 2}, {us(1), 1}});
  CHECK(wheel.fired(us(1), place));
  CHECK_FALSE(wheel.fired(us(1) + Duration(1), wheel.reserve()));
}

TEST_CASE("While a timer fires, fired() tells the timers before it from those after it", "[unit][engine]") {
  TimerWheel wheel;
  struct Probe {
    TimerWheel* w;
    Timer t;
    uint64_t earlier = 0, later = 0;
    bool earlier_fired = false, later_fired = true;
    void fire(Time) {
      earlier_fired = w->fired(us(1), earlier);
      later_fired = w->fired(us(1), later);
    }
  } p{&wheel, {}};
  p.t.bind<&Probe::fire>(&p);
  p.earlier = wheel.reserve();
  wheel.schedule(p.t, us(1));
  p.later = wheel.reserve();
  wheel.advance(us(5));
  CHECK(p.earlier_fired);
  CHECK_FALSE(p.later_fired);
  CHECK(wheel.fired(us(1), p.later));  // after advance(): all that was due
}
