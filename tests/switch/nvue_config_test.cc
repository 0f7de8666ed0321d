// NVUE's staged configuration on a running switch: `nv set`/`nv unset`
// edit the pending revision, `nv config diff` shows it, `nv config apply`
// validates it whole and applies it (a failing one changes nothing), `nv
// config show -o yaml` is the running config as a topology's switch section.
#include <catch2/catch.hpp>

#include "common/config/topology.h"
#include "switch/nvue_yaml.h"
#include "switch/switch_kind.h"
#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

// A switch section as a topology file holds it, read back.
sw::SwitchConfig load_switch_section(const std::string& yaml) {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  register_switch_kinds(reg);
  std::string doc = "nodes:\n  sw1:\n";
  size_t at = 0;
  while (at < yaml.size()) {
    const size_t nl = yaml.find('\n', at);
    doc += "    " + yaml.substr(at, nl - at) + "\n";
    at = nl == std::string::npos ? yaml.size() : nl + 1;
  }
  auto topo = parse_topology(doc, "show.yaml", reg);
  INFO(doc);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  return std::any_cast<const sw::SwitchConfig&>(topo.value().nodes[0].config);
}

}  // namespace

TEST_CASE("nv set stages; nv config diff shows it; nv config apply applies it", "[sim][switch]") {
  Star s = make_star(star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless)), 5);
  CHECK(nv_text(*s.sw, {"config", "diff"}).empty());
  REQUIRE(s.sw->nv({"set", "qos", "roce", "mode", "lossy"}).ok());
  REQUIRE(s.sw->nv({"set", "interface", "swp2", "link", "mtu", "4200"}).ok());
  // Staged only: the running switch is as it was.
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossless);
  CHECK(s.sw->config().qos.pfc.switch_priorities == 0x08);
  CHECK(!s.sw->config().interfaces[1].mtu);
  const std::string diff = nv_text(*s.sw, {"config", "diff"});
  INFO(diff);
  CHECK(diff.rfind("- set:\n", 0) == 0);
  const YAML::Node d = YAML::Load(diff);
  CHECK(d[0]["set"]["qos"]["roce"]["mode"].as<std::string>() == "lossy");
  CHECK(d[0]["set"]["qos"]["pfc"]["switch-priority"].size() == 0);  // PFC off in lossy mode
  CHECK(d[0]["set"]["interfaces"]["swp2"]["mtu"].as<int>() == 4200);
  CHECK(!d[0]["set"]["qos"]["pfc-watchdog"]);  // unchanged settings are not in the diff
  // An unset of something only staged is a change of the pending copy.
  REQUIRE(s.sw->nv({"unset", "interface", "swp2", "link", "mtu"}).ok());
  CHECK(!YAML::Load(nv_text(*s.sw, {"config", "diff"}))[0]["set"]["interfaces"]);

  CHECK(nv_text(*s.sw, {"config", "apply"}) == "applied");
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossy);
  CHECK(s.sw->config().qos.pfc.switch_priorities == 0);
  CHECK(nv_text(*s.sw, {"config", "diff"}).empty());
  CHECK(nv_text(*s.sw, {"config", "apply"}) == "no pending changes");

  // Removing what is applied shows as an unset.
  REQUIRE(s.sw->nv({"set", "interface", "swp1", "link", "mtu", "1500"}).ok());
  REQUIRE(s.sw->nv({"config", "apply"}).ok());
  // `nv show interface`: what runs (operational) and what is configured
  // (applied); a setting left to its default has no applied value.
  {
    const std::string one = nv_text(*s.sw, {"show", "interface", "swp1"});
    const std::string two = nv_text(*s.sw, {"show", "interface", "swp2"});
    INFO(one << two);
    // The columns line up under their headings.
    const auto cell = [](const std::string& table, const std::string& row_start, const std::string& heading) {
      const size_t col = table.find(heading);
      const size_t row = table.find("\n" + row_start + " ");
      if (col == std::string::npos || row == std::string::npos) return std::string("?");
      const size_t at = row + 1 + col;
      const size_t end = table.find_first_of(" \n", at);
      return at < table.size() ? table.substr(at, end - at) : std::string();
    };
    CHECK(one.find_first_not_of(' ') == one.find("operational"));
    CHECK(cell(one, "  mtu", "operational") == "1500");
    CHECK(cell(one, "  mtu", "applied") == "1500");
    CHECK(cell(two, "  mtu", "operational") == "9000");  // the attached link's
    CHECK(cell(two, "  mtu", "applied").empty());  // not configured: no applied value
    CHECK(cell(one, "  speed", "operational") == "100G");
    CHECK(cell(one, "type", "applied") == "swp");
    const auto j = nlohmann::json::parse(nv_text(*s.sw, {"show", "interface", "swp1", "-o", "json"}));
    CHECK(j["link"]["mtu"] == 1500);
    CHECK(j["link"]["speed"] == 100000000000ull);
    CHECK(j["counters"].contains("discards.no-route"));
  }
  REQUIRE(s.sw->nv({"unset", "interface", "swp1", "link", "mtu"}).ok());
  const YAML::Node u = YAML::Load(nv_text(*s.sw, {"config", "diff"}));
  CHECK(u[0]["unset"]["interfaces"]["swp1"]["mtu"].IsNull());
  CHECK(nv_text(*s.sw, {"config", "detach"}) == "pending changes dropped");
  CHECK(s.sw->config().interfaces[0].mtu == 1500u);

  // Lists and ranges of ports in show and clear.
  const auto j = nlohmann::json::parse(nv_text(*s.sw, {"show", "interface", "swp1-2", "qos", "roce", "counters", "-o", "json"}));
  CHECK(j.size() == 2);
  CHECK(j["swp1"].contains("tx-roce-stats"));
  CHECK(j["swp2"]["rx-roce-stats"]["roce-packets"].is_number());
  // As tables: each port's under its name.
  const std::string both = nv_text(*s.sw, {"show", "interface", "swp1-2", "qos", "roce", "counters"});
  CHECK(both.rfind("swp1\n====\n                             operational\n", 0) == 0);
  CHECK_THAT(both, Catch::Contains("\nswp2\n====\n"));
  CHECK(!s.sw->nv({"show", "interface", "swp1,swp3", "qos", "roce", "counters"}).ok());
  REQUIRE(s.sw->nv({"action", "clear", "interface", "swp1,swp2", "qos", "roce", "counters"}).ok());

  CHECK_THAT(s.sw->nv({"config", "bogus"}).message(), Catch::Contains("expected diff, apply, show, save or detach"));
  CHECK_THAT(s.sw->nv({"config", "apply", "now"}).message(), Catch::Contains("unexpected 'now'"));
}

