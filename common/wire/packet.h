// Decoding a frame into a view of its layers. The decoder never reads past
// the span it is given; anything inconsistent is rejected with a reason.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "common/wire/ethernet.h"
#include "common/wire/ip.h"
#include "common/wire/pfc.h"
#include "common/wire/roce.h"

namespace rocemu::wire {

// Largest frame accepted (jumbo 9216 + Ethernet and VLAN headers).
inline constexpr uint32_t kMaxFrameLen = 9216 + 18;

#define ROCEMU_DECODE_ERRORS(X)                                                   \
  X(kOk, "ok")                                                                    \
  X(kTruncatedEthernet, "frame shorter than an Ethernet header")                  \
  X(kTooLong, "frame longer than the largest accepted frame")                     \
  X(kTruncatedVlan, "802.1Q tag cut short")                                       \
  X(kNestedVlan, "stacked 802.1Q tags are not supported")                         \
  X(kTruncatedArp, "ARP header cut short")                                        \
  X(kTruncatedMacControl, "MAC control (PFC/PAUSE) frame cut short")              \
  X(kTruncatedIp, "IP header cut short")                                          \
  X(kBadIpVersion, "IP version does not match the EtherType")                     \
  X(kBadIpHeaderLength, "IPv4 header length below 20 bytes or past the frame")    \
  X(kBadIpTotalLength, "IP length field disagrees with the frame")                \
  X(kBadIpChecksum, "IPv4 header checksum is wrong")                              \
  X(kIpFragment, "IPv4 fragment")                                                 \
  X(kTruncatedUdp, "UDP header cut short")                                        \
  X(kBadUdpLength, "UDP length field disagrees with the IP length")               \
  X(kRoceIpOptions, "RoCEv2 over IPv4 with options")                              \
  X(kTruncatedBth, "RoCEv2 packet shorter than BTH + ICRC")                       \
  X(kUnknownOpcode, "BTH opcode is not a known RC/UC/UD/XRC/CNP opcode")              \
  X(kBadTransportVersion, "BTH TVer is not 0")                                    \
  X(kTruncatedExtHeaders, "extension headers cut short")                          \
  X(kUnexpectedPayload, "payload on an opcode that carries none")                 \
  X(kBadPadCount, "BTH pad count larger than the payload")

enum class DecodeError : uint8_t {
#define X(name, text) name,
  ROCEMU_DECODE_ERRORS(X)
#undef X
      kCount
};
std::string_view decode_error_name(DecodeError e);  // the enumerator, e.g. "kTruncatedUdp"
std::string_view decode_error_text(DecodeError e);

enum class PacketKind : uint8_t { kOther, kArp, kPfc, kPause, kIpv4, kIpv6 };

struct PacketView {
  const uint8_t* data = nullptr;
  uint32_t len = 0;

  // Layer 2
  uint16_t ether_type = 0;  // of the payload (after any VLAN tag)
  bool has_vlan = false;
  uint8_t pcp = 0;
  uint16_t vid = 0;
  uint16_t l3_off = 0;
  PacketKind kind = PacketKind::kOther;

  // Layer 3 (IPv4 / IPv6)
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  uint8_t ip_proto = 0;
  uint16_t l4_off = 0;
  uint16_t ip_end = 0;  // end of the IP datagram (Ethernet padding follows)

  // Layer 4
  bool is_udp = false;
  uint16_t sport = 0, dport = 0;

  // RoCEv2
  bool is_roce = false;
  uint8_t opcode = 0;
  uint16_t bth_off = 0;
  uint16_t payload_off = 0;
  uint16_t payload_len = 0;  // without pad
  uint8_t pad = 0;
  uint16_t icrc_off = 0;

  bool is_ipv4() const { return kind == PacketKind::kIpv4; }
  bool is_ipv6() const { return kind == PacketKind::kIpv6; }
  bool is_ip() const { return is_ipv4() || is_ipv6(); }

  const EthHdr& eth() const { return *reinterpret_cast<const EthHdr*>(data); }
  const Ipv4Hdr& ipv4() const { return *reinterpret_cast<const Ipv4Hdr*>(data + l3_off); }
  const Ipv6Hdr& ipv6() const { return *reinterpret_cast<const Ipv6Hdr*>(data + l3_off); }
  const ArpHdr& arp() const { return *reinterpret_cast<const ArpHdr*>(data + l3_off); }
  const PfcHdr& pfc() const { return *reinterpret_cast<const PfcHdr*>(data + l3_off); }
  const UdpHdr& udp() const { return *reinterpret_cast<const UdpHdr*>(data + l4_off); }
  const Bth& bth() const { return *reinterpret_cast<const Bth*>(data + bth_off); }
  const OpcodeInfo& op() const { return opcode_info(opcode); }
  IpAddr src_ip() const;
  IpAddr dst_ip() const;

  template <typename T>
  const T& ext(ExtHeader h) const {
    return *reinterpret_cast<const T*>(data + bth_off + sizeof(Bth) + ext_offset(opcode, h));
  }
  const Reth& reth() const { return ext<Reth>(kExtReth); }
  const Aeth& aeth() const { return ext<Aeth>(kExtAeth); }
  const AtomicEth& atomic_eth() const { return ext<AtomicEth>(kExtAtomicEth); }
  const AtomicAckEth& atomic_ack() const { return ext<AtomicAckEth>(kExtAtomicAck); }
  const ImmDt& imm() const { return ext<ImmDt>(kExtImmDt); }
  const Ieth& ieth() const { return ext<Ieth>(kExtIeth); }
  const Deth& deth() const { return ext<Deth>(kExtDeth); }
  const Xrceth& xrceth() const { return ext<Xrceth>(kExtXrceth); }
  std::span<const uint8_t> payload() const { return {data + payload_off, payload_len}; }

  uint32_t icrc_on_wire() const;  // as carried (little-endian on the wire)
  uint32_t icrc_computed() const;
  bool icrc_ok() const { return icrc_on_wire() == icrc_computed(); }
};

// Decodes `frame`; on kOk `out` describes every layer found. Never reads
// outside `frame`.
DecodeError decode(std::span<const uint8_t> frame, PacketView& out);
// The same for a frame whose IPv4 header checksum is known to be right,
// as a NIC's checksum-good offload flag says: one the engine built and
// kept (dpdk::kMetaIcrcValid; every rewrite inside the engine fixes the
// checksum, a fault stage that corrupts a frame clears the flag). Every
// other check is made; frames from outside take decode() above.
DecodeError decode_ip_checksum_good(std::span<const uint8_t> frame, PacketView& out);

}  // namespace rocemu::wire
