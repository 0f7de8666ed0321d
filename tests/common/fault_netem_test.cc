// netem's correlations, symmetric jitter and reordering, frame by frame
// through one fault (common/engine/fault.h), against what the model says:
// each expected value is worked out here from the parameters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/config/fault_kinds.h"
#include "common/engine/fault.h"

using namespace rocemu;

namespace {

FaultConfig netem(std::vector<std::string> words) {
  auto r = config::parse_fault_words(words);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return r.value().faults;
}

// A frame that is not RoCE: only the random faults touch it.
const std::vector<uint8_t> kFrame = [] {
  std::vector<uint8_t> f(100, 0xab);
  f[12] = 0x88;
  f[13] = 0xb5;
  return f;
}();

std::vector<FaultDecision> decide(const FaultConfig& fc, size_t frames, uint64_t seed) {
  FaultInjector inj(seed);
  inj.configure(fc);
  std::vector<FaultDecision> out;
  out.reserve(frames);
  for (size_t i = 0; i < frames; i++) out.push_back(inj.decide(kFrame.data(), uint32_t(kFrame.size())));
  return out;
}

// Runs of consecutive true values.
std::vector<size_t> runs(const std::vector<bool>& v) {
  std::vector<size_t> r;
  size_t n = 0;
  for (bool b : v) {
    if (b) {
      n++;
    } else if (n > 0) {
      r.push_back(n);
      n = 0;
    }
  }
  if (n > 0) r.push_back(n);
  return r;
}

}  // namespace

TEST_CASE("netem's correlated forms read as netem writes them, and back", "[unit][config]") {
  const FaultConfig l = netem({"loss", "1%", "25%"});
  CHECK(l.loss == Approx(0.01));
  CHECK(l.loss_correlation == Approx(0.25));
  CHECK(netem({"loss", "random", "1%", "25%"}).loss_correlation == Approx(0.25));
  const FaultConfig d = netem({"delay", "100us", "10us", "25%"});
  CHECK(d.delay == us(100));
  CHECK(d.jitter == us(10));
  CHECK(d.delay_correlation == Approx(0.25));
  CHECK(netem({"delay", "100us", "10us", "distribution", "uniform"}).jitter == us(10));
  CHECK(netem({"duplicate", "1%", "25%"}).duplicate_correlation == Approx(0.25));
  CHECK(netem({"corrupt", "0.1%", "5%"}).corrupt_correlation == Approx(0.05));
  const FaultConfig r = netem({"delay", "10ms", "reorder", "25%", "50%"});
  CHECK(r.reorder == Approx(0.25));
  CHECK(r.reorder_correlation == Approx(0.5));
  CHECK(r.reorder_gap == 1);
  CHECK(netem({"delay", "10ms", "reorder", "25%", "gap", "5"}).reorder_gap == 5);
  CHECK(netem({"delay", "10ms", "reorder", "100%", "50%", "gap", "5"}).reorder_gap == 5);
  CHECK(netem({"reorder", "25%", "delay", "10ms", "gap", "3"}).reorder_gap == 3);  // tc takes gap anywhere
  // rocemu's own: without a delay the chosen frames are held back.
  CHECK(netem({"reorder", "25%", "50%", "20us"}).reorder_delay == us(20));

  for (const std::string& words :
       {std::string("loss 1% 25%"), std::string("delay 100us 10us 25%"), std::string("duplicate 1% 25%"),
        std::string("corrupt 0.1% 5%"), std::string("delay 10ms reorder 25% 50% gap 5"),
        std::string("reorder 25% 50% 5us")}) {
    std::vector<std::string> w;
    for (size_t at = 0; at < words.size();) {
      const size_t sp = std::min(words.find(' ', at), words.size());
      w.push_back(words.substr(at, sp - at));
      at = sp + 1;
    }
    CHECK(config::describe_faults(netem(w)) == words);
  }

  auto error = [](std::vector<std::string> w) {
    auto parsed = config::parse_fault_words(w);
    REQUIRE_FALSE(parsed.ok());
    return parsed.status().message();
  };
  CHECK(error({"loss", "1%", "25"}) == "loss correlation: '25' needs a unit (25%)");
  CHECK(error({"loss", "1%", "125%"}) == "loss correlation: '125%' is not a percentage from 0% to 100%");
  CHECK(error({"delay", "100us", "25%"}) == "delay: a correlation (25%) follows a jitter (delay 100us 10us 25%)");
  CHECK(error({"delay", "1ms", "1us", "distribution", "normal"}) ==
        "delay distribution: 'normal': the jitter is uniform only (distribution uniform)");
  CHECK(error({"gap", "5"}) == "gap: needs reorder P% (as netem: reorder 25% gap 5)");
  CHECK(error({"delay", "1ms", "reorder", "25%", "gap", "0"}) == "reorder gap: '0' is not a count from 1");
  CHECK(error({"delay", "1ms", "reorder", "25%", "5us"}).rfind("reorder: with a delay the frames reordered go at once", 0) == 0);
}

