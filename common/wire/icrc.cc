#include "common/wire/icrc.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "common/wire/ip.h"
#include "common/wire/roce.h"

namespace rocemu::wire {

uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t len) {
  return uint32_t(::crc32_z(crc, data, len));
}

uint32_t compute_icrc(std::span<const uint8_t> pkt, bool ipv6) {
  const size_t ip_len = ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr);
  const size_t masked_len = ip_len + sizeof(UdpHdr) + sizeof(Bth);
  if (pkt.size() < masked_len) return 0;

  // 8 bytes of pseudo LRH (all ones) followed by a masked copy of IP+UDP+BTH.
  uint8_t head[8 + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth)];
  std::memset(head, 0xff, 8);
  std::memcpy(head + 8, pkt.data(), masked_len);
  uint8_t* ip = head + 8;
  if (ipv6) {
    // version:4 | traffic class:8 | flow label:20 -> keep only the version.
    ip[0] |= 0x0f;
    ip[1] = ip[2] = ip[3] = 0xff;
    ip[7] = 0xff;  // hop limit
  } else {
    ip[1] = 0xff;             // TOS
    ip[8] = 0xff;             // TTL
    ip[10] = ip[11] = 0xff;   // header checksum
  }
  uint8_t* udp = ip + ip_len;
  udp[6] = udp[7] = 0xff;  // UDP checksum
  uint8_t* bth = udp + sizeof(UdpHdr);
  bth[4] = 0xff;  // FECN, BECN, resv6

  uint32_t crc = crc32_update(0, head, 8 + masked_len);
  crc = crc32_update(crc, pkt.data() + masked_len, pkt.size() - masked_len);
  return crc;
}

}  // namespace rocemu::wire
