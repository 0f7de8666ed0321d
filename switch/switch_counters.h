// The switch's counters, from one list each: the enum, the name (NVUE's
// `qos roce counters` group.field where NVUE has one, SONiC's queue and
// PFC words otherwise) and the help text. Every dropped packet bumps one.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/counters.h"

namespace rocemu::sw {

#define ROCEMU_SW_COUNTER_ENUM(id, name, help) id,
#define ROCEMU_SW_COUNTER_NAME(id, name, help) name,
#define ROCEMU_SW_COUNTER_HELP(id, name, help) help,
#define ROCEMU_SW_COUNTER_SET(Type, LIST)                                                       \
  struct Type {                                                                                 \
    enum Id : uint16_t { LIST(ROCEMU_SW_COUNTER_ENUM) kCount };                                 \
    static constexpr std::array<std::string_view, kCount> kNames = {LIST(ROCEMU_SW_COUNTER_NAME)}; \
    static constexpr std::array<std::string_view, kCount> kHelp = {LIST(ROCEMU_SW_COUNTER_HELP)};  \
    std::array<uint64_t, kCount> v{};                                                           \
    uint64_t& operator[](Id id) { return v[id]; }                                               \
    uint64_t operator[](Id id) const { return v[id]; }                                          \
    void clear() { v.fill(0); }                                                                 \
  }

// Per port. "roce" is what the RoCE profile classifies as RoCE (the RoCE
// priority group at ingress, its traffic class at egress), not what the
// packet says it is: a host marking the wrong DSCP shows up as non-RoCE.
#define ROCEMU_SW_PORT_COUNTERS(X)                                                                      \
  X(rx_roce_packets, "rx-roce-stats.roce-packets", "packets received in the RoCE priority group")     \
  X(rx_roce_bytes, "rx-roce-stats.roce-bytes", "bytes received in the RoCE priority group")           \
  X(rx_roce_no_buffer_discard, "rx-roce-stats.no-buffer-discard",                                     \
    "RoCE PG packets dropped at ingress for want of buffer (headroom too small on a lossless PG)")     \
  X(rx_non_roce_packets, "rx-non-roce-stats.non-roce-packets", "packets received in other PGs")       \
  X(rx_non_roce_bytes, "rx-non-roce-stats.non-roce-bytes", "bytes received in other PGs")             \
  X(rx_non_roce_no_buffer_discard, "rx-non-roce-stats.no-buffer-discard",                             \
    "non-RoCE packets dropped at ingress for want of buffer")                                         \
  X(tx_roce_packets, "tx-roce-stats.roce-packets", "packets sent from the RoCE traffic class")        \
  X(tx_roce_bytes, "tx-roce-stats.roce-bytes", "bytes sent from the RoCE traffic class")              \
  X(tx_roce_no_buffer_discard, "tx-roce-stats.unicast-no-buffer-discard",                             \
    "packets for the RoCE TC dropped at egress admission")                                            \
  X(tx_cnp_packets, "tx-cnp-stats.cnp-packets", "packets sent from the CNP traffic class")            \
  X(tx_cnp_bytes, "tx-cnp-stats.cnp-bytes", "bytes sent from the CNP traffic class")                  \
  X(tx_cnp_no_buffer_discard, "tx-cnp-stats.unicast-no-buffer-discard",                               \
    "packets for the CNP TC dropped at egress admission")                                             \
  X(tx_non_roce_packets, "tx-non-roce-stats.non-roce-packets", "packets sent from other TCs")         \
  X(tx_non_roce_bytes, "tx-non-roce-stats.non-roce-bytes", "bytes sent from other TCs")               \
  X(tx_non_roce_no_buffer_discard, "tx-non-roce-stats.unicast-no-buffer-discard",                     \
    "packets for other TCs dropped at egress admission")                                              \
  X(tx_ecn_marked_packets, "tx-ecn-stats.ecn-marked-packets", "packets marked CE on this egress port") \
  X(rx_pfc_frames, "rx-pfc-frames", "802.1Qbb frames received")                                       \
  X(tx_pfc_frames, "tx-pfc-frames", "802.1Qbb frames sent")                                           \
  X(rx_pause_frames, "rx-pause-frames", "802.3x PAUSE frames received (ignored: PFC disables PAUSE)") \
  X(rx_arp, "rx-arp", "ARP packets received")                                                         \
  X(tx_arp, "tx-arp", "ARP packets sent (replies and requests)")                                      \
  X(drop_parse_error, "discards.parse-error", "frames the parser rejected")                           \
  X(drop_not_ip, "discards.not-ip", "frames neither IP, ARP nor MAC control")                         \
  X(drop_no_route, "discards.no-route", "IP packets with no route")                                   \
  X(drop_to_switch, "discards.to-switch", "IP packets for the switch's own address (no ICMP)")        \
  X(drop_ttl_expired, "discards.ttl-expired", "IP packets whose TTL or hop limit ran out")            \
  X(drop_neighbor_miss, "discards.neighbor-miss", "packets whose next hop's MAC is not known yet")    \
  X(drop_mtu_exceeded, "discards.mtu-exceeded", "packets larger than the egress MTU")                 \
  X(drop_link_down, "discards.link-down", "packets for a port that is down or not connected")         \
  X(drop_wred, "discards.wred", "non-ECT packets dropped above the ECN band on a lossy queue")        \
  X(drop_pfc_watchdog, "discards.pfc-watchdog", "packets dropped by the PFC watchdog")                \
  X(drop_fault, "discards.fault", "frames dropped by the port's fault stage")                         \
  X(drop_arp, "discards.arp", "ARP packets not for IPv4 over Ethernet")                               \
  X(fault_corrupted, "fault.corrupted", "frames corrupted by the port's fault stage")                  \
  X(fault_duplicated, "fault.duplicated", "frames duplicated by the port's fault stage")               \
  X(fault_delayed, "fault.delayed", "frames delayed or reordered by the port's fault stage")           \
  X(trim_packets, "trim.trim-packets", "packets trimmed instead of dropped")                           \
  X(trim_sent_packets, "trim.trim-sent-packets", "trimmed packets sent")                              \
  X(trim_drop_packets, "trim.trim-drop-packets", "trimmed packets that still did not fit")

ROCEMU_SW_COUNTER_SET(PortCounters, ROCEMU_SW_PORT_COUNTERS);

// Per egress queue (SONiC `show queue counters`, plus ECN/WRED).
#define ROCEMU_SW_QUEUE_COUNTERS(X)                                                   \
  X(packets, "packets", "packets sent")                                              \
  X(bytes, "bytes", "bytes sent")                                                    \
  X(drop_packets, "drop-packets", "packets dropped (buffer, WRED, watchdog)")        \
  X(drop_bytes, "drop-bytes", "bytes dropped")                                       \
  X(trim_packets, "trim-packets", "packets trimmed on their way into this queue")    \
  X(trim_sent_packets, "trim-sent-packets", "trimmed packets sent from this queue")  \
  X(trim_drop_packets, "trim-drop-packets", "trimmed packets that did not fit")      \
  X(ecn_marked_packets, "ecn-marked-packets", "packets marked CE (SAI WRED_ECN_MARKED)") \
  X(wred_dropped_packets, "wred-dropped-packets", "non-ECT packets dropped by WRED")

ROCEMU_SW_COUNTER_SET(QueueCounters, ROCEMU_SW_QUEUE_COUNTERS);

// Per port and ingress priority group (NVUE `counters qos
// ingress-buffer-stats`). A lossless PG drops only when its headroom is
// full; a lossy one when it is over its shared-buffer threshold: both are
// rx-buffer-discards, the second also rx-shared-buffer-discards.
#define ROCEMU_SW_PG_COUNTERS(X)                                                                  \
  X(rx_frames, "rx-frames", "frames received in the priority group")                              \
  X(rx_bytes, "rx-bytes", "bytes received in the priority group")                                 \
  X(rx_buffer_discards, "rx-buffer-discards", "frames of the PG dropped at ingress for want of buffer") \
  X(rx_shared_buffer_discards, "rx-shared-buffer-discards",                                       \
    "frames of a lossy PG dropped at ingress over its shared-buffer threshold")                     \
  X(rx_slack_frames, "rx-slack-frames",                                                           \
    "frames a lossless PG took beyond its headroom in real time: sent by a link partner running "    \
    "ahead of the engine's clock (tx_slack) before it could see XOFF")

ROCEMU_SW_COUNTER_SET(PgCounters, ROCEMU_SW_PG_COUNTERS);

// Per port and lossless queue (SONiC `show pfcwd stats`).
#define ROCEMU_SW_WATCHDOG_COUNTERS(X)                                          \
  X(storm_detected, "storm-detected", "PFC storms detected")                    \
  X(storm_restored, "storm-restored", "PFC storms over")                        \
  X(tx_ok, "tx-ok", "packets sent from the queue while in storm")               \
  X(tx_drop, "tx-drop", "packets for the queue dropped while in storm")         \
  X(rx_ok, "rx-ok", "packets received on the PG while in storm")                \
  X(rx_drop, "rx-drop", "packets received on the PG dropped while in storm")

ROCEMU_SW_COUNTER_SET(WatchdogCounters, ROCEMU_SW_WATCHDOG_COUNTERS);

}  // namespace rocemu::sw
