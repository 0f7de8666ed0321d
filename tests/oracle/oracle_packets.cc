#include "tests/oracle/oracle_packets.h"

#include <cstdio>
#include <set>
#include <stdexcept>

namespace rocemu::test {
namespace {

using namespace rocemu::wire;

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; i++) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    s += buf;
  }
  return s;
}

std::string be32_hex(uint32_t v) {
  const uint8_t b[4] = {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)};
  return hex(b, 4);
}

// Payload lengths cycle through every pad count, an empty payload and a few
// sizes up to a 4 KB MTU.
constexpr uint32_t kPayloadLens[] = {1, 2, 3, 4, 5, 6, 7, 0, 13, 250, 1021, 4093};
constexpr uint8_t kDscps[] = {26, 48, 0, 63, 10, 46, 3, 33};

struct PathVariant {
  bool ipv6;
  bool vlan;
};
constexpr PathVariant kPaths[] = {{false, false}, {false, true}, {true, false}, {true, true}};

PathHeaders make_path(PathVariant pv, uint32_t k) {
  PathHeaders p;
  p.src_mac = *MacAddr::parse("02:11:22:33:44:55");
  p.dst_mac = *MacAddr::parse("02:66:77:88:99:aa");
  p.vlan = pv.vlan;
  p.pcp = uint8_t(k % 8);
  p.vid = uint16_t(1 + (k * 37) % 4094);
  p.ipv6 = pv.ipv6;
  p.src_ip = *IpAddr::parse(pv.ipv6 ? "fd00:1::5" : "10.1.2.3");
  p.dst_ip = *IpAddr::parse(pv.ipv6 ? "fd00:2::abcd" : "192.168.100.200");
  p.dscp = kDscps[k % std::size(kDscps)];
  p.ecn = Ecn(k % 4);
  p.ttl = uint8_t(8 + k % 240);  // tshark notes TTLs below 5
  p.flow_label = (0xabcde + k * 0x111) & 0xfffff;
  p.udp_sport = pv.ipv6 ? flow_label_to_udp_sport(p.flow_label) : uint16_t(0xc000 | ((k * 0x2d) & 0x3fff));
  p.ipv4_id = uint16_t(0x1000 + k);
  return p;
}

RoceFields make_fields(uint8_t opcode, uint32_t k) {
  RoceFields f;
  f.opcode = opcode;
  f.se = k & 1;
  f.ack_req = k & 2;
  f.fecn = k & 4;
  f.becn = k & 8;
  f.mig_req = k & 16;
  f.pkey = uint16_t(0x8000 | ((0x1234 + k) & 0x7fff));
  f.dest_qp = 0x800000 | ((k * 0x9e37) & 0x7fffff);  // top bit set: all 24 bits count
  f.psn = (0xfffff0 + k * 0x3d) & 0xffffff;           // crosses the wrap
  f.reth_va = 0x0123456789abcdefull ^ (uint64_t(k) << 40);
  f.reth_rkey = 0xa5a50000u | k;
  f.reth_len = 0x10000u + k * 7;
  f.aeth_syndrome = aeth_ack(uint8_t(k % 32));
  f.aeth_msn = (0xf00000 + k * 0x101) & 0xffffff;
  f.atomic_va = 0xfedcba9876543210ull - uint64_t(k) * 8;
  f.atomic_rkey = 0x5a5a0000u | k;
  f.atomic_swap_add = 0x1111222233334444ull + k;
  f.atomic_compare = 0x5555666677778888ull + k;
  f.atomic_orig = 0x9999aaaabbbbccccull + k;
  f.imm = 0xdead0000u | k;
  f.ieth_rkey = 0xbeef0000u | k;
  f.deth_qkey = 0x80010000u + k;
  f.deth_src_qp = 0x400000u + k;
  f.xrc_srqn = 0x800000u | ((k * 0x3b1) & 0x7fffff);  // top bit set: all 24 bits count
  return f;
}

