// wire::decode() on bad input: every truncation of every kind of valid
// frame, oversized frames, wrong IP/UDP lengths, bad headers, random
// garbage and random mutations. Each input is decoded from an exact-size
// heap buffer (tests/fuzz/decode_check.h), so under ASan a read past the
// end fails the test; each rejection must carry the reason that fits.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <set>

#include "common/engine/rng.h"
#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "tests/fuzz/decode_check.h"
#include "tests/oracle/oracle_packets.h"
#include "tests/support/pcap_file.h"

using namespace rocemu;
using namespace rocemu::wire;
using rocemu::test::check_decode;
using rocemu::test::oracle_frames;

namespace {

// Decodes a copy of `bytes` that is exactly bytes.size() long.
DecodeError decode_exact(const std::vector<uint8_t>& bytes, PacketView* out = nullptr) {
  std::unique_ptr<uint8_t[]> buf(new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(buf.get(), bytes.data(), bytes.size());
  PacketView v;
  const DecodeError e = decode({buf.get(), bytes.size()}, v);
  if (out) {
    *out = v;
    out->data = bytes.data();  // the copy dies here; point at the caller's bytes
  }
  return e;
}

std::vector<std::vector<uint8_t>> rxe_frames() {
  std::vector<std::vector<uint8_t>> out;
  for (const char* name : {"rxe-rocev2-ipv4.pcap", "rxe-rocev2-ipv4-loss10.pcap"})
    for (auto& f : rocemu::test::read_capture(std::string(ROCEMU_TEST_DATA) + "/" + name))
      out.push_back(std::move(f.bytes));
  return out;
}

// All valid frames we have: our encoders' and real rxe traffic (one frame
// per opcode and size: the captures repeat the same layouts many times).
std::vector<std::vector<uint8_t>> valid_frames() {
  std::vector<std::vector<uint8_t>> out;
  for (auto& f : oracle_frames()) out.push_back(std::move(f.bytes));
  std::set<std::pair<int, size_t>> seen;
  for (auto& f : rxe_frames()) {
    PacketView v;
    const int kind = decode(f, v) == DecodeError::kOk && v.is_roce ? v.opcode : -1;
    if (seen.insert({kind, f.size()}).second) out.push_back(std::move(f));
  }
  return out;
}

// The reason decode() must give for the first `n` bytes of a valid frame
// whose full decode is `v`.
DecodeError expected_for_prefix(const PacketView& v, uint32_t n) {
  if (n < sizeof(EthHdr)) return DecodeError::kTruncatedEthernet;
  if (v.has_vlan && n < 18) return DecodeError::kTruncatedVlan;
  switch (v.kind) {
    case PacketKind::kArp:
      return n < v.l3_off + sizeof(ArpHdr) ? DecodeError::kTruncatedArp : DecodeError::kOk;
    case PacketKind::kPfc:
      return n < v.l3_off + sizeof(PfcHdr) ? DecodeError::kTruncatedMacControl : DecodeError::kOk;
    case PacketKind::kIpv4:
      if (n < v.l3_off + sizeof(Ipv4Hdr)) return DecodeError::kTruncatedIp;
      if (n < v.l4_off) return DecodeError::kBadIpHeaderLength;
      return n < v.ip_end ? DecodeError::kBadIpTotalLength : DecodeError::kOk;
    case PacketKind::kIpv6:
      if (n < v.l3_off + sizeof(Ipv6Hdr)) return DecodeError::kTruncatedIp;
      return n < v.ip_end ? DecodeError::kBadIpTotalLength : DecodeError::kOk;
    default:
      return DecodeError::kOk;
  }
}

// cut_datagram() for a frame that decodes.
std::vector<uint8_t> cut(const std::vector<uint8_t>& frame, uint32_t udp_bytes);

// Cuts a RoCE frame so the IP datagram ends `udp_bytes` after the UDP
// header's start, with the IP (and UDP, when present) lengths saying so.
std::vector<uint8_t> cut_datagram(const std::vector<uint8_t>& frame, const PacketView& v, uint32_t udp_bytes) {
  std::vector<uint8_t> f(frame.begin(), frame.begin() + v.l4_off + udp_bytes);
  const uint32_t ip_end = v.l4_off + udp_bytes;
  if (v.is_ipv4()) {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + v.l3_off);
    ip->total_length.set(uint16_t(ip_end - v.l3_off));
    ip->checksum.set(0);
    ip->checksum.set(ipv4_checksum({f.data() + v.l3_off, uint32_t(ip->ihl()) * 4}));
  } else {
    reinterpret_cast<Ipv6Hdr*>(f.data() + v.l3_off)->payload_length.set(uint16_t(ip_end - v.l4_off));
  }
  if (udp_bytes >= sizeof(UdpHdr)) reinterpret_cast<UdpHdr*>(f.data() + v.l4_off)->length.set(uint16_t(udp_bytes));
  return f;
}

std::vector<uint8_t> cut(const std::vector<uint8_t>& frame, uint32_t udp_bytes) {
  PacketView v;
  REQUIRE(decode(frame, v) == DecodeError::kOk);
  return cut_datagram(frame, v, udp_bytes);
}

DecodeError expected_for_datagram(const PacketView& v, uint32_t udp_bytes) {
  if (udp_bytes < sizeof(UdpHdr)) return DecodeError::kTruncatedUdp;
  const uint32_t rest = udp_bytes - uint32_t(sizeof(UdpHdr));
  if (rest < sizeof(Bth) + kIcrcLen) return DecodeError::kTruncatedBth;
  const OpcodeInfo& info = opcode_info(v.opcode);
  if (rest < sizeof(Bth) + info.ext_len + kIcrcLen) return DecodeError::kTruncatedExtHeaders;
  const uint32_t total = rest - uint32_t(sizeof(Bth)) - info.ext_len - kIcrcLen;
  if (total != 0 && !info.any(kOpPayload | kOpCnp)) return DecodeError::kUnexpectedPayload;
  if (v.pad > total) return DecodeError::kBadPadCount;
  return DecodeError::kOk;
}

PathHeaders path(bool ipv6, bool vlan) {
  PathHeaders p;
  p.src_mac = *MacAddr::parse("02:00:00:00:00:01");
  p.dst_mac = *MacAddr::parse("02:00:00:00:00:02");
  p.vlan = vlan;
  p.vid = 100;
  p.pcp = 3;
  p.ipv6 = ipv6;
  p.src_ip = *IpAddr::parse(ipv6 ? "fd00::1" : "10.0.0.1");
  p.dst_ip = *IpAddr::parse(ipv6 ? "fd00::2" : "10.0.0.2");
  p.dscp = 26;
  return p;
}

std::vector<uint8_t> roce(uint8_t opcode, uint32_t payload_len, bool ipv6 = false, bool vlan = false) {
  const PathHeaders p = path(ipv6, vlan);
  std::vector<uint8_t> f(roce_frame_len(p, opcode, payload_len));
  std::vector<uint8_t> payload(payload_len, 0xab);
  RoceFields fields;
  fields.opcode = opcode;
  fields.dest_qp = 0x123456;
  fields.psn = 0x654321;
  REQUIRE(encode_roce(f, p, fields, payload) == f.size());
  return f;
}

void fix_ipv4_checksum(std::vector<uint8_t>& f, uint32_t l3) {
  auto* ip = reinterpret_cast<Ipv4Hdr*>(f.data() + l3);
  ip->checksum.set(0);
  ip->checksum.set(ipv4_checksum({f.data() + l3, uint32_t(ip->ihl()) * 4}));
}

}  // namespace

