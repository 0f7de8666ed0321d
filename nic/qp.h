// Queue pair state: attributes set through modify_qp, the requester's view
// of the send queue (PSNs, retransmission), the responder's view of
// incoming requests, and the scheduling flags the NIC uses to send.
#pragma once

#include <infiniband/verbs.h>
#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "common/engine/timer_wheel.h"
#include "common/wire/build.h"
#include "common/wire/psn.h"
#include "nic/cc/cc.h"
#include "nic/objects.h"
#include "nic/tx_scheduler.h"
#include "nic/wc_status.h"

namespace rocemu::nic {

inline constexpr uint32_t kMaxSge = 16;
inline constexpr uint32_t kMaxInline = 256;
// The most READs/atomics a NIC can be configured to answer at once per QP
// (NicConfig::max_qp_rd_atom; rxe reports 128, mlx5 16).
inline constexpr uint32_t kMaxRdAtomic = 128;
// QPNs handed out: from kFirstQpn to 0xffffff (below are the special QPs).
inline constexpr uint32_t kFirstQpn = 0x11;
inline constexpr uint32_t kNumQpns = (1u << 24) - kFirstQpn;

// The first QPN after `qpn`, going round from 0xffffff to kFirstQpn, that
// `in_use` does not hold. There always is one: the NIC holds at most
// max_qp (< kNumQpns) QPs.
template <typename InUse>
uint32_t next_free_qpn(uint32_t qpn, InUse&& in_use) {
  do qpn = qpn >= 0xffffff || qpn < kFirstQpn ? kFirstQpn : qpn + 1;
  while (in_use(qpn));
  return qpn;
}

// A send WQE copied out of the ring and checked, plus its progress.
struct SendWork {
  uint64_t wr_id = 0;
  uint32_t index = 0;     // send queue index (free-running)
  uint8_t opcode = 0;     // enum ibv_wr_opcode
  uint16_t flags = 0;     // enum ibv_send_flags
  uint32_t imm = 0;       // network order as posted; or the rkey to invalidate
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
  uint32_t length = 0;
  uint8_t num_sge = 0;
  bool is_inline = false;
  std::array<Sge, kMaxSge> sge{};
  std::array<uint8_t, kMaxInline> inline_data{};
  uint32_t ud_ah = 0, ud_remote_qpn = 0, ud_remote_qkey = 0;
  uint32_t xrc_remote_srqn = 0;  // XRC initiator: the SRQ at the target

  // transport progress
  bool started = false;
  uint32_t first_psn = 0;
  uint32_t npkts = 0;          // PSNs this WQE uses
  bool done = false;           // transport finished; may complete once all earlier ones have
  ibv_wc_status status = IBV_WC_SUCCESS;
  uint32_t resp_pkts = 0;      // READ: response packets received in order

