#include "apps/topo_gen.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace rocemu::app {
namespace {

constexpr uint32_t kMaxLeaves = 250;      // 10.L.0.0/16 per leaf, 10.255/16 for the links
constexpr uint32_t kMaxSpines = 63;       // 10.255.L.(4(S-1))/30 per link
constexpr uint32_t kMaxHostsPerLeaf = 250;
constexpr uint32_t kMaxSwitchPorts = 256;
constexpr uint64_t kMaxPortRate = 1'600'000'000'000ull;  // what a switch interface takes

std::string rate_text(uint64_t bps) {
  if (bps % 1'000'000'000 == 0) return std::to_string(bps / 1'000'000'000) + "G";
  if (bps % 1'000'000 == 0) return std::to_string(bps / 1'000'000) + "M";
  return std::to_string(bps);
}

std::string mac_text(uint8_t kind, uint32_t index) {
  char b[32];
  std::snprintf(b, sizeof b, "02:53:%02x:00:%02x:00", kind, index & 0xff);
  return b;
}
// The switch's MAC plus the port index, as SwitchConfig::port_mac makes it.
std::string port_mac_text(uint8_t kind, uint32_t index, uint32_t port) {
  char b[32];
  std::snprintf(b, sizeof b, "02:53:%02x:00:%02x:%02x", kind, index & 0xff, port & 0xff);
  return b;
}
constexpr uint8_t kLeafMac = 0x4c;   // 'L'
constexpr uint8_t kSpineMac = 0x53;  // 'S'

std::string link_ip(uint32_t leaf, uint32_t spine, uint32_t side) {
  return "10.255." + std::to_string(leaf) + "." + std::to_string(4 * (spine - 1) + side);
}

Status check(const LeafSpineOptions& o) {
  auto range = [](const char* what, uint32_t v, uint32_t lo, uint32_t hi) -> Status {
    if (v < lo || v > hi)
      return Status::error(std::string(what) + " must be " + std::to_string(lo) + ".." + std::to_string(hi) + ", not " +
                           std::to_string(v));
    return {};
  };
  if (Status s = range("--leaves", o.leaves, 1, kMaxLeaves); !s.ok()) return s;
  if (Status s = range("--spines", o.spines, 1, kMaxSpines); !s.ok()) return s;
  if (Status s = range("--hosts-per-leaf", o.hosts_per_leaf, 1, kMaxHostsPerLeaf); !s.ok()) return s;
  if (o.hosts_per_leaf + o.spines > kMaxSwitchPorts)
    return Status::error("a leaf would have " + std::to_string(o.hosts_per_leaf + o.spines) + " ports (at most " +
                         std::to_string(kMaxSwitchPorts) + ")");
  if (o.rate_bps < 1'000'000 || o.rate_bps > kMaxPortRate) return Status::error("--rate must be between 1M and 1600G");
  if (!(o.oversubscription > 0)) return Status::error("--oversubscription must be above 0");
  if (o.roce_mode != "lossless" && o.roce_mode != "lossy")
    return Status::error("--roce must be lossless or lossy, not '" + o.roce_mode + "'");
  if (o.load_balancing != "hash" && o.load_balancing != "per-packet")
    return Status::error("--load-balancing must be hash or per-packet, not '" + o.load_balancing + "'");
  if (o.loss_recovery != "go-back-n" && o.loss_recovery != "selective-repeat")
    return Status::error("--loss-recovery must be go-back-n or selective-repeat, not '" + o.loss_recovery + "'");
  return {};
}

}  // namespace

std::optional<double> parse_oversubscription(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  auto number = [](std::string_view s) -> std::optional<double> {
    if (s.empty()) return std::nullopt;
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || !(v > 0) || !std::isfinite(v)) return std::nullopt;
    return v;
  };
  const auto a = number(text.substr(0, colon));
  const auto b = number(text.substr(colon + 1));
  if (!a || !b) return std::nullopt;
  return *a / *b;
}

