// Independent oracles for the wire encoders: tshark and scapy decode a pcap
// of every opcode (IPv4/IPv6, with and without 802.1Q), CNPs, PFC and ARP,
// and must find exactly the values we encoded. A corrupted copy of the same
// pcap proves the checks can fail.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "tests/oracle/oracle_packets.h"
#include "tests/oracle/oracle_run.h"
#include "tests/support/pcap_file.h"

using namespace rocemu::test;
using namespace rocemu::wire;

namespace {

std::string out_path(const std::string& name) { return std::string(ROCEMU_ORACLE_OUT) + "/" + name; }

std::string write_frames(const std::string& name, const std::vector<OracleFrame>& frames) {
  std::vector<std::vector<uint8_t>> raw;
  raw.reserve(frames.size());
  for (const auto& f : frames) raw.push_back(f.bytes);
  const std::string path = out_path(name);
  write_pcap(path, raw);
  return path;
}

size_t find_frame(const std::vector<OracleFrame>& frames, const std::string& name) {
  for (size_t i = 0; i < frames.size(); i++)
    if (frames[i].name == name) return i;
  FAIL("no oracle frame named " << name);
  return 0;
}

// 0-based frame indexes named by tshark_problems ("frame N (...)", 1-based).
std::set<size_t> tshark_frames(const std::vector<std::string>& problems) {
  std::set<size_t> s;
  for (const auto& p : problems) {
    size_t n = 0;
    if (std::sscanf(p.c_str(), "frame %zu ", &n) == 1 && n > 0) s.insert(n - 1);
  }
  return s;
}

std::set<size_t> scapy_frames(const std::vector<std::string>& problems) {
  std::set<size_t> s;
  for (const auto& p : problems) {
    size_t n = 0;
    if (std::sscanf(p.c_str(), "FAIL %zu ", &n) == 1) s.insert(n);
  }
  return s;
}

bool any_contains(const std::vector<std::string>& lines, size_t frame_1based_or_0, const std::string& what,
                  bool scapy) {
  const std::string prefix =
      scapy ? "FAIL " + std::to_string(frame_1based_or_0) + " " : "frame " + std::to_string(frame_1based_or_0 + 1) + " (";
  for (const auto& l : lines)
    if (l.rfind(prefix, 0) == 0 && l.find(what) != std::string::npos) return true;
  return false;
}

std::string lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST_CASE("Oracle frames cover every opcode, path and AETH kind", "[oracle]") {
  const auto frames = oracle_frames();
  std::map<uint8_t, std::set<std::pair<bool, bool>>> paths;
  std::set<uint8_t> syndromes;
  std::set<uint8_t> pads;
  int pfc = 0, arp = 0;
  for (const auto& f : frames) {
    if (f.kind == FrameKind::kPfc) pfc++;
    if (f.kind == FrameKind::kArp) arp++;
    if (f.kind != FrameKind::kRoce) continue;
    // Our own decoder agrees before the outside ones are asked.
    PacketView v;
    INFO(f.name);
    REQUIRE(decode(f.bytes, v) == DecodeError::kOk);
    REQUIRE(v.is_roce);
    CHECK(v.icrc_ok());
    CHECK(v.opcode == f.fields.opcode);
    paths[f.fields.opcode].insert({f.path.ipv6, f.path.vlan});
    if (f.fields.opcode == op::kAck) syndromes.insert(f.fields.aeth_syndrome);
    if (opcode_info(f.fields.opcode).any(kOpPayload)) pads.insert(pad_for(f.payload_len));
  }
  int valid = 0;
  for (int o = 0; o < 256; o++) {
    if (!opcode_info(uint8_t(o)).valid()) continue;
    valid++;
    INFO("opcode " << o);
    CHECK(paths[uint8_t(o)].size() == 4);
  }
  CHECK(paths.size() == size_t(valid));
  for (auto code : {NakCode::kPsnSeqError, NakCode::kInvalidRequest, NakCode::kRemoteAccessError,
                    NakCode::kRemoteOperationalError, NakCode::kInvalidRdRequest})
    CHECK(syndromes.count(aeth_nak(code)) == 1);
  CHECK(syndromes.count(aeth_rnr_nak(14)) == 1);
  CHECK(syndromes.count(aeth_ack()) == 1);
  CHECK(pads == std::set<uint8_t>{0, 1, 2, 3});
  CHECK(pfc >= 5);
  CHECK(arp == 2);
}

TEST_CASE("tshark decodes every frame with the values we encoded", "[oracle]") {
  const auto frames = oracle_frames();
  const std::string pcap = write_frames("oracle.pcap", frames);
  const TsharkRun run = run_tshark(pcap, oracle_field_names(frames));
  INFO("tshark stderr: " << run.stderr_text);
  REQUIRE(run.status == 0);
  REQUIRE(run.frames.size() == frames.size());
  const auto problems = tshark_problems(frames, run);
  INFO(lines(problems));
  CHECK(problems.empty());
  // Warnings are not failures, but they are worth seeing.
  std::map<std::string, int> warnings;
  for (const auto& f : run.frames)
    for (const auto& w : f.warnings) warnings[w]++;
  for (const auto& [w, n] : warnings) WARN("tshark warning on " << n << " frames: " << w);

  // With Wireshark's default, the zero UDP checksum over IPv6 is the one
  // error, and it is on every IPv6 RoCE frame and nowhere else.
  const TsharkRun strict = run_tshark(pcap, {"udp.checksum"}, false);
  REQUIRE(strict.frames.size() == frames.size());
  for (size_t i = 0; i < frames.size(); i++) {
    INFO(frames[i].name);
    const bool v6 = frames[i].kind == FrameKind::kRoce && frames[i].path.ipv6;
    CHECK(strict.frames[i].errors ==
          (v6 ? std::vector<std::string>{"Illegal checksum value (0)"} : std::vector<std::string>{}));
  }
}

TEST_CASE("scapy's RoCE layer computes the ICRC we wrote", "[oracle]") {
  const auto frames = oracle_frames();
  const std::string pcap = write_frames("oracle-scapy.pcap", frames);
  const ScapyRun run = run_scapy(pcap, frames, out_path("oracle-scapy.expect"));
  INFO(run.output);
  CHECK(run.status == 0);
  CHECK(run.problems.empty());
  int v4 = 0, v6 = 0, vlan = 0, cnp = 0;
  for (const auto& f : frames) {
    if (f.kind != FrameKind::kRoce) continue;
    (f.path.ipv6 ? v6 : v4)++;
    vlan += f.path.vlan;
    cnp += f.fields.opcode == op::kCnp;
  }
  CHECK(run.checked_ipv4 == v4);
  CHECK(run.checked_ipv6 == v6);
  CHECK(run.checked_vlan == vlan);
  CHECK(run.checked_cnp == cnp);
  CHECK(cnp == 4);
  if (run.icrc_ipv6_source != "scapy")
    WARN("this scapy has no IPv6 ICRC; the IPv6 frames were checked with the same masking "
         "applied to scapy's layers, verified against scapy on every IPv4 frame");
}

TEST_CASE("The oracles catch a wrong ICRC, a wrong field and a malformed frame", "[oracle]") {
  auto frames = oracle_frames();
  // A: one ICRC bit flipped (IPv6, VLAN) and B: the same on IPv4.
  const size_t a = find_frame(frames, "RC_RDMA_WRITE_FIRST ipv6 vlan");
  frames[a].bytes[frames[a].bytes.size() - 2] ^= 0x10;
  const size_t b = find_frame(frames, "UD_SEND_ONLY ipv4");
  frames[b].bytes.back() ^= 0x01;
  // C: a PSN other than the one expected, with a valid ICRC.
  const size_t c = find_frame(frames, "RC_RDMA_READ_REQUEST ipv4 vlan");
  {
    auto& bytes = frames[c].bytes;
    const uint32_t l2 = frames[c].path.l2_len();
    bytes[l2 + 20 + 8 + 11] ^= 0x01;
    reseal_roce(bytes, l2, false);
  }
  // D: an AtomicETH cut short, the IP and UDP lengths made to agree.
  const size_t d = find_frame(frames, "RC_CMP_SWAP ipv4");
  {
    auto& bytes = frames[d].bytes;
    const uint32_t keep = 14 + 20 + 8 + 12 + 8;
    bytes.resize(keep);
    auto* ip = reinterpret_cast<Ipv4Hdr*>(bytes.data() + 14);
    ip->total_length.set(uint16_t(keep - 14));
    ip->checksum.set(0);
    ip->checksum.set(ipv4_checksum({bytes.data() + 14, 20}));
    reinterpret_cast<UdpHdr*>(bytes.data() + 34)->length.set(uint16_t(keep - 34));
  }
  // E: a wrong IPv4 header checksum.
  const size_t e = find_frame(frames, "RC_SEND_LAST ipv4");
  frames[e].bytes[14 + 10] ^= 0x5a;

  const std::string pcap = write_frames("oracle-corrupt.pcap", frames);

  const TsharkRun t = run_tshark(pcap, oracle_field_names(frames));
  REQUIRE(t.status == 0);
  const auto tp = tshark_problems(frames, t);
  INFO("tshark said:\n" << lines(tp));
  CHECK(tshark_frames(tp) == std::set<size_t>{a, b, c, d, e});
  CHECK(any_contains(tp, a, "infiniband.invariant.crc", false));
  CHECK(any_contains(tp, b, "infiniband.invariant.crc", false));
  CHECK(any_contains(tp, c, "infiniband.bth.psn", false));
  CHECK(any_contains(tp, d, "malformed", false));
  CHECK(any_contains(tp, e, "ip.checksum.status", false));

  const ScapyRun s = run_scapy(pcap, frames, out_path("oracle-corrupt.expect"));
  INFO("scapy said:\n" << s.output);
  CHECK(s.status == 1);
  CHECK(scapy_frames(s.problems) == std::set<size_t>{a, b, c, d, e});
  CHECK(any_contains(s.problems, a, "ICRC on the wire", true));
  CHECK(any_contains(s.problems, b, "ICRC on the wire", true));
  CHECK(any_contains(s.problems, c, "BTH psn", true));
  CHECK(any_contains(s.problems, e, "IPv4 header checksum", true));
}
