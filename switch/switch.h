// The switch node: a Spectrum-class RoCE switch as a pipeline of small
// batch stages over each received burst:
//
//   fault stage -> parse -> trust (DSCP/PCP) -> switch priority -> priority
//   group -> route (LPM, MAC rewrite, TTL) -> egress admission (shared
//   buffer, dynamic thresholds, PFC headroom) -> ECN (WRED) / trimming ->
//   per-TC queues -> scheduler (strict + DWRR, PFC-paused TCs skipped) ->
//   transmit at the port's line rate
//
// plus PFC generation (XOFF/XON per ingress PG), pause timers on receive,
// the PFC watchdog, PFC storm injection, ARP, and the control API the CLI
// calls on a running engine. Control calls must run on the engine thread
// (Engine::post), between bursts, which is what makes apply() atomic.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "common/engine/fault_stage.h"
#include "common/engine/node.h"
#include "common/log.h"
#include "common/wire/packet.h"
#include "switch/bridge.h"
#include "switch/mmu.h"
#include "switch/nvue_view.h"
#include "switch/packet_queue.h"
#include "switch/pfc.h"
#include "switch/route.h"
#include "switch/scheduler.h"
#include "switch/switch_config.h"
#include "switch/switch_counters.h"
#include "switch/vxlan.h"

namespace rocemu::sw {

class Switch final : public Node {
 public:
  Switch(std::string name, SwitchConfig cfg);
  ~Switch() override;

  std::string_view kind() const override { return "switch"; }
  void on_start(Time now) override;
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t port, Time now) override;
  void report_counters(CounterSink& sink) const override;

  // ---- control API (engine thread) ----
  // Validates `cfg` whole and applies it between bursts; on error nothing
  // changes and the message names the field. A change made this way
  // (rocemu fault, a scenario) while `nv set` has staged changes is
  // carried into the pending copy, except where that copy changed the
  // same setting itself: a later `nv config apply` does not undo it.
  Status apply(const SwitchConfig& cfg);
  const SwitchConfig& config() const { return cfg_; }
  // NVUE-style commands: {"set","qos","roce","mode","lossless"},
  // {"unset","qos","roce"}, {"show","interface","swp1","qos","roce","counters"},
  // {"action","clear","interface","swp1","qos","roce","counters"}. `set`
  // and `unset` edit the pending configuration, {"config","apply"} applies
  // it (switch/nvue_config.cc); `show` fills `out`, `config diff|show|apply`
  // put their text there as a JSON string.
  Status nv(const std::vector<std::string>& words, nlohmann::json* out = nullptr);
  // The pending configuration, if `nv set`/`nv unset` staged one.
  const std::optional<SwitchConfig>& pending() const { return pending_; }
  void clear_counters();
  void clear_counters(uint16_t port);

  // `nv show` views (switch_show.cc, nvue_show.cc): NVUE's keys, columns
  // and order; Switch::nv prints them as tables, or as plain values with
  // -o json|yaml. The show_* calls are the plain values, for tests and tools.
  NvView view_qos_roce() const;                        // nv show qos roce
  NvView view_roce_counters(uint16_t port) const;      // interface <if> qos roce counters
  NvView view_roce_status(uint16_t port) const;        // interface <if> qos roce status
  NvView view_pfc_counters() const;                    // SONiC show pfc counters
  NvView view_queue_counters(uint16_t port) const;     // SONiC show queue counters
  NvView view_pfc_watchdog(std::optional<uint16_t> port = std::nullopt) const;  // pfcwd stats
  NvView view_pg_watermark(uint16_t port) const;       // priority-group watermark
  NvView view_buffer_pools() const;                    // qos buffer
  NvView view_interface(uint16_t port) const;          // interface <if>: link, headroom, drops
  NvView view_routes() const;                          // vrf
  NvView view_vxlan() const;                           // nve vxlan: settings, VNIs, the VTEP's counters
  // system forwarding [ecmp-hash]: the hash fields (NVUE's order), hash seed,
  // load balancing and packet trimming; with `ecmp_hash_only` the fields alone.
  NvView view_system_forwarding(bool ecmp_hash_only = false) const;
  // `interface <if> counters qos [egress-queue-stats|ingress-buffer-stats|pfc-stats]`
  Status view_counters_qos(uint16_t port, const std::vector<std::string>& rest, NvView& out) const;
  ojson show_qos_roce() const { return view_qos_roce().plain(); }
  ojson show_roce_counters(uint16_t port) const { return view_roce_counters(port).plain(); }
  ojson show_pfc_watchdog() const { return view_pfc_watchdog().plain(); }
  ojson show_interface(uint16_t port) const { return view_interface(port).plain(); }
  ojson show_routes() const { return view_routes().plain(); }

