#include "tests/sim/support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nic/nic_kind.h"
#include "switch/switch_kind.h"
#include "tests/support/eal.h"

namespace rocemu::test {

const NodeKindRegistry& sim_registry() {
  static const NodeKindRegistry reg = [] {
    NodeKindRegistry r;
    register_basic_kinds(r);
    nic::register_nic_kind(r);
    register_switch_kinds(r);
    return r;
  }();
  return reg;
}

std::string small_scenario(const std::string& expectations, int count, const std::string& extra) {
  std::ostringstream y;
  y << R"(name: small
description: 2:1 incast of 64 KiB WRITEs
seed: 5
duration: 2ms
sample_interval: 5us
topology:
  engine: {mbufs: 16384}
  nodes:
    h0: {kind: nic, ip: 10.0.0.1, prefix: 24, gateway: 10.0.0.254}
    h1: {kind: nic, ip: 10.0.1.1, prefix: 24, gateway: 10.0.1.254}
    h2: {kind: nic, ip: 10.0.2.1, prefix: 24, gateway: 10.0.2.254}
    sw1:
      kind: switch
      ports: 3
      interfaces:
        swp1: {address: 10.0.0.254/24}
        swp2: {address: 10.0.1.254/24}
        swp3: {address: 10.0.2.254/24}
      qos: {roce: lossless}
  links:
    - {a: h0, b: "sw1:0", rate: 100G, delay: 1us}
    - {a: h1, b: "sw1:1", rate: 100G, delay: 1us}
    - {a: h2, b: "sw1:2", rate: 100G, delay: 1us}
workloads:
  - {name: incast, from: [h0, h1], to: h2, verb: write, message_size: 64KiB, count: )"
    << count << R"(, mtu: 4096, timeout: 8}
)" << extra
    << "expectations:\n"
    << expectations;
  return y.str();
}

sim::RunResult run_text(const std::string& text, const std::string& file) {
  auto s = sim::parse_scenario(text, file, sim_registry());
  INFO(s.status().message());
  REQUIRE(s.ok());
  require_eal();
  auto r = sim::run_scenario(s.value());
  INFO(r.status().message());
  REQUIRE(r.ok());
  return std::move(r.value());
}

std::string fresh_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("rocemu-sim-" + tag + "-XXXXXX")).string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  return tmpl;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

int run_rocemu(const std::string& args, const std::string& log) {
  const std::string cmd = std::string(ROCEMU_BINARY_DIR) + "/bin/rocemu " + args + " > " + log + " 2>&1";
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace rocemu::test
