// The verdict: every expectation of a scenario (or every metric of a
// baseline) checked against summary.json, with the measured value.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/scenario.h"
#include "sim/summary.h"

namespace rocemu::sim {

struct Check {
  std::string name;
  std::string metric;
  std::string condition;           // "<= 0", "within 5% of 97.5"
  std::optional<double> measured;  // nullopt: not in the summary
  bool pass = false;
};

struct Verdict {
  std::vector<Check> checks;
  bool pass() const;
  size_t failures() const;
};

// Whether `measured` satisfies `op value`.
bool holds(Op op, double measured, double value, double within_percent);
Verdict evaluate(const std::vector<Expectation>& expectations, const Json& summary);
// One line per check ("  PASS  name: metric = 12.3 (<= 15)") and the verdict line.
std::string format_verdict(const std::string& title, const Verdict& v);
// Numbers as the verdict prints them: up to 6 significant digits.
std::string format_number(double v);

}  // namespace rocemu::sim
