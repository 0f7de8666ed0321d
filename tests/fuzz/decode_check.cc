#include "tests/fuzz/decode_check.h"

#include <cstring>
#include <memory>

#include "common/engine/fault.h"

namespace rocemu::test {
namespace {

using namespace rocemu::wire;

std::string fail(const char* what, uint32_t a = 0, uint32_t b = 0) {
  return std::string(what) + " (" + std::to_string(a) + ", " + std::to_string(b) + ")";
}

volatile uint64_t g_view_digest;  // keeps touch_view's reads

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

uint64_t digest(uint64_t h, std::span<const uint8_t> bytes) {
  for (uint8_t b : bytes) h = mix(h, b);
  return h;
}

uint64_t digest(uint64_t h, const IpAddr& a) { return digest(h, a.b); }

}  // namespace

std::string view_contract_violation(std::span<const uint8_t> frame, const PacketView& v) {
  const uint32_t len = uint32_t(frame.size());
  if (v.data != frame.data() || v.len != len) return fail("view does not describe the frame", v.len, len);
  if (len < sizeof(EthHdr) || len > kMaxFrameLen) return fail("accepted a frame of impossible length", len);
  if (v.l3_off != (v.has_vlan ? 18u : 14u)) return fail("l3_off", v.l3_off, v.has_vlan);
  switch (v.kind) {
    case PacketKind::kArp:
      if (v.l3_off + sizeof(ArpHdr) > len) return fail("ARP past the frame", v.l3_off, len);
      break;
    case PacketKind::kPfc:
      if (v.l3_off + sizeof(PfcHdr) > len) return fail("PFC past the frame", v.l3_off, len);
      if (v.pfc().opcode.get() != kPfcOpcode) return fail("PFC kind without the PFC opcode");
      break;
    case PacketKind::kPause:
      if (v.l3_off + 4u > len) return fail("PAUSE past the frame", v.l3_off, len);
      break;
    case PacketKind::kIpv4:
    case PacketKind::kIpv6: {
      const uint32_t hlen = v.is_ipv4() ? uint32_t(v.ipv4().ihl()) * 4 : uint32_t(sizeof(Ipv6Hdr));
      if (v.is_ipv4() && (v.ipv4().version() != 4 || hlen < 20)) return fail("bad IPv4 header accepted", hlen);
      if (v.is_ipv6() && v.ipv6().version() != 6) return fail("bad IPv6 version accepted");
      if (v.l4_off != v.l3_off + hlen) return fail("l4_off", v.l4_off, v.l3_off + hlen);
      if (v.ip_end > len || v.ip_end < v.l4_off) return fail("ip_end", v.ip_end, len);
      if (v.is_ipv4() && ipv4_checksum({v.data + v.l3_off, hlen}) != 0) return fail("bad IPv4 checksum accepted");
      if (v.ether_type != (v.is_ipv4() ? 0x0800 : 0x86dd)) return fail("EtherType", v.ether_type);
      break;
    }
    case PacketKind::kOther:
      break;
  }
  if (v.is_udp) {
    if (!v.is_ip() || v.ip_proto != kIpProtoUdp) return fail("UDP outside IP");
    if (v.l4_off + sizeof(UdpHdr) > v.ip_end) return fail("UDP header past the IP datagram", v.l4_off, v.ip_end);
    const uint32_t udp_len = v.udp().length.get();
    if (udp_len < sizeof(UdpHdr) || v.l4_off + udp_len > v.ip_end) return fail("UDP length", udp_len, v.ip_end);
    if (v.sport != v.udp().src_port.get() || v.dport != v.udp().dst_port.get()) return fail("ports");
  }
  if (v.is_roce) {
    if (!v.is_udp || v.dport != kRoceV2Port) return fail("RoCE without UDP 4791", v.dport);
    if (v.is_ipv4() && v.ipv4().ihl() != 5) return fail("RoCE over IPv4 with options");
    const uint32_t udp_end = v.l4_off + v.udp().length.get();
    if (udp_end != v.ip_end) return fail("RoCE UDP end is not the IP end", udp_end, v.ip_end);
    if (v.bth_off != v.l4_off + sizeof(UdpHdr)) return fail("bth_off", v.bth_off);
    const OpcodeInfo& info = opcode_info(v.opcode);
    if (!info.valid() || v.bth().opcode != v.opcode) return fail("opcode", v.opcode);
    if (v.bth().tver() != 0) return fail("TVer accepted", v.bth().tver());
    if (v.payload_off != v.bth_off + sizeof(Bth) + info.ext_len) return fail("payload_off", v.payload_off);
    if (v.pad != v.bth().pad_count()) return fail("pad", v.pad);
    if (uint32_t(v.payload_off) + v.payload_len + v.pad != v.icrc_off) return fail("payload + pad != ICRC offset");
    if (uint32_t(v.icrc_off) + kIcrcLen != v.ip_end) return fail("ICRC does not end the datagram", v.icrc_off);
    if (v.payload_len + v.pad != 0 && !info.any(kOpPayload | kOpCnp)) return fail("payload on an opcode without");
    for (int h = 0; h < kNumExtHeaders; h++) {
      if (!info.has(ExtHeader(h))) continue;
      const uint32_t end = v.bth_off + sizeof(Bth) + ext_offset(v.opcode, ExtHeader(h)) + kExtHeaderLen[size_t(h)];
      if (end > v.payload_off) return fail("extension header past the payload offset", uint32_t(h), end);
    }
  } else if (v.is_udp && v.dport == kRoceV2Port) {
    return fail("UDP 4791 accepted but not as RoCE");
  }
  return {};
}

uint64_t touch_view(const PacketView& v) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = mix(h, v.eth().ether_type.get());
  h = digest(h, v.eth().src.b);
  h = mix(h, v.pcp);
  h = mix(h, v.vid);
  switch (v.kind) {
    case PacketKind::kArp: {
      const ArpHdr& a = v.arp();
      h = mix(h, a.oper.get());
      h = mix(h, a.spa.get());
      h = mix(h, a.tpa.get());
      h = digest(h, a.tha.b);
      break;
    }
    case PacketKind::kPfc: {
      const PfcHdr& p = v.pfc();
      for (int i = 0; i < kNumPriorities; i++) h = mix(h, p.enabled(i) ? p.time[i].get() : 0x10000u);
      break;
    }
    default:
      break;
  }
  if (v.is_ip()) {
    h = digest(h, v.src_ip());
    h = digest(h, v.dst_ip());
    h = mix(h, v.dscp);
    h = mix(h, uint8_t(v.ecn));
    if (v.is_ipv6()) h = mix(h, v.ipv6().flow_label());
    else h = mix(h, v.ipv4().id.get());
  }
  if (v.is_udp) h = mix(h, v.udp().length.get());
  if (v.is_roce) {
    const Bth& b = v.bth();
    h = mix(h, b.dest_qp());
    h = mix(h, b.psn());
    h = mix(h, b.pkey.get());
    h = mix(h, uint32_t(b.se()) | b.mig_req() << 1 | b.fecn() << 2 | b.becn() << 3 | b.ack_req() << 4);
    const OpcodeInfo& op = v.op();
    if (op.has(kExtDeth)) h = mix(mix(h, v.deth().qkey.get()), v.deth().src_qp());
    if (op.has(kExtXrceth)) h = mix(h, v.xrceth().srqn());
    if (op.has(kExtReth)) h = mix(mix(mix(h, v.reth().va.get()), v.reth().rkey.get()), v.reth().dma_length.get());
    if (op.has(kExtAtomicEth)) {
      const AtomicEth& a = v.atomic_eth();
      h = mix(mix(mix(mix(h, a.va.get()), a.rkey.get()), a.swap_add.get()), a.compare.get());
    }
    if (op.has(kExtAeth)) {
      h = mix(h, v.aeth().msn());
      h = mix(h, uint8_t(aeth_kind(v.aeth().syndrome())));
      if (aeth_kind(v.aeth().syndrome()) == AethKind::kRnrNak) h = mix(h, rnr_timer_ns(aeth_value(v.aeth().syndrome())));
    }
    if (op.has(kExtAtomicAck)) h = mix(h, v.atomic_ack().orig.get());
    if (op.has(kExtImmDt)) h = mix(h, v.imm().imm.get());
    if (op.has(kExtIeth)) h = mix(h, v.ieth().rkey.get());
    h = digest(h, v.payload());
    h = mix(h, v.icrc_on_wire());
    h = mix(h, v.icrc_computed());
    h = mix(h, v.icrc_ok());
  }
  return h;
}

