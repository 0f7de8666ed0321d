// The switch's forwarding table: longest-prefix match on the destination
// (DPDK rte_lpm for IPv4, rte_lpm6 for IPv6) to a next hop that holds the
// egress port and the neighbour's MAC. Neighbours, static or learned by
// ARP, are installed as host routes (/32, /128), as a switch ASIC's host
// table does, so one lookup gives the rewrite. A connected route (no
// gateway) whose destination is not yet a neighbour "gleans": the caller
// ARPs for it and drops the packet. A static route with several next hops
// is an ECMP group: its LPM entry names the group, and route() picks the
// member (switch/ecmp.h) and counts it.
#pragma once

#include <rte_lpm.h>
#include <rte_lpm6.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/engine/time.h"
#include "common/status.h"
#include "switch/ecmp.h"
#include "switch/switch_config.h"

namespace rocemu::sw {

struct NextHop {
  uint16_t port = 0;
  wire::MacAddr mac{};
  bool resolved = false;
  bool glean = false;  // connected route: the destination is the neighbour
  bool local = false;  // one of the switch's own addresses
  wire::IpAddr ip;     // neighbour to resolve when !glean; the remote VTEP of a tunnel
  bool tunnel = false; // into the VXLAN overlay: encapsulate in `vni` to the VTEP `ip`, then route that
  uint32_t vni = 0;
};
inline constexpr uint16_t kNoPort = UINT16_MAX;  // a tunnel next hop's port

// The next hops of one prefix: next_hops_ of members_[first, first + count).
struct EcmpGroup {
  IpPrefix prefix;
  uint32_t first = 0;
  uint16_t count = 0;
  uint32_t turn = 0;  // per-packet load balancing: the next member
};

struct EcmpMember {
  uint32_t next_hop = 0;
  EcmpCounters counters;
};

struct NeighborEntry {
  wire::MacAddr mac;
  uint16_t port = 0;
  bool is_static = false;
  uint32_t next_hop = 0;  // index of its host route's next hop
};

class RouteTable {
 public:
  // Needs the EAL (the LPM tables live in DPDK memory).
  static Result<std::unique_ptr<RouteTable>> create(const std::string& name);
  ~RouteTable();
  RouteTable(const RouteTable&) = delete;
  RouteTable& operator=(const RouteTable&) = delete;
  // The name of its DPDK LPM table.
  const std::string& name() const { return name_; }

  // Replaces every route and static neighbour with those of `cfg`; learned
  // neighbours are kept if their port still exists.
  Status load(const SwitchConfig& cfg);

  // Data path: the next hop toward `v`'s destination, nullptr if there is no
  // route. For an ECMP group, the member the load balancing picks; `member`
  // names it (kNoMember outside a group) for count_ecmp once the packet
  // passed the checks that may drop it.
  static constexpr uint32_t kNoMember = UINT32_MAX;
  const NextHop* route(const wire::PacketView& v, uint32_t& member) {
    member = kNoMember;
    uint32_t id;
    const int rc = v.is_ipv4() ? rte_lpm_lookup(lpm_, v.ipv4().dst.get(), &id)
                   : lpm6_ != nullptr ? rte_lpm6_lookup(lpm6_, v.ipv6().dst.data(), &id)
                                      : -1;
    if (rc != 0) return nullptr;
    if ((id & kGroupBit) == 0) return &next_hops_[id];
    EcmpGroup& g = groups_[id & ~kGroupBit];
    member = g.first + pick_(ecmp_, v, g.count, g.turn);
    return &next_hops_[members_[member].next_hop];
  }
  // A packet of `len` bytes sent on by `member` (from route()).
  void count_ecmp(uint32_t member, uint32_t len) {
    if (member == kNoMember) return;
    EcmpCounters& c = members_[member].counters;
    c[EcmpCounters::packets]++;
    c[EcmpCounters::bytes] += len;
  }
  // Without a packet (proxy ARP, tools): an ECMP group's first member.
  const NextHop* lookup_v4(uint32_t dst_host_order) const {
    uint32_t id;
    return rte_lpm_lookup(lpm_, dst_host_order, &id) == 0 ? &first_hop(id) : nullptr;
  }
  const NextHop* lookup_v6(const uint8_t* dst) const {
    uint32_t id;
    return lpm6_ != nullptr && rte_lpm6_lookup(lpm6_, dst, &id) == 0 ? &first_hop(id) : nullptr;
  }
  const NextHop* lookup(const wire::IpAddr& dst) const {
    return dst.is_v4() ? lookup_v4(dst.v4_host_order()) : lookup_v6(dst.b.data());
  }

  // Learns (or refreshes) a neighbour; returns true if something changed.
  bool learn(const wire::IpAddr& ip, const wire::MacAddr& mac, uint16_t port);
  // Whether `ip` is one of the switch's interface addresses.
  bool is_local(const wire::IpAddr& ip) const;
  // Rate limit for ARP requests: true if a request for `ip` may go out now.
  bool may_request(const wire::IpAddr& ip, Time now, Duration interval);

  const std::map<wire::IpAddr, NeighborEntry>& neighbors() const { return neighbors_; }
  const std::vector<Route>& routes() const { return routes_; }
  const NextHop& next_hop(uint32_t i) const { return next_hops_[i]; }
  size_t num_next_hops() const { return next_hops_.size(); }
  const std::vector<EcmpGroup>& ecmp_groups() const { return groups_; }
  const EcmpMember& ecmp_member(uint32_t i) const { return members_[i]; }
  // Of every member, or of those out of `port`.
  void clear_ecmp_counters(std::optional<uint16_t> port = std::nullopt) {
    for (EcmpMember& m : members_)
      if (!port || next_hops_[m.next_hop].port == *port) m.counters.clear();
  }

 private:
  // An LPM entry with this bit names an ECMP group, not a next hop (it fits
  // the next-hop width of both rte_lpm, 24 bits, and rte_lpm6, 21 bits).
  static constexpr uint32_t kGroupBit = 1u << 20;

  RouteTable(std::string name, rte_lpm* lpm) : name_(std::move(name)), lpm_(lpm) {}
  const NextHop& first_hop(uint32_t id) const {
    return (id & kGroupBit) == 0 ? next_hops_[id] : next_hops_[members_[groups_[id & ~kGroupBit].first].next_hop];
  }
  Status add(const IpPrefix& p, uint32_t nh);
  Status add_static(const std::vector<const Route*>& same_prefix);
  void remove_installed();
  Status ensure_lpm6();
  uint32_t new_next_hop(const NextHop& nh);
  Status install_neighbor(const wire::IpAddr& ip, NeighborEntry& e);

  std::string name_;
  rte_lpm* lpm_ = nullptr;
  rte_lpm6* lpm6_ = nullptr;
  std::vector<IpPrefix> installed_;  // what add() put into lpm_ and lpm6_, for the next load()
  std::vector<NextHop> next_hops_;
  std::vector<EcmpGroup> groups_;
  std::vector<EcmpMember> members_;
  EcmpConfig ecmp_;
  EcmpPick pick_ = ecmp_pick(LoadBalancing::kHash);
  std::map<wire::IpAddr, NeighborEntry> neighbors_;
  std::vector<Route> routes_;
  std::vector<wire::IpAddr> local_;
  uint16_t num_ports_ = 0;
  struct Pending {
    wire::IpAddr ip;
    Time last{-1};
  };
  std::array<Pending, 16> pending_{};
  uint32_t pending_next_ = 0;
};

}  // namespace rocemu::sw
