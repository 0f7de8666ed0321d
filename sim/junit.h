// JUnit XML for CI: one test suite per verdict (the expectations, and the
// baseline if one was compared), one test case per check.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "sim/expect.h"

namespace rocemu::sim {

struct JunitSuite {
  std::string name;  // "lossless-incast", "lossless-incast.baseline"
  const Verdict* verdict;
};

// `wall_seconds` is the run's wall time (the suites' time attribute).
std::string junit_xml(const std::vector<JunitSuite>& suites, double wall_seconds);

}  // namespace rocemu::sim