TEST_CASE("Every truncation of every valid frame is rejected with its reason", "[unit][decode]") {
  const auto frames = valid_frames();
  REQUIRE(frames.size() > 200);
  size_t checked = 0;
  for (const auto& frame : frames) {
    PacketView full;
    REQUIRE(decode_exact(frame, &full) == DecodeError::kOk);
    for (uint32_t n = 0; n < frame.size(); n++) {
      const std::vector<uint8_t> prefix(frame.begin(), frame.begin() + n);
      const DecodeError want = expected_for_prefix(full, n);
      const DecodeError got = decode_exact(prefix);
      if (got != want) {
        INFO("frame of " << frame.size() << " bytes cut to " << n);
        CHECK(decode_error_name(got) == decode_error_name(want));
      }
      const std::string why = check_decode(prefix, n);
      if (!why.empty()) FAIL("cut to " << n << ": " << why);
      checked++;
    }
  }
  CHECK(checked > 50000);
}

TEST_CASE("A datagram cut short with consistent IP and UDP lengths is rejected", "[unit][decode]") {
  int roce_frames = 0;
  for (const auto& frame : valid_frames()) {
    PacketView full;
    REQUIRE(decode_exact(frame, &full) == DecodeError::kOk);
    if (!full.is_roce) continue;
    roce_frames++;
    const uint32_t udp_bytes = full.ip_end - full.l4_off;
    for (uint32_t u = 0; u <= udp_bytes; u++) {
      const auto cut = cut_datagram(frame, full, u);
      const DecodeError want = u == udp_bytes ? DecodeError::kOk : expected_for_datagram(full, u);
      const DecodeError got = decode_exact(cut);
      if (got != want) {
        INFO(opcode_info(full.opcode).name << ": UDP datagram of " << udp_bytes << " bytes cut to " << u);
        CHECK(decode_error_name(got) == decode_error_name(want));
      }
      if (const std::string why = check_decode(cut, u); !why.empty()) FAIL(why);
    }
  }
  CHECK(roce_frames > 200);
}

