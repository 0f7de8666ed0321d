#include "switch/trim.h"

#include <algorithm>

#include "common/wire/build.h"
#include "common/wire/icrc.h"

namespace rocemu::sw {
namespace {

// Ends the IP datagram `v` (and its UDP datagram) at frame offset
// `new_end` and remarks it to `dscp`; the IPv4 checksum is recomputed.
void trim_ip_lengths(uint8_t* p, const wire::PacketView& v, uint32_t new_end, uint8_t dscp) {
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
}

}  // namespace

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
  trim_ip_lengths(p, v, new_end, dscp);
  if (v.is_roce) wire::reseal_roce(frame.first(new_end), v.l3_off, v.is_ipv6());
  return new_end;
}

uint32_t trim_vxlan_frame(std::span<uint8_t> frame, const wire::PacketView& outer, const wire::PacketView& inner,
                          uint32_t size, uint8_t dscp) {
  const uint32_t at = uint32_t(inner.data - frame.data());
  const uint32_t cut = trim_frame(frame.subspan(at), inner, size > at ? size - at : 0, dscp);
  if (cut == 0) return 0;
  const uint32_t new_end = at + cut;
  trim_ip_lengths(frame.data(), outer, new_end, dscp);  // the outer ECN stays
  return new_end;
}

}  // namespace rocemu::sw