TEST_CASE("nv config apply validates the whole pending config: a failing one changes nothing", "[sim][switch]") {
  Star s = make_star(star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless)), 6);
  const std::string before = sw::switch_config_text(s.sw->config());
  // Each command is good alone; together they are not (min above max).
  REQUIRE(s.sw->nv({"set", "qos", "roce", "mode", "lossy"}).ok());
  REQUIRE(s.sw->nv({"set", "qos", "congestion-control", "traffic-class", "3", "min-threshold", "2MB"}).ok());
  // A bad word is refused at `set` and leaves the pending copy as it was.
  const std::string staged = nv_text(*s.sw, {"config", "diff"});
  CHECK(!s.sw->nv({"set", "qos", "roce", "mode", "lossles"}).ok());
  CHECK(nv_text(*s.sw, {"config", "diff"}) == staged);

  const Status st = s.sw->nv({"config", "apply"});
  REQUIRE(!st.ok());
  CHECK_THAT(st.message(), Catch::Contains("qos.congestion-control.traffic-class.3") &&
                               Catch::Contains("nothing was applied"));
  CHECK(sw::switch_config_text(s.sw->config()) == before);
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossless);
  CHECK(nv_text(*s.sw, {"config", "show", "-o", "yaml"}) == before);
  CHECK(nv_text(*s.sw, {"config", "diff"}) == staged);  // kept, to be fixed
  REQUIRE(s.sw->nv({"set", "qos", "congestion-control", "traffic-class", "3", "min-threshold", "150KB"}).ok());
  CHECK(nv_text(*s.sw, {"config", "apply"}) == "applied");
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossy);
}

