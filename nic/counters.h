// NIC counters, named as mlx5 names its hw_counters (and port counters) so
// the numbers read like those of a real ConnectX; the few without an mlx5
// equivalent say so in their help text.
#pragma once

#include <string>
#include <string_view>

#include "common/counters.h"

namespace rocemu::nic {

#define ROCEMU_NIC_COUNTERS(X)                                                                            \
  X(out_of_sequence, "responder: packets received with a PSN beyond the expected one")                    \
  X(packet_seq_err, "requester: NAK-sequence-error packets received")                                     \
  X(local_ack_timeout_err, "requester: Local ACK Timeout expiries (each spends one of retry_cnt)")        \
  X(rnr_nak_retry_err, "requester: RNR NAKs received")                                                    \
  X(duplicate_request, "responder: duplicate requests received")                                          \
  X(implied_nak_seq_err, "requester: ACKs for PSNs beyond an unanswered READ/atomic")                     \
  X(req_cqe_error, "completions with an error status on a send queue")                                    \
  X(req_cqe_flush_error, "send completions flushed (QP in error)")                                        \
  X(resp_cqe_error, "completions with an error status on a receive queue")                                \
  X(resp_cqe_flush_error, "receive completions flushed (QP in error)")                                    \
  X(req_remote_access_errors, "requester: remote access error NAKs received")                             \
  X(req_remote_invalid_request, "requester: invalid request NAKs received")                               \
  X(resp_remote_access_errors, "responder: requests refused for a bad rkey, range, access or XRC SRQ")           \
  X(resp_local_length_error, "responder: messages longer than the receive buffer")                        \
  X(resp_opcode_sequence_err, "responder: requests out of opcode sequence, a peer's bug (NAK Invalid Request)") \
  X(rx_write_requests, "responder: RDMA WRITE requests received")                                         \
  X(rx_read_requests, "responder: RDMA READ requests received")                                           \
  X(rx_atomic_requests, "responder: atomic requests received")                                            \
  X(rx_atomic_write_requests, "responder: RDMA ATOMIC WRITE requests received (no mlx5 name)")        \
  X(rx_dct_connect, "always 0: no DC transport")                                                          \
  X(roce_adp_retrans, "requester: retransmission episodes (a timeout or NAK that resent packets)")       \
  X(roce_adp_retrans_to, "requester: retransmission episodes started by the timer")                       \
  X(roce_slow_restart, "always 0: no slow restart")                                                       \
  X(rnr_nak_sent, "responder: RNR NAKs sent (no receive WQE)")                                            \
  X(nak_seq_sent, "responder: NAK-sequence-error packets sent")                                           \
  X(retransmitted_packets, "requester: packets sent again")                                               \
  X(np_ecn_marked_roce_packets, "RoCE packets received with ECN CE")                                      \
  X(np_cnp_sent, "CNPs sent")                                                                             \
  X(np_cnp_suppressed, "CE-marked packets that got no CNP (min_time_between_cnps; no mlx5 name)")          \
  X(rp_cnp_handled, "CNPs received and handled")                                                          \
  X(rp_cnp_ignored, "CNPs received for an unknown QP or a priority whose reaction point is off")                                                    \
  X(rx_icrc_encapsulated, "always 0: no encapsulation")                                                   \
  X(rx_icrc_error, "RoCE packets dropped for a bad ICRC (no mlx5 name; mlx5 drops silently)")              \
  X(rx_malformed, "frames that did not decode (no mlx5 name)")                                            \
  X(rx_not_for_us, "RoCE packets to another IP or an unknown QP (no mlx5 name)")                           \
  X(rx_wrong_state, "requests for a QP not in RTR/RTS (no mlx5 name)")                                    \
  X(rx_trimmed, "trimmed packets received (payload cut by a switch; no mlx5 name)")                       \
  X(rx_pfc_frames, "PFC frames received")                                                                 \
  X(tx_pfc_paused_time_ps, "picoseconds the port spent paused by PFC, any priority")                      \
  X(rx_arp, "ARP frames received")                                                                        \
  X(tx_arp, "ARP frames sent")                                                                            \
  X(tx_no_mbuf, "packets not sent for want of a buffer (retried)")                                        \
  X(cq_overflow, "completions lost to a full CQ (reported as an async error)")                            \
  X(dma_write_errors, "operations whose deferred writes into host memory failed (failed with them; no mlx5 name)") \
  X(rx_roce_packets, "RoCE packets received")                                                             \
  X(tx_roce_packets, "RoCE packets sent")                                                                 \
  X(rx_roce_bytes, "RoCE bytes received")                                                                 \
  X(tx_roce_bytes, "RoCE bytes sent")                                                                     \
  X(rx_ooo_buffered, "selective repeat: out-of-order packets kept for later")                             \
  X(rx_ooo_dropped, "selective repeat: out-of-order packets beyond the window")                           \
  X(rx_discards_uc, "UC: packets dropped with their message after a gap")                                 \
  X(out_of_buffer, "UD/UC messages dropped for want of a receive WQE")                                     \
  X(rx_ud_qkey_violation, "UD messages dropped for a wrong Q_Key (no mlx5 name)")

ROCEMU_COUNTER_SET(NicCounters, ROCEMU_NIC_COUNTERS);

// Per priority, as ethtool -S shows them on mlx5: the name with `prioN_`
// after its direction (rx_pause -> rx_prio3_pause).
#define ROCEMU_NIC_PRIO_COUNTERS(X)                                                                       \
  X(rx_pause, "PFC frames received for the priority")                                                     \
  X(rx_pause_duration, "microseconds the priority has been paused by PFC received")                      \
  X(rx_pause_transition, "times the priority went from paused (XOFF) to not paused (XON)")               \
  X(tx_pause, "always 0: the NIC sends no PFC (it never runs out of receive buffer)")                    \
  X(tx_pause_duration, "always 0: the NIC sends no PFC")

ROCEMU_COUNTER_SET(NicPrioCounters, ROCEMU_NIC_PRIO_COUNTERS);

// "rx_pause", 3 -> "rx_prio3_pause"
std::string prio_counter_name(std::string_view name, int prio);

}  // namespace rocemu::nic
