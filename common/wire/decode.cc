#include <array>

#include "common/wire/icrc.h"
#include "common/wire/packet.h"

namespace rocemu::wire {
namespace {

constexpr std::array<std::string_view, size_t(DecodeError::kCount)> kErrorText = {
#define X(name, text) text,
    ROCEMU_DECODE_ERRORS(X)
#undef X
};
constexpr std::array<std::string_view, size_t(DecodeError::kCount)> kErrorName = {
#define X(name, text) #name,
    ROCEMU_DECODE_ERRORS(X)
#undef X
};

DecodeError decode_roce(PacketView& v, uint32_t udp_end) {
  if (v.is_ipv4() && v.ipv4().ihl() != 5) return DecodeError::kRoceIpOptions;
  v.bth_off = uint16_t(v.l4_off + sizeof(UdpHdr));
  if (udp_end < v.bth_off + sizeof(Bth) + kIcrcLen) return DecodeError::kTruncatedBth;
  const Bth& bth = v.bth();
  const OpcodeInfo& info = opcode_info(bth.opcode);
  if (!info.valid()) return DecodeError::kUnknownOpcode;
  if (bth.tver() != 0) return DecodeError::kBadTransportVersion;
  v.opcode = bth.opcode;
  v.payload_off = uint16_t(v.bth_off + sizeof(Bth) + info.ext_len);
  v.icrc_off = uint16_t(udp_end - kIcrcLen);
  if (v.payload_off > v.icrc_off) return DecodeError::kTruncatedExtHeaders;
  const uint32_t total = v.icrc_off - v.payload_off;
  if (total != 0 && !info.any(kOpPayload | kOpCnp)) return DecodeError::kUnexpectedPayload;
  v.pad = bth.pad_count();
  if (v.pad > total) return DecodeError::kBadPadCount;
  v.payload_len = uint16_t(total - v.pad);
  v.is_roce = true;
  return DecodeError::kOk;
}

DecodeError decode_udp(PacketView& v) {
  if (uint32_t(v.l4_off) + sizeof(UdpHdr) > v.ip_end) return DecodeError::kTruncatedUdp;
  const UdpHdr& udp = v.udp();
  const uint32_t udp_len = udp.length.get();
  if (udp_len < sizeof(UdpHdr) || v.l4_off + udp_len > v.ip_end) return DecodeError::kBadUdpLength;
  v.is_udp = true;
  v.sport = udp.src_port.get();
  v.dport = udp.dst_port.get();
  if (v.dport != kRoceV2Port) return DecodeError::kOk;
  if (v.l4_off + udp_len != v.ip_end) return DecodeError::kBadUdpLength;
  return decode_roce(v, v.l4_off + udp_len);
}

DecodeError decode_ipv4(PacketView& v, bool checksum_good) {
  if (v.len < v.l3_off + sizeof(Ipv4Hdr)) return DecodeError::kTruncatedIp;
  const Ipv4Hdr& ip = v.ipv4();
  if (ip.version() != 4) return DecodeError::kBadIpVersion;
  const uint32_t hlen = uint32_t(ip.ihl()) * 4;
  if (hlen < sizeof(Ipv4Hdr) || v.l3_off + hlen > v.len) return DecodeError::kBadIpHeaderLength;
  const uint32_t total = ip.total_length.get();
  if (total < hlen || v.l3_off + total > v.len) return DecodeError::kBadIpTotalLength;
  if (!checksum_good && ipv4_checksum({v.data + v.l3_off, hlen}) != 0) return DecodeError::kBadIpChecksum;
  if ((ip.frag.get() & 0x3fff) != 0) return DecodeError::kIpFragment;
  v.kind = PacketKind::kIpv4;
  v.dscp = ip.dscp();
  v.ecn = ip.ecn();
  v.ip_proto = ip.protocol;
  v.l4_off = uint16_t(v.l3_off + hlen);
  v.ip_end = uint16_t(v.l3_off + total);
  return v.ip_proto == kIpProtoUdp ? decode_udp(v) : DecodeError::kOk;
}

DecodeError decode_ipv6(PacketView& v) {
  if (v.len < v.l3_off + sizeof(Ipv6Hdr)) return DecodeError::kTruncatedIp;
  const Ipv6Hdr& ip = v.ipv6();
  if (ip.version() != 6) return DecodeError::kBadIpVersion;
  const uint32_t end = v.l3_off + sizeof(Ipv6Hdr) + ip.payload_length.get();
  if (end > v.len) return DecodeError::kBadIpTotalLength;
  v.kind = PacketKind::kIpv6;
  v.dscp = ip.dscp();
  v.ecn = ip.ecn();
  v.ip_proto = ip.next_header;
  v.l4_off = uint16_t(v.l3_off + sizeof(Ipv6Hdr));
  v.ip_end = uint16_t(end);
  return v.ip_proto == kIpProtoUdp ? decode_udp(v) : DecodeError::kOk;
}

}  // namespace

std::string_view decode_error_text(DecodeError e) {
  return size_t(e) < kErrorText.size() ? kErrorText[size_t(e)] : "unknown";
}
std::string_view decode_error_name(DecodeError e) {
  return size_t(e) < kErrorName.size() ? kErrorName[size_t(e)] : "unknown";
}

IpAddr PacketView::src_ip() const {
  if (is_ipv4()) return IpAddr::v4(ipv4().src.get());
  IpAddr a;
  a.b = ipv6().src;
  return a;
}

IpAddr PacketView::dst_ip() const {
  if (is_ipv4()) return IpAddr::v4(ipv4().dst.get());
  IpAddr a;
  a.b = ipv6().dst;
  return a;
}

uint32_t PacketView::icrc_on_wire() const {
  const uint8_t* p = data + icrc_off;
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

uint32_t PacketView::icrc_computed() const {
  return compute_icrc({data + l3_off, size_t(icrc_off - l3_off)}, is_ipv6());
}

namespace {

inline __attribute__((always_inline)) DecodeError decode_frame(std::span<const uint8_t> frame, PacketView& v,
                                                              bool ip_checksum_good) {
  v = PacketView{};
  v.data = frame.data();
  v.len = uint32_t(frame.size());
  if (frame.size() < sizeof(EthHdr)) return DecodeError::kTruncatedEthernet;
  if (frame.size() > kMaxFrameLen) return DecodeError::kTooLong;
  uint32_t off = sizeof(EthHdr);
  uint16_t type = v.eth().ether_type.get();
  if (type == uint16_t(EtherType::kVlan)) {
    if (v.len < off + sizeof(VlanTag)) return DecodeError::kTruncatedVlan;
    const auto& tag = *reinterpret_cast<const VlanTag*>(v.data + off);
    v.has_vlan = true;
    v.pcp = tag.pcp();
    v.vid = tag.vid();
    type = tag.ether_type.get();
    off += sizeof(VlanTag);
    if (type == uint16_t(EtherType::kVlan) || type == 0x88a8) return DecodeError::kNestedVlan;
  }
  v.ether_type = type;
  v.l3_off = uint16_t(off);
  switch (EtherType(type)) {
    case EtherType::kIpv4:
      return decode_ipv4(v, ip_checksum_good);
    case EtherType::kIpv6:
      return decode_ipv6(v);
    case EtherType::kArp:
      if (v.len < off + sizeof(ArpHdr)) return DecodeError::kTruncatedArp;
      v.kind = PacketKind::kArp;
      return DecodeError::kOk;
    case EtherType::kMacControl: {
      if (v.len < off + 2) return DecodeError::kTruncatedMacControl;
      const uint16_t opcode = uint16_t(v.data[off] << 8 | v.data[off + 1]);
      if (opcode == kPfcOpcode) {
        if (v.len < off + sizeof(PfcHdr)) return DecodeError::kTruncatedMacControl;
        v.kind = PacketKind::kPfc;
      } else if (opcode == kPauseOpcode) {
        if (v.len < off + 4) return DecodeError::kTruncatedMacControl;
        v.kind = PacketKind::kPause;
      }
      return DecodeError::kOk;
    }
    default:
      return DecodeError::kOk;
  }
}

}  // namespace

DecodeError decode(std::span<const uint8_t> frame, PacketView& v) { return decode_frame(frame, v, false); }

DecodeError decode_ip_checksum_good(std::span<const uint8_t> frame, PacketView& v) {
  return decode_frame(frame, v, true);
}

}  // namespace rocemu::wire