void expect_path(OracleFrame& o) {
  const PathHeaders& p = o.path;
  auto& e = o.expect;
  using F = FieldExpect;
  e.push_back(F::str("eth.src", p.src_mac.str()));
  e.push_back(F::str("eth.dst", p.dst_mac.str()));
  const uint16_t l3_type = p.ipv6 ? 0x86dd : 0x0800;
  if (p.vlan) {
    e.push_back(F::num("eth.type", 0x8100));
    e.push_back(F::num("vlan.priority", p.pcp));
    e.push_back(F::num("vlan.dei", 0));
    e.push_back(F::num("vlan.id", p.vid));
    e.push_back(F::num("vlan.etype", l3_type));
  } else {
    e.push_back(F::num("eth.type", l3_type));
  }
  const uint32_t frame_len = uint32_t(o.bytes.size());
  const uint32_t udp_len = frame_len - p.l2_len() - p.l3_len();
  if (p.ipv6) {
    e.push_back(F::num("ipv6.version", 6));
    e.push_back(F::num("ipv6.tclass.dscp", p.dscp));
    e.push_back(F::num("ipv6.tclass.ecn", uint8_t(p.ecn)));
    e.push_back(F::num("ipv6.flow", p.flow_label));
    e.push_back(F::num("ipv6.plen", udp_len));
    e.push_back(F::num("ipv6.nxt", 17));
    e.push_back(F::num("ipv6.hlim", p.ttl));
    e.push_back(F::str("ipv6.src", p.src_ip.str()));
    e.push_back(F::str("ipv6.dst", p.dst_ip.str()));
  } else {
    e.push_back(F::num("ip.version", 4));
    e.push_back(F::num("ip.hdr_len", 20));
    e.push_back(F::num("ip.dsfield.dscp", p.dscp));
    e.push_back(F::num("ip.dsfield.ecn", uint8_t(p.ecn)));
    e.push_back(F::num("ip.len", udp_len + 20));
    e.push_back(F::num("ip.id", p.ipv4_id));
    e.push_back(F::num("ip.flags.df", 1));
    e.push_back(F::num("ip.frag_offset", 0));
    e.push_back(F::num("ip.ttl", p.ttl));
    e.push_back(F::num("ip.proto", 17));
    e.push_back(F::num("ip.checksum.status", 1));  // good (checked with -o ip.check_checksum:TRUE)
    e.push_back(F::str("ip.src", p.src_ip.str()));
    e.push_back(F::str("ip.dst", p.dst_ip.str()));
  }
  e.push_back(F::num("udp.srcport", p.udp_sport));
  e.push_back(F::num("udp.dstport", kRoceV2Port));
  e.push_back(F::num("udp.length", udp_len));
  // Zero over IPv4 and IPv6 alike, as rxe and RoCE NICs send it: the ICRC
  // protects the packet (RFC 6935/6936 allow it for tunnels over IPv6).
  e.push_back(F::num("udp.checksum", 0));
}

