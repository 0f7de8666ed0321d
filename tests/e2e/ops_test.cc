// Operating a running engine: rocemu doctor against `rocemu up`'s fabric,
// healthy first, then with a misconfiguration applied while it runs.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <set>

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
  // The misconfiguration, made the way a user makes it.
  const auto [set_rc, set_out] =
      f.rocemu({"nv", "set", "qos", "congestion-control", "default-global", "traffic-class", "3", "ecn", "disable"});
  INFO(set_out);
  REQUIRE(set_rc == 0);
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
