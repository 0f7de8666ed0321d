// The VLAN-aware bridge of a switch (NVUE's `bridge domain br_default`):
// the MAC table, learned from the source addresses of frames on access
// ports and, for a bridged VNI with `nve vxlan mac-learning on`, from the
// inner source addresses of decapsulated frames (the remote VTEP that sent
// them); entries age out after `bridge domain br_default ageing` seconds.
// Pure: the caller passes `now`. The switch (switch_bridge.cc) forwards by
// it: a known unicast address to its port or remote VTEP, broadcast,
// multicast and unknown unicast (BUM) flooded to the VLAN's other ports and
// head-end replicated to the VNI's flood list; a frame from the overlay is
// flooded to local ports only (split horizon).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/engine/time.h"
#include "common/wire/ethernet.h"
#include "switch/switch_counters.h"

namespace rocemu::sw {

// Where a MAC address is: a local port, or behind a remote VTEP.
struct MacPlace {
  bool remote = false;
  uint16_t port = 0;  // local
  uint32_t vtep = 0;  // remote: the VTEP's address, host order
  friend bool operator==(const MacPlace&, const MacPlace&) = default;
};

struct MacEntry {
  uint16_t vlan = 0;
  wire::MacAddr mac{};
  MacPlace place;
  Time learned{0}, seen{0};
};

class MacTable {
 public:
  enum class Learn : uint8_t { kRefreshed, kLearned, kMoved, kFull };
  explicit MacTable(size_t capacity = 16384) : capacity_(capacity) {}

  // An entry not seen for more than `ageing` (0: never ages) is absent:
  // to learn(), lookup(), entries() and the capacity.
  void set_ageing(Duration ageing) { ageing_ = ageing; }
  // `mac` (a unicast address) seen in `vlan` at `place`; `aged` counts up
  // the entries removed for age (this address's own, or a sweep when full).
  Learn learn(uint16_t vlan, const wire::MacAddr& mac, const MacPlace& place, Time now, size_t& aged);
  // Where `mac` is in `vlan`; an aged entry is removed and `aged` set.
  std::optional<MacPlace> lookup(uint16_t vlan, const wire::MacAddr& mac, Time now, bool& aged);
  // Every entry not aged at `now`, by VLAN then address.
  std::vector<MacEntry> entries(Time now) const;
  size_t size() const { return map_.size(); }
  void clear() { map_.clear(); }
  // Forgets what was learned on local port `port` (its link went down).
  void flush_port(uint16_t port);

 private:
  static uint64_t key(uint16_t vlan, const wire::MacAddr& mac);
  bool is_aged(const MacEntry& e, Time now) const { return ageing_ > Duration(0) && now - e.seen > ageing_; }
  size_t capacity_;
  Duration ageing_{0};
  std::unordered_map<uint64_t, MacEntry> map_;
};

// Per switch, when it has bridge VLANs.
#define ROCEMU_SW_BRIDGE_COUNTERS(X)                                                                       \
  X(mac_learned, "bridge.mac-learned", "MAC addresses learned (on a local port or behind a remote VTEP)") \
  X(mac_moved, "bridge.mac-moved", "learned MAC addresses seen at another port or VTEP (moved)")         \
  X(mac_aged, "bridge.mac-aged", "learned MAC addresses removed for age")                                \
  X(mac_table_full, "bridge.mac-table-full", "addresses not learned: the MAC table was full")           \
  X(flood_packets, "bridge.flood-packets", "broadcast, multicast and unknown unicast frames flooded")    \
  X(flood_local_copies, "bridge.flood-local-copies", "copies of flooded frames sent to local ports")     \
  X(drop_vlan_filter, "bridge.discards.vlan-filter",                                                      \
    "frames on an access port tagged with another VLAN")                                                  \
  X(drop_same_port, "bridge.discards.same-port", "unicast frames to an address learned on their own ingress port") \
  X(drop_split_horizon, "bridge.discards.split-horizon",                                                  \
    "decapsulated frames to an address behind another VTEP (never sent back into the overlay)")          \
  X(drop_no_buffer, "bridge.discards.no-mbuf", "flood copies not made: no free packet buffer")              \
  X(drop_bad_source_mac, "bridge.discards.bad-source-mac", "frames with a multicast or all-zero source MAC") \
  X(drop_link_local, "bridge.discards.link-local",                                                         \
    "link-local frames (01:80:c2:00:00:00-0f: STP, LACP, LLDP) and MAC control other than PFC/PAUSE at an access port")

ROCEMU_SW_COUNTER_SET(BridgeCounters, ROCEMU_SW_BRIDGE_COUNTERS);

// Per VNI of a VTEP (reported as vxlan.vni<N>.<name>).
#define ROCEMU_SW_VNI_COUNTERS(X)                                                                   \
  X(encap_packets, "encap-packets", "frames encapsulated in this VNI")                            \
  X(encap_bytes, "encap-bytes", "bytes of inner frames encapsulated in this VNI")                 \
  X(decap_packets, "decap-packets", "frames decapsulated from this VNI")                          \
  X(decap_bytes, "decap-bytes", "bytes of inner frames decapsulated from this VNI")               \
  X(flood_copies, "head-end-replication-copies", "copies of BUM frames sent to the flood list's VTEPs")

ROCEMU_SW_COUNTER_SET(VniCounters, ROCEMU_SW_VNI_COUNTERS);

}  // namespace rocemu::sw
