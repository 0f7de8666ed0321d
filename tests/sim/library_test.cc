// The scenario library (scenarios/*.yaml): every scenario runs and its
// verdict is PASS. Each one is short in virtual time; the wall time of
// each is printed so CI logs show which one grew.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>

#include "sim/runner.h"
#include "tests/sim/support.h"
#include "tests/support/eal.h"

using namespace rocemu;
using namespace rocemu::test;

TEST_CASE("Every scenario in scenarios/ passes", "[sim][library]") {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::string(ROCEMU_SOURCE_DIR) + "/scenarios"))
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 5);
  require_eal();
  for (const std::string& f : files) {
    DYNAMIC_SECTION(std::filesystem::path(f).filename().string()) {
      auto s = sim::load_scenario(f, sim_registry());
      INFO(s.status().message());
      REQUIRE(s.ok());
      CHECK(s->duration <= ms(10));  // CI has two cores and a time budget
      CHECK(!s->expectations.empty());
      const auto t0 = std::chrono::steady_clock::now();
      auto r = sim::run_scenario(s.value());
      INFO(r.status().message());
      REQUIRE(r.ok());
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      WARN(s->name << ": " << r->summary["end_us"].get<double>() << " us virtual in " << wall << " s wall");
      INFO(sim::format_verdict(s->name, r->verdict));
      CHECK(r->verdict.pass());
    }
  }
}
