// The fault kinds of `rocemu fault add` in tc-netem's forms
// (common/config/fault_kinds.h), and Gilbert-Elliott loss as netem defines it.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/config/fault_kinds.h"
#include "common/config/topology.h"
#include "common/engine/basic_nodes.h"
#include "tests/support/eal.h"

using namespace rocemu;

namespace {

Result<config::FaultWords> parse(std::vector<std::string> w) { return config::parse_fault_words(w); }

FaultConfig must(std::vector<std::string> w) {
  auto r = parse(w);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return r.value().faults;
}

std::string error(std::vector<std::string> w) {
  auto r = parse(w);
  REQUIRE_FALSE(r.ok());
  const std::string m = r.status().message();
  CHECK(m.find('\n') == std::string::npos);  // one line
  return m;
}

}  // namespace

TEST_CASE("rocemu fault add reads netem's forms, each value with its unit", "[unit][config]") {
  CHECK(must({"loss", "1%"}).loss == Approx(0.01));
  CHECK(must({"loss", "random", "0.5%"}).loss == Approx(0.005));
  FaultConfig d = must({"delay", "100us", "10us"});
  CHECK(d.delay == us(100));
  CHECK(d.jitter == us(10));
  CHECK(must({"delay", "2ms"}).jitter == Duration(0));
  CHECK(*must({"rate", "10gbit"}).rate_bps == 10'000'000'000ull);
  CHECK(must({"duplicate", "1%"}).duplicate == Approx(0.01));
  CHECK(must({"corrupt", "0.1%"}).corrupt == Approx(0.001));
  FaultConfig r = must({"reorder", "25%", "20us"});
  CHECK(r.reorder == Approx(0.25));
  CHECK(r.reorder_delay == us(20));
  CHECK(must({"reorder", "25%"}).reorder_delay == us(5));
  FaultConfig m = must({"drop", "match", "qpn=17", "psn=0x10", "opcode=10", "times=1"});
  REQUIRE(m.drop.size() == 1);
  CHECK(*m.drop[0].qpn == 17);
  CHECK(*m.drop[0].psn == 16);
  CHECK(*m.drop[0].opcode == 10);
  CHECK(m.drop[0].times == 1);
  CHECK(must({"link", "down"}).link_down);
  auto up = parse({"link", "up"});
  REQUIRE(up.ok());
  CHECK(up.value().link_up);
  CHECK_FALSE(up.value().faults.any());
  // Several kinds in one line, as netem takes them.
  FaultConfig both = must({"delay", "100us", "loss", "1%", "rate", "25G"});
  CHECK(both.delay == us(100));
  CHECK(both.loss == Approx(0.01));
  CHECK(*both.rate_bps == 25'000'000'000ull);
  // netem's defaults for gemodel: r = 1 - p, 1-h = 100%, 1-k = 0%.
  FaultConfig ge = must({"loss", "gemodel", "2%"});
  REQUIRE(ge.burst);
  CHECK(ge.burst->p_good_to_bad == Approx(0.02));
  CHECK(ge.burst->p_bad_to_good == Approx(0.98));
  CHECK(ge.burst->loss_bad == Approx(1));
  CHECK(ge.burst->loss_good == Approx(0));
  FaultConfig ge4 = must({"loss", "gemodel", "1%", "10%", "70%", "0.1%"});
  CHECK(ge4.burst->p_bad_to_good == Approx(0.10));
  CHECK(ge4.burst->loss_bad == Approx(0.70));
  CHECK(ge4.burst->loss_good == Approx(0.001));
}

TEST_CASE("A fault value without its unit is refused in one line that names the unit", "[unit][config]") {
  CHECK(error({"delay", "5"}) == "delay: '5' needs a unit (e.g. 5us, 5ms, 5ns)");
  CHECK(error({"delay", "5us", "3"}) == "delay jitter: '3' needs a unit (e.g. 3us, 3ms, 3ns)");
  CHECK(error({"rate", "10"}) == "rate: '10' needs a unit (e.g. 10gbit, 10mbit)");
  CHECK(error({"loss", "2"}) == "loss: '2' needs a unit (2%)");
  CHECK(error({"loss", "gemodel", "1%", "0.1"}) == "loss gemodel: '0.1' needs a unit (0.1%)");
  CHECK(error({"loss", "150%"}) == "loss: '150%' is not a percentage from 0% to 100%");
  CHECK(error({"bogus", "1"}).rfind("unknown fault 'bogus' (faults: loss, delay, rate,", 0) == 0);
  CHECK(error({"drop", "match", "qpn=0x1000000"}) == "drop match: qpn: 0x1000000 does not fit in 24 bits");
  CHECK(error({"drop", "qpn=1"}).rfind("drop: expected `match`", 0) == 0);
  CHECK(error({"link", "sideways"}) == "link: expected down or up");
  CHECK(error({"loss"}) == "loss: needs a value");
}

TEST_CASE("A fault reads back in the words that made it", "[unit][config]") {
  for (const std::vector<std::string>& w : {std::vector<std::string>{"loss", "1%"},
                                           {"delay", "100us", "10us"},
                                           {"rate", "10gbit"},
                                           {"loss", "gemodel", "1%", "10%", "70%", "0.1%"},
                                           {"drop", "match", "qpn=17", "psn=5"},
                                           {"reorder", "25%", "5us"},
                                           {"link", "down"}}) {
    std::string joined;
    for (const auto& x : w) joined += (joined.empty() ? "" : " ") + x;
    CHECK(config::describe_faults(must(w)) == joined);
  }
}

TEST_CASE("The topology's faults mapping and rocemu fault add share one table of kinds", "[unit][config]") {
  for (const config::FaultKind& k : config::fault_kinds()) {
    INFO(k.key);
    CHECK(config::find_fault_kind(k.key) == &k);
    // every key the table has, the command line takes (with its unit)
    const std::string value = k.unit == config::FaultUnit::kProbability ? "1%"
                              : k.unit == config::FaultUnit::kTime      ? "1us"
                              : k.unit == config::FaultUnit::kRate      ? "1gbit"
                              : k.unit == config::FaultUnit::kCount     ? "5"
                                                                        : "";
    std::vector<std::string> w = {std::string(k.key)};
    if (!value.empty()) w.push_back(value);
    // a setting that shapes another comes with it
    const std::string key(k.key);
    if (key.ends_with("_correlation") || key == "reorder_gap") {
      const std::string base = key == "delay_correlation" ? "jitter" : key.substr(0, key.find('_'));
      w.insert(w.end(), {base, base == "jitter" ? "1us" : "1%"});
    }
    INFO(w.size());
    CHECK(parse(w).ok());
  }
  config::Context ctx("t.yaml");
  const FaultConfig fc = parse_faults(YAML::Load("{loss: 0.01, delay: 5us, rate: 10G, bogus: 1}"), "faults", ctx);
  CHECK(fc.loss == Approx(0.01));
  CHECK(fc.delay == us(5));
  CHECK(*fc.rate_bps == 10'000'000'000ull);
  CHECK_THAT(ctx.status().message(), Catch::Contains("faults.bogus"));
}

TEST_CASE("loss gemodel loses in the long run what netem's Gilbert-Elliott chain says", "[unit][config]") {
  const double p = 0.01, r = 0.10, loss_bad = 0.70, loss_good = 0.001;  // gemodel 1% 10% 70% 0.1%
  const FaultConfig fc = must({"loss", "gemodel", "1%", "10%", "70%", "0.1%"});
  auto engine = test::make_engine(5);
  std::vector<uint8_t> frame(100, 0xab);
  frame[12] = 0x88;
  frame[13] = 0xb5;
  constexpr uint64_t kFrames = 200'000;
  auto& gen = engine->add<Generator>("gen", frame, kFrames);
  auto& sink = engine->add<Sink>("sink");
  auto link = engine->connect(gen, 0, sink, 0, LinkParams{.rate_bps = 100'000'000'000ull, .delay = us(1)});
  REQUIRE(link.ok());
  link.value()->faults(0).add(1, fc);
  engine->run_to_idle();  // virtual time: 200,000 frames of 124 wire bytes at 100 Gbit/s, about 2 ms
  REQUIRE(gen.sent() == kFrames);
  // Stationary chain: in the bad state a fraction p / (p + r) of the time.
  const double pi_bad = p / (p + r);
  const double expected = pi_bad * loss_bad + (1 - pi_bad) * loss_good;
  const double lost = double(kFrames - sink.packets()) / double(kFrames);
  // Losses come in bursts: the variance of the mean is that of
  // independent trials times (1 + lambda) / (1 - lambda), lambda = 1 - p - r
  // the chain's second eigenvalue.
  const double lambda = 1 - p - r;
  const double sigma = std::sqrt(expected * (1 - expected) / double(kFrames) * (1 + lambda) / (1 - lambda));
  INFO("lost " << lost << ", expected " << expected << " +- " << sigma);
  CHECK(std::abs(lost - expected) < 4 * sigma);
  CHECK(link.value()->faults(0).find(1)->stats.dropped == kFrames - sink.packets());
}

TEST_CASE("A fault setting that would do nothing is refused, naming it, from the command line and a topology",
          "[unit][config]") {
  const std::pair<std::vector<std::string>, std::string> words[] = {
      {{"loss_correlation", "25%"}, "loss_correlation: does nothing without loss"},
      {{"corrupt_correlation", "25%"}, "corrupt_correlation: does nothing without corrupt"},
      {{"duplicate-correlation", "25%"}, "duplicate_correlation: does nothing without duplicate"},
      {{"reorder_correlation", "25%"}, "reorder_correlation: does nothing without reorder"},
      {{"delay", "10us", "delay_correlation", "25%"}, "delay_correlation: does nothing without jitter"},
      {{"reorder_gap", "5"}, "reorder_gap: does nothing without reorder"},
      {{"delay", "10us", "reorder", "25%", "reorder_delay", "3us"}, "reorder_delay: does nothing with a delay"},
  };
  for (const auto& [w, message] : words) {
    INFO(w.front());
    auto r = parse(w);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::StartsWith(message));
  }
  // With what they shape they are taken.
  CHECK(parse({"loss", "1%", "loss_correlation", "25%"}).ok());
  CHECK(parse({"reorder", "25%", "reorder_gap", "5"}).ok());
  CHECK(parse({"delay", "10us", "5us", "25%"}).ok());
  CHECK(parse({"reorder", "25%", "reorder_delay", "3us"}).ok());

  const std::pair<const char*, const char*> yaml[] = {
      {"{loss_correlation: 0.25}", "faults: loss_correlation: does nothing without loss"},
      {"{reorder_gap: 5}", "faults: reorder_gap: does nothing without reorder"},
      {"{delay: 10us, reorder: 0.25, reorder_delay: 3us}", "faults: reorder_delay: does nothing with a delay"},
  };
  for (const auto& [text, message] : yaml) {
    INFO(text);
    config::Context ctx("t.yaml");
    parse_faults(YAML::Load(text), "faults", ctx);
    REQUIRE_FALSE(ctx.ok());
    CHECK_THAT(ctx.status().message(), Catch::Contains(message));
  }
  config::Context ctx("t.yaml");
  parse_faults(YAML::Load("{loss: 0.01, loss_correlation: 0.25, reorder: 0.1, reorder_gap: 3}"), "faults", ctx);
  CHECK(ctx.ok());
}

TEST_CASE("Each fault kind of the table reads back what it set", "[unit][config]") {
  for (const config::FaultKind& k : config::fault_kinds()) {
    INFO(k.key);
    FaultConfig fc;
    const config::FaultValue before = k.get(fc);
    k.set(fc, 0.5, us(7), 3, true);
    const config::FaultValue v = k.get(fc);
    CHECK_FALSE(v == before);
    switch (k.unit) {
      case config::FaultUnit::kProbability: CHECK(v.probability == 0.5); break;
      case config::FaultUnit::kTime: CHECK(v.time == us(7)); break;
      case config::FaultUnit::kRate:
      case config::FaultUnit::kCount: CHECK(v.number == 3u); break;
      case config::FaultUnit::kFlag: CHECK(v.flag); break;
    }
  }
}
