// Running scenarios: the same seed gives the same bytes; expectations that
// must fail fail and ones that must pass pass (in process and as rocemu's
// exit status); a baseline notices a changed metric; JUnit output parses;
// the fault schedule acts at its times.
#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "sim/baseline.h"
#include "sim/junit.h"
#include "tests/sim/support.h"
#include "tests/support/eal.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

const std::string kPassing =
    "  - {name: completes, metric: flow_stats.all_completed, op: \"==\", value: true}\n"
    "  - {name: lossless, metric: drops.total, op: \"==\", value: 0}\n";
// No flow can beat its 100 Gbit/s link.
const std::string kFailing =
    "  - {name: faster than the wire, metric: flow_stats.throughput_gbps.max, op: \">\", value: 100}\n";

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("Two runs with the same seed write the same bytes; another seed changes them", "[sim][run]") {
  // ECN marks are drawn from the switch's seeded RNG: the seed matters.
  const std::string text = small_scenario(kPassing, 24);
  const std::string a = fresh_dir("det-a"), b = fresh_dir("det-b"), c = fresh_dir("det-c");
  REQUIRE(sim::write_outputs(run_text(text), a).ok());
  REQUIRE(sim::write_outputs(run_text(text), b).ok());
  const auto names = files_in(a);
  CHECK(names ==
        std::vector<std::string>{"cnp.csv", "dcqcn.csv", "flows.csv", "pfc.csv", "queues.csv", "summary.json"});
  REQUIRE(names == files_in(b));
  for (const auto& n : names) {
    INFO(n);
    CHECK(read_file(a + "/" + n) == read_file(b + "/" + n));
  }
  std::string other = text;
  other.replace(other.find("seed: 5"), 7, "seed: 6");
  REQUIRE(sim::write_outputs(run_text(other), c).ok());
  CHECK(read_file(a + "/queues.csv") != read_file(c + "/queues.csv"));
  for (const auto& d : {a, b, c}) std::filesystem::remove_all(d);
}

TEST_CASE("An expectation that must fail fails, one that must pass passes", "[sim][run]") {
  const sim::RunResult r = run_text(small_scenario(kPassing + kFailing));
  REQUIRE(r.verdict.checks.size() == 3);
  CHECK(r.verdict.checks[0].pass);
  CHECK(r.verdict.checks[1].pass);
  CHECK(!r.verdict.checks[2].pass);
  REQUIRE(r.verdict.checks[2].measured);
  CHECK(*r.verdict.checks[2].measured > 10);  // it did measure something real
  CHECK(*r.verdict.checks[2].measured <= 100);
  CHECK(!r.verdict.pass());
  const std::string text = sim::format_verdict("verdict", r.verdict);
  INFO(text);
  CHECK(text.find("  FAIL  faster than the wire: flow_stats.throughput_gbps.max = ") != std::string::npos);
  CHECK(text.find("verdict: FAIL (2 of 3 passed)") != std::string::npos);
}