void expect_roce(OracleFrame& o) {
  const RoceFields& f = o.fields;
  const OpcodeInfo& info = opcode_info(f.opcode);
  auto& e = o.expect;
  using F = FieldExpect;
  e.push_back(F::num("infiniband.bth.opcode", f.opcode));
  e.push_back(F::num("infiniband.bth.se", f.se));
  e.push_back(F::num("infiniband.bth.m", f.mig_req));
  e.push_back(F::num("infiniband.bth.padcnt", pad_for(o.payload_len)));
  e.push_back(F::num("infiniband.bth.tver", 0));
  e.push_back(F::num("infiniband.bth.p_key", f.pkey));
  // Wireshark 4.0 shows the FECN/BECN/resv6 byte as "Reserved" (the DETH's
  // reserved byte is a second occurrence).
  const uint8_t fb = uint8_t((f.fecn ? 0x80 : 0) | (f.becn ? 0x40 : 0));
  e.push_back(F::str("infiniband.reserved", hex(&fb, 1)).at(0));
  e.push_back(F::num("infiniband.bth.destqp", f.dest_qp));
  e.push_back(F::num("infiniband.bth.a", f.ack_req));
  e.push_back(F::num("infiniband.bth.psn", f.psn));
  if (opcode_transport(f.opcode) == Transport::kXrc) {
    // Wireshark 4.0 names the XRC opcodes but dissects nothing behind the
    // BTH: it shows the XRCETH, the other headers, the payload with its
    // pad and the ICRC as one vendor-specific blob (occurrence 0 is the
    // subtree's own 4-byte item). Byte for byte, so the XRCETH's place
    // and value and every header behind it are checked all the same.
    const size_t bth_end = o.path.outer_len() + sizeof(Bth);
    e.push_back(F::str("infiniband.vendor", hex(&o.bytes[bth_end], o.bytes.size() - bth_end)).at(1));
    return;
  }
  if (info.has(kExtDeth)) {
    e.push_back(F::num("infiniband.deth.q_key", f.deth_qkey));
    e.push_back(F::num("infiniband.deth.srcqp", f.deth_src_qp));
  }
  if (info.any(kOpAtomicWrite)) return;  // see atomic_write_blob()
  if (info.has(kExtReth)) {
    e.push_back(F::num("infiniband.reth.va", f.reth_va));
    e.push_back(F::num("infiniband.reth.r_key", f.reth_rkey));
    e.push_back(F::num("infiniband.reth.dmalen", f.reth_len));
  }
  if (info.has(kExtAtomicEth)) {
    // Wireshark shows the AtomicETH address and key with the RETH's fields.
    e.push_back(F::num("infiniband.reth.va", f.atomic_va));
    e.push_back(F::num("infiniband.reth.r_key", f.atomic_rkey));
    e.push_back(F::num("infiniband.atomiceth.swapdt", f.atomic_swap_add));
    e.push_back(F::num("infiniband.atomiceth.cmpdt", f.atomic_compare));
  }
  if (info.has(kExtAeth)) {
    const uint8_t syn = f.aeth_syndrome;
    e.push_back(F::num("infiniband.aeth.syndrome", syn));
    e.push_back(F::num("infiniband.aeth.syndrome.opcode", syn >> 5));
    switch (aeth_kind(syn)) {
      case AethKind::kAck:
        e.push_back(F::num("infiniband.aeth.syndrome.credit_count", aeth_value(syn)));
        break;
      case AethKind::kRnrNak:
        e.push_back(F::num("infiniband.aeth.syndrome.timer", aeth_value(syn)));
        break;
      case AethKind::kNak:
        e.push_back(F::num("infiniband.aeth.syndrome.error_code", aeth_value(syn)));
        break;
      case AethKind::kReserved:
        break;
    }
    e.push_back(F::num("infiniband.aeth.msn", f.aeth_msn));
  }
  if (info.has(kExtAtomicAck)) e.push_back(F::num("infiniband.atomicacketh.origremdt", f.atomic_orig));
  if (info.has(kExtImmDt)) e.push_back(F::str("infiniband.immdt", be32_hex(f.imm)));
  if (info.has(kExtIeth)) e.push_back(F::str("infiniband.ieth", be32_hex(f.ieth_rkey)));
  const size_t icrc_off = o.bytes.size() - kIcrcLen;
  if (info.any(kOpCnp)) {
    // Wireshark 4.0 does not know opcode 0x81: it shows the 16 reserved
    // bytes and the ICRC as one vendor-specific blob (occurrence 0 is the
    // subtree's own item, which covers only 4 bytes).
    e.push_back(F::str("infiniband.vendor", std::string(32, '0') + hex(&o.bytes[icrc_off], 4)).at(1));
  } else {
    // Read as a big-endian number from the bytes as sent.
    e.push_back(F::str("infiniband.invariant.crc", "0x" + hex(&o.bytes[icrc_off], 4)));
  }
}

// Wireshark 4.0 does not know opcode 0x1D, RDMA ATOMIC WRITE (IBA 1.5,
// 2021): it shows "Opcode: Unknown (29)" and what follows the BTH as one
// vendor-specific blob (as for a CNP). The blob must be the IBA layout,
// written out here independently of our encoder -- RETH (VA 8 bytes, R_Key
// 4, DMA length 4, all big-endian), the 8 bytes of payload -- and then the
// ICRC as sent, which scapy recomputes.
std::string atomic_write_blob(const OracleFrame& o, const std::vector<uint8_t>& payload) {
  const RoceFields& f = o.fields;
  const uint8_t va[8] = {uint8_t(f.reth_va >> 56), uint8_t(f.reth_va >> 48), uint8_t(f.reth_va >> 40),
                         uint8_t(f.reth_va >> 32), uint8_t(f.reth_va >> 24), uint8_t(f.reth_va >> 16),
                         uint8_t(f.reth_va >> 8),  uint8_t(f.reth_va)};
  return hex(va, 8) + be32_hex(f.reth_rkey) + be32_hex(f.reth_len) + hex(payload.data(), payload.size()) +
         hex(&o.bytes[o.bytes.size() - kIcrcLen], kIcrcLen);
}

