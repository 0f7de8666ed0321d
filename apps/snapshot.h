// A snapshot of a running fabric: what `rocemu doctor` and `rocemu top`
// read. Plain values taken on the engine thread (take_snapshot), carried
// to the CLI as JSON (the engine's `snapshot` command), so the checks and
// views that read it need no engine.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rocemu {
class Engine;
}

namespace rocemu::app {

// The QPs of a NIC that share a traffic class and path MTU (live ones:
// RTR or RTS), with the lowest QPN as an example.
struct QpClassSnap {
  uint32_t example_qpn = 0;
  uint32_t count = 0;
  uint8_t traffic_class = 0;  // as sent (the NIC's default when the QP set 0)
  uint8_t dscp = 0;
  uint8_t priority = 0;       // IEEE priority (PCP, PFC)
  uint32_t path_mtu = 0;      // bytes
};

struct NicSnap {
  std::string name;
  uint32_t mtu = 0;               // Ethernet MTU of the port
  uint8_t pfc_priorities = 0;     // priorities whose PFC it honours
  uint8_t cnp_dscp = 0;
  uint8_t cnp_prio = 0;
  bool ecn = false;               // sends ECT(0)
  std::vector<QpClassSnap> qps;
  // counters
  uint64_t tx_bytes = 0, rx_bytes = 0;
  uint64_t cnp_sent = 0, cnp_handled = 0, ecn_marked = 0;
  uint64_t pfc_rx = 0;
};

struct SwitchPortSnap {
  uint16_t index = 0;
  std::string name;  // the interface's name (sw1's swpN)
  uint32_t mtu = 0;
  uint64_t speed = 0;  // bit/s
  uint32_t cable_length = 0;
  uint64_t headroom_xoff = 0;  // bytes
  bool watchdog = false;
  // counters
  uint64_t rx_bytes = 0, tx_bytes = 0;
  std::array<uint64_t, 8> pfc_tx{}, pfc_rx{};  // per priority
  std::array<uint64_t, 8> queue_depth{};       // packets per TC
  std::array<uint64_t, 8> tc_drops{}, tc_ecn_marked{};
  uint64_t roce_no_buffer_discard = 0;         // ingress, RoCE PG
  uint64_t cnp_packets = 0;
  uint64_t drops = 0;                           // every discard of the port
};

struct SwitchSnap {
  std::string name;
  bool roce = false;  // `qos roce` applied
  std::string roce_mode;
  uint8_t roce_dscp = 0, roce_sp = 0, cnp_dscp = 0, cnp_sp = 0;
  std::string trust;
  std::array<uint8_t, 64> dscp_to_sp{};
  std::array<uint8_t, 8> pcp_to_sp{};
  uint8_t port_default_sp = 0;
  std::array<uint8_t, 8> sp_to_tc{};
  std::array<bool, 8> tc_strict{};
  std::array<bool, 8> tc_ecn{};
  std::array<uint64_t, 8> tc_ecn_min{}, tc_ecn_max{};  // bytes
  uint8_t pfc_priorities = 0;
  std::vector<SwitchPortSnap> ports;

  // The switch priority a packet gets, as the switch classifies it.
  uint8_t priority_of(uint8_t dscp, bool vlan, uint8_t pcp) const;
  uint8_t tc_of(uint8_t sp) const { return sp_to_tc[sp & 7]; }
  bool pfc_on(uint8_t sp) const { return (pfc_priorities >> (sp & 7)) & 1; }
  // A TC carrying a PFC priority.
  bool tc_lossless(uint8_t tc) const;
};

// One end of a link: a node and its port, named as the user names it.
struct EndSnap {
  std::string node;
  uint16_t port = 0;
  std::string port_name;
  uint32_t mtu = 0;
};

struct LinkSnap {
  std::string name;
  EndSnap a, b;
};

struct FabricSnapshot {
  int64_t time_ns = 0;  // the engine's clock
  std::vector<NicSnap> nics;
  std::vector<SwitchSnap> switches;
  std::vector<LinkSnap> links;

  const NicSnap* nic(const std::string& name) const;
  const SwitchSnap* switch_named(const std::string& name) const;
};

struct RuntimePaths;

// On the engine thread.
FabricSnapshot take_snapshot(const Engine& engine);
// From the running engine's `snapshot` command (apps/cmd_doctor.cc).
std::optional<FabricSnapshot> fetch_snapshot(const RuntimePaths& paths, std::string& err);

void to_json(nlohmann::json& j, const FabricSnapshot& s);
void from_json(const nlohmann::json& j, FabricSnapshot& s);

}  // namespace rocemu::app
