// The rocemu command as a user meets it: help everywhere, exit statuses,
// ports by the names the user sees, fault values in tc's forms.
#include <unistd.h>

#include <algorithm>
#include <tuple>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

const std::vector<std::string> kCommands = {"up", "down",  "status",  "exec", "demo",      "nv",
                                            "nic", "counters", "fault", "capture", "sim", "completion"};

std::pair<int, std::string> rocemu_cmd(const std::vector<std::string>& args) {
  // A runtime directory with no engine in it.
  static const std::string dir = [] {
    char tmpl[] = "/tmp/rocemu-cli-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    return std::string(tmpl);
  }();
  std::vector<std::string> argv = {bin("rocemu")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {"ROCEMU_RUNTIME_DIR=" + dir}, std::chrono::seconds(30));
}

// What bash completes for the words typed so far (the last one partial).
std::string complete(const std::string& words) {
  const std::string script = "source <(" + bin("rocemu") + " completion bash); COMP_WORDS=(" + words +
                             "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _rocemu; echo \"${COMPREPLY[*]}\"";
  return run({"/bin/bash", "-c", script}, {}, std::chrono::seconds(30)).second;
}

}  // namespace

TEST_CASE("Every command answers --help itself, with exit status 0", "[e2e][cli]") {
  for (const std::string& c : kCommands) {
    const auto [st, out] = rocemu_cmd({c, "--help"});
    INFO(c << ": " << out);
    CHECK(st == 0);
    CHECK_THAT(out, Catch::Contains("rocemu " + c));
  }
  // Help after other words, as users type it.
  CHECK(rocemu_cmd({"fault", "h1", "--help"}).first == 0);
  CHECK(rocemu_cmd({"nv", "show", "--help"}).first == 0);
  const auto [vst, version] = rocemu_cmd({"--version"});
  CHECK(vst == 0);
  CHECK_THAT(version, Catch::StartsWith("rocemu 0."));
}

TEST_CASE("Usage errors exit 2, failures 1", "[e2e][cli]") {
  CHECK(rocemu_cmd({}).first == 2);
  CHECK(rocemu_cmd({"bogus"}).first == 2);
  CHECK(rocemu_cmd({"up", "--bogus"}).first == 2);
  CHECK(rocemu_cmd({"sim"}).first == 2);
  CHECK(rocemu_cmd({"status", "extra"}).first == 2);
  CHECK(rocemu_cmd({"exec", "h1"}).first == 2);
  // No engine running: a failure, in one line.
  const auto [st, out] = rocemu_cmd({"status"});
  CHECK(st == 1);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

TEST_CASE("--help never reaches the engine: `down --help` leaves it running", "[e2e][cli]") {
  Fabric f;
  for (const std::string c : {"down", "status", "counters", "nv", "fault", "capture"}) {
    const auto [st, out] = f.rocemu({c, "--help"});
    INFO(c << ": " << out);
    CHECK(st == 0);
    CHECK_THAT(out, Catch::StartsWith("usage: rocemu " + c));
  }
  CHECK(f.rocemu({"status"}).first == 0);
  // exec's words after the node belong to the program, its --help too.
  Process p = f.exec("h1", {"/usr/bin/printf", "%s", "--help"});
  CHECK(finish(p, std::chrono::seconds(30)) == 0);
  CHECK_THAT(p.output, Catch::StartsWith("--help"));
}

TEST_CASE("Ports are named as on the switch; unknown ones are errors naming the valid ones", "[e2e][cli]") {
  Fabric f;
  // The built-in fabric: h1 on sw1's swp1, h2 on swp2.
  auto [st, out] = f.rocemu({"fault", "sw1:swp2", "loss", "1%"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("sw1:swp2") && Catch::Contains("h2:0-sw1:1"));
  std::tie(st, out) = f.rocemu({"fault", "sw1:1", "clear"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("h2:0-sw1:1"));
  // swp1 is port 0, h1's link (on the old numbering it was h2's); there is no swp0.
  std::tie(st, out) = f.rocemu({"fault", "sw1:swp1", "clear"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("sw1:swp1") && Catch::Contains("h1:0-sw1:0"));
  std::tie(st, out) = f.rocemu({"fault", "sw1:swp0", "clear"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no port 'swp0' on sw1 (ports: swp1, swp2)"));
  std::tie(st, out) = f.rocemu({"fault", "sw1:swp8", "loss", "1%"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no port 'swp8' on sw1 (ports: swp1, swp2)"));
  std::tie(st, out) = f.rocemu({"fault", "h9", "loss", "1%"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no node named 'h9' (nodes: h1, h2, sw1)"));
  const std::string pcap = f.dir() + "/swp2.pcapng";
  std::tie(st, out) = f.rocemu({"capture", "sw1:swp2", pcap});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("capturing sw1:swp2"));
  std::tie(st, out) = f.rocemu({"capture", "sw1:bogus", pcap});
  CHECK(st == 2);
}

TEST_CASE("Fault values in tc's forms; a time or rate without its unit is refused", "[e2e][cli]") {
  Fabric f;
  auto [st, out] = f.rocemu({"fault", "h1", "delay", "5"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("delay: '5' needs a unit"));
  std::tie(st, out) = f.rocemu({"fault", "h1", "rate", "10"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("needs a unit"));
  std::tie(st, out) = f.rocemu({"fault", "h1", "loss", "1%", "rate", "10gbit", "delay", "5us"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("faults set"));
  std::tie(st, out) = f.rocemu({"fault", "h1", "loss", "2"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::StartsWith("rocemu fault: fault.loss:"));
  std::tie(st, out) = f.rocemu({"fault", "h1", "bogus", "1"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("unknown fault 'bogus' (faults: loss,"));
}

TEST_CASE("Bash completion from the same table of commands", "[e2e][cli]") {
  CHECK(complete("rocemu si") == "sim\n");
  CHECK(complete("rocemu fault h1 del") == "delay\n");
  CHECK_THAT(complete("rocemu ''"), Catch::Contains("capture") && Catch::Contains("--version"));
}

TEST_CASE("rocemu nic: the device, its counters, DCQCN knobs read and set live by mlx5 name", "[e2e][cli]") {
  Fabric f;
  auto [st, out] = f.rocemu({"nic", "show", "h1"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("device rocemu0") && Catch::Contains("3      RoCE v2  10.0.1.1") &&
                      Catch::Contains("congestion control: dcqcn (profile mlx5"));
  std::tie(st, out) = f.rocemu({"nic", "show", "h1", "counters"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("np_cnp_sent 0") && Catch::Contains("rp_cnp_handled 0"));
  std::tie(st, out) = f.rocemu({"nic", "show", "h1", "cc"});
  CHECK_THAT(out, Catch::Contains("rpg_ai_rate 5\n") && Catch::Contains("roce_rp_enable [0,1,2,3,4,5,6,7]\n"));
  std::tie(st, out) = f.rocemu({"nic", "set", "h1", "cc", "rpg_ai_rate", "10", "roce_rp_enable", "3"});
  CHECK(st == 0);
  std::tie(st, out) = f.rocemu({"nic", "show", "h1", "cc"});
  CHECK_THAT(out, Catch::Contains("rpg_ai_rate 10\n") && Catch::Contains("roce_rp_enable [3]\n"));
  std::tie(st, out) = f.rocemu({"nic", "set", "h1", "cc", "rpg_min_rate", "0"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("cc.rpg_min_rate: must be above 0"));
  std::tie(st, out) = f.rocemu({"nic", "show", "sw1"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no NIC named 'sw1' (NICs: h1, h2)"));
}
