#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <vector>

#include "common/wire/build.h"
#include "common/wire/icrc.h"
#include "common/wire/packet.h"
#include "common/wire/psn.h"
#include "tests/support/pcap_file.h"

using namespace rocemu::wire;

namespace {

std::vector<uint8_t> bytes(std::initializer_list<int> v) {
  std::vector<uint8_t> out;
  for (int b : v) out.push_back(uint8_t(b));
  return out;
}

PathHeaders v4_path() {
  PathHeaders p;
  p.src_mac = *MacAddr::parse("02:00:00:00:00:01");
  p.dst_mac = *MacAddr::parse("02:00:00:00:00:02");
  p.src_ip = *IpAddr::parse("10.0.0.1");
  p.dst_ip = *IpAddr::parse("10.0.0.2");
  p.dscp = 26;
  p.ecn = Ecn::kEct0;
  p.udp_sport = 0xc123;
  return p;
}

}  // namespace

TEST_CASE("PSN arithmetic across the 24-bit wrap", "[unit][wire]") {
  CHECK(psn_add(0xfffffe, 3) == 1);
  CHECK(psn_add(5, -6) == 0xffffff);
  CHECK(psn_diff(1, 0xffffff) == 2);
  CHECK(psn_diff(0xffffff, 1) == -2);
  CHECK(psn_lt(0xffffff, 0));
  CHECK(psn_gt(0, 0xffffff));
  CHECK(psn_ge(7, 7));
  CHECK(psn_le(0x7ffffe, 0xfffffe - 1));
  // Half a window away is the boundary of the comparison.
  CHECK(psn_diff(kPsnHalf, 0) == -int32_t(kPsnHalf));
  CHECK(psn_diff(kPsnHalf - 1, 0) == int32_t(kPsnHalf - 1));
}

TEST_CASE("UDP source port and flow label follow rdma-core", "[unit][wire]") {
  // ibv_flow_label_to_udp_sport: low 14 bits xor high 6 bits, in 0xC000..0xFFFF.
  CHECK(flow_label_to_udp_sport(0) == 0xc000);
  CHECK(flow_label_to_udp_sport(0x3fff) == 0xffff);
  CHECK(flow_label_to_udp_sport(0x4000) == 0xc001);
  CHECK(flow_label_to_udp_sport(0xfffff) == 0xc000 + (0x3fff ^ 0x3f));
  for (uint32_t fl : {1u, 0x12345u, 0xabcdeu, 0x80000u}) {
    const uint16_t sp = flow_label_to_udp_sport(fl);
    CHECK(sp >= 0xc000);
  }
  // rdma_calc_flow_label(lqpn, rqpn): v = l*r; v ^= v>>20; v ^= v>>40; 20 bits.
  const uint64_t v0 = uint64_t(0x11) * 0x22;
  CHECK(calc_flow_label(0x11, 0x22) == ((v0 ^ (v0 >> 20) ^ ((v0 ^ (v0 >> 20)) >> 40)) & 0xfffff));
  const uint64_t big = uint64_t(0xffffff) * 0xfffffe;
  uint64_t x = big ^ (big >> 20);
  x ^= x >> 40;
  CHECK(calc_flow_label(0xffffff, 0xfffffe) == (x & 0xfffff));
}

