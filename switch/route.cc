#include "switch/route.h"

#include <rte_errno.h>

#include <algorithm>
#include <tuple>

namespace rocemu::sw {
namespace {

constexpr uint32_t kMaxRules = 8192;

NextHop static_next_hop(const Route& r) {
  NextHop nh;
  if (r.overlay()) {  // resolved by the underlay route to the VTEP, packet by packet
    nh.port = kNoPort;
    nh.tunnel = true;
    nh.resolved = true;
    nh.ip = *r.vtep;
    nh.vni = r.vni;
    return nh;
  }
  nh.port = r.port;
  if (r.mac) {
    nh.mac = *r.mac;
    nh.resolved = true;
  } else if (r.via) {
    nh.ip = *r.via;
  } else {
    nh.glean = true;
  }
  return nh;
}

// An ECMP member's identity across reloads: prefix, port, gateway.
using MemberKey = std::tuple<std::string, uint16_t, wire::IpAddr>;

// The rte_lpm rules of a prefix: itself, or for a default route its two
// halves (rte_lpm and rte_lpm6 take no depth 0).
template <typename V4, typename V6>
int lpm_rules_of(const IpPrefix& p, V4&& v4, V6&& v6) {
  if (p.is_v4()) {
    if (p.length == 0) return v4(0u, uint8_t(1)) | v4(0x80000000u, uint8_t(1));
    const uint32_t a = p.addr.v4_host_order();
    return v4(a & ~(p.length == 32 ? 0u : 0xffffffffu >> p.length), p.length);
  }
  if (p.length != 0) return v6(p.addr.b.data(), p.length);
  std::array<uint8_t, 16> lo{}, hi{};
  hi[0] = 0x80;
  return v6(lo.data(), uint8_t(1)) | v6(hi.data(), uint8_t(1));
}

}  // namespace

Result<std::unique_ptr<RouteTable>> RouteTable::create(const std::string& name) {
  rte_lpm_config cfg{};
  cfg.max_rules = kMaxRules;
  cfg.number_tbl8s = 256;
  rte_lpm* lpm = rte_lpm_create(name.c_str(), SOCKET_ID_ANY, &cfg);
  if (lpm == nullptr) return Status::error("route table " + name + ": " + rte_strerror(rte_errno));
  return std::unique_ptr<RouteTable>(new RouteTable(name, lpm));
}

RouteTable::~RouteTable() {
  rte_lpm_free(lpm_);
  if (lpm6_ != nullptr) rte_lpm6_free(lpm6_);
}

Status RouteTable::ensure_lpm6() {
  if (lpm6_ != nullptr) return {};
  rte_lpm6_config cfg{};
  cfg.max_rules = kMaxRules;
  cfg.number_tbl8s = 1024;
  const std::string n = name_ + "6";
  lpm6_ = rte_lpm6_create(n.c_str(), SOCKET_ID_ANY, &cfg);
  if (lpm6_ == nullptr) return Status::error("route table " + n + ": " + rte_strerror(rte_errno));
  return {};
}

// An index at or above kGroupBit would read as a group: new_next_hop
// refuses with kNoNextHop, which add() and add_static() reject.
constexpr uint32_t kNoNextHop = UINT32_MAX;

Status RouteTable::add(const IpPrefix& p, uint32_t nh) {
  if (nh == kNoNextHop) return Status::error("route " + p.str() + ": the next-hop table is full");
  if (!p.is_v4())
    if (Status s = ensure_lpm6(); !s.ok()) return s;
  const int rc = lpm_rules_of(
      p, [&](uint32_t ip, uint8_t depth) { return rte_lpm_add(lpm_, ip, depth, nh); },
      [&](const uint8_t* ip, uint8_t depth) { return rte_lpm6_add(lpm6_, ip, depth, nh); });
  if (rc != 0) return Status::error("route " + p.str() + ": " + rte_strerror(-rc));
  installed_.push_back(p);
  return {};
}

void RouteTable::remove_installed() {
  // rte_lpm_delete_all clears the whole 64 MiB tbl24, touching every page
  // of it: per rule, a table with the few routes of a switch touches only
  // the entries they cover (a fresh table is not touched at all).
  if (installed_.size() > kMaxRules) {
    rte_lpm_delete_all(lpm_);
    if (lpm6_ != nullptr) rte_lpm6_delete_all(lpm6_);
  } else {
    for (const IpPrefix& p : installed_)  // a prefix added twice is gone at the first delete
      (void)lpm_rules_of(
          p, [&](uint32_t ip, uint8_t depth) { return rte_lpm_delete(lpm_, ip, depth); },
          [&](const uint8_t* ip, uint8_t depth) { return rte_lpm6_delete(lpm6_, ip, depth); });
  }
  installed_.clear();
}

uint32_t RouteTable::new_next_hop(const NextHop& nh) {
  if (next_hops_.size() >= kGroupBit) return kNoNextHop;
  next_hops_.push_back(nh);
  return uint32_t(next_hops_.size() - 1);
}

Status RouteTable::install_neighbor(const wire::IpAddr& ip, NeighborEntry& e) {
  NextHop nh;
  nh.port = e.port;
  nh.mac = e.mac;
  nh.resolved = true;
  nh.ip = ip;
  e.next_hop = new_next_hop(nh);
  IpPrefix host{ip, uint8_t(ip.is_v4() ? 32 : 128)};
  if (Status s = add(host, e.next_hop); !s.ok()) {
    if (e.next_hop != kNoNextHop) next_hops_.pop_back();  // refused: leave no next hop behind
    return s;
  }
  // Gateways of routes resolve through it.
  for (NextHop& g : next_hops_) {
    if (!g.glean && !g.tunnel && g.ip == ip && &g != &next_hops_[e.next_hop]) {
      g.mac = e.mac;
      g.port = e.port;
      g.resolved = true;
    }
  }
  return {};
}

Status RouteTable::add_static(const std::vector<const Route*>& same_prefix) {
  const IpPrefix& prefix = same_prefix.front()->prefix;
  if (same_prefix.size() == 1) return add(prefix, new_next_hop(static_next_hop(*same_prefix.front())));
  EcmpGroup g;
  g.prefix = prefix;
  g.first = uint32_t(members_.size());
  g.count = uint16_t(same_prefix.size());
  for (const Route* r : same_prefix) {
    const uint32_t nh = new_next_hop(static_next_hop(*r));
    if (nh == kNoNextHop) return Status::error("route " + prefix.str() + ": the next-hop table is full");
    members_.push_back(EcmpMember{nh, {}});
  }
  groups_.push_back(g);
  return add(prefix, kGroupBit | uint32_t(groups_.size() - 1));
}

Status RouteTable::load(const SwitchConfig& cfg) {
  // A member that stays (same prefix, port and gateway) keeps its counters.
  std::map<MemberKey, EcmpCounters> kept;
  for (const EcmpGroup& g : groups_)
    for (uint32_t i = g.first; i < g.first + g.count; i++)
      kept[{g.prefix.str(), next_hops_[members_[i].next_hop].port, next_hops_[members_[i].next_hop].ip}] =
          members_[i].counters;
  // On every exit, a failed load's too (the caller rolls back with the
  // members as they are then), the members that stay get them back.
  auto restore = [&] {
    for (const EcmpGroup& g : groups_)
      for (uint32_t i = g.first; i < g.first + g.count; i++)
        if (auto it = kept.find({g.prefix.str(), next_hops_[members_[i].next_hop].port, next_hops_[members_[i].next_hop].ip});
            it != kept.end())
          members_[i].counters = it->second;
  };
  struct OnExit {
    decltype(restore)& f;
    ~OnExit() { f(); }
  } on_exit{restore};
  remove_installed();
  next_hops_.clear();
  next_hops_.reserve(256);
  groups_.clear();
  members_.clear();
  ecmp_ = cfg.ecmp;
  pick_ = ecmp_pick(cfg.ecmp.load_balancing);
  routes_ = cfg.routes;
  num_ports_ = cfg.num_ports;
  local_.clear();
  // Connected subnets of the interfaces, then static routes (a later,
  // longer or equal prefix wins: rte_lpm replaces equal prefixes).
  for (uint16_t i = 0; i < cfg.interfaces.size(); i++) {
    const auto& a = cfg.interfaces[i].address;
    if (!a) continue;
    local_.push_back(a->addr);
    NextHop nh;
    nh.port = i;
    nh.glean = true;
    if (Status s = add(*a, new_next_hop(nh)); !s.ok()) return s;
  }
  for (uint16_t i = 0; i < cfg.interfaces.size(); i++) {
    const auto& a = cfg.interfaces[i].address;
    if (!a) continue;
    NextHop nh;
    nh.port = i;
    nh.local = true;
    if (Status s = add(IpPrefix{a->addr, uint8_t(a->is_v4() ? 32 : 128)}, new_next_hop(nh)); !s.ok()) return s;
  }
  if (cfg.vxlan.enabled()) {
    local_.push_back(*cfg.vxlan.source);
    NextHop nh;
    nh.port = kNoPort;
    nh.local = true;
    if (Status s = add(IpPrefix{*cfg.vxlan.source, 32}, new_next_hop(nh)); !s.ok()) return s;
  }
  // Static routes by prefix, in the order of their first route: one next
  // hop, or an ECMP group of them.
  std::vector<std::vector<const Route*>> by_prefix;
  for (const Route& r : cfg.routes) {
    auto it = std::find_if(by_prefix.begin(), by_prefix.end(),
                           [&](const auto& same) { return same.front()->prefix.same_as(r.prefix); });
    if (it == by_prefix.end()) by_prefix.push_back({&r});
    else it->push_back(&r);
  }
  for (const auto& same : by_prefix)
    if (Status s = add_static(same); !s.ok()) return s;
  // Neighbours: learned ones survive if their port does; static ones are
  // replaced.
  std::map<wire::IpAddr, NeighborEntry> old;
  old.swap(neighbors_);
  for (auto& [ip, e] : old)
    if (!e.is_static && e.port < cfg.num_ports) neighbors_[ip] = e;
  for (const Neighbor& n : cfg.neighbors) neighbors_[n.ip] = NeighborEntry{n.mac, n.port, true, 0};
  for (auto& [ip, e] : neighbors_)
    if (Status s = install_neighbor(ip, e); !s.ok()) return s;
  return {};
}

bool RouteTable::learn(const wire::IpAddr& ip, const wire::MacAddr& mac, uint16_t port) {
  auto it = neighbors_.find(ip);
  if (it != neighbors_.end()) {
    NeighborEntry& e = it->second;
    if (e.is_static || (e.mac == mac && e.port == port)) return false;
    e.mac = mac;
    e.port = port;
    NextHop& nh = next_hops_[e.next_hop];
    nh.mac = mac;
    nh.port = port;
    for (NextHop& g : next_hops_) {
      if (!g.glean && !g.tunnel && g.ip == ip) {
        g.mac = mac;
        g.port = port;
        g.resolved = true;
      }
    }
    return true;
  }
  if (is_local(ip)) return false;
  NeighborEntry e{mac, port, false, 0};
  if (!install_neighbor(ip, e).ok()) return false;  // table full: keep gleaning
  neighbors_[ip] = e;
  return true;
}

bool RouteTable::is_local(const wire::IpAddr& ip) const {
  for (const auto& a : local_)
    if (a == ip) return true;
  return false;
}

bool RouteTable::may_request(const wire::IpAddr& ip, Time now, Duration interval) {
  for (Pending& p : pending_) {
    if (p.last.count() >= 0 && p.ip == ip) {
      if (now - p.last < interval) return false;
      p.last = now;
      return true;
    }
  }
  Pending& slot = pending_[pending_next_++ % pending_.size()];
  slot.ip = ip;
  slot.last = now;
  return true;
}

}  // namespace rocemu::sw
