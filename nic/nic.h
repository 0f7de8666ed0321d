// The emulated RoCEv2 NIC: a Node with one Ethernet port. Verbs objects
// are created through the control API (called by the verbs provider's
// server, or directly by tests); work arrives in host queues (send/receive
// rings) and leaves as RoCEv2 packets; completions go to CQ rings.
//
// The transport is split as in kernel rxe: requester.cc (send queue to
// packets, retransmission), completer.cc (ACKs, NAKs and responses to
// completions), responder.cc (requests to memory writes, receive
// completions, ACK/NAK/read responses). nic.cc holds the port side
// (receive dispatch, ARP, PFC, transmit scheduling) and control.cc the
// verbs control path.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/engine/link.h"
#include "common/engine/node.h"
#include "common/log.h"
#include "common/wire/packet.h"
#include "nic/cc/cc.h"
#include "nic/cm/cm.h"
#include "nic/counters.h"
#include "nic/loss_recovery.h"
#include "nic/objects.h"
#include "nic/qp.h"
#include "nic/transport_states.h"
#include "nic/tx_scheduler.h"

namespace YAML {
class Node;
}

namespace rocemu::nic {

// Picks the LossRecoveryStrategy (nic/loss_recovery.h) a NIC is built with.
enum class LossRecovery : uint8_t { kGoBackN, kSelectiveRepeat };

struct NicConfig {
  wire::MacAddr mac{};
  std::vector<wire::IpAddr> ips;           // the first IPv4 one gives GID indexes 2 and 3
  uint8_t prefix_len = 24;                 // IPv4 subnet of the first address
  std::optional<wire::IpAddr> gateway;     // off-subnet destinations go to its MAC
  std::map<wire::IpAddr, wire::MacAddr> neighbors;  // static neighbour entries
  LossRecovery recovery = LossRecovery::kGoBackN;
  uint32_t sr_window = 512;                // selective repeat: packets in flight / kept out of order
  Duration sr_rto_low = us(100);           // selective repeat: timeout with <= 3 packets in flight (IRN)
  uint32_t sr_renak_packets = 32;          // selective repeat: NAK a hole again after this many later arrivals
  uint8_t default_traffic_class = 106;     // used when a QP sets 0: DSCP 26, ECT(0)
  bool ecn = true;                         // send data ECT(0)
  uint8_t trim_dscp = 11;                  // trimmed packets arrive with this DSCP
  uint8_t cnp_dscp = 48;                   // mlx5 roce_np cnp_dscp
  uint8_t cnp_prio = 6;                    // mlx5 roce_np cnp_802p_prio
  // Priorities whose received PFC pauses this NIC (mlnx_qos --pfc): a bit
  // per priority; every one unless the topology's `pfc` lists them.
  uint8_t pfc_priorities = 0xff;
  cc::CcConfig cc;                         // congestion control (cc/cc.h)
  std::array<uint8_t, 64> dscp_to_prio{};  // filled with dscp >> 3 (mlx5 trust dscp)
  bool vlan = false;                       // tag frames (PCP = priority)
  uint16_t vid = 0;
  uint32_t ack_req_every = 32;             // requester sets AckReq at least this often
  uint64_t port_rate_bps = 100'000'000'000ull;  // reported when the port is unconnected
  // Device capabilities and limits: what ibv_query_device reports and the
  // NIC enforces, as an mlx5 (ConnectX-6) reports them unless the topology
  // sets them (the keys of nic_kind.cc). Peers read some of them: perftest
  // sets max_rd_atomic from the remote side's max_qp_rd_atom.
  uint32_t max_qp = 16384;
  uint32_t max_mr = 65536;
  uint32_t max_cq = 65536;
  uint32_t max_srq = 65536;
  uint32_t max_cqe = 1 << 20;
  uint32_t max_qp_wr = 32768;
  uint32_t max_sge = kMaxSge;         // SGEs per send or receive WQE (at most kMaxSge)
  uint32_t max_qp_rd_atom = 16;       // READs/atomics a QP answers at once: max_dest_rd_atomic (<= kMaxRdAtomic)
  uint32_t max_qp_init_rd_atom = 16;  // READs/atomics a QP has outstanding: max_rd_atomic
  // What one application may hold, so that one cannot take the device
  // from the others: ENOMEM beyond it, as a provider out of resources.
  struct AppQuota {
    uint32_t qps = 4096;
    uint32_t cqs = 8192;
    uint32_t mrs = 16384;
    uint32_t mws = 16384;  // memory windows
    uint32_t srqs = 1024;
    uint64_t queue_bytes = 1ull << 30;  // memory of its send/receive/completion rings
  } app_quota;