TEST_CASE("Header fields have their wire widths", "[unit][wire]") {
  Bth bth{};
  bth.set_qpn(0xffffffff, true, true);
  CHECK(bth.dest_qp() == 0xffffff);
  CHECK(bth.fecn());
  CHECK(bth.becn());
  bth.set_psn(0x1ffffff, true);
  CHECK(bth.psn() == 0xffffff);
  CHECK(bth.ack_req());
  bth.set_flags(true, false, 3);
  CHECK(bth.pad_count() == 3);
  CHECK(bth.se());
  CHECK(bth.tver() == 0);
  Aeth aeth{};
  aeth.set(0xff, 0x1ffffff);
  CHECK(aeth.syndrome() == 0xff);
  CHECK(aeth.msn() == 0xffffff);
  Deth deth{};
  deth.set_src_qp(0xabcdef12);
  CHECK(deth.src_qp() == 0xcdef12);
  VlanTag tag{};
  tag.set_tci(7, true, 0x1fff);
  CHECK(tag.pcp() == 7);
  CHECK(tag.dei());
  CHECK(tag.vid() == 0xfff);
  Ipv6Hdr ip6{};
  ip6.set(0xff, 0x1fffff);
  CHECK(ip6.version() == 6);
  CHECK(ip6.traffic_class() == 0xff);
  CHECK(ip6.flow_label() == 0xfffff);
  Ipv4Hdr ip4{};
  ip4.set_dscp(0xff);
  CHECK(ip4.dscp() == 0x3f);
  ip4.set_ecn(Ecn::kCe);
  CHECK(ip4.ecn() == Ecn::kCe);
  CHECK(ip4.dscp() == 0x3f);
}

TEST_CASE("AETH syndrome encoding", "[unit][wire]") {
  CHECK(aeth_kind(aeth_ack()) == AethKind::kAck);
  CHECK(aeth_value(aeth_ack()) == 0x1f);
  CHECK(aeth_rnr_nak(14) == 0x2e);
  CHECK(aeth_kind(0x2e) == AethKind::kRnrNak);
  CHECK(aeth_nak(NakCode::kPsnSeqError) == 0x60);
  CHECK(aeth_nak(NakCode::kInvalidRequest) == 0x61);
  CHECK(aeth_nak(NakCode::kRemoteAccessError) == 0x62);
  CHECK(aeth_nak(NakCode::kRemoteOperationalError) == 0x63);
  CHECK(aeth_kind(0x63) == AethKind::kNak);
  CHECK(rnr_timer_ns(0) == 655360000u);
  CHECK(rnr_timer_ns(1) == 10000u);
  CHECK(rnr_timer_ns(14) == 1280000u);
  CHECK(rnr_timer_ns(31) == 491520000u);
}

TEST_CASE("Opcode table drives the extension headers", "[unit][wire]") {
  CHECK(opcode_info(op::kWriteFirst).has(kExtReth));
  CHECK_FALSE(opcode_info(op::kWriteMiddle).has(kExtReth));
  CHECK(opcode_info(op::kReadRespFirst).has(kExtAeth));
  CHECK_FALSE(opcode_info(op::kReadRespMiddle).has(kExtAeth));
  CHECK(opcode_info(op::kAtomicAck).ext_len == 12);
  CHECK(ext_offset(op::kAtomicAck, kExtAtomicAck) == 4);
  CHECK(ext_offset(op::kWriteOnlyImm, kExtImmDt) == 16);
  CHECK(ext_offset(op::ud(op::kSendOnlyImm), kExtImmDt) == 8);
  CHECK(opcode_info(op::kCnp).valid());
  int valid = 0;
  for (int i = 0; i < 256; i++) valid += opcode_info(uint8_t(i)).valid();
  CHECK(valid == 24 + 12 + 2 + 1 + 23);  // RC, UC, UD, CNP, XRC
  // RDMA ATOMIC WRITE (IBA 1.5, 0x1D): RETH then 8 bytes of payload, RC only.
  CHECK(opcode_info(op::kAtomicWrite).name == "RC_RDMA_ATOMIC_WRITE");
  CHECK(opcode_info(op::kAtomicWrite).has(kExtReth));
  CHECK(opcode_info(op::kAtomicWrite).ext_len == 16);
  CHECK(opcode_info(op::kAtomicWrite).is(kOpRequest | kOpPayload | kOpFirst | kOpLast | kOpAtomicWrite));
  CHECK_FALSE(opcode_info(op::kAtomicWrite).any(kOpWrite | kOpAtomic | kOpRead));
  CHECK_FALSE(opcode_info(op::uc(op::kAtomicWrite)).valid());
}

