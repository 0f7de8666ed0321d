#include "switch/ecmp.h"

#include <algorithm>
#include <bit>

namespace rocemu::sw {
namespace {

// Word by word, then a final avalanche: every input bit moves about half
// of the output bits, so the member (hash % n) depends on all of them.
constexpr uint32_t absorb(uint32_t h, uint32_t word) {
  h ^= word * 0x9e3779b1u;
  h = std::rotl(h, 13);
  return h * 5 + 0xe6546b64u;
}
constexpr uint32_t avalanche(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

uint32_t absorb_addr(uint32_t h, const wire::IpAddr& a) {
  for (size_t i = 0; i < a.b.size(); i += 4)
    h = absorb(h, uint32_t(a.b[i]) << 24 | uint32_t(a.b[i + 1]) << 16 | uint32_t(a.b[i + 2]) << 8 | a.b[i + 3]);
  return h;
}

uint16_t pick_by_hash(const EcmpConfig& c, const wire::PacketView& v, uint16_t members, uint32_t& /*turn*/) {
  return uint16_t(ecmp_hash(c, flow_key(v)) % members);
}

uint16_t pick_per_packet(const EcmpConfig& /*c*/, const wire::PacketView& /*v*/, uint16_t members, uint32_t& turn) {
  const uint16_t m = uint16_t(turn % members);
  turn = m + 1u;
  return m;
}

}  // namespace

std::optional<EcmpHashField::Id> parse_ecmp_hash_field(std::string_view name) {
  for (size_t i = 0; i < EcmpHashField::kCount; i++)
    if (EcmpHashField::kNames[i] == name) return EcmpHashField::Id(i);
  return std::nullopt;
}

std::string ecmp_hash_field_list() {
  std::string s;
  for (const std::string_view n : EcmpHashField::kNames) s += (s.empty() ? "" : ", ") + std::string(n);
  return s;
}

std::optional<LoadBalancing> parse_load_balancing(std::string_view name) {
  for (size_t i = 0; i < kLoadBalancingNames.size(); i++)
    if (kLoadBalancingNames[i] == name) return LoadBalancing(i);
  return std::nullopt;
}

std::string_view load_balancing_name(LoadBalancing lb) { return kLoadBalancingNames[size_t(lb)]; }

FlowKey flow_key(const wire::PacketView& v) {
  FlowKey k;
  if (!v.is_ip()) {  // a bridged frame that is not IP (VXLAN's source port): its MACs and EtherType
    const wire::EthHdr& eth = v.eth();
    std::copy(eth.src.b.begin(), eth.src.b.end(), k.src.b.begin());
    std::copy(eth.dst.b.begin(), eth.dst.b.end(), k.dst.b.begin());
    k.flow_label = v.ether_type;
    return k;
  }
  k.src = v.src_ip();
  k.dst = v.dst_ip();
  k.protocol = v.ip_proto;
  if (v.is_udp) {
    k.sport = v.sport;
    k.dport = v.dport;
  }
  if (v.is_ipv6()) k.flow_label = v.ipv6().flow_label();
  return k;
}

uint32_t ecmp_hash(const EcmpConfig& c, const FlowKey& k) {
  using F = EcmpHashField;
  uint32_t h = absorb(0x3c6ef372u, c.hash_seed);
  if (c.hashes(F::ip_protocol)) h = absorb(h, 0x100u | k.protocol);
  if (c.hashes(F::source_ip)) h = absorb_addr(absorb(h, 0x200u), k.src);
  if (c.hashes(F::destination_ip)) h = absorb_addr(absorb(h, 0x300u), k.dst);
  if (c.hashes(F::source_port)) h = absorb(h, 0x40000u | k.sport);
  if (c.hashes(F::destination_port)) h = absorb(h, 0x50000u | k.dport);
  if (c.hashes(F::ipv6_label)) h = absorb(h, 0x600000u | k.flow_label);
  return avalanche(h);
}

EcmpPick ecmp_pick(LoadBalancing lb) {
  switch (lb) {
    case LoadBalancing::kHash:
      return pick_by_hash;
    case LoadBalancing::kPerPacket:
      return pick_per_packet;
  }
  return pick_by_hash;
}

}  // namespace rocemu::sw
