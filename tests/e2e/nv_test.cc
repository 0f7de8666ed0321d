// NVUE's staged configuration on a running engine, with real traffic:
// `rocemu nv set` stages, `rocemu nv config apply` switches the RoCE mode
// lossless -> lossy -> lossless while ib_write_bw and rocemu-verify (every
// byte checked) run between h1 and h2; both complete. A failing apply
// changes nothing, and `nv config diff` / `nv config show` prove it.
#include <nlohmann/json.hpp>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

// RoCE packets sw1 has sent to h2 so far (its swp2).
uint64_t roce_to_h2(const Fabric& f) {
  const auto [st, out] = f.rocemu({"nv", "show", "interface", "swp2", "qos", "roce", "counters", "-o", "json"});
  REQUIRE(st == 0);
  return nlohmann::json::parse(out)["tx-roce-stats"]["roce-packets"].get<uint64_t>();
}

// Waits, by the switch's own counter, until `n` more RoCE packets crossed
// it; false if the traffic ended first.
bool wait_packets(const Fabric& f, uint64_t n, const std::atomic<int>& running) {
  const uint64_t from = roce_to_h2(f);
  while (running.load() == 2)
    if (roce_to_h2(f) >= from + n) return true;
  return false;
}

std::string applied_mode(const Fabric& f) {
  const auto [st, out] = f.rocemu({"nv", "show", "qos", "roce", "-o", "json"});
  REQUIRE(st == 0);
  return nlohmann::json::parse(out)["mode"].get<std::string>();
}

void switch_mode(const Fabric& f, const std::string& mode) {
  auto [st, out] = f.rocemu({"nv", "set", "qos", "roce", "mode", mode});
  INFO(out);
  REQUIRE(st == 0);
  std::tie(st, out) = f.rocemu({"nv", "config", "diff"});
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::StartsWith("- set:") && Catch::Contains("mode: " + mode));
  std::tie(st, out) = f.rocemu({"nv", "config", "apply"});
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("applied"));
  CHECK(applied_mode(f) == mode);
}

}  // namespace

TEST_CASE("nv config apply switches lossless -> lossy -> lossless under ib_write_bw and rocemu-verify",
          "[e2e][nv]") {
  Fabric f;
  REQUIRE(applied_mode(f) == "lossless");
  const int port = pick_port();
  const int vport = pick_port();
  std::atomic<int> running{2};
  PairResult w, v;
  std::thread bw([&] {
    const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port),
                                          "-D", "6"};
    std::vector<std::string> cli = srv;
    cli.push_back("127.0.0.1");
    w = run_pair(f, "h2", "h1", srv, cli, port);
    running--;
  });
  std::thread verify([&] {
    v = run_pair(f, "h2", "h1", {bin("rocemu-verify"), "--server", "--port", std::to_string(vport), "--iters", "3000"},
                 {bin("rocemu-verify"), "--connect", "127.0.0.1", "--port", std::to_string(vport), "--iters", "3000"},
                 vport);
    running--;
  });
  // Each switch happens with both pairs still moving data.
  const bool first = wait_packets(f, 2000, running);
  if (first) switch_mode(f, "lossy");
  const bool second = first && wait_packets(f, 2000, running);
  if (second) switch_mode(f, "lossless");
  const bool both_running_after = running.load() == 2;
  bw.join();
  verify.join();
  INFO("ib_write_bw client:\n" << w.client_out << "\nserver:\n" << w.server_out);
  INFO("rocemu-verify client:\n" << v.client_out << "\nserver:\n" << v.server_out);
  CHECK(first);
  CHECK(second);
  CHECK(both_running_after);
  CHECK(w.client == 0);
  CHECK(w.server == 0);
  CHECK(v.client == 0);
  CHECK(v.server == 0);
  CHECK_THAT(v.server_out, Catch::Contains("all good"));
  CHECK(applied_mode(f) == "lossless");
}