TEST_CASE("XRC opcodes: an XRCETH before the other headers of a request, none on a response", "[unit][wire]") {
  for (int o = 0; o < 0x20; o++) {
    const OpcodeInfo& rc = opcode_info(uint8_t(o));
    const OpcodeInfo& xrc = opcode_info(op::xrc(uint8_t(o)));
    INFO("opcode " << o);
    if (o == op::kAtomicWrite) {  // RC only (as rxe)
      CHECK_FALSE(xrc.valid());
      continue;
    }
    REQUIRE(rc.valid() == xrc.valid());
    if (!rc.valid()) continue;
    CHECK(xrc.flags == rc.flags);
    CHECK(xrc.name.substr(0, 4) == "XRC_");
    CHECK(xrc.name.substr(4) == rc.name.substr(3));
    const bool request = rc.any(kOpRequest);
    CHECK(xrc.has(kExtXrceth) == request);
    CHECK(xrc.ext_len == rc.ext_len + (request ? 4 : 0));
    for (int h = kExtReth; h < kNumExtHeaders; h++)
      if (rc.has(ExtHeader(h))) CHECK(ext_offset(op::xrc(uint8_t(o)), ExtHeader(h)) == ext_offset(uint8_t(o), ExtHeader(h)) + (request ? 4 : 0));
  }
  CHECK(opcode_transport(0xa4) == Transport::kXrc);
  CHECK(op::base(op::xrc(op::kFetchAdd)) == op::kFetchAdd);
  Xrceth x{};
  x.set_srqn(0xfedcba98);
  CHECK(x.srqn() == 0xdcba98);
  CHECK(x.srqn_word.get() == 0x00dcba98);
}

TEST_CASE("An XRC request's XRCETH is written and read back", "[unit][wire]") {
  PathHeaders path;
  path.src_ip = IpAddr::v4(0x0a000001);
  path.dst_ip = IpAddr::v4(0x0a000002);
  RoceFields f;
  f.opcode = op::xrc(op::kWriteOnlyImm);
  f.dest_qp = 0x123456;
  f.xrc_srqn = 0xabcdef;
  f.reth_va = 0x1000;
  f.reth_rkey = 0x77;
  f.reth_len = 4;
  f.imm = 0x01020304;
  std::array<uint8_t, 256> buf{};
  const uint8_t payload[4] = {1, 2, 3, 4};
  const uint32_t n = encode_roce(buf, path, f, payload);
  REQUIRE(n > 0);
  PacketView v;
  REQUIRE(decode(std::span<const uint8_t>(buf.data(), n), v) == DecodeError::kOk);
  CHECK(v.xrceth().srqn() == 0xabcdef);
  CHECK(v.reth().rkey.get() == 0x77);
  CHECK(v.imm().imm.get() == 0x01020304);
  CHECK(v.payload_len == 4);
  CHECK(v.icrc_ok());
}

TEST_CASE("ICRC known answers", "[unit][wire]") {
  // CRC-32 check value.
  const std::string check = "123456789";
  CHECK(crc32_update(0, reinterpret_cast<const uint8_t*>(check.data()), check.size()) == 0xcbf43926u);
  // Masked fields do not change the ICRC; unmasked ones do.
  std::vector<uint8_t> frame(256);
  const uint32_t len = encode_roce(frame, v4_path(), RoceFields{.opcode = op::kSendOnly, .dest_qp = 0x12, .psn = 7},
                                   bytes({1, 2, 3, 4, 5}));
  frame.resize(len);
  PacketView v;
  REQUIRE(decode(frame, v) == DecodeError::kOk);
  REQUIRE(v.icrc_ok());
  const uint32_t icrc = v.icrc_on_wire();
  auto flipped = frame;
  flipped[14 + 1] ^= 0x03;  // ECN -> masked
  flipped[14 + 8] -= 1;     // TTL -> masked (checksum would be wrong, but masked too)
  CHECK(compute_icrc({flipped.data() + 14, v.icrc_off - 14u}, false) == icrc);
  flipped = frame;
  flipped[v.bth_off + 4] |= 0xc0;  // FECN/BECN -> masked
  CHECK(compute_icrc({flipped.data() + 14, v.icrc_off - 14u}, false) == icrc);
  flipped = frame;
  flipped[v.bth_off + 11] ^= 1;  // PSN -> covered
  CHECK(compute_icrc({flipped.data() + 14, v.icrc_off - 14u}, false) != icrc);
  flipped = frame;
  flipped[v.payload_off] ^= 0x80;  // payload -> covered
  CHECK(compute_icrc({flipped.data() + 14, v.icrc_off - 14u}, false) != icrc);
}

