// A switch's whole configuration: interfaces, routes, neighbours and QoS.
// It is validated whole before anything is applied (Switch::apply), and
// every error names the field, in the words the YAML and NVUE use.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/engine/fault.h"
#include "common/status.h"
#include "common/wire/ethernet.h"
#include "common/wire/ip.h"
#include "switch/ecmp.h"
#include "switch/qos_config.h"

namespace rocemu::sw {

struct IpPrefix {
  wire::IpAddr addr;  // IPv4 held IPv4-mapped
  uint8_t length = 0; // bits of the family (0..32 or 0..128)

  // "10.0.0.0/24", "fd00::/64"; a bare address is a host prefix.
  static std::optional<IpPrefix> parse(std::string_view text);
  bool is_v4() const { return addr.is_v4(); }
  bool contains(const wire::IpAddr& a) const;
  // The same network (the host bits aside): 10.0.1.0/24 and 10.0.1.7/24.
  bool same_as(const IpPrefix& o) const { return length == o.length && contains(o.addr); }
  std::string str() const;
};

// A switch emitting PFC on its own, whatever its buffer says: the fault
// that makes a PFC storm.
struct PfcStorm {
  bool enable = false;
  uint8_t priorities = 0x08;
  uint16_t quanta = 0xffff;
  Duration interval{0};  // 0: half the pause time of `quanta`
};

struct InterfaceConfig {
  std::string name;                  // port_name(index): "swp1" is port 0
  std::optional<wire::MacAddr> mac;  // default: switch mac + port index
  std::optional<IpPrefix> address;   // answered to ARP as the host's gateway
  std::optional<uint64_t> speed;     // default: the attached link's rate
  std::optional<uint32_t> mtu;       // default: the attached link's MTU
  std::optional<uint32_t> cable_length;  // default: qos pfc cable-length
  std::optional<bool> pfc_watchdog;  // default: qos pfc-watchdog state
  FaultConfig faults;                // fault stage on frames this port receives
  PfcStorm pfc_storm;
  // `bridge domain br_default access VID`: an access port of the bridge in
  // VLAN `access` (untagged frames; a frame tagged with another VLAN is
  // dropped). A bridge port is switched, not routed: it has no address.
  std::optional<uint16_t> access;
};

// A static route: to `prefix` out of `port`, to the neighbour `via` (or to
// the destination itself when `via` is unset: a connected route), with the
// next-hop MAC given or learned by ARP; or, with `vtep` set, into the VXLAN
// overlay: encapsulated in `vni` to the remote VTEP `vtep` (no port, the
// underlay route to `vtep` gives it). Routes to the same prefix are one
// route with several next hops, an ECMP group (as two `ip route` lines in
// FRR are), in the order given; at most kMaxEcmpMembers of them.
constexpr size_t kMaxEcmpMembers = 64;
struct Route {
  IpPrefix prefix;
  uint16_t port = 0;
  std::optional<wire::IpAddr> via;
  std::optional<wire::MacAddr> mac;
  std::optional<wire::IpAddr> vtep;  // overlay route: the remote VTEP
  uint32_t vni = 0;                  // with vtep: the VNI to encapsulate in

  bool overlay() const { return vtep.has_value(); }
  // The same next hop (an ECMP group may not list one twice).
  bool same_next_hop(const Route& o) const {
    return overlay() ? o.vtep == vtep && o.vni == vni : !o.overlay() && o.port == port && o.via == via;
  }
};

// VXLAN (RFC 7348): the switch as a static VTEP, NVUE's `nve vxlan`. A VNI
// maps to a VRF (a routed, "L3" VNI: routes with `vtep` send into it) or to
// a VLAN of the bridge (a bridged, "L2" VNI: `bridge domain br_default vlan
// 10 vni 10`; frames of the VLAN are switched into it by MAC). The remote
// VTEPs of a VNI are its head-end replication (flood) list and the global
// one; a route may name only those, and a bridged VNI floods broadcast,
// unknown unicast and multicast to each of them. EVPN is not modelled.
enum class VxlanDscpAction : uint8_t { kCopy, kSet };
constexpr std::array<std::string_view, 2> kVxlanDscpActionNames = {"copy", "set"};
std::optional<VxlanDscpAction> parse_vxlan_dscp_action(std::string_view name);
std::string_view vxlan_dscp_action_name(VxlanDscpAction a);

inline constexpr uint32_t kMaxVni = (1u << 24) - 1;
inline constexpr uint16_t kVxlanPort = 4789;  // IANA

struct VxlanVni {
  uint32_t vni = 0;
  std::string vrf = "default";      // a routed VNI's
  std::vector<wire::IpAddr> flood;  // head-end replication: remote VTEPs of this VNI
  uint16_t vlan = 0;                // a bridged VNI's VLAN (0: a routed VNI)
  bool bridged() const { return vlan != 0; }
  friend bool operator==(const VxlanVni&, const VxlanVni&) = default;
};

struct VxlanConfig {
  std::optional<wire::IpAddr> source;  // nve vxlan source address: the VTEP is on when set
  bool state = true;                   // nve vxlan state enabled|disabled (off keeps the settings)
  uint16_t port = kVxlanPort;          // UDP destination port
  // The outer DSCP on encapsulation: the inner one (copy) or `dscp_value` (set).
  VxlanDscpAction encap_dscp = VxlanDscpAction::kCopy;
  uint8_t dscp_value = 0;
  std::vector<wire::IpAddr> flood;  // remote VTEPs of every VNI
  std::vector<VxlanVni> vnis;
  // nve vxlan mac-learning: a bridged VNI learns the inner source MAC of a
  // decapsulated frame as behind its outer source address (data-plane
  // learning; off, as NVUE's default, every unicast to a remote host is
  // flooded to the flood list).
  bool mac_learning = false;