TEST_CASE("rocemu sim exits 0 on PASS, 1 on FAIL, 2 on a bad file, and writes JUnit", "[sim][run]") {
  const std::string dir = fresh_dir("cli");
  write_file(dir + "/pass.yaml", small_scenario(kPassing));
  write_file(dir + "/fail.yaml", small_scenario(kPassing + kFailing));
  const std::string bad = small_scenario("  - {metric: nowhere, op: \"==\", value: 0}\n");
  write_file(dir + "/bad.yaml", bad);
  const std::string bad_line = std::to_string(std::count(bad.begin(), bad.end(), '\n'));  // the last line
  CHECK(run_rocemu("sim " + dir + "/pass.yaml --no-plots -o " + dir + "/out-pass", dir + "/pass.log") == 0);
  CHECK(run_rocemu("sim " + dir + "/fail.yaml --no-plots -o " + dir + "/out-fail --junit " + dir + "/junit.xml",
                   dir + "/fail.log") == 1);
  CHECK(run_rocemu("sim " + dir + "/bad.yaml --no-plots -o " + dir + "/out-bad", dir + "/bad.log") == 2);
  CHECK(run_rocemu("sim --no-such-flag", dir + "/usage.log") == 2);
  CHECK(read_file(dir + "/bad.log")
            .find("bad.yaml:" + bad_line + ": expectations[0].metric: 'nowhere' is not in summary.json") !=
        std::string::npos);
  CHECK(!std::filesystem::exists(dir + "/out-bad"));  // rejected before anything ran
  CHECK(std::filesystem::exists(dir + "/out-pass/summary.json"));
  const std::string log = read_file(dir + "/fail.log");
  INFO(log);
  CHECK(log.find("verdict: FAIL (2 of 3 passed)") != std::string::npos);
  // JUnit: well-formed XML, one test case per expectation, the failure marked.
  const std::string py =
      "/usr/bin/python3 -c \"import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); "
      "s = r.find('testsuite'); print(r.tag, r.get('tests'), r.get('failures'), s.get('name'), "
      "len(s.findall('testcase')), len(s.findall('testcase/failure')), "
      "s.find('testcase/failure/..').get('name'))\" " +
      dir + "/junit.xml > " + dir + "/junit.txt";
  REQUIRE(std::system(py.c_str()) == 0);
  CHECK(read_file(dir + "/junit.txt") == "testsuites 3 1 small 3 1 faster than the wire\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("JUnit output escapes what XML needs escaped", "[sim][run]") {
  sim::Verdict v;
  v.checks.push_back({"a < b & \"c\"", "m", "<= 1", 2.0, false});
  v.checks.push_back({"ok", "m", "== 1", 1.0, true});
  const std::string xml = sim::junit_xml({{"s<1>", &v}}, 0.5);
  CHECK(xml.find("name=\"a &lt; b &amp; &quot;c&quot;\"") != std::string::npos);
  CHECK(xml.find("<testsuite name=\"s&lt;1&gt;\" tests=\"2\" failures=\"1\"") != std::string::npos);
  CHECK(xml.find("message=\"m = 2 (expected &lt;= 1)\"") != std::string::npos);
}

TEST_CASE("A baseline passes on the run it was written from and catches a changed metric", "[sim][run]") {
  const std::string text = small_scenario(kPassing);
  auto s = sim::parse_scenario(text, "small.yaml", sim_registry());
  REQUIRE(s.ok());
  const sim::RunResult r = run_text(text);
  const std::string yaml = sim::baseline_yaml(s.value(), r.summary);
  auto b = sim::parse_baseline(yaml, "base.yaml");
  INFO(yaml);
  REQUIRE(b.ok());
  CHECK(b->scenario == "small");
  CHECK(b->metrics.size() > 20);
  CHECK(sim::compare_baseline(b.value(), r.summary).pass());

  // The same run against a baseline where the bottleneck was 10 % busier.
  const auto& want = "  \"bottleneck.utilization\": {value: ";
  const size_t at = yaml.find(want);
  REQUIRE(at != std::string::npos);
  const double util = r.summary["bottleneck"]["utilization"].get<double>();
  std::string changed = yaml;
  const size_t end = changed.find(',', at);
  changed.replace(at + std::strlen(want), end - at - std::strlen(want), std::to_string(util * 1.1));
  auto b2 = sim::parse_baseline(changed, "base.yaml");
  REQUIRE(b2.ok());
  const sim::Verdict v = sim::compare_baseline(b2.value(), r.summary);
  CHECK(v.failures() == 1);
  for (const auto& c : v.checks)
    if (!c.pass) CHECK(c.metric == "bottleneck.utilization");

  // Absolute tolerances, and a bad file names line and field.
  auto abs = sim::parse_baseline("metrics:\n  drops.total: {value: 1, tolerance: 0.5}\n", "a.yaml");
  REQUIRE(abs.ok());
  CHECK(!sim::compare_baseline(abs.value(), r.summary).pass());  // 0 is not within 0.5 of 1
  auto bad = sim::parse_baseline("metrics:\n  drops.total: {value: 1, tolerance: lots}\n", "b.yaml");
  REQUIRE(!bad.ok());
  CHECK(bad.status().message().find("b.yaml:2: metrics.drops.total.tolerance") != std::string::npos);
}

TEST_CASE("The fault schedule acts at its times: a link down from 50 to 100 us", "[sim][run]") {
  const std::string extra = R"(faults:
  - {at: 50us, link: h0, set: {link_down: true}}
  - {at: 100us, link: h0, clear: true}
)";
  const sim::RunResult r = run_text(small_scenario(kPassing, 16, extra));
  const auto& flows = r.series.at(0);
  REQUIRE(flows.name == "flows");
  REQUIRE(flows.columns.at(0).name() == "incast-h0_gbps");
  double during = 0, before = 0, after = 0;
  for (size_t row = 0; row < flows.time_us.size(); row++) {
    const double t = flows.time_us[row], v = flows.columns[0].at(row);
    if (t > 55 && t <= 100) during += v;
    if (t > 10 && t <= 50) before += v;
    if (t > 100) after += v;
  }
  INFO("before " << before << " during " << during << " after " << after);
  CHECK(during == 0);  // nothing new leaves h0 while its link is down
  CHECK(before > 0);
  CHECK(after > 0);  // ... and it goes on once the link is back (after a timeout)
  CHECK(r.summary["drops"]["by_reason"]["link_down"].get<uint64_t>() > 0);
  CHECK(r.summary["retransmissions"]["timeouts"].get<uint64_t>() > 0);
  CHECK(r.summary["flow_stats"]["all_completed"].get<bool>());
  CHECK(r.summary["flows"]["incast-h0"]["fct_us"].get<double>() >
        r.summary["flows"]["incast-h1"]["fct_us"].get<double>());
}