TEST_CASE("Correlated loss keeps its rate, and its bursts are as long as the correlation makes them", "[unit][engine]") {
  const double p = 0.01, rho = 0.25;  // loss 1% 25%
  const FaultConfig fc = netem({"loss", "1%", "25%"});
  constexpr size_t kFrames = 1'000'000;
  const auto d = decide(fc, kFrames, 11);
  std::vector<bool> lost(kFrames);
  for (size_t i = 0; i < kFrames; i++) lost[i] = d[i].drop;
  const double rate = double(std::count(lost.begin(), lost.end(), true)) / double(kFrames);
  // A draw repeats the last with probability rho: the loss sequence is a
  // two-state chain with P(loss | loss) = rho + (1 - rho) p and
  // P(loss | kept) = (1 - rho) p. Stationary rate p; lag-1 correlation rho;
  // the variance of the mean that of independent trials x (1 + rho) / (1 - rho).
  const double sigma = std::sqrt(p * (1 - p) / double(kFrames) * (1 + rho) / (1 - rho));
  INFO("loss rate " << rate << ", expected " << p << " +- " << sigma);
  CHECK(std::abs(rate - p) < 4 * sigma);
  // Bursts are geometric: mean 1 / (1 - P(loss | loss)).
  const std::vector<size_t> bursts = runs(lost);
  REQUIRE(bursts.size() > 1000);
  double mean = 0;
  for (size_t b : bursts) mean += double(b);
  mean /= double(bursts.size());
  const double stay = rho + (1 - rho) * p;
  const double want = 1 / (1 - stay);
  const double burst_sigma = std::sqrt(stay) / (1 - stay) / std::sqrt(double(bursts.size()));  // sd of a geometric mean
  INFO("mean burst " << mean << ", expected " << want << " +- " << burst_sigma);
  CHECK(std::abs(mean - want) < 4 * burst_sigma);
  // P(loss | the frame before was lost), measured.
  size_t pairs = 0, both = 0;
  for (size_t i = 1; i < kFrames; i++)
    if (lost[i - 1]) {
      pairs++;
      both += lost[i];
    }
  const double cond = double(both) / double(pairs);
  const double cond_sigma = std::sqrt(stay * (1 - stay) / double(pairs));
  INFO("P(loss | loss) " << cond << ", expected " << stay << " +- " << cond_sigma);
  CHECK(std::abs(cond - stay) < 4 * cond_sigma);

  // Without correlation the same rate, in bursts of 1 / (1 - p).
  const auto plain = decide(netem({"loss", "1%"}), kFrames, 11);
  std::vector<bool> lost0(kFrames);
  for (size_t i = 0; i < kFrames; i++) lost0[i] = plain[i].drop;
  const std::vector<size_t> b0 = runs(lost0);
  double mean0 = 0;
  for (size_t b : b0) mean0 += double(b);
  mean0 /= double(b0.size());
  CHECK(std::abs(mean0 - 1 / (1 - p)) < 4 * std::sqrt(p) / (1 - p) / std::sqrt(double(b0.size())));
  CHECK(mean > mean0 + 0.2);  // the correlation made them longer
}

TEST_CASE("Correlated duplicate and corrupt keep their rates", "[unit][engine]") {
  constexpr size_t kFrames = 400'000;
  const double p = 0.05, rho = 0.5;
  const auto d = decide(netem({"duplicate", "5%", "50%", "corrupt", "5%", "50%"}), kFrames, 3);
  size_t dup = 0, bad = 0, dup_pairs = 0, dup_both = 0;
  for (size_t i = 0; i < kFrames; i++) {
    dup += d[i].duplicate;
    bad += d[i].corrupt;
    if (i > 0 && d[i - 1].duplicate) {
      dup_pairs++;
      dup_both += d[i].duplicate;
    }
  }
  const double sigma = std::sqrt(p * (1 - p) / double(kFrames) * (1 + rho) / (1 - rho));
  CHECK(std::abs(double(dup) / kFrames - p) < 4 * sigma);
  CHECK(std::abs(double(bad) / kFrames - p) < 4 * sigma);
  const double stay = rho + (1 - rho) * p;
  CHECK(std::abs(double(dup_both) / double(dup_pairs) - stay) < 4 * std::sqrt(stay * (1 - stay) / double(dup_pairs)));
}

