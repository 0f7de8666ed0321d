#include "switch/trim.h"

#include <algorithm>

#include "common/wire/build.h"
#include "common/wire/icrc.h"

namespace rocemu::sw {

void ipv4_checksum_update(wire::Ipv4Hdr& ip, uint16_t old_word, uint16_t new_word) {
  // HC' = ~(~HC + ~m + m')
  uint32_t sum = uint32_t(uint16_t(~ip.checksum.get())) + uint16_t(~old_word) + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  ip.checksum.set(uint16_t(~sum));
}

void set_dscp(uint8_t* frame, const wire::PacketView& v, uint8_t dscp) {
  if (v.is_ipv4()) {
    auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(frame + v.l3_off);
    const uint16_t old_word = uint16_t(ip.version_ihl << 8 | ip.tos);
    ip.set_dscp(dscp);
    ipv4_checksum_update(ip, old_word, uint16_t(ip.version_ihl << 8 | ip.tos));
  } else if (v.is_ipv6()) {
    auto& ip = *reinterpret_cast<wire::Ipv6Hdr*>(frame + v.l3_off);
    ip.set_traffic_class(uint8_t(dscp << 2 | (ip.traffic_class() & 3)));
  }
}

void set_ecn(uint8_t* frame, const wire::PacketView& v, wire::Ecn ecn) {
  if (v.is_ipv4()) {
    auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(frame + v.l3_off);
    const uint16_t old_word = uint16_t(ip.version_ihl << 8 | ip.tos);
    ip.set_ecn(ecn);
    ipv4_checksum_update(ip, old_word, uint16_t(ip.version_ihl << 8 | ip.tos));
  } else if (v.is_ipv6()) {
    auto& ip = *reinterpret_cast<wire::Ipv6Hdr*>(frame + v.l3_off);
    ip.set_traffic_class(uint8_t((ip.traffic_class() & 0xfc) | uint8_t(ecn)));
  }
}

void decrement_ttl(uint8_t* frame, const wire::PacketView& v) {
  if (v.is_ipv4()) {
    auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(frame + v.l3_off);
    const uint16_t old_word = uint16_t(ip.ttl << 8 | ip.protocol);
    ip.ttl--;
    ipv4_checksum_update(ip, old_word, uint16_t(ip.ttl << 8 | ip.protocol));
  } else if (v.is_ipv6()) {
    reinterpret_cast<wire::Ipv6Hdr*>(frame + v.l3_off)->hop_limit--;
  }
}

uint32_t trim_frame(std::span<uint8_t> frame, const wire::PacketView& v, uint32_t size, uint8_t dscp) {
  if (!v.is_ip() || v.ip_end <= size) return 0;
  uint8_t* p = frame.data();
  uint32_t new_end;  // end of the IP datagram after trimming
  if (v.is_roce) {
    const uint32_t headers = v.payload_off;
    uint32_t keep = 0;
    if (size > headers + wire::kIcrcLen) keep = (size - headers - wire::kIcrcLen) & ~3u;
    keep = std::min<uint32_t>(keep, uint32_t(v.payload_len) & ~3u);
    new_end = headers + keep + wire::kIcrcLen;
    auto& bth = *reinterpret_cast<wire::Bth*>(p + v.bth_off);
    bth.set_flags(bth.se(), bth.mig_req(), 0);
  } else {
    const uint32_t floor = v.is_udp ? uint32_t(v.l4_off) + sizeof(wire::UdpHdr) : uint32_t(v.l4_off);
    new_end = std::max(size, floor);
  }
  if (new_end >= v.ip_end) return 0;
  if (v.is_udp) {
    auto& udp = *reinterpret_cast<wire::UdpHdr*>(p + v.l4_off);
    udp.length.set(uint16_t(new_end - v.l4_off));
    if (!v.is_roce && v.is_ipv4()) udp.checksum.set(0);  // optional over IPv4
  }
  if (v.is_ipv4()) {
    auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(p + v.l3_off);
    ip.total_length.set(uint16_t(new_end - v.l3_off));
    ip.set_dscp(dscp);
    ip.checksum.set(0);
    ip.checksum.set(wire::ipv4_checksum({p + v.l3_off, uint32_t(ip.ihl()) * 4}));
  } else {
    auto& ip = *reinterpret_cast<wire::Ipv6Hdr*>(p + v.l3_off);
    ip.payload_length.set(uint16_t(new_end - v.l3_off - sizeof(wire::Ipv6Hdr)));
    ip.set_traffic_class(uint8_t(dscp << 2 | (ip.traffic_class() & 3)));
  }
  if (v.is_roce) wire::reseal_roce(frame.first(new_end), v.l3_off, v.is_ipv6());
  return new_end;
}

}  // namespace rocemu::sw