std::string check_decode(std::span<const uint8_t> input, uint64_t seed) {
  const size_t n = input.size();
  // Exact-size heap copies: one byte read past the end is an ASan report.
  std::unique_ptr<uint8_t[]> frame(new uint8_t[n]);
  if (n) std::memcpy(frame.get(), input.data(), n);
  const std::span<const uint8_t> f{frame.get(), n};

  PacketView v;
  const DecodeError err = decode(f, v);
  if (err >= DecodeError::kCount) return fail("decode returned an unknown error", uint32_t(err));
  if (decode_error_name(err) == "unknown" || decode_error_text(err).empty()) return fail("error without a name");
  bool icrc_was_ok = false;
  if (err == DecodeError::kOk) {
    if (std::string why = view_contract_violation(f, v); !why.empty()) return why;
    g_view_digest = touch_view(v);
    icrc_was_ok = v.is_roce && v.icrc_ok();
  }

  // FaultInjector::corrupt() on a copy: never out of bounds, and what it
  // does to a good RoCE frame is caught by the ICRC.
  std::unique_ptr<uint8_t[]> copy(new uint8_t[n]);
  if (n) std::memcpy(copy.get(), input.data(), n);
  FaultInjector faults(seed);
  faults.corrupt(copy.get(), uint32_t(n));
  if (icrc_was_ok) {
    PacketView c;
    if (decode({copy.get(), n}, c) == DecodeError::kOk && c.is_roce && c.icrc_ok())
      return "FaultInjector::corrupt left a RoCE frame with a valid ICRC";
  }
  return {};
}

}  // namespace rocemu::test
