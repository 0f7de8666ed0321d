// VXLAN (RFC 7348) as a switch's VTEP does it, on byte spans: the outer
// headers written in front of an inner frame, the outer UDP source port
// from a hash of the inner flow, the outer DSCP and ECN, and the ECN a
// decapsulated packet leaves with (RFC 6040). The switch (switch_vxlan.cc)
// moves the bytes in its mbufs; this file needs no EAL and no clock.
//
//   outer Ethernet (14) | outer IPv4 (20) | UDP (8, dport 4789) | VXLAN (8) | inner Ethernet | inner IP | ...
//
// 50 bytes in all: an inner IP packet of N bytes is an outer one of N + 50,
// which the underlay MTU (an IP MTU) must hold. VTEPs never fragment.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "common/byteorder.h"
#include "common/wire/ethernet.h"
#include "common/wire/ip.h"
#include "common/wire/packet.h"
#include "switch/ecmp.h"
#include "switch/switch_counters.h"

namespace rocemu::sw {

struct __attribute__((packed)) VxlanHdr {
  uint8_t flags;  // 0x08: the VNI is valid (I); the other bits are reserved
  std::array<uint8_t, 3> reserved1;
  be32 vni_reserved;  // VNI:24 reserved:8

  uint32_t vni() const { return vni_reserved.get() >> 8; }
  void set_vni(uint32_t v) { vni_reserved.set(v << 8); }
};
static_assert(sizeof(VxlanHdr) == 8);

inline constexpr uint8_t kVxlanFlagI = 0x08;
// Outer Ethernet + IPv4 + UDP + VXLAN.
inline constexpr uint32_t kVxlanOverhead = 14 + 20 + 8 + 8;
// What the outer IP packet adds to the inner IP packet: outer IPv4, UDP,
// VXLAN and the inner Ethernet header (the underlay MTU check: inner IP
// length + 50 <= underlay IP MTU).
inline constexpr uint32_t kVxlanIpOverhead = 20 + 8 + 8 + 14;
static_assert(kVxlanIpOverhead == kVxlanOverhead);

// The outer UDP source port of an inner flow: RFC 7348's "hash of the
// inner headers" folded into the dynamic range 49152..65535. The hash is
// the ECMP hash (ecmp.h) of the inner 5-tuple with every field on, so two
// QPs (two inner source ports) between the same hosts get two outer ports,
// and the underlay's ECMP spreads them as it would without the overlay.
uint16_t vxlan_source_port(const wire::PacketView& inner, uint32_t seed = 0);

// What a VTEP writes in front of an inner frame.
struct VxlanEncap {
  wire::MacAddr src_mac, dst_mac;  // the underlay next hop's
  uint32_t src_ip = 0, dst_ip = 0; // host order: this VTEP, the remote one
  uint32_t vni = 0;
  uint16_t dst_port = 4789;
  uint16_t src_port = 0;
  uint8_t dscp = 0;                // outer DSCP (copied from the inner or set)
  wire::Ecn ecn = wire::Ecn::kNotEct;  // outer ECN: the inner's (RFC 6040 normal mode)
  uint8_t ttl = 64;
  uint16_t ip_id = 0;
};

// Writes the 50 outer bytes into `out` (exactly kVxlanOverhead long) for
// an inner frame of `inner_len` bytes: IPv4 with DF set and its checksum,
// UDP checksum 0 (RFC 7348: SHOULD be 0).
void vxlan_write_outer(std::span<uint8_t> out, const VxlanEncap& e, uint32_t inner_len);

// RFC 6040 decapsulation (normal mode), Figure 4: the inner packet's ECN
// after decapsulation, or nullopt where the RFC drops (outer CE on a
// not-ECT inner: the congestion mark cannot be passed on).
std::optional<wire::Ecn> rfc6040_decap(wire::Ecn outer, wire::Ecn inner);

// Why a frame for this VTEP is not decapsulated (kOk: it is).
enum class VxlanRxCheck : uint8_t { kOk, kBadHeader, kUnknownVni, kInnerNotIp, kInnerTagged, kInnerMalformed };
// What a VTEP does with a VNI: nothing (unknown), route its inner IP
// packets (an L3 VNI), or bridge its inner frames, IP or not (an L2 VNI).
enum class VniKind : uint8_t { kUnknown, kRouted, kBridged };
// Checks the VXLAN header and inner frame of `outer` (a decoded UDP packet
// to the VTEP's port), and decodes the inner frame into `inner`.
// `kind_of(vni)` says what the VTEP does with a VNI.
template <typename KindOf>
VxlanRxCheck vxlan_check(const wire::PacketView& outer, KindOf&& kind_of, uint32_t& vni, wire::PacketView& inner) {
  const uint32_t at = uint32_t(outer.l4_off) + sizeof(wire::UdpHdr);
  if (uint32_t(outer.ip_end) < at + sizeof(VxlanHdr) + sizeof(wire::EthHdr)) return VxlanRxCheck::kBadHeader;
  const auto& h = *reinterpret_cast<const VxlanHdr*>(outer.data + at);
  if ((h.flags & kVxlanFlagI) == 0) return VxlanRxCheck::kBadHeader;
  vni = h.vni();
  const VniKind kind = kind_of(vni);
  if (kind == VniKind::kUnknown) return VxlanRxCheck::kUnknownVni;
  const uint32_t inner_off = at + sizeof(VxlanHdr);
  const wire::DecodeError e = wire::decode({outer.data + inner_off, uint32_t(outer.ip_end) - inner_off}, inner);
  // Like the switch's own parser: IP with any transport goes on.
  const bool ip_ok = inner.is_ip() && (e == wire::DecodeError::kOk || e >= wire::DecodeError::kTruncatedUdp);
  if (kind == VniKind::kRouted && !ip_ok) return VxlanRxCheck::kInnerNotIp;
  if (kind == VniKind::kBridged && e != wire::DecodeError::kOk && !ip_ok) return VxlanRxCheck::kInnerMalformed;
  // RFC 7348 6.1: a decapsulating VTEP SHOULD discard inner frames with a VLAN tag.
  if (inner.has_vlan) return VxlanRxCheck::kInnerTagged;
  if (e != wire::DecodeError::kOk) inner.is_roce = false;
  return VxlanRxCheck::kOk;
}

// What a frame in transit carries (at an underlay switch, or at the
// encapsulating VTEP's egress): kNone if `outer` is not IPv4 UDP to `port`
// with a valid VXLAN header (any VNI); kIp for an untagged inner IP packet,
// which is decoded into `inner`; kOther for any other inner frame (a
// bridged VNI's ARP or other EtherType, a tagged or malformed frame), which
// must not be cut as if the outer packet were plain UDP.
enum class VxlanInner : uint8_t { kNone, kIp, kOther };
inline VxlanInner vxlan_inner(const wire::PacketView& outer, uint16_t port, wire::PacketView& inner) {
  if (!outer.is_ipv4() || !outer.is_udp || outer.dport != port) return VxlanInner::kNone;
  uint32_t vni = 0;
  switch (vxlan_check(outer, [](uint32_t) { return VniKind::kBridged; }, vni, inner)) {
    case VxlanRxCheck::kOk:
      return inner.is_ip() ? VxlanInner::kIp : VxlanInner::kOther;
    case VxlanRxCheck::kBadHeader:
      return VxlanInner::kNone;
    default:
      return VxlanInner::kOther;
  }
}

// Per VTEP (one per switch), in the switch's naming style. Bytes are the
// inner frames' (what the overlay carries), packets one per frame.
#define ROCEMU_SW_VTEP_COUNTERS(X)                                                                      \
  X(encap_packets, "vxlan.encap-packets", "frames encapsulated into the overlay")                     \
  X(encap_bytes, "vxlan.encap-bytes", "bytes of inner frames encapsulated")                           \
  X(flood_copies, "vxlan.head-end-replication-copies",                                                \
    "copies of broadcast, multicast and unknown unicast frames sent to the flood lists' VTEPs")       \
  X(decap_packets, "vxlan.decap-packets", "frames decapsulated from the overlay")                     \
  X(decap_bytes, "vxlan.decap-bytes", "bytes of inner frames decapsulated")                           \
  X(decap_ce_copied, "vxlan.decap-ce-copied", "decapsulated packets whose outer CE was copied to the inner ECT header") \
  X(drop_underlay_mtu, "vxlan.discards.underlay-mtu-exceeded",                                        \
    "frames not encapsulated: inner IP length + 50 over the underlay egress MTU (VTEPs never fragment)") \
  X(drop_underlay_no_route, "vxlan.discards.underlay-no-route",                                       \
    "frames not encapsulated: no underlay route to the remote VTEP (an unresolved next hop is a neighbor miss)") \
  X(drop_no_headroom, "vxlan.discards.no-headroom", "frames not encapsulated: no room for the outer headers") \
  X(drop_bad_header, "vxlan.discards.bad-header", "frames to the VTEP's port without a valid VXLAN header") \
  X(drop_unknown_vni, "vxlan.discards.unknown-vni", "frames for a VNI the VTEP does not map")          \
  X(drop_inner_not_ip, "vxlan.discards.inner-not-ip", "decapsulated frames that are not IP")          \
  X(drop_inner_malformed, "vxlan.discards.inner-malformed",                                           \
    "decapsulated frames of a bridged VNI that do not decode (a cut-short header)")                   \
  X(drop_inner_vlan_tagged, "vxlan.discards.inner-vlan-tagged",                                       \
    "decapsulated frames with an 802.1Q tag on the inner frame (RFC 7348 6.1: discarded)")            \
  X(drop_ecn_not_ect_ce, "vxlan.discards.ecn-not-ect-ce",                                             \
    "decapsulated packets dropped per RFC 6040: outer CE on a not-ECT inner packet")

ROCEMU_SW_COUNTER_SET(VtepCounters, ROCEMU_SW_VTEP_COUNTERS);

}  // namespace rocemu::sw