  NicConfig();
};

// One row of the GID table.
struct GidEntry {
  wire::IpAddr gid;
  ibv_gid_type type;  // IBV_GID_TYPE_ROCE_V1 or IBV_GID_TYPE_ROCE_V2
};

class Nic final : public Node, private cm::Host {
 public:
  Nic(std::string name, NicConfig cfg);
  ~Nic() override;

  std::string_view kind() const override { return "nic"; }
  void on_start(Time now) override;
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t port, Time now) override;
  void report_counters(CounterSink& sink) const override;
  // ethtool's per-priority counter, e.g. (rx_pause_duration, 3): rx_prio3_pause_duration.
  uint64_t prio_counter(NicPrioCounters::Id id, int prio, Time now) const;

  // ---- device ----
  const NicConfig& config() const { return cfg_; }
  const std::vector<GidEntry>& gid_table() const { return gids_; }
  uint64_t link_rate_bps() const;
  uint32_t link_mtu() const;  // Ethernet MTU of the port
  ibv_mtu active_mtu() const;  // largest IB MTU whose packets fit the port
  bool link_up() const;
  const NicCounters& counters() const { return counters_; }
  NicCounters& counters() { return counters_; }
  const cc::Algorithm& congestion_control() const { return *cc_; }
  // Neighbours learned from ARP (static ones aside): at most kMaxNeighbors,
  // whatever the wire sends (Linux's gc_thresh3 default).
  static constexpr size_t kMaxNeighbors = 1024;
  size_t neighbor_cache_size() const { return arp_cache_.size(); }
  // Sets DCQCN knobs by their mlx5 names while running, as mlx5's
  // cc_params do: every QP uses them from its next event on. The algorithm
  // itself is chosen when the NIC is built. On error nothing changes.
  Status set_cc_knobs(const YAML::Node& knobs);
  // The node GUID (from the MAC, EUI-64, as mlx5 forms it), host order.
  uint64_t node_guid() const;
  // Every QP, in QPN order.
  template <typename F>
  void for_each_qp(F&& f) const {
    for (const auto& [qpn, qp] : qps_) f(static_cast<const Qp&>(*qp));
  }