OracleFrame roce_frame(std::string name, const PathHeaders& path, const RoceFields& f, uint32_t payload_len,
                       uint32_t k) {
  OracleFrame o;
  o.name = std::move(name);
  o.kind = FrameKind::kRoce;
  o.path = path;
  o.fields = f;
  o.payload_len = payload_len;
  std::vector<uint8_t> payload(payload_len);
  for (uint32_t j = 0; j < payload_len; j++) payload[j] = uint8_t(k * 31 + j * 7 + 1);
  o.bytes.resize(roce_frame_len(path, f.opcode, payload_len));
  const uint32_t len = encode_roce(o.bytes, path, f, payload);
  if (len != o.bytes.size()) throw std::logic_error("encode_roce: unexpected length for " + o.name);
  expect_path(o);
  expect_roce(o);
  if (opcode_info(f.opcode).any(kOpAtomicWrite)) {
    o.expect.push_back(FieldExpect::str("infiniband.vendor", atomic_write_blob(o, payload)).at(1));
    return o;
  }
  // Wireshark 4.0 hands the payload and the pad bytes to the data dissector.
  const uint8_t pad = pad_for(payload_len);
  if (payload_len > 0 && opcode_transport(f.opcode) != Transport::kXrc) {  // XRC: in the blob
    o.expect.push_back(FieldExpect::str("data.data", hex(payload.data(), payload_len) + std::string(2u * pad, '0')));
    o.expect.push_back(FieldExpect::num("data.len", payload_len + pad));
  }
  return o;
}

std::string path_name(PathVariant pv) {
  return std::string(pv.ipv6 ? " ipv6" : " ipv4") + (pv.vlan ? " vlan" : "");
}

void add_pfc(std::vector<OracleFrame>& out, uint8_t class_enable, const uint16_t (&quanta)[kNumPriorities],
             const char* what) {
  OracleFrame o;
  o.name = std::string("PFC ") + what;
  o.kind = FrameKind::kPfc;
  o.bytes.resize(kPfcFrameLen);
  const MacAddr src = *MacAddr::parse("02:aa:bb:cc:dd:ee");
  if (encode_pfc(o.bytes, src, class_enable, quanta) != kPfcFrameLen) throw std::logic_error("encode_pfc");
  using F = FieldExpect;
  o.expect.push_back(F::str("eth.src", src.str()));
  o.expect.push_back(F::str("eth.dst", "01:80:c2:00:00:01"));
  o.expect.push_back(F::num("eth.type", 0x8808));
  o.expect.push_back(F::num("macc.opcode", kPfcOpcode));
  o.expect.push_back(F::num("macc.cbfc.enbv", class_enable));
  for (int i = 0; i < kNumPriorities; i++) {
    const bool on = (class_enable >> i) & 1;
    o.expect.push_back(F::num("macc.cbfc.enbv.c" + std::to_string(i), on));
    o.expect.push_back(F::num("macc.cbfc.pause_time.c" + std::to_string(i), on ? quanta[i] : 0));
  }
  out.push_back(std::move(o));
}

void add_arp(std::vector<OracleFrame>& out, uint16_t oper) {
  OracleFrame o;
  o.kind = FrameKind::kArp;
  o.name = oper == kArpRequest ? "ARP request" : "ARP reply";
  o.bytes.resize(60);
  const MacAddr sha = *MacAddr::parse("02:12:34:56:78:9a");
  const MacAddr tha = oper == kArpRequest ? MacAddr{{0, 0, 0, 0, 0, 0}} : *MacAddr::parse("02:fe:dc:ba:98:76");
  const MacAddr dst = oper == kArpRequest ? kBroadcastMac : tha;
  const uint32_t spa = 0x0a010203, tpa = 0xc0a864c8;
  if (encode_arp(o.bytes, oper, sha, spa, tha, tpa, dst) != 60) throw std::logic_error("encode_arp");
  using F = FieldExpect;
  o.expect.push_back(F::str("eth.src", sha.str()));
  o.expect.push_back(F::str("eth.dst", dst.str()));
  o.expect.push_back(F::num("eth.type", 0x0806));
  o.expect.push_back(F::num("arp.hw.type", 1));
  o.expect.push_back(F::num("arp.proto.type", 0x0800));
  o.expect.push_back(F::num("arp.hw.size", 6));
  o.expect.push_back(F::num("arp.proto.size", 4));
  o.expect.push_back(F::num("arp.opcode", oper));
  o.expect.push_back(F::str("arp.src.hw_mac", sha.str()));
  o.expect.push_back(F::str("arp.src.proto_ipv4", "10.1.2.3"));
  o.expect.push_back(F::str("arp.dst.hw_mac", tha.str()));
  o.expect.push_back(F::str("arp.dst.proto_ipv4", "192.168.100.200"));
  out.push_back(std::move(o));
}

}  // namespace

