// The switch's forwarding table: longest-prefix match on the destination
// (DPDK rte_lpm for IPv4, rte_lpm6 for IPv6) to a next hop that holds the
// egress port and the neighbour's MAC. Neighbours, static or learned by
// ARP, are installed as host routes (/32, /128), as a switch ASIC's host
// table does, so one lookup gives the rewrite. A connected route (no
// gateway) whose destination is not yet a neighbour "gleans": the caller
// ARPs for it and drops the packet.
#pragma once

#include <rte_lpm.h>
#include <rte_lpm6.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/engine/time.h"
#include "common/status.h"
#include "switch/switch_config.h"

namespace rocemu::sw {

struct NextHop {
  uint16_t port = 0;
  wire::MacAddr mac{};
  bool resolved = false;
  bool glean = false;  // connected route: the destination is the neighbour
  bool local = false;  // one of the switch's own addresses
  wire::IpAddr ip;     // neighbour to resolve when !glean
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

  // Data path. nullptr: no route.
  const NextHop* lookup_v4(uint32_t dst_host_order) const {
    uint32_t nh;
    return rte_lpm_lookup(lpm_, dst_host_order, &nh) == 0 ? &next_hops_[nh] : nullptr;
  }
  const NextHop* lookup_v6(const uint8_t* dst) const {
    uint32_t nh;
    return lpm6_ != nullptr && rte_lpm6_lookup(lpm6_, dst, &nh) == 0 ? &next_hops_[nh] : nullptr;
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

 private:
  RouteTable(std::string name, rte_lpm* lpm) : name_(std::move(name)), lpm_(lpm) {}
  Status add(const IpPrefix& p, uint32_t nh);
  Status ensure_lpm6();
  uint32_t new_next_hop(const NextHop& nh);
  Status install_neighbor(const wire::IpAddr& ip, NeighborEntry& e);

  std::string name_;
  rte_lpm* lpm_ = nullptr;
  rte_lpm6* lpm6_ = nullptr;
  std::vector<NextHop> next_hops_;
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
