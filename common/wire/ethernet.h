// Ethernet II, IEEE 802.1Q and ARP headers.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/byteorder.h"

namespace rocemu::wire {

struct MacAddr {
  std::array<uint8_t, 6> b;  // no initializer: keeps the type trivial for packed headers

  static std::optional<MacAddr> parse(std::string_view text);  // "02:00:00:00:00:01"
  std::string str() const;
  bool is_multicast() const { return (b[0] & 1) != 0; }
  friend bool operator==(const MacAddr&, const MacAddr&) = default;
};
static_assert(sizeof(MacAddr) == 6);

inline constexpr MacAddr kBroadcastMac{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
// 802.1Qbb / 802.3x MAC control frames go to this reserved group address.
inline constexpr MacAddr kMacControlMac{{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}};

enum class EtherType : uint16_t {
  kIpv4 = 0x0800,
  kArp = 0x0806,
  kVlan = 0x8100,
  kIpv6 = 0x86dd,
  kMacControl = 0x8808,
};

struct __attribute__((packed)) EthHdr {
  MacAddr dst;
  MacAddr src;
  be16 ether_type;
};
static_assert(sizeof(EthHdr) == 14);

// The 4 bytes that follow the source MAC when TPID = 0x8100.
struct __attribute__((packed)) VlanTag {
  be16 tci;  // PCP:3 DEI:1 VID:12
  be16 ether_type;

  uint8_t pcp() const { return uint8_t(tci.get() >> 13); }
  bool dei() const { return (tci.get() >> 12) & 1; }
  uint16_t vid() const { return tci.get() & 0x0fff; }
  void set_tci(uint8_t pcp, bool dei, uint16_t vid) {
    tci.set(uint16_t((pcp & 7) << 13 | (dei ? 1 << 12 : 0) | (vid & 0x0fff)));
  }
};
static_assert(sizeof(VlanTag) == 4);

struct __attribute__((packed)) ArpHdr {
  be16 htype;  // 1 = Ethernet
  be16 ptype;  // 0x0800
  uint8_t hlen;
  uint8_t plen;
  be16 oper;  // 1 request, 2 reply
  MacAddr sha;
  be32 spa;
  MacAddr tha;
  be32 tpa;
};
static_assert(sizeof(ArpHdr) == 28);
inline constexpr uint16_t kArpRequest = 1;
inline constexpr uint16_t kArpReply = 2;

}  // namespace rocemu::wire