  uint32_t last_psn() const { return wire::psn_add(first_psn, int64_t(npkts) - 1); }
  bool is_read() const { return opcode == IBV_WR_RDMA_READ; }
  bool is_atomic() const {
    return opcode == IBV_WR_ATOMIC_CMP_AND_SWP || opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
  }
  // RDMA ATOMIC WRITE: 8 bytes (carried as inline data) stored at once;
  // answered like a READ of nothing, and counted as one (rxe).
  bool is_atomic_write() const { return opcode == IBV_WR_ATOMIC_WRITE; }
  bool needs_response() const { return is_read() || is_atomic() || is_atomic_write(); }
  // A bind or local invalidate: done inside the NIC, no packet, no PSN.
  bool is_local() const { return opcode == IBV_WR_BIND_MW || opcode == IBV_WR_LOCAL_INV; }
  bool signaled(bool sig_all) const { return sig_all || (flags & IBV_SEND_SIGNALED); }
};

// What a responder owes the requester, in order: read responses and
// atomic acknowledgements.
struct ResponderTask {
  enum Kind : uint8_t { kReadResponse, kAtomicAck } kind = kReadResponse;
  uint32_t psn = 0;        // PSN of the next response packet
  uint32_t req_psn = 0;    // PSN of the request it answers (its RdAtomicReplay)
  uint64_t va = 0;         // READ: next byte to send
  uint32_t remaining = 0;  // READ: bytes left
  uint32_t rkey = 0;       // READ: looked up again for every response
  bool first = true;
  uint64_t orig = 0;       // atomic result
  uint32_t xrc_srqn = 0;   // an XRC target's: the SRQ the request named (its PD checks the READ)
};

// A READ, atomic or ATOMIC WRITE the responder accepted, kept so a
// duplicate of it can be answered again (IBA 9.7.5.1.3; rxe's "resources"):
// a duplicate READ re-reads only bytes of the READ it repeats, a duplicate
// atomic gets the saved result, a duplicate ATOMIC WRITE its empty READ
// response (not stored again). A duplicate that matches none is not
// answered.
struct RdAtomicReplay {
  bool valid = false;
  bool atomic = false;
  uint32_t psn = 0;     // the request's PSN
  uint32_t npkts = 0;   // PSNs its responses use
  uint64_t va = 0;
  uint32_t length = 0;  // READ: bytes; atomic: 8
  uint32_t rkey = 0;
  uint64_t orig = 0;    // atomic result
  bool atomic_write = false;  // an ATOMIC WRITE (atomic too: executed once, answered by an empty READ response)
};

// kXrcSend: an XRC initiator (INI, IBV_QPT_XRC_SEND): a send queue only,
// its requests name the target's SRQ. kXrcRecv: an XRC target (TGT,
// IBV_QPT_XRC_RECV) in an XRC domain: no queues of its own, it delivers
// each request to the SRQ the request names.
enum class QpType : uint8_t { kRc, kUc, kUd, kXrcSend, kXrcRecv };
class Nic;

// Payload read ahead into frames, for hosts where each read is a system
// call: one call fills up to kFrames frames (512 KiB), each payload read
// straight to its place behind the headers. Each frame is keyed by what it
// carries (`key`, `pos`); a sender that wants something else drops them.
struct ReadAhead {
  static constexpr uint32_t kFrames = 128;
  // Where a frame's payload sits in its mbuf: behind room for the longest
  // header (VLAN + IPv6 + UDP + BTH + RETH + ImmDt = 98 bytes).
  static constexpr uint16_t kPayloadOff = RTE_PKTMBUF_HEADROOM + 104;
  uint32_t next = 0, count = 0;
  std::array<rte_mbuf*, kFrames> frames{};
  std::array<uint32_t, kFrames> key{};
  std::array<uint64_t, kFrames> pos{};
  bool holds(uint32_t k, uint64_t p) const { return next < count && key[next] == k && pos[next] == p; }
};

struct Qp {
  Nic* nic = nullptr;
  uint32_t qpn = 0;
  QpType type = QpType::kRc;
  HostContext* ctx = nullptr;
  Pd* pd = nullptr;
  Cq* send_cq = nullptr;
  Cq* recv_cq = nullptr;
  Srq* srq = nullptr;     // XRC target: the SRQ of the message in progress (set per request)
  XrcdRef* xrcd = nullptr;  // XRC target: its domain (through its first holder's open)
  // XRC target: who holds it -- its creator and each ibv_open_qp, by the
  // open of the domain each came through. It goes with its last holder;
  // ctx and xrcd are its first holder's (events, the host it lives in).
  struct TargetHold {
    HostContext* ctx;
    XrcdRef* xrcd;
    bool creator;  // the QP counts against its application's quota while it holds it
  };
  std::vector<TargetHold> holds;
  ibv_qp_cap cap{};
  bool sq_sig_all = false;
  ibv_qp_state state = IBV_QPS_RESET;
  MwList windows;  // type 2 memory windows bound through it now (unbound when it goes)

  // ---- attributes (ibv_modify_qp) ----
  uint16_t pkey_index = 0;
  uint8_t port_num = 1;
  uint32_t qkey = 0;
  int access = 0;
  ibv_mtu path_mtu = IBV_MTU_1024;
  uint32_t mtu = 1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint8_t max_rd_atomic = 0;       // initiator depth
  uint8_t max_dest_rd_atomic = 0;  // responder resources
  uint8_t min_rnr_timer = 0;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  ibv_ah_attr ah{};

  // ---- path (derived at RTR) ----
  wire::PathHeaders path;
  wire::IpAddr dst_ip;
  uint8_t priority = 0;     // IEEE priority for PFC
  uint16_t egress_port = 0;
  bool neighbor_ok = false;  // destination MAC known

  // ---- queues ----
  Ring sq;
  RecvQueue rq;
  std::vector<SendWork> swq;  // indexed by send queue index & (entries - 1)

  // ---- requester ----
  struct RequesterState {
    uint32_t sq_fetched = 0;    // next send queue index to copy from the ring
    uint32_t sq_head = 0;       // oldest WQE not completed
    uint32_t sq_send = 0;       // WQE the next packet belongs to
    uint32_t send_psn = 0;      // PSN of the next packet to send
    uint32_t next_new_psn = 0;  // PSN for the next WQE not started yet
    uint32_t una_psn = 0;       // oldest PSN not acknowledged
    uint32_t sent_high = 0;     // one past the highest PSN ever sent
    bool any_outstanding = false;
    uint32_t pkts_since_ack_req = 0;
    uint32_t rd_atomic_outstanding = 0;
    uint32_t retry_left = 0;
    uint32_t rnr_left = 0;
    bool rnr_waiting = false;
    bool read_rewind_pending = false;  // a READ re-request is on its way
    uint32_t read_rewind_psn = 0;
    Timer retry_timer;
    Timer rnr_timer;
    // Read-ahead of payload (see ReadAhead): of this WQE and of the WRITEs
    // and SENDs posted behind it. Frames are keyed by WQE index and offset.
    ReadAhead prefetch;
    uint64_t retransmitted = 0;  // per-QP count of packets sent again
  } req;