TEST_CASE("nv config show -o yaml is the running config as a topology's switch section", "[unit][switch]") {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  register_switch_kinds(reg);
  auto topo = parse_topology(R"(
nodes:
  sw1:
    kind: switch
    ports: 3
    mac: "02:53:57:00:10:00"
    proxy-arp: false
    interfaces:
      swp1: {address: 10.0.0.254/24, cable-length: 300, pfc-watchdog: enabled, mtu: 4200, speed: 25G}
      swp3: {faults: {loss: 0.015, delay: 2us, rate: 10G, burst: {p_good_to_bad: 0.001, p_bad_to_good: 0.3}},
             pfc-storm: {switch-priority: [3, 4], quanta: 100}}
    routes:
      - {prefix: 10.1.0.0/16, via: 10.0.0.1, interface: swp1}
      - {prefix: "fd00:1::/64", interface: swp2, mac: "02:00:00:00:01:02"}
    neighbors:
      - {ip: 10.0.0.1, mac: "02:00:00:00:00:01", interface: swp1}
    qos:
      roce: {mode: lossless}
      mapping: {trust: both, dscp: {24: 3}, pcp: {5: 0}, port-default-sp: 2}
      egress-queue-mapping: {5: 0}
      egress-scheduler: {0: {mode: dwrr, bw-percent: 40}, 3: {bw-percent: 60}}
      congestion-control: {3: {min-threshold: 100KB, max-threshold: 1MB, probability: 50}}
      pfc: {cable-length: 40, xoff-threshold: 100KB, pause-quanta: 30000}
      pfc-watchdog: {state: enabled, detection-time: 100ms, action: forward}
      packet-trim: {state: enabled, size: 512}
      buffer: {size: 8MB, ingress-lossy-alpha: 0.125}
      headroom: {cell-size: 96}
)",
                             "t.yaml", reg);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  const auto& cfg = std::any_cast<const sw::SwitchConfig&>(topo.value().nodes[0].config);
  const std::string yaml = sw::switch_config_text(cfg);
  INFO(yaml);
  const sw::SwitchConfig back = load_switch_section(yaml);
  CHECK(sw::switch_config_text(back) == yaml);
  // What the file set came back, field by field.
  CHECK(back.mac == cfg.mac);
  CHECK(!back.proxy_arp);
  CHECK(back.interfaces[0].mtu == 4200u);
  CHECK(back.interfaces[0].speed == 25'000'000'000ull);
  CHECK(back.interfaces[0].cable_length == 300u);
  CHECK(back.interfaces[0].pfc_watchdog == true);
  CHECK(back.interfaces[0].address->str() == "10.0.0.254/24");
  CHECK(back.interfaces[2].faults.loss == 0.015);
  CHECK(back.interfaces[2].faults.delay == us(2));
  CHECK(back.interfaces[2].faults.rate_bps == 10'000'000'000ull);
  CHECK(back.interfaces[2].faults.burst->p_bad_to_good == 0.3);
  CHECK(back.interfaces[2].pfc_storm.priorities == 0x18);
  CHECK(back.interfaces[2].pfc_storm.quanta == 100);
  REQUIRE(back.routes.size() == 2);
  CHECK(back.routes[1].port == 1);
  CHECK(back.routes[1].mac == cfg.routes[1].mac);
  CHECK(back.neighbors.size() == 1);
  CHECK(back.qos.roce.enable);
  CHECK(back.qos.mapping.trust == sw::Trust::kBoth);
  CHECK(back.qos.mapping.dscp_to_sp == cfg.qos.mapping.dscp_to_sp);
  CHECK(back.qos.mapping.pcp_to_sp == cfg.qos.mapping.pcp_to_sp);
  CHECK(back.qos.mapping.port_default_sp == 2);
  CHECK(back.qos.sp_to_tc == cfg.qos.sp_to_tc);
  CHECK(back.qos.scheduler[3].bw_percent == 60);
  CHECK(back.qos.congestion[3].wred.probability == 50);
  CHECK(back.qos.pfc.cable_length == 40);
  CHECK(back.qos.pfc.xoff == 100000u);
  CHECK(!back.qos.pfc.xon);
  CHECK(back.qos.pfc.pause_quanta == 30000);
  CHECK(back.qos.watchdog.action == sw::WatchdogAction::kForward);
  CHECK(back.qos.watchdog.detection_time == ms(100));
  CHECK(back.qos.trim.enable);
  CHECK(back.qos.trim.size == 512);
  CHECK(back.qos.buffer.size == 8'000'000);
  CHECK(back.qos.buffer.ingress_lossy_alpha == 0.125);
  CHECK(back.qos.headroom.cell_size == 96);
  CHECK(back.qos.roce.roce_dscp == cfg.qos.roce.roce_dscp);

  // RoCE off and lossy read back as they were too.
  for (const char* mode : {"off", "lossy", "lossy-multi-tc"}) {
    INFO(mode);
    sw::SwitchConfig c = sw::SwitchConfig::with_ports(2);
    if (std::string(mode) != "off") c.qos = sw::qos_roce_profile(*sw::parse_roce_mode(mode));
    const std::string y = sw::switch_config_text(c);
    CHECK(sw::switch_config_text(load_switch_section(y)) == y);
  }
}

TEST_CASE("nv config show -o yaml keeps every fault kind: correlations and reorder_gap read back", "[sim][switch]") {
  const sw::SwitchConfig from_file = load_switch_section(
      "kind: switch\n"
      "ports: 2\n"
      "interfaces:\n"
      "  swp1: {faults: {loss: 0.01, loss_correlation: 0.25, corrupt: 0.001, corrupt_correlation: 0.5,\n"
      "                  duplicate: 0.02, duplicate_correlation: 0.125, delay: 20us, jitter: 5us,\n"
      "                  delay_correlation: 0.75, reorder: 0.1, reorder_correlation: 0.375, reorder_gap: 4}}\n"
      "  swp2: {faults: {reorder: 0.2, reorder_delay: 3us, rate: 10G}}\n");
  Star s = make_star(star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless)), 7);
  sw::SwitchConfig cfg = s.sw->config();
  cfg.interfaces[0].faults = from_file.interfaces[0].faults;
  cfg.interfaces[1].faults = from_file.interfaces[1].faults;
  REQUIRE(s.sw->apply(cfg).ok());

  const std::string yaml = nv_text(*s.sw, {"config", "show", "-o", "yaml"});
  INFO(yaml);
  for (const char* key : {"loss_correlation", "corrupt_correlation", "duplicate_correlation", "delay_correlation",
                          "reorder_correlation", "reorder_gap", "reorder_delay"})
    CHECK_THAT(yaml, Catch::Contains(std::string(key) + ":"));
  const sw::SwitchConfig back = load_switch_section(yaml);
  const FaultConfig& a = back.interfaces[0].faults;
  CHECK(a.loss_correlation == 0.25);
  CHECK(a.corrupt_correlation == 0.5);
  CHECK(a.duplicate_correlation == 0.125);
  CHECK(a.delay_correlation == 0.75);
  CHECK(a.reorder_correlation == 0.375);
  CHECK(a.reorder_gap == 4u);
  CHECK(a.jitter == us(5));
  CHECK(back.interfaces[1].faults.reorder_delay == us(3));
  CHECK(back.interfaces[1].faults.rate_bps == 10'000'000'000ull);
  CHECK(sw::switch_config_text(back) == yaml);
}
