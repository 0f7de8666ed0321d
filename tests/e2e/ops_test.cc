// Operating a running engine: rocemu doctor against `rocemu up`'s fabric,
// healthy first, then with a misconfiguration applied while it runs.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <optional>
#include <set>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

TEST_CASE("rocemu doctor: the running built-in fabric is healthy (0); ECN turned off on TC 3 is found (1)",
          "[e2e][doctor]") {
  Fabric f;
  {
    const auto [rc, out] = f.rocemu({"doctor", "--interval", "0.2"});
    INFO(out);
    CHECK(rc == 0);
    CHECK(out.find("healthy: no findings") != std::string::npos);
  }
  {
    const auto [rc, out] = f.rocemu({"doctor", "--bogus"});
    CHECK(rc == 2);
  }
  {
    const auto [rc, out] = f.rocemu({"doctor", "--help"});
    CHECK(rc == 0);
    CHECK(out.find("Exit status: 0 healthy, 1 findings") != std::string::npos);
    const auto [lrc, list] = f.rocemu({"doctor", "--list"});
    CHECK(lrc == 0);
    for (const char* check : {"host-dscp", "cnp-class", "pfc-priorities", "mtu", "ecn-off", "pfc-without-ecn",
                              "lossless-drops", "watchdog-off", "dscp26-lossy"})
      CHECK(list.find(check) != std::string::npos);
  }
  // The misconfiguration, made the way a user makes it.
  const auto [set_rc, set_out] =
      f.rocemu({"nv", "set", "qos", "congestion-control", "default-global", "traffic-class", "3", "ecn", "disable"});
  INFO(set_out);
  REQUIRE(set_rc == 0);
  // Where `nv set` stages (NVUE's way), the change takes effect on apply;
  // where it applies at once, there is nothing to apply and this fails.
  f.rocemu({"nv", "config", "apply"});
  {
    const auto [rc, out] = f.rocemu({"doctor", "--interval", "0.2"});
    INFO(out);
    CHECK(rc == 1);
    CHECK(out.find("[ecn-off] sw1: ECN marking is off on the RoCE traffic class") != std::string::npos);
    CHECK(out.find("fix:") != std::string::npos);
  }
  {
    const auto [rc, out] = f.rocemu({"doctor", "-o", "json", "--interval", "0"});
    INFO(out);
    CHECK(rc == 1);
    const auto j = nlohmann::json::parse(out);
    CHECK(j["healthy"] == false);
    REQUIRE(j["findings"].size() == 1);
    CHECK(j["findings"][0]["check"] == "ecn-off");
    CHECK(j["findings"][0]["evidence"].get<std::string>().find("TC 3") != std::string::npos);
  }
}

TEST_CASE("rocemu doctor without an engine: a one-line error, exit 1", "[e2e][doctor]") {
  char tmpl[] = "/tmp/rocemu-doctor-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  const auto [rc, out] = run({bin("rocemu"), "doctor"}, {"ROCEMU_RUNTIME_DIR=" + std::string(tmpl)});
  INFO(out);
  CHECK(rc == 1);
  CHECK(out.find("no rocemu engine is running") != std::string::npos);
  rmdir(tmpl);
}

TEST_CASE("rocemu up --metrics-port: every counter at 127.0.0.1:PORT/metrics, read by the Prometheus parser",
          "[e2e][metrics]") {
  const int port = pick_port();
  Fabric f("", {"--metrics-port", std::to_string(port)});
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  // Scraped with Python's HTTP client, parsed with python3-prometheus-client.
  const std::string script = "import json, sys, urllib.request\n"
                             "sys.path.insert(0, '" + std::string(ROCEMU_SOURCE_DIR) + "/tests/integration')\n"
                             "from prometheus_client.parser import text_string_to_metric_families\n"
                             "text = urllib.request.urlopen('" + url + "', timeout=20).read().decode()\n"
                             "fams = {m.name: [[s.name, s.labels, s.value] for s in m.samples]\n"
                             "        for m in text_string_to_metric_families(text)}\n"
                             "print(json.dumps(fams))\n";
  const auto [rc, out] = run({"/usr/bin/python3", "-c", script}, {}, std::chrono::seconds(60));
  INFO(out.substr(0, 2000));
  REQUIRE(rc == 0);
  const auto fams = nlohmann::json::parse(out);
  REQUIRE(fams.contains("rocemu_nic_tx_roce_packets"));
  std::set<std::string> nodes;
  for (const auto& s : fams["rocemu_nic_tx_roce_packets"]) nodes.insert(s[1]["node"].get<std::string>());
  CHECK(nodes == std::set<std::string>{"h1", "h2"});
  // The switch's per-priority PFC counters, its ports named as `nv` names them.
  REQUIRE(fams.contains("rocemu_switch_pfc_tx_pause_packets"));
  std::set<std::string> ports;
  for (const auto& s : fams["rocemu_switch_pfc_tx_pause_packets"]) ports.insert(s[1]["port"].get<std::string>());
  CHECK(ports.size() == 2);
  const auto [nv_rc, nv_out] = f.rocemu({"nv", "show", "interface", *ports.begin()});
  INFO(nv_out);
  CHECK(nv_rc == 0);
}

namespace {

// One telemetry command through DPDK's own client (dpdk-telemetry.py reads
// commands from standard input and prints each reply as JSON).
nlohmann::json telemetry(const std::string& prefix, const std::string& command) {
  const auto [rc, out] =
      run({"/bin/sh", "-c", "echo '" + command + "' | /usr/bin/dpdk-telemetry.py -f " + prefix}, {},
          std::chrono::seconds(30));
  INFO(command << ": " << out.substr(0, 2000));
  REQUIRE(rc == 0);
  const auto j = nlohmann::json::parse(out, nullptr, false);
  REQUIRE_FALSE(j.is_discarded());
  const std::string key = command.substr(0, command.find(','));
  REQUIRE(j.contains(key));
  return j[key];
}

}  // namespace

