// Packet trimming: a packet that does not fit in the buffer is cut to a
// configured size instead of being dropped, so the receiver learns of the
// loss at once (NDP; Spectrum-4 packet-trim; SONiC packet trimming HLD).
// Headers are kept whole, the IP and UDP lengths are fixed, the DSCP is
// remarked and a RoCEv2 packet gets a new ICRC over what is left.
#pragma once

#include <cstdint>
#include <span>

#include "common/wire/packet.h"

namespace rocemu::sw {

// The flag in an mbuf's metadata (dpdk::meta(m).flags) of a packet that
// was trimmed on ingress, so egress counts and schedules it as trimmed.
inline constexpr uint8_t kMetaFlagTrimmed = 1;

// Cuts the IP packet described by `v` (decoded from `frame`) to at most
// `size` bytes of frame and remarks it to `dscp`. RoCEv2: keeps Ethernet
// to the last extension header, a whole number of 4-byte payload words and
// the ICRC, and clears the BTH pad count. Returns the new frame length
// (never below the headers), or 0 if the frame is no longer than `size`
// and nothing was changed, or is not IP.
uint32_t trim_frame(std::span<uint8_t> frame, const wire::PacketView& v, uint32_t size, uint8_t dscp);

// The same inside a VXLAN frame: `outer` (IPv4, decoded from `frame`)
// carries the IP packet `inner` (decoded from the same bytes). The inner
// packet is cut as above so that the whole frame is at most `size` bytes
// (never below the outer and inner headers), and keeps its own ICRC; the
// outer IPv4 and UDP lengths follow it (the UDP checksum 0, as VTEPs send
// it) and both DSCPs are remarked to `dscp`, the outer for the underlay's
// classification, the inner for the NIC. Returns as trim_frame().
uint32_t trim_vxlan_frame(std::span<uint8_t> frame, const wire::PacketView& outer, const wire::PacketView& inner,
                          uint32_t size, uint8_t dscp);

// The small header rewrites of the forwarding path, inline: every routed
// packet takes decrement_ttl(), every ECN mark set_ecn().

// RFC 1624 incremental update of an IPv4 header checksum after the
// 16-bit header word `old_word` became `new_word` (host order).
inline void ipv4_checksum_update(wire::Ipv4Hdr& ip, uint16_t old_word, uint16_t new_word) {
  // HC' = ~(~HC + ~m + m')
  uint32_t sum = uint32_t(uint16_t(~ip.checksum.get())) + uint16_t(~old_word) + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  ip.checksum.set(uint16_t(~sum));
}

// Rewrites the IPv4 TOS or IPv6 traffic class byte in place to its bits
// in `keep` and `bits` (IPv4 checksum fixed incrementally).
inline void rewrite_traffic_class(uint8_t* frame, const wire::PacketView& v, uint8_t keep, uint8_t bits) {
  if (v.is_ipv4()) {
    auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(frame + v.l3_off);
    const uint16_t old_word = uint16_t(ip.version_ihl << 8 | ip.tos);
    ip.tos = uint8_t((ip.tos & keep) | bits);
    ipv4_checksum_update(ip, old_word, uint16_t(ip.version_ihl << 8 | ip.tos));
  } else if (v.is_ipv6()) {
    auto& ip = *reinterpret_cast<wire::Ipv6Hdr*>(frame + v.l3_off);
    ip.set_traffic_class(uint8_t((ip.traffic_class() & keep) | bits));
  }
}

// Rewrites the DSCP of an IPv4 or IPv6 packet in place. ICRC masks the
// DSCP, so RoCE needs no reseal.
inline void set_dscp(uint8_t* frame, const wire::PacketView& v, uint8_t dscp) {
  rewrite_traffic_class(frame, v, 0x03, uint8_t((dscp & 0x3f) << 2));
}

// Rewrites the ECN field of an IPv4 or IPv6 packet in place (ICRC masks it too).
inline void set_ecn(uint8_t* frame, const wire::PacketView& v, wire::Ecn ecn) {
  rewrite_traffic_class(frame, v, 0xfc, uint8_t(ecn));
}

// A router's TTL (IPv4, checksum fixed incrementally) or hop limit
// (IPv6) decrement; ICRC masks both.
inline void decrement_ttl(uint8_t* frame, const wire::PacketView& v) {
  if (v.is_ipv4()) {
    auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(frame + v.l3_off);
    const uint16_t old_word = uint16_t(ip.ttl << 8 | ip.protocol);
    ip.ttl--;
    ipv4_checksum_update(ip, old_word, uint16_t(ip.ttl << 8 | ip.protocol));
  } else if (v.is_ipv6()) {
    reinterpret_cast<wire::Ipv6Hdr*>(frame + v.l3_off)->hop_limit--;
  }
}

}  // namespace rocemu::sw