std::vector<OracleFrame> oracle_frames() {
  std::vector<OracleFrame> out;
  uint32_t k = 0;
  for (int opc = 0; opc < 256; opc++) {
    const uint8_t opcode = uint8_t(opc);
    const OpcodeInfo& info = opcode_info(opcode);
    if (!info.valid()) continue;
    for (PathVariant pv : kPaths) {
      const PathHeaders path = make_path(pv, k);
      const std::string name = std::string(info.name) + path_name(pv);
      if (info.any(kOpCnp)) {
        OracleFrame o;
        o.name = name;
        o.path = path;
        o.fields.opcode = opcode;
        o.fields.becn = true;
        o.fields.dest_qp = 0x800000 | ((k * 0x9e37) & 0x7fffff);
        o.payload_len = kCnpPadLen;
        o.bytes.resize(roce_frame_len(path, opcode, kCnpPadLen));
        if (encode_cnp(o.bytes, path, o.fields.dest_qp) != o.bytes.size()) throw std::logic_error("encode_cnp");
        expect_path(o);
        expect_roce(o);
        out.push_back(std::move(o));
        k++;
        continue;
      }
      if (opcode == op::kAck) {
        // One ACK per AETH kind: ACK with credits, RNR NAKs, every NAK code.
        const uint8_t syndromes[] = {aeth_ack(),
                                     aeth_ack(3),
                                     aeth_rnr_nak(0),
                                     aeth_rnr_nak(14),
                                     aeth_rnr_nak(31),
                                     aeth_nak(NakCode::kPsnSeqError),
                                     aeth_nak(NakCode::kInvalidRequest),
                                     aeth_nak(NakCode::kRemoteAccessError),
                                     aeth_nak(NakCode::kRemoteOperationalError),
                                     aeth_nak(NakCode::kInvalidRdRequest)};
        for (uint8_t syn : syndromes) {
          RoceFields f = make_fields(opcode, k);
          f.aeth_syndrome = syn;
          char suffix[16];
          std::snprintf(suffix, sizeof suffix, " aeth=0x%02x", syn);
          out.push_back(roce_frame(name + suffix, make_path(pv, k), f, 0, k));
          k++;
        }
        continue;
      }
      if (info.any(kOpAtomicWrite)) {  // always RETH + 8 bytes
        RoceFields f = make_fields(opcode, k);
        f.reth_va &= ~uint64_t(7);
        f.reth_len = 8;
        out.push_back(roce_frame(name, path, f, 8, k));
        k++;
        continue;
      }
      const uint32_t payload_len = info.any(kOpPayload) ? kPayloadLens[k % std::size(kPayloadLens)] : 0;
      out.push_back(roce_frame(name, path, make_fields(opcode, k), payload_len, k));
      k++;
    }
  }

  const uint16_t q1[kNumPriorities] = {0x1111, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666, 0x7777, 0x8888};
  const uint16_t q_max[kNumPriorities] = {0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff};
  const uint16_t q_zero[kNumPriorities] = {};
  add_pfc(out, 0x08, q1, "XOFF priority 3");
  add_pfc(out, 0x08, q_zero, "XON priority 3");
  add_pfc(out, 0x48, q1, "priorities 3 and 6");
  add_pfc(out, 0xff, q_max, "all priorities, maximum quanta");
  add_pfc(out, 0x81, q1, "priorities 0 and 7");
  add_pfc(out, 0x00, q1, "no class enabled");
  add_arp(out, kArpRequest);
  add_arp(out, kArpReply);
  return out;
}

std::vector<std::string> oracle_field_names(const std::vector<OracleFrame>& frames) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& f : frames)
    for (const auto& e : f.expect)
      if (seen.insert(e.field).second) names.push_back(e.field);
  return names;
}

}  // namespace rocemu::test
