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

// Rewrites the DSCP of an IPv4 or IPv6 packet in place (IPv4 checksum
// fixed incrementally). ICRC masks the DSCP, so RoCE needs no reseal.
void set_dscp(uint8_t* frame, const wire::PacketView& v, uint8_t dscp);

// Rewrites the ECN field of an IPv4 or IPv6 packet in place (ICRC masks it too).
void set_ecn(uint8_t* frame, const wire::PacketView& v, wire::Ecn ecn);

// A router's TTL (IPv4, checksum fixed incrementally) or hop limit
// (IPv6) decrement; ICRC masks both.
void decrement_ttl(uint8_t* frame, const wire::PacketView& v);

// RFC 1624 incremental update of an IPv4 header checksum after the
// 16-bit header word `old_word` became `new_word` (host order).
void ipv4_checksum_update(wire::Ipv4Hdr& ip, uint16_t old_word, uint16_t new_word);

}  // namespace rocemu::sw