TEST_CASE("A failing nv config apply changes nothing; nv config show -o yaml and save", "[e2e][nv]") {
  Fabric f;
  auto [st, before] = f.rocemu({"nv", "config", "show", "-o", "yaml"});
  REQUIRE(st == 0);
  CHECK_THAT(before, Catch::StartsWith("kind: switch") && Catch::Contains("swp2:"));
  std::string out;
  // Staged: good words each, invalid together (ECN min above max).
  REQUIRE(f.rocemu({"nv", "set", "qos", "roce", "mode", "lossy"}).first == 0);
  REQUIRE(f.rocemu({"nv", "set", "qos", "congestion-control", "traffic-class", "3", "min-threshold", "2MB"}).first ==
          0);
  // A bad value is refused at once (usage, exit 2) and not staged.
  std::tie(st, out) = f.rocemu({"nv", "set", "interface", "swp1", "link", "mtu", "99999"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("99999") && Catch::Contains("68..9216"));
  const auto [dst, diff] = f.rocemu({"nv", "config", "diff"});
  REQUIRE(dst == 0);
  CHECK_THAT(diff, Catch::Contains("mode: lossy") && Catch::Contains("min-threshold: 2000000") &&
                       !Catch::Contains("mtu"));
  CHECK(applied_mode(f) == "lossless");

  std::tie(st, out) = f.rocemu({"nv", "config", "apply"});
  INFO(out);
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("qos.congestion-control.traffic-class.3") && Catch::Contains("nothing was applied"));
  // Nothing changed; what was staged is still there to fix.
  CHECK(applied_mode(f) == "lossless");
  CHECK(f.rocemu({"nv", "config", "show", "-o", "yaml"}).second == before);
  CHECK(f.rocemu({"nv", "config", "diff"}).second == diff);
  REQUIRE(f.rocemu({"nv", "config", "detach"}).first == 0);
  CHECK(f.rocemu({"nv", "config", "diff"}).second.empty());

  // config save: to a file named, or to the runtime directory's nv-startup.yaml.
  const std::string file = f.dir() + "/saved.yaml";
  std::tie(st, out) = f.rocemu({"nv", "config", "save", file});
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains(file));
  std::ifstream in(file);
  std::stringstream saved;
  saved << in.rdbuf();
  CHECK(saved.str() == before);
  std::tie(st, out) = f.rocemu({"nv", "config", "save"});
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains(f.dir() + "/nv-startup.yaml"));
  CHECK(std::ifstream(f.dir() + "/nv-startup.yaml").good());
  CHECK(f.rocemu({"nv", "config", "bogus"}).first == 2);

  // The CLI prints NVUE's table by default, plain values with -o json.
  std::tie(st, out) = f.rocemu({"nv", "show", "qos", "roce"});
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("operational  applied\n") && Catch::Contains("\nmode ") &&
                      Catch::Contains("\nRoCE SP->TC mapping and ETS\n===") && !Catch::Contains("{"));
  std::tie(st, out) = f.rocemu({"nv", "show", "interface", "swp1", "counters", "qos", "ingress-buffer-stats"});
  REQUIRE(st == 0);
  CHECK(out.rfind("priority-group  rx-frames  rx-buffer-discards  rx-shared-buffer-discards\n", 0) == 0);

  // A fault added outside NVUE while a change is staged: the diff does not
  // show it as a change to undo, and applying the staged change keeps it.
  REQUIRE(f.rocemu({"nv", "set", "qos", "pfc-watchdog", "detection-time", "300ms"}).first == 0);
  std::tie(st, out) = f.rocemu({"fault", "add", "sw1:swp2", "pfc-storm", "prio", "5"});
  INFO(out);
  REQUIRE(st == 0);
  std::tie(st, out) = f.rocemu({"nv", "config", "diff"});
  INFO(out);
  CHECK_THAT(out, Catch::Contains("detection-time: 300ms") && !Catch::Contains("pfc-storm"));
  REQUIRE(f.rocemu({"nv", "config", "apply"}).first == 0);
  std::tie(st, out) = f.rocemu({"nv", "config", "show", "-o", "yaml"});
  CHECK_THAT(out, Catch::Contains("pfc-storm:") && Catch::Contains("detection-time: 300ms"));
  REQUIRE(f.rocemu({"fault", "clear"}).first == 0);
  std::tie(st, out) = f.rocemu({"nv", "config", "show", "-o", "yaml"});
  CHECK_THAT(out, !Catch::Contains("pfc-storm:"));
}