  // ---- control path (verbs); each returns 0 or an errno value ----
  // Contexts of one `owner` (an application: the verbs server names the
  // process) share one quota, however many it opens; owner 0: a quota of
  // its own.
  HostContext* open_context(HostMemory* memory, uint64_t owner = 0);
  // Tears down everything the context owns (an application that exited or
  // died): its QPs stop at once, peers see retries then errors.
  void close_context(HostContext* ctx);
  HostContext* find_context(uint32_t id) const;
  int alloc_pd(HostContext* ctx, uint32_t& handle);
  int dealloc_pd(HostContext* ctx, uint32_t handle);
  // `iova` is the address the MR answers to in WQEs and RETHs (as
  // ibv_reg_mr_iova2); it defaults to addr.
  int reg_mr(HostContext* ctx, uint32_t pd, uint64_t addr, uint64_t length, int access, uint32_t& key,
             std::optional<uint64_t> iova = std::nullopt);
  // EINVAL while a memory window is bound to the MR (it then stays).
  int dereg_mr(HostContext* ctx, uint32_t key);
  // ibv_rereg_mr: `flags` (ibv_rereg_mr_flags) says which of pd, access
  // and the translation (addr, length; the I/O address becomes addr)
  // change. As mlx5: the key stays where its mkey can be changed in place
  // (a new PD, access changes among local/remote write, remote read,
  // atomic and relaxed ordering, a translation of no more pages than the
  // MR was made for); otherwise the MR gets a new key (`new_key`), the old
  // one and the windows bound to it are gone. An error changes nothing.
  int rereg_mr(HostContext* ctx, uint32_t key, int flags, uint32_t pd, uint64_t addr, uint64_t length, int access,
               uint32_t* new_key = nullptr);
  // Access flags an MR may have: EINVAL for an unknown flag, remote write
  // or atomic without local write, and on-demand paging, which this NIC
  // lacks (ib_check_mr_access in Linux 6.1, as for Soft-RoCE; from 6.2 on
  // the kernel answers EOPNOTSUPP). reg_mr and rereg_mr check with it.
  static int check_mr_access(int access);
  // ibv_import_pd / ibv_import_mr: the kernel's query of a handle in the
  // context (UVERBS_METHOD_QUERY_MR), ENOENT if it names nothing there
  // (an idr lookup that finds nothing).
  int query_pd(HostContext* ctx, uint32_t handle) const;
  int query_mr(HostContext* ctx, uint32_t key, uint64_t& iova, uint64_t& length) const;
  // The access flags of an MR of `ctx`, or -1.
  int mr_access(HostContext* ctx, uint32_t key) const;
  // ibv_alloc_mw: a window of `type` (1 or 2) in PD `pd`, unbound; `rkey`
  // its first key (in the MRs' key space, see kMwKeyBit). A type 1 window
  // is bound by ibv_bind_mw, a type 2 one by an IBV_WR_BIND_MW work request;
  // both are executed by the QP's requester (nic/memory_window.cc).
  int alloc_mw(HostContext* ctx, uint32_t pd, int type, uint32_t& handle, uint32_t& rkey);
  // Its key stops working at once, bound or not.
  int dealloc_mw(HostContext* ctx, uint32_t handle);
  // `entries` is the count asked for (at most max_cqe, or max_qp_wr for an
  // SRQ); the ring holds round_up_pow2(entries). Ring memory
  // (ring_bytes(round_up_pow2(entries), stride)) stays the caller's.
  int create_cq(HostContext* ctx, void* ring, uint32_t entries, uint32_t& handle);
  int destroy_cq(HostContext* ctx, uint32_t handle);
  Cq* find_cq(HostContext* ctx, uint32_t handle) const;
  // `xrcd` (an XRC domain handle of ctx, with `cq`): an XRC SRQ (IBV_SRQT_XRC),
  // numbered for XRC requests to name (srq_number).
  int create_srq(HostContext* ctx, uint32_t pd, void* ring, uint32_t entries, uint32_t max_sge, uint32_t limit,
                 uint32_t& handle, uint32_t xrcd = 0, uint32_t cq = 0);
  // ibv_get_srq_num: the XRC SRQ's number; EINVAL for another SRQ.
  int srq_number(HostContext* ctx, uint32_t handle, uint32_t& srqn) const;
  // ibv_open_xrcd: with a file (inode_dev, inode not both 0) the domain
  // every opener of that file shares: created with O_CREAT (else EAGAIN),
  // EINVAL with O_EXCL if it exists (the kernel's ib_uverbs_open_xrcd);
  // without one, a domain of its own. Each open is closed on its own.
  int open_xrcd(HostContext* ctx, uint64_t inode_dev, uint64_t inode, int oflags, uint32_t& handle);
  // ibv_close_xrcd: EBUSY while SRQs or target QPs created through this
  // open are there.
  int close_xrcd(HostContext* ctx, uint32_t handle);
  int modify_srq(HostContext* ctx, uint32_t handle, uint32_t limit);
  int destroy_srq(HostContext* ctx, uint32_t handle);
  Srq* find_srq(HostContext* ctx, uint32_t handle) const;

