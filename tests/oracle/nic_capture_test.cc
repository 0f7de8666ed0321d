// A mixed transfer between two emulated NICs, captured on the link and
// handed to tshark and scapy: every packet our transport sends must decode
// without errors, with our ICRC.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "common/wire/packet.h"
#include "tests/nic/workload.h"
#include "tests/oracle/oracle_run.h"
#include "tests/support/pcap_file.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

std::vector<OracleFrame> describe(const std::vector<CapturedFrame>& captured, int& roce) {
  std::vector<OracleFrame> out;
  roce = 0;
  for (const auto& c : captured) {
    OracleFrame o;
    o.bytes = c.bytes;
    wire::PacketView v;
    REQUIRE(wire::decode(c.bytes, v) == wire::DecodeError::kOk);
    if (!v.is_roce) {
      o.kind = FrameKind::kArp;
      out.push_back(o);
      continue;
    }
    roce++;
    o.kind = FrameKind::kRoce;
    o.path.ipv6 = v.is_ipv6();
    o.path.vlan = v.has_vlan;
    const wire::Bth& b = v.bth();
    o.fields.opcode = b.opcode;
    o.fields.se = b.se();
    o.fields.mig_req = b.mig_req();
    o.fields.pkey = b.pkey.get();
    o.fields.fecn = b.fecn();
    o.fields.becn = b.becn();
    o.fields.dest_qp = b.dest_qp();
    o.fields.ack_req = b.ack_req();
    o.fields.psn = b.psn();
    o.payload_len = v.payload_len;
    o.expect = {FieldExpect::num("infiniband.bth.opcode", b.opcode), FieldExpect::num("infiniband.bth.psn", b.psn()),
                FieldExpect::num("infiniband.bth.destqp", b.dest_qp())};
    out.push_back(o);
  }
  return out;
}

void check_capture(const std::string& path, bool ipv6) {
  const auto captured = read_capture(path);
  int roce = 0;
  const auto frames = describe(captured, roce);
  REQUIRE(roce > 200);
  const auto run = run_tshark(path, {"infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.bth.destqp"});
  INFO(run.stderr_text);
  REQUIRE(run.status == 0);
  REQUIRE(run.frames.size() == captured.size());
  const auto problems = tshark_problems(frames, run);
  for (const auto& p : problems) INFO(p);
  CHECK(problems.empty());
  const auto sc = run_scapy(path, frames, path + ".expect");
  INFO(sc.output);
  CHECK(sc.status == 0);
  CHECK(sc.problems.empty());
  CHECK((ipv6 ? sc.checked_ipv6 : sc.checked_ipv4) == roce);
}

}  // namespace

TEST_CASE("A captured mixed transfer under loss decodes in tshark and scapy agrees on every ICRC", "[oracle][nic]") {
  const bool ipv6 = GENERATE(false, true);
  const auto mode = GENERATE(nic::LossRecovery::kGoBackN, nic::LossRecovery::kSelectiveRepeat);
  INFO((ipv6 ? "IPv6" : "IPv4") << (mode == nic::LossRecovery::kGoBackN ? " go-back-N" : " selective repeat"));
  TwoNics f(21, mode, LinkParams{}, 16384, ipv6);
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/nic-capture-" + (ipv6 ? "v6" : "v4") +
                           (mode == nic::LossRecovery::kGoBackN ? "-gbn" : "-sr") + ".pcapng";
  REQUIRE(f.engine->capture_link(*f.link, path).ok());
  FaultConfig fc;
  fc.loss = 0.02;
  f.link->set_faults(0, fc);
  f.link->set_faults(1, fc);
  WorkloadSpec spec;
  spec.writes = 6;
  spec.sends = 6;
  spec.reads = 6;
  spec.atomics = 6;
  spec.max_len = 20000;
  const auto r = run_rc_workload(f, spec);
  REQUIRE(r.failure == "");
  f.engine->flush_captures();
  check_capture(path, ipv6);
}

namespace {

std::string shell(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST_CASE("A port capture keeps every header, flags each frame's direction and stamps it when it crossed",
          "[oracle][nic]") {
  TwoNics f(23);
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/nic-port-capture.pcapng";
  CaptureOptions opts;
  opts.snaplen = 128;
  auto id = f.engine->capture_port(*f.n1, 0, path, opts);
  REQUIRE(id.ok());
  WorkloadSpec spec;
  spec.writes = 8;
  spec.reads = 4;
  spec.max_len = 60000;
  const auto r = run_rc_workload(f, spec);
  REQUIRE(r.failure == "");
  REQUIRE(f.engine->stop_capture(id.value()));

  const std::string cmd = "tshark -n -r " + path +
                          " -T fields -E separator=, -e frame.interface_id -e frame.packet_flags_direction"
                          " -e frame.time_epoch -e frame.cap_len -e frame.len -e infiniband.bth.opcode 2>/dev/null";
  const std::string out = shell(cmd);
  INFO(cmd << "\n" << out.substr(0, 4000));
  std::stringstream lines(out);
  std::string line;
  // interface 0: what h1 sends (outbound), 1: what it receives (inbound)
  std::map<int, std::vector<std::string>> times;
  int frames = 0, long_frames = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> v;
    std::stringstream ss(line);
    for (std::string x; std::getline(ss, x, ',');) v.push_back(x);
    REQUIRE(v.size() >= 5);
    const int iface = std::stoi(v[0]);
    CHECK(std::stoul(v[1], nullptr, 0) == (iface == 0 ? 2u : 1u));  // 2 outbound, 1 inbound
    CHECK(std::stoi(v[3]) <= 128);
    if (std::stoi(v[4]) > 128) long_frames++;
    if (std::stoi(v[4]) > 100) CHECK((v.size() == 6 && !v[5].empty()));  // the BTH is decoded
    times[iface].push_back(v[2]);
    frames++;
  }
  REQUIRE(frames > 100);
  CHECK(long_frames > 50);
  REQUIRE(times.size() == 2);
  for (auto& [iface, t] : times) {
    INFO("interface " << iface);
    // Each frame has its own time (at 100 Gbit/s no two cross within a
    // nanosecond), in the order they crossed.
    std::vector<long double> ts;
    for (const auto& s : t) ts.push_back(std::stold(s));
    CHECK(std::is_sorted(ts.begin(), ts.end()));
    CHECK(std::adjacent_find(ts.begin(), ts.end()) == ts.end());
  }
}