  // ---- state for tests and tools ----
  const Mmu& mmu() const { return mmu_; }
  const PortCounters& counters(uint16_t port) const { return ports_[port]->counters; }
  const QueueCounters& queue_counters(uint16_t port, uint8_t tc) const { return ports_[port]->queue_counters[tc]; }
  const PgCounters& pg_counters(uint16_t port, uint8_t pg) const { return ports_[port]->pg_counters[pg]; }
  const WatchdogCounters& watchdog_counters(uint16_t port, uint8_t tc) const { return ports_[port]->wd[tc].counters; }
  bool watchdog_storm(uint16_t port, uint8_t tc) const { return ports_[port]->wd[tc].storm; }
  Time watchdog_detected_at(uint16_t port, uint8_t tc) const { return ports_[port]->wd[tc].detected_at; }
  uint64_t pfc_rx_frames(uint16_t port, uint8_t prio) const { return ports_[port]->pfc_rx[prio]; }
  uint64_t pfc_tx_frames(uint16_t port, uint8_t prio) const { return ports_[port]->pfc_tx[prio]; }
  Duration rx_pause_duration(uint16_t port, uint8_t prio, Time now) const { return ports_[port]->pause[prio].duration(now); }
  Duration tx_pause_duration(uint16_t port, uint8_t prio, Time now) const { return ports_[port]->xoff[prio].duration(now); }
  bool xoff_asserted(uint16_t port, uint8_t prio) const { return ports_[port]->xoff[prio].on(); }
  uint32_t queue_length(uint16_t port, uint8_t tc) const { return ports_[port]->queue[tc].size(); }
  const Headroom& headroom(uint16_t port) const { return ports_[port]->headroom; }
  uint64_t port_speed(uint16_t port) const { return ports_[port]->speed; }
  wire::MacAddr port_mac(uint16_t port) const { return ports_[port]->mac; }
  uint32_t port_mtu(uint16_t port) const { return ports_[port]->mtu; }
  uint32_t port_cable_length(uint16_t port) const { return ports_[port]->cable_length; }
  bool port_watchdog(uint16_t port) const { return ports_[port]->watchdog; }
  const RouteTable* routes() const { return routes_.get(); }
  // ECMP's choices summed per egress port (nullopt: the port is in no group).
  std::vector<std::optional<EcmpCounters>> ecmp_port_counters() const;
  // The VTEP's counters (all zero when the switch is no VTEP).
  const VtepCounters& vtep_counters() const { return vtep_counters_; }
  // A VNI's counters (nullptr if the VTEP does not map it).
  const VniCounters* vni_counters(uint32_t vni) const;
  // The bridge: its counters and MAC table (nv show bridge domain br_default mac-table).
  const BridgeCounters& bridge_counters() const { return bridge_counters_; }
  std::vector<MacEntry> mac_table() const { return mac_table_.entries(current_time()); }
  NvView view_mac_table() const;
  // The fault stage of what a port receives (rocemu fault on an external port).
  FaultStage& port_faults(uint16_t port) { return ports_[port]->fault; }

