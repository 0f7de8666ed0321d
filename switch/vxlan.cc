#include "switch/vxlan.h"

#include <cstring>

namespace rocemu::sw {

uint16_t vxlan_source_port(const wire::PacketView& inner, uint32_t seed) {
  EcmpConfig all;  // every field of the 5-tuple (and the IPv6 flow label)
  all.hash_seed = seed;
  return uint16_t(0xc000 | (ecmp_hash(all, flow_key(inner)) & 0x3fff));
}

void vxlan_write_outer(std::span<uint8_t> out, const VxlanEncap& e, uint32_t inner_len) {
  uint8_t* p = out.data();
  auto& eth = *reinterpret_cast<wire::EthHdr*>(p);
  eth.dst = e.dst_mac;
  eth.src = e.src_mac;
  eth.ether_type.set(uint16_t(wire::EtherType::kIpv4));
  auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(p + 14);
  ip.version_ihl = 0x45;
  ip.tos = 0;
  ip.set_dscp(e.dscp);
  ip.set_ecn(e.ecn);
  ip.total_length.set(uint16_t(20 + 8 + 8 + inner_len));
  ip.id.set(e.ip_id);
  ip.frag.set(0x4000);  // DF: VTEPs must not fragment
  ip.ttl = e.ttl;
  ip.protocol = wire::kIpProtoUdp;
  ip.checksum.set(0);
  ip.src.set(e.src_ip);
  ip.dst.set(e.dst_ip);
  ip.checksum.set(wire::ipv4_checksum({p + 14, 20}));
  auto& udp = *reinterpret_cast<wire::UdpHdr*>(p + 34);
  udp.src_port.set(e.src_port);
  udp.dst_port.set(e.dst_port);
  udp.length.set(uint16_t(8 + 8 + inner_len));
  udp.checksum.set(0);
  auto& vx = *reinterpret_cast<VxlanHdr*>(p + 42);
  vx.flags = kVxlanFlagI;
  vx.reserved1 = {};
  vx.set_vni(e.vni);
}

std::optional<wire::Ecn> rfc6040_decap(wire::Ecn outer, wire::Ecn inner) {
  using wire::Ecn;
  if (inner == Ecn::kNotEct) {
    if (outer == Ecn::kCe) return std::nullopt;  // drop: the mark cannot be passed on
    return Ecn::kNotEct;                         // (ECT outer on not-ECT inner: RFC "log", passed)
  }
  if (outer == Ecn::kCe) return Ecn::kCe;
  if (inner == Ecn::kEct0 && outer == Ecn::kEct1) return Ecn::kEct1;
  return inner;
}

}  // namespace rocemu::sw