TEST_CASE("A run covers its whole duration even when the sample interval does not divide it", "[sim][run]") {
  std::string text = small_scenario(kPassing, 64);
  auto swap = [&](const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  swap("duration: 2ms\n", "duration: 300us\nuntil: duration\n");
  swap("sample_interval: 5us", "sample_interval: 1ms");  // longer than the run: one sample, at 0
  const sim::RunResult r = run_text(text);
  INFO(r.summary.dump());
  CHECK(r.summary["end_us"].get<double>() == Approx(300));
  CHECK(r.summary["flows"]["incast-h0"]["bytes"].get<uint64_t>() > 0);
}

TEST_CASE("VXLAN and ECN end to end: a congested spine marks the outer header CE, leaf2 copies it inward (RFC 6040), "
          "the receiving NIC sends CNPs and DCQCN cuts the senders",
          "[sim][run]") {
  auto s = sim::load_scenario(std::string(ROCEMU_SOURCE_DIR) + "/scenarios/vxlan-lossless.yaml", sim_registry());
  INFO(s.status().message());
  REQUIRE(s.ok());
  // The spines' links down to leaf2 at 25G: the spines' egress queues are
  // the bottleneck (50G into leaf2, whose 100G port to h4 never queues).
  int slowed = 0;
  for (LinkSpec& l : s->topology.links) {
    if (l.a != "leaf2" || l.a_port == 0) continue;
    l.params.rate_bps = 25'000'000'000ull;
    slowed++;
  }
  REQUIRE(slowed == 2);
  s->expectations.clear();
  require_eal();
  auto r = sim::run_scenario(s.value());
  INFO(r.status().message());
  REQUIRE(r.ok());
  const sim::Json& j = r->summary;
  const uint64_t spine_marks = j["queues"]["spine1/swp2"]["tc3"]["ecn_marked_packets"].get<uint64_t>() +
                               j["queues"]["spine2/swp2"]["tc3"]["ecn_marked_packets"].get<uint64_t>();
  const uint64_t copied = j["vxlan"]["switches"]["leaf2"]["decap_ce_copied"].get<uint64_t>();
  // leaf1 marks the outer header too when the spines' PFC holds its uplinks.
  const uint64_t leaf1_marks = j["queues"]["leaf1/swp4"]["tc3"]["ecn_marked_packets"].get<uint64_t>() +
                               j["queues"]["leaf1/swp5"]["tc3"]["ecn_marked_packets"].get<uint64_t>();
  INFO("spine marks " << spine_marks << ", leaf1 uplink marks " << leaf1_marks << ", CE copied at leaf2 " << copied << ", CNPs "
                      << j["cnp"]["sent"].get<uint64_t>() << ", rate cuts " << j["dcqcn"]["rate_cuts"].get<uint64_t>());
  CHECK(spine_marks > 0);
  CHECK(j["queues"]["leaf2/swp1"]["tc3"]["ecn_marked_packets"].get<uint64_t>() == 0);  // not leaf2's own marks
  CHECK(copied > 0);
  CHECK(spine_marks + leaf1_marks == copied);  // each outer mark (a packet is marked once) reached the inner header
  // Every CE the receiver saw came out of a VXLAN header at leaf2.
  CHECK(j["ecn"]["received_marked_packets"].get<uint64_t>() == copied);
  CHECK(j["cnp"]["sent"].get<uint64_t>() > 0);
  CHECK(j["cnp"]["handled"].get<uint64_t>() > 0);
  CHECK(j["dcqcn"]["rate_cuts"].get<uint64_t>() > 0);
  CHECK(j["drops"]["total"].get<uint64_t>() == 0);
  CHECK(j["flow_stats"]["all_completed"].get<bool>());
}