TEST_CASE("Frames longer than the largest jumbo frame are rejected", "[unit][decode]") {
  // IPv4 + VLAN with a payload that makes exactly kMaxFrameLen bytes.
  const uint32_t payload = kMaxFrameLen - (18 + 20 + 8 + 12 + 4);
  auto f = roce(op::kSendOnly, payload, false, true);
  REQUIRE(f.size() == kMaxFrameLen);
  PacketView v;
  CHECK(decode_exact(f, &v) == DecodeError::kOk);
  CHECK(v.payload_len == payload);
  f.push_back(0);  // one byte of Ethernet padding too many
  CHECK(decode_exact(f) == DecodeError::kTooLong);
  CHECK(decode_exact(std::vector<uint8_t>(65535, 0xff)) == DecodeError::kTooLong);
  CHECK(check_decode(std::vector<uint8_t>(65536, 0x45), 1).empty());
}

TEST_CASE("Bad headers are rejected with the reason that fits", "[unit][decode]") {
  struct Case {
    const char* what;
    std::function<std::vector<uint8_t>()> make;
    DecodeError want;
  };
  const uint32_t l3 = 14, l4 = 34, bth = 42;
  auto v4 = [] { return roce(op::kSendOnly, 100); };
  auto ipv4_hdr = [](std::vector<uint8_t>& f) { return reinterpret_cast<Ipv4Hdr*>(f.data() + 14); };
  auto udp_hdr = [](std::vector<uint8_t>& f, uint32_t off) { return reinterpret_cast<UdpHdr*>(f.data() + off); };
  const std::vector<Case> cases = {
      {"stacked 802.1Q tags",
       [] {
         auto f = roce(op::kSendOnly, 8, false, true);
         f[16] = 0x81, f[17] = 0x00;
         return f;
       },
       DecodeError::kNestedVlan},
      {"802.1ad tag inside 802.1Q",
       [] {
         auto f = roce(op::kSendOnly, 8, false, true);
         f[16] = 0x88, f[17] = 0xa8;
         return f;
       },
       DecodeError::kNestedVlan},
      {"IPv6 header behind EtherType IPv4",
       [&] {
         auto f = v4();
         f[l3] = 0x65;
         return f;
       },
       DecodeError::kBadIpVersion},
      {"IPv4 header behind EtherType IPv6",
       [] {
         auto f = roce(op::kSendOnly, 8, true);
         f[14] = 0x45;
         return f;
       },
       DecodeError::kBadIpVersion},
      {"IHL below 5",
       [&] {
         auto f = v4();
         f[l3] = 0x44;
         return f;
       },
       DecodeError::kBadIpHeaderLength},
      {"IHL past the frame",
       [&] {
         auto f = roce(op::kAck, 0);  // 62 bytes: no room for 60 bytes of IP header
         f[l3] = 0x4f;
         return f;
       },
       DecodeError::kBadIpHeaderLength},
      {"IPv4 total length past the frame",
       [&] {
         auto f = v4();
         ipv4_hdr(f)->total_length.set(uint16_t(f.size() - l3 + 1));
         fix_ipv4_checksum(f, l3);
         return f;
       },
       DecodeError::kBadIpTotalLength},
      {"IPv4 total length below the header",
       [&] {
         auto f = v4();
         ipv4_hdr(f)->total_length.set(19);
         fix_ipv4_checksum(f, l3);
         return f;
       },
       DecodeError::kBadIpTotalLength},
      {"IPv4 header checksum",
       [&] {
         auto f = v4();
         f[l3 + 10] ^= 0x01;
         return f;
       },
       DecodeError::kBadIpChecksum},
      {"IPv4 more-fragments",
       [&] {
         auto f = v4();
         ipv4_hdr(f)->frag.set(0x2000);
         fix_ipv4_checksum(f, l3);
         return f;
       },
       DecodeError::kIpFragment},
      {"IPv4 fragment offset",
       [&] {
         auto f = v4();
         ipv4_hdr(f)->frag.set(0x4001);
         fix_ipv4_checksum(f, l3);
         return f;
       },
       DecodeError::kIpFragment},
      {"IPv6 payload length past the frame",
       [] {
         auto f = roce(op::kSendOnly, 8, true);
         auto* ip = reinterpret_cast<Ipv6Hdr*>(f.data() + 14);
         ip->payload_length.set(uint16_t(ip->payload_length.get() + 1));
         return f;
       },
       DecodeError::kBadIpTotalLength},
      {"UDP length below 8",
       [&] {
         auto f = v4();
         udp_hdr(f, l4)->length.set(7);
         return f;
       },
       DecodeError::kBadUdpLength},
      {"UDP length past the IP datagram",
       [&] {
         auto f = v4();
         udp_hdr(f, l4)->length.set(uint16_t(udp_hdr(f, l4)->length.get() + 1));
         return f;
       },
       DecodeError::kBadUdpLength},
      {"RoCE UDP length short of the IP datagram",
       [&] {
         auto f = v4();
         udp_hdr(f, l4)->length.set(uint16_t(udp_hdr(f, l4)->length.get() - 4));
         return f;
       },
       DecodeError::kBadUdpLength},
      {"other UDP length short of the IP datagram (allowed)",
       [&] {
         auto f = v4();
         udp_hdr(f, l4)->dst_port.set(4792);
         udp_hdr(f, l4)->length.set(uint16_t(udp_hdr(f, l4)->length.get() - 4));
         return f;
       },
       DecodeError::kOk},
      {"RoCE over IPv4 with options",
       [&] {
         auto f = v4();
         f.insert(f.begin() + l4, {1, 1, 1, 1});  // four NOP options
         ipv4_hdr(f)->version_ihl = 0x46;
         ipv4_hdr(f)->total_length.set(uint16_t(ipv4_hdr(f)->total_length.get() + 4));
         fix_ipv4_checksum(f, l3);
         return f;
       },
       DecodeError::kRoceIpOptions},
      {"other UDP over IPv4 with options (allowed)",
       [&] {
         auto f = v4();
         f.insert(f.begin() + l4, {1, 1, 1, 1});
         ipv4_hdr(f)->version_ihl = 0x46;
         ipv4_hdr(f)->total_length.set(uint16_t(ipv4_hdr(f)->total_length.get() + 4));
         fix_ipv4_checksum(f, l3);
         udp_hdr(f, l4 + 4)->dst_port.set(53);
         return f;
       },
       DecodeError::kOk},
      {"BTH TVer 1",
       [&] {
         auto f = v4();
         f[bth + 1] |= 0x01;
         return f;
       },
       DecodeError::kBadTransportVersion},
      {"BTH TVer 15",
       [&] {
         auto f = v4();
         f[bth + 1] |= 0x0f;
         return f;
       },
       DecodeError::kBadTransportVersion},
      {"pad count on an empty SEND",
       [] {
         auto f = roce(op::kSendOnly, 0);
         f[42 + 1] |= 0x10;
         return f;
       },
       DecodeError::kBadPadCount},
      {"pad count 3 on 2 bytes",
       [] {
         auto f = roce(op::uc(op::kWriteOnly), 2);  // RETH, 2 bytes, 2 pad, ICRC
         f = cut(f, 8 + 12 + 16 + 2 + 4);           // RETH, 2 bytes, ICRC
         f[42 + 1] |= 0x30;
         return f;
       },
       DecodeError::kBadPadCount},
      {"pad count on an ACK",
       [] {
         auto f = roce(op::kAck, 0);
         f[42 + 1] |= 0x20;
         return f;
       },
       DecodeError::kBadPadCount},
      {"payload on an ACK",
       [] {
         auto f = roce(op::kReadRespOnly, 4);  // same AETH layout, then turned into an ACK
         f[42] = op::kAck;
         return f;
       },
       DecodeError::kUnexpectedPayload},
      {"payload on a READ request",
       [] {
         auto f = roce(op::kWriteOnly, 8);  // RETH + 8 bytes, turned into a READ request
         f[42] = op::kReadRequest;
         return f;
       },
       DecodeError::kUnexpectedPayload},
      {"payload on an atomic ACK",
       [] {
         auto f = roce(op::kCmpSwap, 0);  // 28 bytes of AtomicETH = AETH + AtomicAckETH + 16
         f[42] = op::kAtomicAck;
         return f;
       },
       DecodeError::kUnexpectedPayload},
      {"AtomicETH cut short",
       [] { return cut(roce(op::kFetchAdd, 0), 8 + 12 + 20 + 4); },
       DecodeError::kTruncatedExtHeaders},
      {"RETH cut short",
       [] { return cut(roce(op::kWriteFirst, 0, true, true), 8 + 12 + 15 + 4); },
       DecodeError::kTruncatedExtHeaders},
      {"BTH cut short",
       [] { return cut(roce(op::kSendOnly, 0, true), 8 + 11 + 4); },
       DecodeError::kTruncatedBth},
      {"unknown MAC control opcode (not ours to judge)",
       [] {
         std::vector<uint8_t> f(60);
         const uint16_t q[kNumPriorities] = {1, 2, 3, 4, 5, 6, 7, 8};
         encode_pfc(f, *MacAddr::parse("02:00:00:00:00:01"), 0xff, q);
         f[15] = 0x02;
         return f;
       },
       DecodeError::kOk},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const auto f = c.make();
    CHECK(decode_error_name(decode_exact(f)) == decode_error_name(c.want));
    CHECK(check_decode(f, 7).empty());
  }
}

