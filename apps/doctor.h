// rocemu doctor: a table of named checks over a fabric snapshot
// (apps/snapshot.h), after NVIDIA NetQ's `netq check roce` and the usual
// RoCE misconfigurations. Each finding says what is wrong, where, the
// numbers that show it and the fix.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "apps/snapshot.h"

namespace rocemu::app {

struct Finding {
  std::string check;     // the check's name ("host-dscp")
  std::string subject;   // where: "h1", "sw1:swp1", "h1 -- sw1:swp1"
  std::string problem;   // one line
  std::string evidence;  // the values that show it
  std::string fix;       // what to change, in the commands or topology keys that change it
};

// Two samples: `before` (may be null: counters since the engine started)
// and `now`. Checks on counters ("climbing") read the difference.
struct DoctorInput {
  const FabricSnapshot& now;
  const FabricSnapshot* before = nullptr;
};

struct DoctorCheck {
  const char* name;
  const char* title;  // what it checks, for `rocemu doctor --list`
  void (*run)(const DoctorInput& in, std::vector<Finding>& out);
};

// Every check, in the order they run and report.
const std::vector<DoctorCheck>& doctor_checks();

std::vector<Finding> run_doctor(const DoctorInput& in);

// Below this many PFC frames sent over the sampling interval pausing is
// not "climbing" (a burst now and then is PFC doing its job).
inline constexpr uint64_t kPfcClimbingFrames = 10;

std::string format_findings(const std::vector<Finding>& findings, const DoctorInput& in);
nlohmann::json findings_json(const std::vector<Finding>& findings, const DoctorInput& in);

}  // namespace rocemu::app