  struct QpInit {
    QpType type = QpType::kRc;
    uint32_t pd = 0, send_cq = 0, recv_cq = 0, srq = 0;
    uint32_t xrcd = 0;  // kXrcRecv: its XRC domain (no PD, CQs or rings)
    ibv_qp_cap cap{};
    bool sq_sig_all = false;
    void* sq_ring = nullptr;  // ring_bytes(sq_entries, send_wqe_stride(cap))
    void* rq_ring = nullptr;  // ring_bytes(rq_entries, recv_wqe_stride(cap)); unused with an SRQ
  };
  // Rounds the queue sizes up; `cap` is updated with what was granted.
  // Ring sizes for a request (before memory is allocated):
  static void qp_ring_sizes(const ibv_qp_cap& cap, uint32_t& sq_entries, uint32_t& sq_stride,
                            uint32_t& rq_entries, uint32_t& rq_stride);
  int check_qp_caps(const ibv_qp_cap& cap) const;
  int create_qp(HostContext* ctx, const QpInit& init, uint32_t& qpn, Time now);
  // The parts of create_qp: what each QP type needs and must not have.
  struct QpRefs {
    Pd* pd = nullptr;
    Cq *send_cq = nullptr, *recv_cq = nullptr;
    Srq* srq = nullptr;
    XrcdRef* xrcd = nullptr;
  };
  int find_qp_refs(HostContext* ctx, const QpInit& init, QpRefs& refs) const;
  int modify_qp(HostContext* ctx, uint32_t qpn, const ibv_qp_attr& attr, int mask, Time now);
  int query_qp(HostContext* ctx, uint32_t qpn, ibv_qp_attr& attr, ibv_qp_init_attr& init) const;
  // For an XRC target, one holder lets go; the QP goes with the last
  // (ibv_destroy_qp(3) of an opened QP).
  int destroy_qp(HostContext* ctx, uint32_t qpn);
  // ibv_open_qp: `ctx` holds XRC target `qpn` too, through its open
  // `xrcd` of the target's domain; EINVAL for another QP or domain.
  int open_qp(HostContext* ctx, uint32_t xrcd, uint32_t qpn);
  int create_ah(HostContext* ctx, uint32_t pd, const ibv_ah_attr& attr, uint32_t& handle);
  int destroy_ah(HostContext* ctx, uint32_t handle);
  Qp* find_qp(uint32_t qpn) const;

  // ---- connection manager (cm_port.cc; the protocol in cm/) ----
  // Runs f(cm) on the NIC's connection manager and re-arms its timer after
  // it: the control path's way in (engine thread).
  template <typename F>
  auto with_cm(Time now, F&& f) {
    if constexpr (std::is_void_v<decltype(f(*cm_))>) {
      f(*cm_);
      rearm_cm(now);
    } else {
      auto r = f(*cm_);
      rearm_cm(now);
      return r;
    }
  }
  const cm::ConnectionManager& connection_manager() const { return *cm_; }

  // ---- data path doorbells ----
  void sq_doorbell(Qp& qp, Time now);
  // New receive WQEs (a QP's own RQ or an SRQ); lets an RNR-stalled
  // responder continue at once for UD/UC and keeps SRQ limit events right.
  void rq_doorbell(Srq* srq, Time now);

 private:
  friend class NicTestPeer;
  // ---- nic.cc: port side ----
  void handle_frame(uint16_t port, rte_mbuf* m, Time now);
  RxDisposition dispatch(rte_mbuf* m, Time now);
  RxDisposition handle_roce(rte_mbuf* m, const wire::PacketView& v, Time now);
  void announce(Time now);
  void handle_arp(const wire::PacketView& v, Time now);
  void handle_pfc(const wire::PacketView& v, Time now);
  bool resolve_neighbor(Qp& qp, Time now);
  std::optional<wire::MacAddr> neighbor(const wire::IpAddr& ip);
  void learn_neighbor(const wire::IpAddr& ip, const wire::MacAddr& mac);
  void send_arp_request(const wire::IpAddr& ip, Time now);
  bool is_local_ip(const wire::IpAddr& ip) const;
  void activate(Qp& qp, Time now);
  // Where a packet to `dst` goes first: the gateway if off-subnet.
  wire::IpAddr next_hop(const wire::IpAddr& dst) const;
  static constexpr uint16_t kWirePort = 0;
  static constexpr uint16_t kLoopbackTx = 1;
  static constexpr uint16_t kLoopbackRx = 2;
  // ---- cm_port.cc: CM MADs on QP1, the CM's neighbours and timer ----
  RxDisposition handle_gsi(const wire::PacketView& v, Time now);
  Reach reach(const wire::IpAddr& ip, Time now) override;
  void send_mad(const wire::IpAddr& dst, const cm::Mad& mad, Time now) override;
  uint8_t path_mtu() override { return uint8_t(active_mtu()); }
  void make_cm();
  // Under scope NIC/cm: MADs and the ids and listeners there are now.
  void report_cm_counters(CounterSink& sink) const;
  void rearm_cm(Time now);
  void on_cm_timer(Time now);
  // ---- transmit scheduling (nic.cc; the lists in tx_scheduler.h) ----
  void pump(Time now);
  void on_pump(Time now) { pump(now); }
  void on_pace(Time now);
  void on_unpause(Time now);
  bool priority_paused(uint8_t prio, Time now) const { return pause_until_[prio] > now; }
  void send_control_frames(Time now);
  // Where `qp` must wait before its next packet goes out on port `out`;
  // kNone if it may send now.
  TxGate gate_for(Qp& qp, bool paced, uint16_t out, Time now);
  Time pace_due(Qp& qp);  // when the QP's last paced slot ends, at its rate now
  // Builds and sends the QP's next packet; false if no buffer was had.
  bool send_one(Qp& qp, bool resp, bool paced, uint16_t out, Time now);
  // Sends a frame on a port now; frees it if the port refuses.
  bool emit(uint16_t port, rte_mbuf* m, Time now);
  // ARP, CNP: queued ahead of QP traffic; one with a priority (a CNP)
  // waits while PFC pauses it.
  void send_control(rte_mbuf* m, Time now, uint8_t prio = kNoPriority);
  static constexpr uint8_t kNoPriority = 0xff;