  bool enabled() const { return state && source.has_value(); }
  const VxlanVni* find(uint32_t vni) const {
    for (const VxlanVni& v : vnis)
      if (v.vni == vni) return &v;
    return nullptr;
  }
  // Whether `vtep` is a remote VTEP of `vni` (its flood list or the global one).
  bool is_remote(uint32_t vni, const wire::IpAddr& vtep) const;
  friend bool operator==(const VxlanConfig&, const VxlanConfig&) = default;
};

// The VLAN-aware bridge br_default (NVUE's `bridge domain br_default`):
// its VLANs, each possibly mapped to a VNI (VxlanVni::vlan), and the age
// after which a learned MAC address is forgotten.
inline constexpr char kBridgeDomain[] = "br_default";
inline constexpr uint16_t kMaxVlan = 4094;
struct BridgeDomain {
  std::vector<uint16_t> vlans;
  uint32_t ageing = 1800;  // seconds (0: learned addresses never age)
  bool has_vlan(uint16_t v) const { return std::find(vlans.begin(), vlans.end(), v) != vlans.end(); }
  friend bool operator==(const BridgeDomain&, const BridgeDomain&) = default;
};

struct Neighbor {
  wire::IpAddr ip;
  wire::MacAddr mac;
  uint16_t port = 0;
};

// Switch ports are numbered as on Cumulus: port index 0 is swp1. These two
// are the only places that know it.
std::string port_name(uint16_t index);
// The port index of "swp1", "swp2", ...; nullopt for anything else
// ("swp0", "3", "swp01").
std::optional<uint16_t> parse_port_name(std::string_view name);

struct SwitchConfig {
  uint16_t num_ports = 0;
  wire::MacAddr mac{{0x02, 0x53, 0x57, 0x00, 0x00, 0x00}};  // port i = mac + i
  std::vector<InterfaceConfig> interfaces;                   // one per port
  std::vector<Route> routes;
  std::vector<Neighbor> neighbors;
  bool proxy_arp = true;  // answer ARP for any routed address (hosts may ARP for their peer)
  EcmpConfig ecmp;        // system forwarding: ecmp-hash, hash-seed, load balancing
  VxlanConfig vxlan;      // nve vxlan: the switch as a VTEP
  BridgeDomain bridge;    // bridge domain br_default: VLANs (access ports: InterfaceConfig::access)
  QosConfig qos = qos_default_global();

  // A configuration with `ports` interfaces named swp1..swpN (port_name).
  static SwitchConfig with_ports(uint16_t ports);
  // Checks every value; the message names the field ("qos.pfc.cable-length: ...").
  Status validate() const;
  // Port index of an interface name ("swp3" is port 2, or the name the
  // topology gave it); -1 if the switch
  // has no such port. A bare number is not a name: it is refused.
  int find_interface(std::string_view name) const;
  // "swp1..swp4", for messages about a name that is not one of them.
  std::string interface_range() const;
  // Ports of a list as NVUE takes it: "swp1", "swp1,swp3", "swp1-4",
  // "swp1-2,5-6" (an item without "swp" continues the previous one's
  // prefix); in the order given, each once. An unknown port, an empty or
  // backwards range is an error naming the valid ones.
  Result<std::vector<uint16_t>> find_interfaces(std::string_view list) const;
  wire::MacAddr port_mac(uint16_t port) const;
  // An overlay route (vtep, vni) against the VTEP's configuration; the
  // message names the field under `at` ("routes[2].vtep: ...").
  Status check_overlay_route(const Route& r, const std::string& at) const;
  // Why a route, next hop or neighbour cannot be out of `port` (empty if it
  // can): a bridge access port routes nothing (an ARP reply there is
  // bridged, so a next hop there never resolves).
  std::string unroutable_port(uint16_t port) const;

 private:
  Status validate_vxlan() const;
  Status validate_bridge() const;
};

}  // namespace rocemu::sw
