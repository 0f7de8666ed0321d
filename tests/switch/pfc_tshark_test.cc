// An independent decoder reads our PFC frames: a capture of the link to a
// paused sender, read back by tshark, shows 802.1Qbb frames (MAC control
// opcode 0x0101) enabling priority 3 only, with 65535 quanta for XOFF and
// 0 for XON, exactly as many as the switch counted.
#include <catch2/catch.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  std::string x;
  while (std::getline(ss, x, sep)) f.push_back(x);
  if (!line.empty() && line.back() == sep) f.push_back("");
  return f;
}

}  // namespace

TEST_CASE("tshark decodes the switch's PFC frames with the right priorities and quanta", "[oracle][switch]") {
  Star s = make_star(star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless)), 81);
  const std::string path = std::string(ROCEMU_BINARY_DIR) + "/switch-pfc-tshark.pcapng";
  REQUIRE(s.engine->capture_link(*s.links[0], path).ok());
  for (int i = 0; i < 2; i++) {
    FlowSpec f;
    f.dst = host_ip(2);
    f.qpn = 0x800 + uint32_t(i);
    f.payload = 4096;
    f.start = us(30);
    f.stop = us(600);
    s.host(i).add_flow(f);
  }
  s.engine->run_to_idle(ms(5));
  s.engine->flush_captures();
  const uint64_t sent = s.sw->pfc_tx_frames(0, 3);
  REQUIRE(sent >= 2);

  std::string cmd = "tshark -n -r " + path +
                    " -Y 'macc.opcode == 0x0101' -T fields -E separator=, -e eth.dst -e eth.type -e macc.opcode"
                    " -e macc.cbfc.enbv";
  for (int i = 0; i < 8; i++) cmd += " -e macc.cbfc.pause_time.c" + std::to_string(i);
  cmd += " 2>/dev/null";
  const std::string out = run(cmd);
  INFO(cmd << "\n" << out);
  std::stringstream lines(out);
  std::string line;
  uint64_t frames = 0, xoff = 0, xon = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto f = split(line, ',');
    REQUIRE(f.size() == 12);
    CHECK(f[0] == "01:80:c2:00:00:01");
    CHECK(f[1] == "0x8808");
    CHECK(f[2] == "0x0101");
    CHECK(f[3] == "0x0008");  // priority 3 only
    for (int prio = 0; prio < 8; prio++)
      if (prio != 3) CHECK(f[size_t(4 + prio)] == "0");
    if (f[7] == "65535") xoff++;
    if (f[7] == "0") xon++;
    frames++;
  }
  CHECK(frames == sent);
  CHECK(xoff >= 1);
  CHECK(xon >= 1);
  CHECK(xoff + xon == frames);
  std::remove(path.c_str());
}
