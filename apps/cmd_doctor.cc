// rocemu doctor: two snapshots of the running engine `interval` apart, the
// checks of apps/doctor.h over them, findings as text or JSON.
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "apps/commands.h"
#include "apps/doctor.h"
#include "apps/runtime.h"

namespace rocemu::app {

// The fabric as the engine sees it now (its `snapshot` command).
std::optional<FabricSnapshot> fetch_snapshot(const RuntimePaths& paths, std::string& err) {
  std::string out;
  if (engine_command(paths, {"snapshot"}, out) != 0) {
    err = out;
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(out).get<FabricSnapshot>();
  } catch (const nlohmann::json::exception& e) {
    err = std::string("the engine's snapshot did not parse: ") + e.what();
    return std::nullopt;
  }
}

int cmd_doctor(const DoctorOptions& o) {
  if (o.list) {
    for (const DoctorCheck& c : doctor_checks()) std::printf("%-16s %s\n", c.name, c.title);
    return 0;
  }
  const RuntimePaths paths = runtime_paths();
  std::string err;
  auto before = fetch_snapshot(paths, err);
  if (!before) {
    std::fprintf(stderr, "rocemu doctor: %s\n", err.c_str());
    return 1;
  }
  // The counter checks compare two samples: the interval between them.
  std::this_thread::sleep_for(std::chrono::duration<double>(o.interval_s));
  auto now = fetch_snapshot(paths, err);
  if (!now) {
    std::fprintf(stderr, "rocemu doctor: %s\n", err.c_str());
    return 1;
  }
  const DoctorInput in{*now, &*before};
  const std::vector<Finding> findings = run_doctor(in);
  if (o.format == "json")
    std::printf("%s\n", findings_json(findings, in).dump(2).c_str());
  else
    std::fputs(format_findings(findings, in).c_str(), stdout);
  return findings.empty() ? 0 : 1;
}

}  // namespace rocemu::app