 private:
  Status nv_stage(const std::vector<std::string>& words);
  // apply() without the rebase (nv config apply: the pending copy is the change).
  Status apply_running(const SwitchConfig& cfg);
  // After the running config went from `before` to cfg_ outside NVUE.
  void rebase_pending(const SwitchConfig& before);
  Status nv_config(const std::vector<std::string>& words, nlohmann::json* out);
  Status nv_action(const std::vector<std::string>& words, std::string& out);
  Status nv_show(const std::vector<std::string>& words, std::string& out);
  // The view of `interface <if> REST...` for one port.
  Status interface_view(uint16_t port, const std::vector<std::string>& rest, NvView& view) const;

  struct WatchdogQueue {
    bool storm = false;
    Time detected_at{0};
    WatchdogCounters counters;
  };
  struct PortRuntime {
    Switch* sw = nullptr;
    uint16_t index = 0;
    // derived from the configuration and the attached port
    wire::MacAddr mac{};
    uint64_t speed = 0;
    uint32_t mtu = 9216;
    uint32_t cable_length = 0;
    Headroom headroom;
    uint64_t slack_bytes = 0;  // real time: what the partner may send after XOFF (mmu.h)
    bool watchdog = false;
    bool batch_tx = false;  // DPDK ethdev: transmit in bursts
    // egress
    std::array<PacketQueue, kNumTc> queue;
    std::array<Time, kNumTc> last_dequeue{};
    Scheduler scheduler;
    rte_mbuf* hold[32];
    uint16_t n_hold = 0;
    PacketQueue control{16};  // ARP and other frames the switch makes
    Time next_tx{0};          // pacing when a fault lowers the rate
    Timer pace_timer;
    // PFC received: pause per priority
    std::array<PauseTimer, kNumPriorities> pause;
    Time pause_horizon{0};  // no priority is paused from then on
    std::array<Time, kNumPriorities> last_pause_rx{};
    std::array<uint64_t, kNumPriorities> pfc_rx{};
    Timer pause_timer;
    // PFC sent: XOFF per priority
    uint8_t xoff_mask = 0;
    uint8_t xon_pending = 0;
    bool pfc_pending = false;
    std::array<XoffTimer, kNumPriorities> xoff;
    std::array<uint64_t, kNumPriorities> pfc_tx{};
    Timer refresh_timer;
    // faults: the stage holds what it delays until due
    FaultStage fault;
    Timer delay_timer;
    bool storm_pending = false;
    Timer storm_timer;
    // watchdog
    std::array<WatchdogQueue, kNumTc> wd;
    // counters
    PortCounters counters;
    std::array<QueueCounters, kNumTc> queue_counters;
    std::array<PgCounters, kNumPg> pg_counters;

    void on_pause_expiry(Time now);
    void on_refresh(Time now);
    void on_delay(Time now);
    void on_storm(Time now);
    void on_pace(Time now);
  };

  // The engine's time (control path; the data path is handed `now`).
  Time current_time() const;
  // configuration -> runtime
  Status rebuild(const SwitchConfig& cfg, Time now);
  void derive_port(PortRuntime& p, const SwitchConfig& cfg, bool load_faults);