TEST_CASE("A frame sealed later (ICRC left pending) gets the same ICRC", "[unit][wire]") {
  for (const bool ipv6 : {false, true}) {
    for (const bool vlan : {false, true}) {
      INFO("ipv6 " << ipv6 << " vlan " << vlan);
      PathHeaders path = v4_path();
      if (ipv6) {
        path.ipv6 = true;
        path.src_ip = *IpAddr::parse("fd00::1");
        path.dst_ip = *IpAddr::parse("fd00::2");
        path.flow_label = 0x12345;
      }
      path.vlan = vlan;
      path.vid = 7;
      std::vector<uint8_t> payload(1027);
      for (size_t i = 0; i < payload.size(); i++) payload[i] = uint8_t(i * 13);
      std::vector<uint8_t> sealed(2048);
      const RoceFields f{.opcode = op::kSendOnly, .dest_qp = 0x42, .psn = 0xfffffe};
      sealed.resize(encode_roce(sealed, path, f, payload));
      // As a NIC builds it: headers, payload, pad -- and no ICRC yet.
      std::vector<uint8_t> lazy(sealed.size(), 0xee);
      const uint32_t hdr = write_roce_headers(lazy, path, f, uint32_t(payload.size()));
      std::memcpy(lazy.data() + hdr, payload.data(), payload.size());
      pad_roce(lazy, uint32_t(payload.size()));
      CHECK(lazy != sealed);
      REQUIRE(seal_icrc(lazy));
      CHECK(lazy == sealed);
    }
  }
  // Not IP, or too short to be: nothing written.
  std::vector<uint8_t> arp(60, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  const auto before = arp;
  CHECK_FALSE(seal_icrc(arp));
  CHECK(arp == before);
  std::vector<uint8_t> tiny = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00, 0x45};
  CHECK_FALSE(seal_icrc(tiny));
  CHECK_FALSE(seal_icrc(std::span<uint8_t>()));
}

TEST_CASE("IPv4 header checksum: RFC 1071 at every length", "[unit][wire]") {
  // The textbook sum, 16-bit big-endian words, one at a time.
  auto reference = [](std::span<const uint8_t> h) {
    uint32_t sum = 0;
    for (size_t i = 0; i + 1 < h.size(); i += 2) sum += uint32_t(h[i]) << 8 | h[i + 1];
    if (h.size() & 1) sum += uint32_t(h.back()) << 8;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return uint16_t(~sum);
  };
  // A known header (RFC 1071 style example from Wikipedia's IPv4 article).
  const auto hdr = bytes({0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
                          0x01, 0xc0, 0xa8, 0x00, 0xc7});
  CHECK(ipv4_checksum(hdr) == 0xb861);
  std::vector<uint8_t> buf(64);
  uint64_t x = 3;
  for (int round = 0; round < 200; round++) {
    for (auto& b : buf) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      b = uint8_t(x >> 56);
    }
    if (round == 0) std::fill(buf.begin(), buf.end(), 0xff);  // the carries of all-ones
    for (size_t len = 0; len <= buf.size(); len++) {
      INFO("round " << round << " len " << len);
      REQUIRE(ipv4_checksum({buf.data(), len}) == reference({buf.data(), len}));
    }
  }
}

