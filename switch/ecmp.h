// Equal-cost multipath: a route with several next hops (an ECMP group)
// sends each packet to one member, chosen by the switch's load balancing,
// a strategy picked once per switch:
//
//   hash        a hash of the packet's 5-tuple (and IPv6 flow label) over
//               the fields `ecmp-hash` enables, seeded by `hash-seed`, as
//               Spectrum does (`nv set system forwarding ecmp-hash ...`).
//               RoCEv2's entropy is the UDP source port, one per QP
//               (nic/control.cc: rdma-core's flow-label formula), so one QP
//               stays on one path and many QPs spread.
//   per-packet  every packet to the next member in turn (packet spraying,
//               what adaptive-routing fabrics do): the load spreads evenly
//               whatever the flows, and a QP's packets may arrive out of
//               order when the paths differ.
//
// Both are deterministic: the same packets give the same choices on every
// run and machine.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/wire/ip.h"
#include "common/wire/packet.h"
#include "switch/switch_counters.h"

namespace rocemu::sw {

// The fields the hash may cover, with NVUE's names.
#define ROCEMU_SW_ECMP_HASH_FIELDS(X)   \
  X(ip_protocol, "ip-protocol")         \
  X(source_ip, "source-ip")             \
  X(destination_ip, "destination-ip")   \
  X(source_port, "source-port")         \
  X(destination_port, "destination-port") \
  X(ipv6_label, "ipv6-label")

struct EcmpHashField {
#define ROCEMU_SW_ECMP_FIELD_ENUM(id, name) id,
  enum Id : uint8_t { ROCEMU_SW_ECMP_HASH_FIELDS(ROCEMU_SW_ECMP_FIELD_ENUM) kCount };
#undef ROCEMU_SW_ECMP_FIELD_ENUM
#define ROCEMU_SW_ECMP_FIELD_NAME(id, name) name,
  static constexpr std::array<std::string_view, kCount> kNames = {ROCEMU_SW_ECMP_HASH_FIELDS(ROCEMU_SW_ECMP_FIELD_NAME)};
#undef ROCEMU_SW_ECMP_FIELD_NAME
};
constexpr uint8_t kEcmpAllFields = (1u << EcmpHashField::kCount) - 1;
// The field NVUE calls `name` ("source-port"), or nullopt: what `nv set
// system forwarding ecmp-hash` looks up (the topology reader checks its
// keys against the same kNames).
std::optional<EcmpHashField::Id> parse_ecmp_hash_field(std::string_view name);
// "ip-protocol, source-ip, ..., ipv6-label": the names, for messages.
std::string ecmp_hash_field_list();

enum class LoadBalancing : uint8_t { kHash, kPerPacket };
constexpr std::array<std::string_view, 2> kLoadBalancingNames = {"hash", "per-packet"};
std::optional<LoadBalancing> parse_load_balancing(std::string_view name);
std::string_view load_balancing_name(LoadBalancing lb);

// A switch's `system forwarding` ECMP settings.
struct EcmpConfig {
  uint8_t hash_fields = kEcmpAllFields;  // bit per EcmpHashField (NVUE: all on by default)
  uint32_t hash_seed = 0;                // NVUE picks a random one if unset; here 0, for reproducible runs
  LoadBalancing load_balancing = LoadBalancing::kHash;

  bool hashes(EcmpHashField::Id f) const { return (hash_fields >> f) & 1; }
  void set_hashes(EcmpHashField::Id f, bool on) {
    hash_fields = uint8_t(on ? hash_fields | 1u << f : hash_fields & ~(1u << f));
  }
  friend bool operator==(const EcmpConfig&, const EcmpConfig&) = default;
};

// What the hash reads of a packet.
struct FlowKey {
  wire::IpAddr src, dst;
  uint8_t protocol = 0;
  uint16_t sport = 0, dport = 0;  // UDP only (0 otherwise)
  uint32_t flow_label = 0;        // IPv6 only
};
// An IP packet's; a frame that is not IP (a bridged one's VXLAN source
// port) keys on its MACs (in src, dst) and EtherType (in flow_label).
FlowKey flow_key(const wire::PacketView& v);

// The hash of the fields `c` enables, seeded by c.hash_seed.
uint32_t ecmp_hash(const EcmpConfig& c, const FlowKey& k);

// Which of a group's `members` a packet takes; `turn` is the group's
// per-packet state (the next member in turn).
using EcmpPick = uint16_t (*)(const EcmpConfig& c, const wire::PacketView& v, uint16_t members, uint32_t& turn);
// The strategy of `lb`, chosen once when the routes are loaded.
EcmpPick ecmp_pick(LoadBalancing lb);

// Per member of an ECMP group: what the load balancing sent there (counted
// when the member is chosen, before egress admission).
#define ROCEMU_SW_ECMP_COUNTERS(X)                                                   \
  X(packets, "ecmp.tx-packets", "packets ECMP load balancing sent to this next hop") \
  X(bytes, "ecmp.tx-bytes", "bytes ECMP load balancing sent to this next hop")

ROCEMU_SW_COUNTER_SET(EcmpCounters, ROCEMU_SW_ECMP_COUNTERS);

}  // namespace rocemu::sw