  // receive path (switch_rx.cc)
  void process(uint16_t in, rte_mbuf** pkts, uint16_t n, Time now);
  void fault_stage(PortRuntime& in, rte_mbuf** pkts, uint16_t& n, Time now);
  void forward(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, Time now);  // v: rewritten as the packet leaves
  uint8_t classify(const wire::PacketView& v) const;
  // `inner`: the inner packet of a VXLAN frame `v`, trimmed instead of the outer one.
  bool enqueue_trimmed(PortRuntime& in, PortRuntime& out, rte_mbuf* m, const wire::PacketView& v,
                       const wire::PacketView* inner, uint8_t pg, uint8_t tc, Time now);
  void enqueue(PortRuntime& in, PortRuntime& out, rte_mbuf* m, uint8_t sp, uint8_t pg, uint8_t tc,
               IngressPlace where, Time now);
  bool route_checks(PortRuntime& in, rte_mbuf* m, const wire::PacketView& v, const NextHop* nh, uint32_t member,
                    Time now);
  // VXLAN (switch_vxlan.cc). decapsulate: strips the outer headers of a
  // frame to this VTEP, v then describes the inner one; false if dropped
  // (counted; the caller frees it). encapsulate: routes the inner packet
  // into the tunnel `nh` and the outer one to the underlay; the underlay
  // next hop, v describing the outer packet, or nullptr if dropped.
  // `vni`: the index in vnis_ of the frame's VNI.
  bool decapsulate(rte_mbuf* m, wire::PacketView& v, size_t& vni);
  const NextHop* encapsulate(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, const NextHop& nh, uint32_t member,
                             Time now);
  bool strip_vlan(rte_mbuf* m, wire::PacketView& v);
  // Removes the frame's 802.1Q tag (the MACs move over it) and decodes it again into `v`.
  static wire::DecodeError untag(rte_mbuf* m, wire::PacketView& v);
  // Writes the inner ICRC (as the wire would carry it) and cuts an IP
  // frame's Ethernet padding: the inner frame as it goes into the tunnel.
  static void seal_inner(rte_mbuf* m, const wire::PacketView& v);
  // The outer headers in front of the inner frame `v` (sealed, its Ethernet
  // header final) to the remote VTEP `remote` in VNI `vni`, and the
  // underlay route; the next hop, v describing the outer packet, or
  // nullptr if dropped (counted).
  const NextHop* tunnel(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, uint32_t remote, uint32_t vni, Time now);

  // The bridge (switch_bridge.cc). A packet's class, from the headers as
  // received (trust -> switch priority -> PG, TC).
  struct Class {
    uint8_t sp = 0, pg = 0, tc = 0;
  };
  // Classification, the ingress counters and the PFC watchdog's ingress
  // drop: false if dropped (counted, freed).
  bool ingress(PortRuntime& in, rte_mbuf* m, const wire::PacketView& v, Class& cls);
  // Egress admission, trimming, ECN and the queue of `out` (m is consumed).
  void egress(PortRuntime& in, PortRuntime& out, rte_mbuf* m, wire::PacketView& v, const Class& cls, Time now);
  // A frame received on an access port of `vlan`, and a frame of a bridged
  // VNI decapsulated from `src_vtep` (m is consumed).
  void bridge_local(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, uint16_t vlan, Time now);
  void bridge_remote(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, size_t vni, uint32_t src_vtep,
                     const Class& cls, Time now);
  // To a local port of the VLAN (MTU checked), into the overlay to one
  // VTEP, or flooded (m is consumed).
  void bridge_to_port(PortRuntime& in, PortRuntime& out, rte_mbuf* m, wire::PacketView& v, const Class& cls, Time now);
  void bridge_to_vtep(PortRuntime& in, rte_mbuf* m, wire::PacketView& v, size_t vni, uint32_t vtep, const Class& cls,
                      Time now);
  void flood(PortRuntime& in, rte_mbuf* m, uint16_t vlan, std::optional<size_t> vni, bool to_overlay, const Class& cls,
             Time now);
  void learn(uint16_t vlan, const wire::MacAddr& mac, const MacPlace& place, Time now);
  // False (counted) for a source MAC no frame may carry: multicast or zero.
  bool valid_source(const wire::MacAddr& src);
  std::optional<MacPlace> find_mac(uint16_t vlan, const wire::MacAddr& mac, Time now);
  // A copy of `m` for one more flood target (nullptr: no mbuf, counted).
  rte_mbuf* flood_copy(rte_mbuf* m);
  // The runtime of the VTEP's VNIs (cfg_.vxlan.vnis, with their merged
  // flood lists and counters) and the bridge's VLANs.
  struct VniRuntime {
    uint32_t vni = 0;
    uint16_t vlan = 0;            // 0: routed
    std::vector<uint32_t> flood;  // remote VTEPs, host order: the VNI's list then the global one
    VniCounters counters;
  };
  std::optional<size_t> vni_index(uint32_t vni) const;
  // `fresh`: the bridge changed (access VLANs, VLANs, VNIs, mac-learning, the VTEP): forget what was learned.
  void rebuild_bridge(bool fresh);
  static bool same_bridge(const SwitchConfig& a, const SwitchConfig& b);
  void drop_no_buffer(PortRuntime& in, PortRuntime& out, rte_mbuf* m, uint8_t pg, uint8_t tc, bool ingress);
  void on_pfc(PortRuntime& in, const wire::PacketView& v, Time now);
  void on_arp(PortRuntime& in, const wire::PacketView& v, Time now);
  void send_arp(PortRuntime& out, uint16_t oper, const wire::IpAddr& target, const wire::MacAddr& tha,
                const wire::IpAddr& spa, const wire::MacAddr& dst, Time now);
  void glean(const NextHop& nh, const wire::IpAddr& dst, Time now);