TEST_CASE("A built IPv4 header's checksum is the RFC 1071 sum of its bytes", "[unit][wire]") {
  // write_roce_headers() sums the fields it writes instead of reading the
  // header back: the same value as ipv4_checksum() over the bytes, carries
  // included (the all-ones round).
  uint64_t x = 7;
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(x >> 32);
  };
  for (int round = 0; round < 2000; round++) {
    PathHeaders path = v4_path();
    path.vlan = (round & 1) != 0;
    if (round == 0) {
      path.src_ip = IpAddr::v4(0xffffffff);
      path.dst_ip = IpAddr::v4(0xffffffff);
      path.dscp = 63;
      path.ecn = Ecn::kCe;
      path.ttl = 255;
      path.ipv4_id = 0xffff;
    } else if (round > 1) {
      path.src_ip = IpAddr::v4(next());
      path.dst_ip = IpAddr::v4(next());
      path.dscp = uint8_t(next() & 63);
      path.ecn = Ecn(next() & 3);
      path.ttl = uint8_t(next());
      path.ipv4_id = uint16_t(next());
    }
    const uint32_t payload = next() % 4097;
    std::vector<uint8_t> frame(roce_frame_len(path, op::kSendOnly, payload));
    REQUIRE(write_roce_headers(frame, path, {.opcode = op::kSendOnly, .dest_qp = 1}, payload) != 0);
    const uint32_t l3 = path.l2_len();
    INFO("round " << round);
    CHECK(ipv4_checksum({frame.data() + l3, 20}) == 0);  // a header with its checksum sums to zero
    PacketView v;
    CHECK(decode(frame, v) == DecodeError::kOk);
    const uint16_t carried = uint16_t(frame[l3 + 10] << 8 | frame[l3 + 11]);
    frame[l3 + 10] = frame[l3 + 11] = 0;
    CHECK(carried == ipv4_checksum({frame.data() + l3, 20}));
  }
}

TEST_CASE("Fast CRC-32 equals zlib at every length and seed", "[unit][wire]") {
  std::vector<uint8_t> buf(9000);
  uint64_t x = 1;
  for (auto& b : buf) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = uint8_t(x >> 56);
  }
  for (size_t len = 0; len <= 600; len++) {
    for (uint32_t seed : {0u, 1u, 0xffffffffu, 0x12345678u}) {
      INFO("len " << len << " seed " << seed);
      REQUIRE(crc32_update(seed, buf.data() + (len % 7), len) == crc32_reference(seed, buf.data() + (len % 7), len));
    }
  }
  for (size_t len : {1024ul, 4096ul, 4111ul, 8999ul})
    REQUIRE(crc32_update(7, buf.data(), len) == crc32_reference(7, buf.data(), len));
}

TEST_CASE("Every packet of real Linux rxe captures decodes with rxe's ICRC", "[unit][wire][rxe]") {
  for (const char* name : {"rxe-rocev2-ipv4.pcap", "rxe-rocev2-ipv4-loss10.pcap"}) {
    const auto frames = rocemu::test::read_capture(std::string(ROCEMU_TEST_DATA) + "/" + name);
    REQUIRE(!frames.empty());
    std::map<int, int> opcodes;
    int roce = 0;
    for (const auto& f : frames) {
      PacketView v;
      INFO(name << " frame of " << f.bytes.size() << " bytes");
      REQUIRE(decode(f.bytes, v) == DecodeError::kOk);
      if (!v.is_roce) continue;
      roce++;
      opcodes[v.opcode]++;
      CHECK(v.icrc_on_wire() == v.icrc_computed());
    }
    if (std::string(name) == "rxe-rocev2-ipv4.pcap") {
      CHECK(roce == 113);
      for (int o : {0, 1, 2, 4, 6, 7, 8, 12, 13, 14, 15, 17, 18, 19, 20, 32, 34, 38, 40, 100})
        CHECK(opcodes[o] > 0);
    } else {
      CHECK(roce == 682);
    }
  }
}