  // ---- congestion control (nic.cc; the algorithm in cc/) ----
  cc::Flow& cc_flow(Qp& qp);
  static void rate_up_thunk(void* qp, Time now);
  void on_rate_up(Qp& qp, Time now);
  // Notification point: a CE-marked packet arrived on `qp`.
  void on_ce_marked(Qp& qp, Time now);
  void send_cnp(Qp& qp, Time now);

  // ---- requester.cc ----
  bool fetch_send_wqes(Qp& qp, Time now);
  void run_local_wqes(Qp& qp, Time now);
  bool requester_has_work(Qp& qp, Time now);
  uint16_t requester_port(Qp& qp);
  rte_mbuf* requester_make_packet(Qp& qp, Time now);
  rte_mbuf* make_request(Qp& qp, SendWork& w, uint32_t psn, Time now);
  rte_mbuf* make_ud_send(Qp& qp, SendWork& w, Time now);
  bool gather(Qp& qp, const SendWork& w, uint32_t offset, uint8_t* dst, uint32_t len);
  // The SGEs' pieces covering [offset, offset + len) of w, checked against
  // their MRs; 0 if one is not (or no longer) valid.
  size_t sge_pieces(Qp& qp, const SendWork& w, uint32_t offset, uint32_t len, HostPiece* pieces);
  rte_mbuf* take_prefetched(Qp& qp, const SendWork& w, uint32_t offset, bool& failed);
  bool fill_prefetch(Qp& qp, const SendWork& w, uint32_t offset, bool more);
  bool read_ahead_ok(const Qp& qp, const SendWork& w) const;
  bool fill_response_prefetch(Qp& qp, bool more);
  void drop_prefetch(Qp& qp);
  void drop_prefetch(ReadAhead& p);
  // Read-ahead, shared by requester and responder: how many frames to read
  // ahead now, one more empty frame for (key, pos) of `len` bytes (false
  // without an mbuf), and the read that fills them (dropping them if it
  // fails).
  uint32_t read_ahead_limit();
  bool add_ahead_frame(ReadAhead& p, iovec* dst, uint32_t len, uint32_t key, uint64_t pos);
  bool read_ahead(Qp& qp, ReadAhead& p, const HostPiece* pieces, size_t n_pieces, const iovec* dst);
  // The next read-ahead frame if it is the one for (key, pos); else the
  // frames held are dropped and fill(more) reads ahead anew -- first on
  // into what follows, then, if that fails (something behind is at fault:
  // its own turn will tell), this alone. nullptr with `failed` if this
  // cannot be read, nullptr alone if there is no mbuf.
  template <typename Fill>
  rte_mbuf* take_ahead(ReadAhead& p, uint32_t key, uint64_t pos, bool& failed, Fill&& fill) {
    if (p.next < p.count && !p.holds(key, pos)) drop_prefetch(p);
    if (p.next == p.count) {
      if (!fill(true) && !fill(false)) {
        failed = true;
        return nullptr;
      }
      if (p.count == 0) return nullptr;
    }
    return p.frames[p.next++];
  }
  // Deferred DMA writes: flushed before anything makes them visible. Each
  // names the operation it carries data for; a write the flush could not
  // do fails that operation (and only that one): at once its completion
  // status, then, once on_rx has `now`, its QP (handle_dma_failures).
  struct DmaOwner {
    Qp* qp;
    bool read_response;  // requester: a READ response for send WQE `id`; responder: the request at PSN `id`
    uint32_t id;
    static DmaOwner responder(Qp& qp) { return {&qp, false, qp.resp.epsn}; }
    static DmaOwner read_response_for(Qp& qp, uint32_t wqe_index) { return {&qp, true, wqe_index}; }
    bool operator==(const DmaOwner&) const = default;
  };
  bool dma_write(const DmaOwner& owner, uint64_t host_addr, const uint8_t* src, uint32_t len);
  void flush_dma();
  void note_dma_failure(const DmaOwner& owner);
  // True if READ responses of `qp` wait in the deferred writes.
  bool read_responses_pending(const Qp& qp) const;
  // The responder's message starting at `psn`: no data of it lost yet.
  static void start_message(Qp& qp, uint32_t psn) {
    qp.resp.message_psn = psn;
    qp.resp.message_data_lost = false;
  }
  void handle_dma_failures(Time now);
  void arm_retry_timer(Qp& qp, Time now);
  void schedule_retry_timer(Qp& qp, Time at);
  void on_retry_timer(Qp& qp, Time now);
  void on_rnr_timer(Qp& qp, Time now);
  static void retry_thunk(void* qp, Time now);
  static void rnr_thunk(void* qp, Time now);
  void rewind(Qp& qp, uint32_t psn, Time now);
  bool validate_local_sges(Qp& qp, SendWork& w);

