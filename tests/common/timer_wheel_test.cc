#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
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

// Timers armed in the past (real time, and virtual time with a lag, date
// frames back): fired() still answers as the timer armed at reserve()
// would have fired.
TEST_CASE("fired() inside a timer a callback armed in the past: a reserved place already passed has fired", "[unit][engine]") {
  // Armed at reserve(), a timer R at 50 ns would fire in advance(100 ns)
  // before B (60 ns), and before C (40 ns), which B arms in the past.
  TimerWheel wheel;
  struct P {
    TimerWheel* w;
    Timer b, c;
    uint64_t place = 0;
    bool fired_in_c = false;
    void fb(Time) { w->schedule(c, ns(40)); }
    void fc(Time) { fired_in_c = w->fired(ns(50), place); }
  } p{&wheel, {}, {}};
  p.b.bind<&P::fb>(&p);
  p.c.bind<&P::fc>(&p);
  p.place = wheel.reserve();
  wheel.schedule(p.b, ns(60));
  wheel.advance(ns(100));
  CHECK(p.fired_in_c);
}

TEST_CASE("fired() inside a timer armed in the past after an earlier advance: what that advance covered has fired", "[unit][engine]") {
  TimerWheel wheel;
  struct P {
    TimerWheel* w;
    Timer x;
    uint64_t place = 0;
    bool fired_in_x = false;
    void fx(Time) { fired_in_x = w->fired(ns(80), place); }
  } p{&wheel, {}};
  p.x.bind<&P::fx>(&p);
  p.place = wheel.reserve();  // a timer at 80 ns would fire in advance(100)
  wheel.advance(ns(100));
  CHECK(wheel.fired(ns(80), p.place));
  wheel.schedule(p.x, ns(50));  // in the past
  wheel.advance(ns(130));
  CHECK(p.fired_in_x);
}

namespace {
struct RProbe {
  Timer timer;
  int id = 0;
  std::vector<std::pair<Time, int>>* log = nullptr;
  std::function<void(int, Time)>* hook = nullptr;
  void fire(Time now) {
    log->push_back({now, id});
    if (hook) (*hook)(id, now);
  }
};
}  // namespace

TEST_CASE("The wheel against a sorted reference: past times, arming from callbacks, reserved places, next_expiry after each step", "[unit][engine]") {
  for (uint64_t seed = 1; seed <= 40; seed++) {
    Rng rng(seed);
    TimerWheel wheel;
    constexpr int kN = 200;
    std::vector<std::pair<Time, int>> fired;
    std::vector<std::unique_ptr<RProbe>> probes;
    std::set<std::tuple<Time, uint64_t, int>> ref;
    std::vector<std::tuple<Time, uint64_t>> key(kN);
    std::vector<std::pair<Time, int>> want;
    uint64_t seq = 0;
    Time now{0};
    const int64_t spans[] = {1, 4096, 1'000'000, 300'000'000, 70'000'000'000, 20'000'000'000'000, 5'000'000'000'000'000, 1'500'000'000'000'000'000};
    auto arm = [&](int id, Time when, bool reserved_place) {
      RProbe& p = *probes[size_t(id)];
      if (p.timer.armed()) ref.erase({std::get<0>(key[size_t(id)]), std::get<1>(key[size_t(id)]), id});
      uint64_t s;
      if (reserved_place) {
        s = wheel.reserve();
        REQUIRE(s == seq);
        seq++;
        wheel.schedule(p.timer, when, s);
      } else {
        wheel.schedule(p.timer, when);
        s = seq++;
      }
      key[size_t(id)] = {when, s};
      ref.insert({when, s, id});
    };
    Time target{0};
    std::function<void(int, Time)> hook = [&](int id, Time cbnow) {
      // the reference: this must be the minimum
      REQUIRE(!ref.empty());
      REQUIRE(std::get<2>(*ref.begin()) == id);
      REQUIRE(std::get<0>(*ref.begin()) <= target);
      ref.erase(ref.begin());
      REQUIRE(wheel.size() == ref.size());
      // sometimes arm/cancel from the callback, times in the past too
      for (int k = int(rng.below(3)); k > 0; k--) {
        const int j = int(rng.below(kN));
        const uint64_t a = rng.below(4);
        if (a == 0) {
          if (probes[size_t(j)]->timer.armed()) ref.erase({std::get<0>(key[size_t(j)]), std::get<1>(key[size_t(j)]), j});
          wheel.cancel(probes[size_t(j)]->timer);
        } else {
          const int64_t back = int64_t(rng.below(uint64_t(spans[rng.below(4)])));
          const int64_t fwd = int64_t(rng.below(uint64_t(spans[rng.below(7)])));
          const Time when = rng.below(2) ? cbnow - Duration(back) : cbnow + Duration(fwd);
          arm(j, when < Time{0} ? Time{0} : when, rng.below(2));
        }
      }
      const Time expect_next = ref.empty() ? kTimeNever : std::get<0>(*ref.begin());
      REQUIRE(wheel.next_expiry() == expect_next);
    };
    for (int i = 0; i < kN; i++) {
      probes.push_back(std::make_unique<RProbe>());
      probes[size_t(i)]->id = i;
      probes[size_t(i)]->log = &fired;
      probes[size_t(i)]->hook = &hook;
      probes[size_t(i)]->timer.bind<&RProbe::fire>(probes[size_t(i)].get());
    }
    for (int step = 0; step < 5000 && now < Time{Duration(int64_t(4'000'000'000'000'000'000))}; step++) {
      const int id = int(rng.below(kN));
      const uint64_t action = rng.below(12);
      if (action < 6) {
        const int64_t back = int64_t(rng.below(uint64_t(spans[rng.below(3)])));
        const Time when = rng.below(5) == 0 ? now - Duration(back) : now + Duration(int64_t(rng.below(uint64_t(spans[rng.below(8)]))));
        arm(id, when < Time{0} ? Time{0} : when, rng.below(3) == 0);
      } else if (action < 8) {
        // cancel the earliest specifically sometimes
        int j = id;
        if (action == 7 && !ref.empty()) j = std::get<2>(*ref.begin());
        if (probes[size_t(j)]->timer.armed()) ref.erase({std::get<0>(key[size_t(j)]), std::get<1>(key[size_t(j)]), j});
        wheel.cancel(probes[size_t(j)]->timer);
      } else if (action == 8 && !ref.empty()) {
        // re-arm the earliest later
        const int j = std::get<2>(*ref.begin());
        arm(j, std::get<0>(*ref.begin()) + Duration(int64_t(rng.below(uint64_t(spans[rng.below(7)])))), false);
      } else {
        const Time expect_next = ref.empty() ? kTimeNever : std::get<0>(*ref.begin());
        REQUIRE(wheel.next_expiry() == expect_next);
        target = rng.below(2) && !ref.empty() ? std::max(expect_next, now)
                                              : now + Duration(int64_t(rng.below(uint64_t(spans[rng.below(7)]))));
        wheel.advance(target);
        REQUIRE((ref.empty() || std::get<0>(*ref.begin()) > target));
        now = target;
      }
      const Time expect_next = ref.empty() ? kTimeNever : std::get<0>(*ref.begin());
      REQUIRE(wheel.next_expiry() == expect_next);
      REQUIRE(wheel.size() == ref.size());
    }
  }
}
