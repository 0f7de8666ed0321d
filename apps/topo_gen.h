// Topology files for routed fabrics (`rocemu topo`): a two-tier leaf-spine
// Clos, and the two-tier fat-tree of k-port switches (a leaf-spine with k
// leaves, k/2 spines and k/2 hosts per leaf). Every leaf routes each other
// leaf's hosts over an ECMP group of its uplinks (one next hop per spine);
// every spine routes each leaf's hosts down its link to that leaf. Every
// switch runs the RoCE profile.
//
// Addresses: host i (1-based) of leaf L is 10.L.i.1/24, its gateway the
// leaf port's 10.L.i.254; the leaf-spine link of leaf L and spine S is
// 10.255.L.(4(S-1))/30, .1 on the leaf and .2 on the spine, each side a
// static neighbour of the other. Hosts are h1..hN, numbered leaf by leaf;
// leaf L's ports are swp1..swpH to its hosts, then one uplink per spine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu::app {

struct LeafSpineOptions {
  uint32_t leaves = 4;
  uint32_t spines = 2;
  uint32_t hosts_per_leaf = 4;
  uint64_t rate_bps = 400'000'000'000ull;  // host links
  // Host bandwidth : uplink bandwidth of a leaf ("1:1", "3:1"); the uplinks'
  // rate follows from it.
  double oversubscription = 1.0;
  std::string roce_mode = "lossless";
  std::string load_balancing = "hash";     // or per-packet (the leaves' ECMP groups)
  std::string loss_recovery = "go-back-n"; // or selective-repeat (every NIC)
  Duration delay = us(1);
  uint32_t mtu = 9000;
};

// "1:1" -> 1, "3:1" -> 3, "2.5:1"; nullopt if it is not RATIO:RATIO with both above 0.
std::optional<double> parse_oversubscription(std::string_view text);

// The topology file's text, or why the options cannot make one.
Result<std::string> leaf_spine_topology(const LeafSpineOptions& o, const std::string& command_line);
// k even, 2..64: k leaves, k/2 spines, k/2 hosts per leaf, 1:1.
Result<std::string> fat_tree_topology(uint32_t k, LeafSpineOptions base, const std::string& command_line);

}  // namespace rocemu::app