  // transmit path (switch_tx.cc)
  // Marks a port as having something to send; flush_kicks() transmits on
  // every marked port (never re-entered from inside a transmit).
  void mark(PortRuntime& p);
  void flush_kicks(Time now);
  void kick(PortRuntime& p, Time now) {
    mark(p);
    flush_kicks(now);
  }
  void transmit(PortRuntime& p, Time now);
  rte_mbuf* next_frame(PortRuntime& p, Time now);
  // Whether next_frame() may find a frame (a paused queue counts too).
  static bool has_frame(const PortRuntime& p) {
    if (p.pfc_pending || p.storm_pending || !p.control.empty()) return true;
    for (const PacketQueue& q : p.queue)
      if (!q.empty()) return true;
    return false;
  }
  uint8_t pg_priorities(uint8_t pg) const;
  uint8_t paused_tcs(PortRuntime& p, Time now);
  rte_mbuf* dequeue(PortRuntime& p, Time now);
  rte_mbuf* make_pfc_frame(PortRuntime& p, Time now);
  void update_xoff(PortRuntime& in, uint8_t pg, Time now);
  void check_xon(PortRuntime& in, uint8_t pg, Time now);
  void on_watchdog(Time now);
  void watchdog_detect(PortRuntime& p, uint8_t tc, Time now);
  void flush_queue(PortRuntime& p, uint8_t tc, Time now);
  void account_tx(PortRuntime& p, rte_mbuf* m);

  SwitchConfig cfg_;
  std::optional<SwitchConfig> pending_;  // staged by nv set/unset, applied by nv config apply
  bool started_ = false;
  bool faults_loaded_ = false;  // the ports' fault stages hold cfg_'s faults
  Mmu mmu_;
  std::unique_ptr<RouteTable> routes_;
  Status route_status_;
  std::vector<std::unique_ptr<PortRuntime>> ports_;
  // lookup tables derived from the QoS configuration
  std::array<uint8_t, kNumSwitchPriorities> sp_pg_{};
  uint8_t lossless_tcs_ = 0;
  uint8_t pfc_rx_prios_ = 0;  // priorities whose received PFC is honoured
  uint8_t pfc_tx_prios_ = 0;  // priorities this switch sends PFC for
  uint8_t roce_pg_ = 3, roce_tc_ = 3, cnp_tc_ = 6;
  uint8_t trim_tc_ = 0;
  Duration refresh_interval_{0};
  Timer watchdog_timer_;
  std::vector<uint16_t> touched_;
  std::vector<uint8_t> is_touched_;
  bool kicking_ = false;
  uint32_t vtep_ip_ = 0;  // the VTEP's source address (host order), 0 if no VTEP
  uint16_t vxlan_ip_id_ = 0;
  VtepCounters vtep_counters_;
  std::vector<VniRuntime> vnis_;
  std::array<int32_t, kMaxVlan + 1> vlan_vni_{};          // VLAN -> index in vnis_ (-1: none)
  std::array<std::vector<uint16_t>, kMaxVlan + 1> vlan_ports_;  // VLAN -> its access ports
  std::vector<uint16_t> port_vlan_;                       // port -> its access VLAN (0: routed port)
  MacTable mac_table_;
  BridgeCounters bridge_counters_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace rocemu::sw