  // ---- control.cc: the application's quota (NicConfig::app_quota) ----
  // Takes one object counted in `field` (at most `limit`) and `bytes` of
  // ring memory from what the context's application may hold; ENOMEM (a
  // provider out of resources) if it has no room left for them.
  int charge(HostContext* ctx, uint32_t HostContext::Usage::*field, uint32_t limit, uint64_t bytes = 0);
  void refund(HostContext* ctx, uint32_t HostContext::Usage::*field, uint64_t bytes = 0);

  // ---- memory_window.cc ----
  // A send WQE that touches no wire (IBV_WR_BIND_MW, IBV_WR_LOCAL_INV),
  // executed when the requester reaches it: the status it completes with.
  ibv_wc_status execute_local_wqe(Qp& qp, const SendWork& w);
  ibv_wc_status bind_mw(Qp& qp, const SendWork& w);
  ibv_wc_status local_invalidate(Qp& qp, uint32_t rkey);
  // The window whose key is `rkey` now (index and key byte), or nullptr.
  Mw* find_mw(uint32_t rkey) const;
  // The MR behind window key `rkey` if the window grants `access` to
  // [va, va + len) to this QP: its PD, type 2 bound to this QP, bounds and
  // rights of window and QP, the MR still there.
  // `pd`: the QP's, or an XRC target's SRQ's (the request's; response_pd).
  Mr* mw_grants(const Qp& qp, const Pd* pd, uint32_t rkey, uint64_t va, uint64_t len, int access) const;
  // SEND with invalidate naming a window key: false if it may not (not a
  // type 2 window of the QP's PD with that key).
  bool remote_invalidate_mw(const Qp& qp, uint32_t rkey);
  // A window unbound: it grants nothing (a type 2 one is free to bind
  // again), and it is off its MR's and QP's lists (MwList).
  void unbind_mw(Mw& mw);
  // Every window bound to the MR (reregistered to other memory, PD or
  // key), or every type 2 window bound through the QP (destroyed): those
  // on its list, no others looked at.
  void unbind_windows(Mr& mr);
  void unbind_windows(Qp& qp);

  // ---- completer.cc ----
  // A response packet, through the steps (CompState, transport_states.h).
  RxDisposition handle_response(Qp& qp, const wire::PacketView& v, Time now);
  struct Response;
  CompState check_response_state(Response& r);
  CompState check_response_trimmed(Response& r);
  CompState check_ack(Response& r);
  CompState on_ack(Response& r);
  CompState on_rnr_nak(Response& r);
  CompState on_nak(Response& r);
  CompState find_response_wqe(Response& r);
  CompState on_atomic_ack(Response& r);
  CompState check_read_psn(Response& r);
  CompState check_read_shape(Response& r);
  CompState on_read_response(Response& r);
  void ack_up_to(Qp& qp, uint32_t psn, Time now, bool from_response = false);
  void complete_send_queue(Qp& qp, Time now);
  void fail_send_queue(Qp& qp, ibv_wc_status status, Time now);
  void flush_qp(Qp& qp, Time now);
  void write_send_cqe(Qp& qp, const SendWork& w, ibv_wc_status status);
  void qp_to_error(Qp& qp, Time now);

