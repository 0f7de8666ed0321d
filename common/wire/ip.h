// IPv4, IPv6 and UDP headers, addresses and the fields RoCE cares about
// (DSCP, ECN, flow label).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/byteorder.h"

namespace rocemu::wire {

enum class Ecn : uint8_t { kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3 };

inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint16_t kRoceV2Port = 4791;

struct __attribute__((packed)) Ipv4Hdr {
  uint8_t version_ihl;
  uint8_t tos;  // DSCP:6 ECN:2
  be16 total_length;
  be16 id;
  be16 frag;
  uint8_t ttl;
  uint8_t protocol;
  be16 checksum;
  be32 src;
  be32 dst;

  uint8_t version() const { return version_ihl >> 4; }
  uint8_t ihl() const { return version_ihl & 0x0f; }
  uint8_t dscp() const { return tos >> 2; }
  Ecn ecn() const { return Ecn(tos & 3); }
  void set_dscp(uint8_t d) { tos = uint8_t((d & 0x3f) << 2 | (tos & 3)); }
  void set_ecn(Ecn e) { tos = uint8_t((tos & 0xfc) | uint8_t(e)); }
};
static_assert(sizeof(Ipv4Hdr) == 20);

struct __attribute__((packed)) Ipv6Hdr {
  be32 vtc_flow;  // version:4 traffic class:8 flow label:20
  be16 payload_length;
  uint8_t next_header;
  uint8_t hop_limit;
  std::array<uint8_t, 16> src;
  std::array<uint8_t, 16> dst;

  uint8_t version() const { return uint8_t(vtc_flow.get() >> 28); }
  uint8_t traffic_class() const { return uint8_t(vtc_flow.get() >> 20); }
  uint32_t flow_label() const { return vtc_flow.get() & 0xfffff; }
  uint8_t dscp() const { return traffic_class() >> 2; }
  Ecn ecn() const { return Ecn(traffic_class() & 3); }
  void set(uint8_t tclass, uint32_t flow) {
    vtc_flow.set(6u << 28 | uint32_t(tclass) << 20 | (flow & 0xfffff));
  }
  void set_traffic_class(uint8_t tclass) { set(tclass, flow_label()); }
};
static_assert(sizeof(Ipv6Hdr) == 40);

struct __attribute__((packed)) UdpHdr {
  be16 src_port;
  be16 dst_port;
  be16 length;
  be16 checksum;
};
static_assert(sizeof(UdpHdr) == 8);

// An IP address of either family; IPv4 is held as an IPv4-mapped IPv6
// address (::ffff:a.b.c.d), which is also how RoCEv2 GIDs carry it.
struct IpAddr {
  std::array<uint8_t, 16> b{};

  static IpAddr v4(uint32_t host_order);
  static std::optional<IpAddr> parse(std::string_view text);
  bool is_v4() const;
  uint32_t v4_host_order() const;  // only if is_v4()
  std::string str() const;
  friend bool operator==(const IpAddr&, const IpAddr&) = default;
  friend auto operator<=>(const IpAddr&, const IpAddr&) = default;
};

// RFC 1071 one's complement sum, for the IPv4 header checksum.
uint16_t ipv4_checksum(std::span<const uint8_t> header);

}  // namespace rocemu::wire