TEST_CASE("DPDK telemetry: dpdk-telemetry.py -f PREFIX, as rocemu status gives it, reads counters that move",
          "[e2e][metrics]") {
  Fabric f;
  const auto [st, status] = f.rocemu({"status"});
  INFO(status);
  REQUIRE(st == 0);
  const std::string want = "dpdk-telemetry.py -f rocemu-" + std::to_string(f.engine_pid()) + ")";
  REQUIRE_THAT(status, Catch::Contains("telemetry: ") && Catch::Contains(want));
  const std::string prefix = "rocemu-" + std::to_string(f.engine_pid());

  const auto nodes = telemetry(prefix, "/rocemu/nodes");
  CHECK(nodes == nlohmann::json::array({"h1", "h2", "sw1"}));
  const auto scopes = telemetry(prefix, "/rocemu/scopes");
  CHECK(std::find(scopes.begin(), scopes.end(), "sw1/swp1") != scopes.end());
  const auto before = telemetry(prefix, "/rocemu/counters,h1");
  REQUIRE(before.contains("tx_roce_packets"));
  CHECK(before.contains("rx_prio3_pause_duration"));

  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-n",
                                        "100", "-s", "4096"};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  REQUIRE(r.client == 0);
  const auto after = telemetry(prefix, "/rocemu/counters,h1");
  INFO(before.dump() << "\n" << after.dump());
  CHECK(after["tx_roce_packets"].get<uint64_t>() >= before["tx_roce_packets"].get<uint64_t>() + 100);
  // The same as the engine's own view.
  const auto [cst, counters] = f.rocemu({"counters", "h1"});
  CHECK_THAT(counters, Catch::Contains("h1 tx_roce_packets " + std::to_string(after["tx_roce_packets"].get<uint64_t>()) + "\n"));
  // A switch port's counters, names as telemetry keys; a prefix narrows them.
  const auto q3 = telemetry(prefix, "/rocemu/counters,sw1/swp1,queue3");
  REQUIRE(q3.is_object());
  CHECK(q3.contains("queue3/ecn_marked_packets"));
  for (const auto& item : q3.items()) CHECK(item.key().rfind("queue3/", 0) == 0);
  CHECK(telemetry(prefix, "/rocemu/counters,bogus").get<std::string>() == "no scope 'bogus' (/rocemu/scopes lists them)");
}

namespace {

// The TX Gbit/s of `name`'s row on a top screen, if the row is there.
std::optional<double> tx_gbps(const std::string& screen, const std::string& name) {
  std::istringstream in(screen);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string first;
    double rx = 0, tx = 0;
    if (w >> first && first == name && w >> rx >> tx) return tx;
  }
  return std::nullopt;
}

size_t occurrences(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) n++;
  return n;
}

}  // namespace

TEST_CASE("rocemu top: --once and -n frames; under tmux, the live view of ib_write_bw through the switch",
          "[e2e][top]") {
  Fabric f;
  {
    const auto [rc, out] = f.rocemu({"top", "--once", "-d", "0.1"});
    INFO(out);
    CHECK(rc == 0);
    CHECK(occurrences(out, "rocemu top:") == 1);
    CHECK(out.find("\033[") == std::string::npos);  // not a terminal: no control codes
    CHECK(tx_gbps(out, "h1").has_value());
  }
  {
    const auto [rc, out] = f.rocemu({"top", "-n", "2", "-d", "0.1"});
    CHECK(rc == 0);
    CHECK(occurrences(out, "rocemu top:") == 2);
  }
  CHECK(f.rocemu({"top", "-d", "0"}).first == 2);

  const int port = pick_port();
  const std::vector<std::string> bw = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-s", "65536", "-D", "8",
                                       "-p", std::to_string(port)};
  Process server = f.exec("h2", bw);
  REQUIRE(wait_until([&] { return tcp_listening(port); }, std::chrono::seconds(30), {&server}));
  std::vector<std::string> client_argv = bw;
  client_argv.push_back("127.0.0.1");
  Process client = f.exec("h1", client_argv);

  // top in a terminal of its own (a private tmux server), read with capture-pane.
  const std::string sock = "rocemu-top-" + std::to_string(getpid());
  const auto tmux = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/tmux", "-L", sock});
    return run(args, {}, std::chrono::seconds(20));
  };
  REQUIRE(tmux({"new-session", "-d", "-s", "top", "-x", "160", "-y", "40", "/usr/bin/env",
                "ROCEMU_RUNTIME_DIR=" + f.dir(), bin("rocemu"), "top", "-d", "0.5"})
              .first == 0);
  std::string screen;
  const bool busy = wait_until(
      [&] {
        screen = tmux({"capture-pane", "-p", "-t", "top"}).second;
        const auto tx = tx_gbps(screen, "h1");
        return tx && *tx > 1;
      },
      std::chrono::seconds(60), {&server, &client});
  tmux({"kill-server"});
  INFO(screen);
  CHECK(busy);
  CHECK(occurrences(screen, "rocemu top:") == 1);  // redrawn in place
  CHECK(screen.find("QUEUE pkts TC0..TC7") != std::string::npos);
  CHECK(screen.find("sw1:") != std::string::npos);
  CHECK(finish(client, std::chrono::seconds(120)) == 0);
  finish(server, std::chrono::seconds(30));
}