  // ---- responder ----
  struct ResponderState {
    uint32_t epsn = 0;               // expected PSN
    uint32_t msn = 0;                // message sequence number
    uint8_t last_req_opcode = 0xff;  // for FIRST/MIDDLE/LAST sequencing
    bool in_message = false;
    RecvEntry recv;                  // receive WQE of the SEND in progress
    bool recv_valid = false;
    uint64_t recv_offset = 0;
    // A write of the message in progress (its PSNs start at message_psn; a
    // UD datagram is its own message) failed: the message's receive
    // completion reports it and clears it (note_dma_failure, write_recv_cqe).
    uint32_t message_psn = 0;
    bool message_data_lost = false;
    uint32_t write_rkey = 0;         // WRITE in progress (looked up per packet: the MR may go)
    uint64_t write_va = 0;
    uint64_t write_remaining = 0;
    uint32_t write_total = 0;
    bool ack_pending = false;
    uint32_t ack_psn = 0;
    uint8_t ack_syndrome = 0;
    ReadAhead response_prefetch;     // READ responses: keyed by PSN and address
    std::deque<ResponderTask> tasks;
    std::array<RdAtomicReplay, kMaxRdAtomic> rd_atomic_log{};
    uint32_t rd_atomic_log_next = 0;
  } resp;

  // ---- loss recovery (loss_recovery.h): the strategy's state, both sides ----
  struct RecoveryState {
    // Requester.
    std::deque<uint32_t> resend_psns;  // PSNs to send again, one each (before new ones)
    Time ack_timeout_at = kTimeNever;  // selective repeat: when the Local ACK Timeout expires
    uint8_t rto_backoff = 0;           // selective repeat: fast timer expiries since progress (it doubles each)
    // Responder.
    bool nak_sent = false;             // go-back-N: one NAK per gap
    std::vector<rte_mbuf*> ooo;        // selective repeat: out-of-order packets by (psn - epsn), until the hole fills
    uint32_t ooo_count = 0;
    uint32_t sr_nak_psn = 0xffffffff;  // the hole last NAKed
    uint32_t sr_ooo_since_nak = 0;     // out-of-order arrivals since
    bool trim_lost_valid = false;      // go-back-N: a trimmed packet ahead of epsn (lowest such PSN)
    uint32_t trim_lost_psn = 0;
    std::vector<uint8_t> ooo_trimmed;  // selective repeat: trimmed PSNs in the window, like ooo
  } lr;

  // ---- scheduling (tx_scheduler.h) and congestion control (cc/) ----
  TxGate tx_gate = TxGate::kNone;
  // Pacing: the last paced packet took a slot of `pace_bytes` wire bytes
  // from `pace_from` at the QP's rate; the next may go when it ends (at the
  // rate as it is then).
  Time pace_from{0};
  uint32_t pace_bytes = 0;
  uint32_t pace_gen = 0;       // tells a current wait-list entry from stale ones
  std::unique_ptr<cc::Flow> cc;  // opened on first use

  bool is_rc() const { return type == QpType::kRc; }
  // Where the responder's data goes and comes from: the host of the SRQ an
  // XRC target delivers to now (it may be another process sharing the
  // XRC domain), else the QP's own.
  HostMemory* responder_memory() const {
    return xrcd != nullptr && srq != nullptr ? srq->pd->ctx->memory : ctx->memory;
  }
  // May `c` modify, query or destroy it: its context's, or a holder's.
  bool held_by(const HostContext* c) const {
    if (holds.empty()) return ctx == c;
    for (const TargetHold& h : holds)
      if (h.ctx == c) return true;
    return false;
  }
  bool is_xrc() const { return type == QpType::kXrcSend || type == QpType::kXrcRecv; }
  // Reliable connected: ACKs, retransmission, READs and atomics (RC and XRC).
  bool reliable() const { return type == QpType::kRc || is_xrc(); }
  // The transport bits of its opcodes (IBA table 38).
  uint8_t opcode_transport() const {
    return type == QpType::kUc ? 0x20 : type == QpType::kUd ? 0x60 : is_xrc() ? 0xa0 : 0x00;
  }
  bool is_ud() const { return type == QpType::kUd; }
  SendWork& work(uint32_t index) { return swq[index & (swq.size() - 1)]; }
  bool can_send_requests() const { return state == IBV_QPS_RTS || state == IBV_QPS_SQD; }
  bool can_receive() const { return state == IBV_QPS_RTR || state == IBV_QPS_RTS || state == IBV_QPS_SQD; }
};

constexpr uint32_t mtu_bytes(ibv_mtu m) { return 128u << int(m); }
const char* qp_state_name(ibv_qp_state s);

// The attribute check of ibv_modify_qp: which attributes a transition
// requires and which it allows, for each QP type (IBA tables 91/92, as the
// kernel's ib_modify_qp_is_ok applies them). Returns false for a transition
// that does not exist or a mask that does not fit it.
bool modify_qp_is_ok(ibv_qp_state cur, ibv_qp_state next, QpType type, int mask);

}  // namespace rocemu::nic