TEST_CASE("Every opcode outside the table is rejected", "[unit][decode]") {
  int rejected = 0;
  for (int o = 0; o < 256; o++) {
    if (opcode_info(uint8_t(o)).valid()) continue;
    for (bool ipv6 : {false, true}) {
      auto f = roce(op::kSendOnly, 16, ipv6);
      f[(ipv6 ? 62 : 42)] = uint8_t(o);
      INFO("opcode " << o);
      CHECK(decode_exact(f) == DecodeError::kUnknownOpcode);
      rejected++;
    }
  }
  CHECK(rejected == 2 * (256 - 39 - 23));  // RC 24 (ATOMIC WRITE among them), UC 12, UD 2, CNP 1, XRC 23
}

TEST_CASE("Ethernet padding after a short RoCE frame is not payload", "[unit][decode]") {
  for (bool ipv6 : {false, true}) {
    auto f = roce(op::kAck, 0, ipv6);
    const size_t len = f.size();
    f.resize(std::max<size_t>(len + 2, 64), 0);  // padded to the minimum frame (and beyond)
    PacketView v;
    REQUIRE(decode_exact(f, &v) == DecodeError::kOk);
    CHECK(v.ip_end == len);
    CHECK(v.icrc_off == len - 4);
    CHECK(v.payload_len == 0);
    CHECK(v.icrc_ok());
  }
}