Result<std::string> leaf_spine_topology(const LeafSpineOptions& o, const std::string& command_line) {
  if (Status s = check(o); !s.ok()) return s;
  const double down = double(o.rate_bps) * o.hosts_per_leaf;
  const uint64_t uplink = uint64_t(std::llround(down / o.oversubscription / o.spines / 1e6)) * 1'000'000;
  if (uplink < 1'000'000 || uplink > kMaxPortRate)
    return Status::error("the uplinks would run at " + rate_text(uplink) + " (" + std::to_string(o.hosts_per_leaf) +
                         " x " + rate_text(o.rate_bps) + " over " + std::to_string(o.spines) +
                         " spines): more spines or more oversubscription (at most 1600G a port)");
  const uint32_t hosts = o.leaves * o.hosts_per_leaf;
  const int64_t delay_ns = to_ns(o.delay);
  const std::string delay = delay_ns % 1000 == 0 ? std::to_string(delay_ns / 1000) + "us" : std::to_string(delay_ns) + "ns";
  std::ostringstream y;
  y << "# " << o.leaves << " leaves x " << o.spines << " spines, " << o.hosts_per_leaf << " hosts per leaf at "
    << rate_text(o.rate_bps) << ", uplinks at " << rate_text(uplink) << " (oversubscription "
    << o.oversubscription << ":1), qos roce " << o.roce_mode << " on every switch.\n"
    << "# Made by: " << command_line << "\n"
    << "# Host i of leaf L is 10.L.i.1/24 (gateway 10.L.i.254 on the leaf's swp<i>); the link of leaf L and\n"
    << "# spine S is 10.255.L.(4(S-1))/30, .1 on the leaf (swp<hosts+S>), .2 on the spine (swp<L>).\n"
    << "# Leaves reach the other leaves' hosts over an ECMP group of their uplinks (a hash of the\n"
    << "# 5-tuple, RoCE's UDP source port included); spines route each leaf's 10.L.0.0/16 down.\n"
    << "engine: {seed: 1, mbufs: " << std::max<uint32_t>(65536, 4096 * hosts) << "}\n"
    << "nodes:\n";
  for (uint32_t l = 1; l <= o.leaves; l++)
    for (uint32_t i = 1; i <= o.hosts_per_leaf; i++) {
      const std::string net = "10." + std::to_string(l) + "." + std::to_string(i);
      y << "  h" << (l - 1) * o.hosts_per_leaf + i << ": {kind: nic, ip: " << net << ".1, prefix: 24, gateway: " << net
        << ".254" << (o.loss_recovery == "go-back-n" ? "" : ", loss_recovery: " + o.loss_recovery) << "}\n";
    }
  for (uint32_t l = 1; l <= o.leaves; l++) {
    y << "  leaf" << l << ":\n"
      << "    kind: switch\n"
      << "    ports: " << o.hosts_per_leaf + o.spines << "\n"
      << "    mac: \"" << mac_text(kLeafMac, l) << "\"\n"
      << "    forwarding: {ecmp-hash: {source-ip: on, destination-ip: on, ip-protocol: on, source-port: on, "
         "destination-port: on}, hash-seed: 0"
      << (o.load_balancing == "hash" ? "" : ", load-balancing: " + o.load_balancing) << "}\n"
      << "    interfaces:\n";
    for (uint32_t i = 1; i <= o.hosts_per_leaf; i++)
      y << "      swp" << i << ": {address: 10." << l << "." << i << ".254/24}\n";
    for (uint32_t s = 1; s <= o.spines; s++)
      y << "      swp" << o.hosts_per_leaf + s << ": {address: " << link_ip(l, s, 1) << "/30}\n";
    if (o.leaves > 1) {
      y << "    routes:\n";
      for (uint32_t other = 1; other <= o.leaves; other++) {
        if (other == l) continue;
        y << "      - prefix: 10." << other << ".0.0/16\n        next-hops:\n";
        for (uint32_t s = 1; s <= o.spines; s++)
          y << "          - {interface: swp" << o.hosts_per_leaf + s << ", via: " << link_ip(l, s, 2) << "}\n";
      }
      y << "    neighbors:\n";
      for (uint32_t s = 1; s <= o.spines; s++)
        y << "      - {ip: " << link_ip(l, s, 2) << ", mac: \"" << port_mac_text(kSpineMac, s, l - 1)
          << "\", interface: swp" << o.hosts_per_leaf + s << "}\n";
    }
    y << "    qos:\n      roce: " << o.roce_mode << "\n";
  }
  for (uint32_t s = 1; s <= o.spines; s++) {
    y << "  spine" << s << ":\n"
      << "    kind: switch\n"
      << "    ports: " << o.leaves << "\n"
      << "    mac: \"" << mac_text(kSpineMac, s) << "\"\n"
      << "    interfaces:\n";
    for (uint32_t l = 1; l <= o.leaves; l++) y << "      swp" << l << ": {address: " << link_ip(l, s, 2) << "/30}\n";
    y << "    routes:\n";
    for (uint32_t l = 1; l <= o.leaves; l++)
      y << "      - {prefix: 10." << l << ".0.0/16, interface: swp" << l << ", via: " << link_ip(l, s, 1) << "}\n";
    y << "    neighbors:\n";
    for (uint32_t l = 1; l <= o.leaves; l++)
      y << "      - {ip: " << link_ip(l, s, 1) << ", mac: \"" << port_mac_text(kLeafMac, l, o.hosts_per_leaf + s - 1)
        << "\", interface: swp" << l << "}\n";
    y << "    qos:\n      roce: " << o.roce_mode << "\n";
  }
  y << "links:\n";
  for (uint32_t l = 1; l <= o.leaves; l++)
    for (uint32_t i = 1; i <= o.hosts_per_leaf; i++)
      y << "  - {a: h" << (l - 1) * o.hosts_per_leaf + i << ", b: \"leaf" << l << ":" << i - 1
        << "\", rate: " << rate_text(o.rate_bps) << ", delay: " << delay << ", mtu: " << o.mtu << "}\n";
  for (uint32_t l = 1; l <= o.leaves; l++)
    for (uint32_t s = 1; s <= o.spines; s++)
      y << "  - {a: \"leaf" << l << ":" << o.hosts_per_leaf + s - 1 << "\", b: \"spine" << s << ":" << l - 1
        << "\", rate: " << rate_text(uplink) << ", delay: " << delay << ", mtu: " << o.mtu << "}\n";
  return y.str();
}

Result<std::string> fat_tree_topology(uint32_t k, LeafSpineOptions base, const std::string& command_line) {
  if (k < 2 || k > 64 || k % 2 != 0) return Status::error("--k must be even, 2..64, not " + std::to_string(k));
  base.leaves = k;
  base.spines = k / 2;
  base.hosts_per_leaf = k / 2;
  base.oversubscription = 1;
  return leaf_spine_topology(base, command_line);
}

}  // namespace rocemu::app