TEST_CASE("delay D J is D give or take J, uniform, its mean D; with a correlation, successive delays follow it",
          "[unit][engine]") {
  constexpr size_t kFrames = 200'000;
  const Duration D = us(100), J = us(10);
  for (const double rho : {0.0, 0.25}) {
    INFO("correlation " << rho);
    std::vector<std::string> w = {"delay", "100us", "10us"};
    if (rho > 0) w.push_back("25%");
    const auto d = decide(netem(w), kFrames, 5);
    std::vector<double> x(kFrames);
    for (size_t i = 0; i < kFrames; i++) {
      REQUIRE(d[i].delayed);
      REQUIRE(d[i].extra_delay >= D - J);
      REQUIRE(d[i].extra_delay < D + J);
      x[i] = double(d[i].extra_delay.count());
    }
    double mean = 0;
    for (double v : x) mean += v;
    mean /= double(kFrames);
    // uniform on [D - J, D + J): sd J / sqrt(3); with correlation rho the
    // mean's variance grows by (1 + rho) / (1 - rho).
    const double sd = double(J.count()) / std::sqrt(3.0);
    const double sigma = sd / std::sqrt(double(kFrames)) * std::sqrt((1 + rho) / (1 - rho));
    INFO("mean " << mean << " ps, expected " << D.count() << " +- " << sigma);
    CHECK(std::abs(mean - double(D.count())) < 4 * sigma);
    // Both halves equally: the jitter is symmetric.
    const size_t below = size_t(std::count_if(x.begin(), x.end(), [&](double v) { return v < double(D.count()); }));
    CHECK(std::abs(double(below) / kFrames - 0.5) < 4 * 0.5 / std::sqrt(double(kFrames)) * std::sqrt((1 + rho) / (1 - rho)));
    // Lag-1 correlation of successive delays.
    double cov = 0, var = 0;
    for (size_t i = 1; i < kFrames; i++) cov += (x[i] - mean) * (x[i - 1] - mean);
    for (double v : x) var += (v - mean) * (v - mean);
    const double r1 = cov / var;
    INFO("lag-1 correlation " << r1);
    CHECK(std::abs(r1 - rho) < 4 / std::sqrt(double(kFrames)));
  }
  // A jitter above the delay never makes it negative.
  const auto low = decide(netem({"delay", "1us", "5us"}), 10'000, 9);
  for (const FaultDecision& f : low) CHECK(f.extra_delay >= Duration(0));
}

TEST_CASE("reorder as netem: with a delay the chosen frames skip it; gap N lets only every Nth be chosen",
          "[unit][engine]") {
  constexpr size_t kFrames = 200'000;
  {
    const auto d = decide(netem({"delay", "10ms", "reorder", "25%", "50%"}), kFrames, 7);
    size_t now = 0;
    for (const FaultDecision& f : d) {
      if (f.extra_delay == Duration(0)) now++;
      else CHECK(f.extra_delay == ms(10));
    }
    const double rho = 0.5, p = 0.25;
    const double sigma = std::sqrt(p * (1 - p) / double(kFrames) * (1 + rho) / (1 - rho));
    CHECK(std::abs(double(now) / kFrames - p) < 4 * sigma);
  }
  {
    // reorder 100% gap 5: exactly every 5th frame goes at once.
    const auto d = decide(netem({"delay", "10ms", "reorder", "100%", "gap", "5"}), 1000, 7);
    for (size_t i = 0; i < d.size(); i++) {
      INFO("frame " << i);
      CHECK((d[i].extra_delay == Duration(0)) == (i % 5 == 4));
    }
    // reorder 50% gap 5: after one goes at once, the next 4 never do.
    const auto h = decide(netem({"delay", "10ms", "reorder", "50%", "gap", "5"}), kFrames, 7);
    size_t last = 0, chosen = 0;
    bool first = true;
    for (size_t i = 0; i < h.size(); i++) {
      if (h[i].extra_delay != Duration(0)) continue;
      if (!first) CHECK(i - last >= 5);
      first = false;
      last = i;
      chosen++;
    }
    // Each wait is 4 frames then a geometric number of tries: 4 + 1 / p.
    CHECK(std::abs(double(kFrames) / double(chosen) - (4 + 1 / 0.5)) < 0.1);
  }
  {
    // Without a delay: held back the given time (rocemu's form).
    const auto d = decide(netem({"reorder", "10%", "20us"}), 10'000, 7);
    size_t held = 0;
    for (const FaultDecision& f : d) {
      CHECK((f.extra_delay == Duration(0) || f.extra_delay == us(20)));
      held += f.extra_delay == us(20);
    }
    CHECK(held > 800);
    CHECK(held < 1200);
  }
}