  // ---- responder.cc ----
  // A request packet (the frame is kept only if the loss recovery takes it).
  RxDisposition handle_request(Qp& qp, rte_mbuf* m, const wire::PacketView& v, Time now);
  // The steps after the PSN check, for a packet at the expected PSN (the
  // loss recovery's reorder buffer hands its packets in here).
  void process_request(Qp& qp, const wire::PacketView& v, Time now);
  // The steps (RespState, transport_states.h) of one request packet.
  struct Request;
  RespState run_request(Request& r, RespState from);
  RespState check_psn(Request& r);
  RespState check_xrc_srq(Request& r);
  RespState check_op_seq(Request& r);
  RespState check_length(Request& r);
  RespState check_request_rkey(Request& r);
  RespState check_resources(Request& r);
  RespState check_duplicate(Request& r);
  RespState on_trimmed_request(Request& r);
  RespState on_out_of_sequence(Request& r);
  RespState uc_resync(Request& r);
  RespState execute(Request& r);
  RespState execute_read(Request& r);
  RespState execute_atomic(Request& r);
  RespState execute_atomic_write(Request& r);
  RespState execute_write(Request& r);
  RespState execute_send(Request& r);
  RespState replay_duplicate(Request& r);
  RespState complete_request(Request& r);
  void request_error(Request& r, RespState error);
  void responder_ud(Qp& qp, const wire::PacketView& v, Time now);
  bool scatter(Qp& qp, RecvEntry& r, uint64_t offset, const uint8_t* src, uint32_t len, ibv_wc_status& err);
  bool take_recv(Qp& qp, RecvEntry& out);
  void schedule_ack(Qp& qp, uint8_t syndrome, uint32_t psn, Time now);
  void responder_error(Qp& qp, ibv_wc_status status, uint8_t nak_syndrome, uint32_t psn, Time now);
  void write_recv_cqe(Qp& qp, const RecvEntry& r, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t byte_len,
                      uint32_t imm, int wc_flags, uint32_t src_qp, bool solicited,
                      uint8_t sl = 0);
  bool responder_has_work(const Qp& qp) const { return qp.resp.ack_pending || !qp.resp.tasks.empty(); }
  rte_mbuf* responder_make_packet(Qp& qp, Time now);
  // The MR `rkey` names if it grants `access` to [va, va + len) to this
  // QP (key and generation, PD `pd` -- the QP's, or for an XRC target the
  // PD of the SRQ the request named --, rights of MR and QP, not
  // invalidated); check_rkey counts a refusal.
  Mr* rkey_grants(const Qp& qp, const Pd* pd, uint32_t rkey, uint64_t va, uint64_t len, int access) const;
  Mr* check_rkey(Qp& qp, const Pd* pd, uint32_t rkey, uint64_t va, uint64_t len, int access);
  // The PD a READ's responses are checked against, and the host they are
  // read from: the QP's, or for an XRC target the PD of the SRQ the READ
  // named (nullptr once that SRQ is gone).
  const Pd* response_pd(const Qp& qp, const ResponderTask& t) const;
  // An XRC target's SRQ by the number a request names, if in its domain.
  Srq* xrc_srq_for(const Qp& qp, uint32_t srqn) const;
  // The MR `lkey` names if the NIC may write [addr, addr + len) of it for a
  // QP of `pd` (key and generation, PD, local write, not invalidated):
  // held against every packet of data that lands (SEND, READ response,
  // atomic result), so a key invalidated or gone mid-message takes no more.
  Mr* lkey_writable(const Pd* pd, uint32_t lkey, uint64_t addr, uint64_t len) const;
  // Trimmed by a switch: the trim DSCP and less payload than the packet
  // must carry (`expected`, or kUnknownLength: an MTU).
  static constexpr uint32_t kUnknownLength = UINT32_MAX;
  bool is_trimmed(const Qp& qp, const wire::PacketView& v, uint32_t expected) const;
  // What is_trimmed looks at before the length: the trim DSCP, a payload
  // opcode, no pad. False for most packets (ACKs always), at no cost.
  bool may_be_trimmed(const wire::PacketView& v) const;
  // What a request packet `d` PSNs from the expected one must carry, if
  // the responder can know.
  uint32_t request_length(const Qp& qp, const wire::PacketView& v, int32_t d) const;