TEST_CASE("The contract check itself finds a broken view", "[unit][decode]") {
  const auto f = roce(op::kSendOnly, 10);
  PacketView v;
  REQUIRE(decode(f, v) == DecodeError::kOk);
  REQUIRE(rocemu::test::view_contract_violation(f, v).empty());
  PacketView bad = v;
  bad.payload_len++;
  CHECK_FALSE(rocemu::test::view_contract_violation(f, bad).empty());
  bad = v;
  bad.ip_end = uint16_t(f.size() + 1);
  CHECK_FALSE(rocemu::test::view_contract_violation(f, bad).empty());
  bad = v;
  bad.opcode = op::kAck;
  CHECK_FALSE(rocemu::test::view_contract_violation(f, bad).empty());
}

TEST_CASE("Random garbage and random mutations of valid frames", "[unit][decode]") {
  Rng rng(0x5eed);
  // Pure garbage, mostly short, a few up to past the largest frame.
  for (int i = 0; i < 20000; i++) {
    const size_t n = i % 100 == 0 ? size_t(rng.below(kMaxFrameLen + 64)) : size_t(rng.below(200));
    std::vector<uint8_t> f(n);
    for (auto& b : f) b = uint8_t(rng.next());
    if (const std::string why = check_decode(f, rng.next()); !why.empty()) FAIL(why);
  }
  // Garbage behind believable headers, so the deeper layers see it too.
  for (int i = 0; i < 20000; i++) {
    auto f = roce(uint8_t(rng.below(256)), uint32_t(rng.below(64)), rng.below(2) != 0, rng.below(2) != 0);
    const size_t from = 14 + size_t(rng.below(f.size() - 14));
    for (size_t j = from; j < f.size(); j++) f[j] = uint8_t(rng.next());
    if (const std::string why = check_decode(f, rng.next()); !why.empty()) FAIL(why);
  }
  // A few bytes changed in every valid frame we have.
  size_t accepted = 0, total = 0;
  for (const auto& frame : valid_frames()) {
    for (int m = 0; m < 20; m++) {
      auto f = frame;
      const int flips = 1 + int(rng.below(3));
      for (int k = 0; k < flips; k++) f[rng.below(f.size())] ^= uint8_t(1 + rng.below(255));
      PacketView v;
      accepted += decode_exact(f, &v) == DecodeError::kOk;
      total++;
      if (const std::string why = check_decode(f, rng.next()); !why.empty()) FAIL(why);
    }
  }
  // Most single-byte changes land in the payload and decode; some must not.
  CHECK(accepted > total / 4);
  CHECK(accepted < total);
}