  rte_mbuf* new_frame();
  void fill_path(Qp& qp);
  uint8_t prio_of(uint8_t dscp) const { return cfg_.dscp_to_prio[dscp & 63]; }

  NicConfig cfg_;
  // Loss recovery, chosen once from cfg_.recovery: the transport calls it
  // wherever go-back-N and selective repeat differ.
  friend class GoBackN;
  friend class SelectiveRepeat;
  std::unique_ptr<LossRecoveryStrategy> recovery_ = make_loss_recovery(*this, cfg_);
  std::vector<GidEntry> gids_;
  NicCounters counters_;
  std::shared_ptr<spdlog::logger> log_;

  // objects
  std::vector<std::unique_ptr<HostContext>> contexts_;
  uint32_t next_ctx_id_ = 1;
  std::map<uint64_t, std::weak_ptr<HostContext::Usage>> usage_by_owner_;  // by application
  KeyedTable<Pd> pds_;
  KeyedTable<Mr, 19> mrs_;  // 19 slot bits: MR keys stay below kMwKeyBit
  KeyedTable<Mw, 19> mws_;  // by handle
  std::unordered_map<uint32_t, Mw*> mw_by_index_;  // rkey >> 8 -> window
  uint8_t mw_key_byte_ = 0;  // the key byte a new window starts with
  KeyedTable<Cq> cqs_;
  KeyedTable<Srq> srqs_;
  // XRC: domains (each with its opens), and XRC SRQs by number.
  std::vector<std::unique_ptr<Xrcd>> xrcds_;
  KeyedTable<XrcdRef> xrcd_refs_;
  std::map<uint32_t, Srq*> xrc_srqs_;
  uint32_t next_srqn_ = 1;
  XrcdRef* find_xrcd(HostContext* ctx, uint32_t handle) const;
  // An SRQ goes: XRC targets delivering to it stop, its number is free.
  void forget_srq(Srq& srq);
  KeyedTable<Ah> ahs_;
  std::map<uint32_t, std::unique_ptr<Qp>> qps_;
  uint32_t next_qpn_ = kFirstQpn;

  // neighbours
  std::map<wire::IpAddr, wire::MacAddr> arp_cache_;  // at most kMaxNeighbors
  std::deque<wire::IpAddr> arp_order_;               // arp_cache_'s addresses, oldest first
  std::map<wire::IpAddr, Time> arp_pending_;  // last request sent
  std::vector<Qp*> waiting_for_arp_;
  Timer arp_timer_;
  void on_arp_timer(Time now);

  // connection manager
  std::unique_ptr<cm::ConnectionManager> cm_;
  Timer cm_timer_;
  std::map<wire::IpAddr, wire::MacAddr> cm_peers_;  // source MACs of CM MADs received: where replies go
  uint32_t gsi_psn_ = 0;

  // transmit scheduling
  TxScheduler sched_;
  std::unique_ptr<cc::Algorithm> cc_;        // chosen once, from cfg_.cc
  struct ControlFrame {
    rte_mbuf* m;
    uint8_t prio;
  };
  std::deque<ControlFrame> control_q_;       // ARP, CNP: sent before QP traffic
  std::array<Time, 8> pause_until_{};        // PFC received per priority
  std::array<NicPrioCounters, 8> prio_counters_{};  // rx_prioN_pause_duration is made when reported:
  std::array<Duration, 8> pause_granted_{};  // pause PFC gave each priority, up to pause_until_
  uint8_t xoff_ = 0;                         // priorities paused now (for the XON transitions)
  Duration pace_burst_{0};                   // real time: how late a paced QP may catch up
  Timer pump_timer_;
  Timer unpause_timer_;
  bool pumping_ = false;
  std::unique_ptr<InternalLink> loopback_;   // ports 1 -> 2: QP to QP on this NIC
  std::vector<HostMemory*> dirty_;           // hosts with deferred writes
  std::vector<DmaOwner> dma_owners_;         // tag -> owner of the deferred writes
  std::vector<DmaOwner> dma_failed_;         // responders whose writes failed, until handled
  std::vector<rte_mbuf*> held_;              // frames they write from
  rte_mbuf* rx_frame_ = nullptr;             // the frame being received
};

}  // namespace rocemu::nic
