// The control protocol between the verbs provider (preloaded into an
// application) and the engine: one SOCK_SEQPACKET Unix socket per
// application, one request and one reply per message, file descriptors
// (shared queue memory, eventfds) passed with SCM_RIGHTS. Both sides are
// built from this header, so messages are plain structs with a version.
//
// The data path does not use the socket: send/receive/completion queues
// live in shared memory (nic/queues.h); the application rings a doorbell
// by adding the QP to the context's doorbell ring and, if the engine
// sleeps, writing its wake eventfd.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "nic/queues.h"

namespace rocemu::verbs {

// 14: a completion channel comes with a write end of its own (kCreateChannel).
inline constexpr uint32_t kProtocolVersion = 14;
inline constexpr const char* kDeviceName = "rocemu0";
inline constexpr int kMaxGids = 16;

enum class Op : uint32_t {
  kHello = 1,
  kQueryPort,
  kAllocPd,
  kDeallocPd,
  kRegMr,          // request fd (optional): a sealed memfd holding the MR's pages (map_bytes)
  kDeregMr,
  kAllocMw,        // a memory window; reply mw
  kDeallocMw,
  kCreateChannel,  // reply fd: the read end of the channel's pipe (the engine writes the other)
  kDestroyChannel,
  kCreateCq,       // reply fd: ring memory
  kDestroyCq,
  kCreateSrq,      // reply fd: ring memory
  kModifySrq,
  kDestroySrq,
  kCreateQp,       // reply fd: send and receive rings
  kModifyQp,
  kQueryQp,
  kDestroyQp,
  kCreateAh,
  kDestroyAh,
  kGetAsyncEvent,  // non-blocking: the oldest pending event, or EAGAIN
  kCli,            // a CLI command (words separated by NUL); the reply's text follows in a second message
  kServeSysfs,     // request fd: /dev/fuse of a mount of a NIC's /sys/class/infiniband (nic/verbs/sysfs_fuse.h)
  kReregMr,
  // /dev/infiniband/rdma_cm (nic/verbs/ucma.h): a connection of its own per
  // open of the device. kCmOpen names the node; reply fd: an eventfd
  // (semaphore) counting the channel's queued events, the application's
  // descriptor for the device.
  kCmOpen,
  kCmCommand,  // a ucma command as written; reply: the response and where it goes
  // ibv_import_device: request fd: the command file of a context (what
  // kHello handed its opener as fd 2, ibv_context::cmd_fd); reply as
  // kHello's, with fds 0 and 1 only. The session then shares that context.
  kImportContext,
  kImportPd,  // handle: ENOENT unless a PD of the context
  kImportMr,  // handle (the MR's key): reply imported_mr, or ENOENT
  // XRC (ibv_open_xrcd, ibv_close_xrcd, ibv_get_srq_num).
  kOpenXrcd,   // reply handle
  kCloseXrcd,
  kGetSrqNum,  // reply handle: the SRQ's number
  kOpenQp,     // ibv_open_qp of an XRC target: open_qp
  // ibv_close_device: the session leaves its context before the reply
  // (reply left); then it only closes. The provider moves its MRs' pages
  // back to private memory only once the engine has said that no other
  // process shares the context (the engine reaches them no more).
  kLeave,
};
inline constexpr size_t kUcmaMax = 512;
inline constexpr size_t kCliMax = 2048;

struct GidRow {
  uint8_t raw[16];
  uint32_t type;  // enum ibv_gid_type
};

struct DeviceInfo {
  uint64_t node_guid;
  uint8_t mac[6];
  uint16_t num_gids;
  GidRow gids[kMaxGids];
  uint32_t max_qp, max_qp_wr, max_sge, max_cq, max_cqe, max_mr, max_srq, max_srq_wr, max_qp_rd_atom,
      max_qp_init_rd_atom;
  uint32_t max_inline;
  uint64_t max_mr_size;
};

struct PortInfo {
  uint32_t state;        // enum ibv_port_state
  uint32_t active_mtu;   // enum ibv_mtu
  uint64_t rate_bps;
  uint32_t link_mtu;     // Ethernet MTU
};

struct QpCreate {
  uint32_t type;  // IBV_QPT_RC / UC / UD / XRC_SEND / XRC_RECV
  uint32_t pd, send_cq, recv_cq, srq;
  uint32_t xrcd;  // IBV_QPT_XRC_RECV: its domain
  ibv_qp_cap cap;
  uint32_t sq_sig_all;
};

struct QpCreated {
  uint32_t qpn;
  ibv_qp_cap cap;
  uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
  uint64_t rq_offset;    // into the shared memory
  uint64_t map_bytes;
};

struct Request {
  uint32_t version = kProtocolVersion;
  Op op{};
  union {
    struct {
      char node[64];
      int32_t pid;
    } hello;
    struct {
      uint32_t handle;
    } handle;
    struct {
      uint32_t pd;
      uint32_t access;
      uint64_t addr, length, iova;
      // With an fd: the pages from addr's down to the one holding the last
      // byte are the fd's bytes [map_offset, map_offset + map_bytes),
      // mapped there by the application (the engine maps them too and
      // copies with memcpy). map_bytes 0: no fd, process_vm_readv/writev.
      uint64_t map_offset, map_bytes;
    } reg_mr;
    struct {
      uint32_t pd;
      uint32_t type;  // enum ibv_mw_type
    } alloc_mw;
    struct {
      uint32_t entries;
      uint32_t channel;  // 0: none
    } create_cq;
    struct {
      uint32_t pd, entries, max_sge, limit;
      uint32_t xrcd, cq;  // an XRC SRQ (IBV_SRQT_XRC): both; else 0
    } create_srq;
    struct {
      // The file's identity (st_dev, st_ino), both 0 for fd -1: the
      // provider reads them; the engine keys shared domains by them.
      uint64_t inode_dev, inode;
      int32_t oflags;
    } open_xrcd;
    struct {
      uint32_t xrcd, qpn;
    } open_qp;
    struct {
      uint32_t handle, limit;
    } modify_srq;
    QpCreate create_qp;
    struct {
      uint32_t qpn;
      int32_t mask;
      ibv_qp_attr attr;
    } modify_qp;
    struct {
      uint32_t pd;
      ibv_ah_attr attr;
    } create_ah;
    struct {
      uint32_t length;
      char text[kCliMax];
    } cli;
    struct {
      char node[64];
    } serve_sysfs;
    struct {
      char node[64];
    } cm_open;
    struct {
      uint32_t length;
      uint8_t bytes[kUcmaMax];
    } ucma;
    struct {
      uint32_t key;
      uint32_t flags;   // enum ibv_rereg_mr_flags
      uint32_t pd;      // with IBV_REREG_MR_CHANGE_PD
      uint32_t access;  // with IBV_REREG_MR_CHANGE_ACCESS
      uint64_t addr, length;  // with IBV_REREG_MR_CHANGE_TRANSLATION
    } rereg_mr;
  } u{};
};

struct Reply {
  int32_t err = 0;   // 0 or an errno value
  uint32_t reserved = 0;
  union {
    struct {
      uint32_t ctx_id;
      int32_t engine_pid;
      // fd 0: doorbell page, fd 1: engine wake eventfd, fd 2 (kHello
      // only): the context's command file, ibv_context::cmd_fd
      uint64_t doorbell_bytes;
      DeviceInfo device;
      PortInfo port;
    } hello;
    PortInfo port;
    struct {
      uint32_t handle;
    } handle;
    struct {
      uint32_t key;
    } mr;
    struct {
      uint32_t key;
      uint32_t reserved;
      uint64_t iova, length;
    } imported_mr;
    struct {
      uint32_t handle, rkey;
    } mw;
    struct {
      uint32_t handle, entries;
      uint64_t bytes;
    } ring;
    QpCreated qp;
    struct {
      ibv_qp_attr attr;
      ibv_qp_init_attr init;
    } query_qp;
    struct {
      // 1: other processes go on sharing the context; the engine keeps
      // the MRs' windows (their memfd pages, as the kernel keeps an MR's
      // pages pinned) and reaches nothing else of the leaving process.
      uint32_t still_shared;
    } left;
    struct {
      uint32_t event_type;  // enum ibv_event_type
      uint32_t element;     // qpn / cq / srq handle
    } event;
    struct {
      uint64_t length;      // bytes of text in the next message
    } cli;
    struct {
      uint32_t channel;
    } cm_open;
    struct {
      uint64_t address;     // where the response goes in the application (0: none)
      uint32_t length;
      uint8_t bytes[kUcmaMax];
    } ucma;
  } u{};
};

// The doorbell page shared by an application context and the engine.
struct DoorbellPage {
  static constexpr uint32_t kEntries = 4096;
  std::atomic<uint32_t> engine_sleeping{0};  // set by the engine before it sleeps
  std::atomic<uint32_t> rescan{0};           // ring overflowed: look at every QP
  std::atomic<uint32_t> lock{0};             // application threads take turns
  uint32_t pad0[13];
  nic::RingIndex producer;  // application
  nic::RingIndex consumer;  // engine
  uint32_t entries[kEntries];  // doorbell entries: kind << 24 | qpn
};
inline constexpr uint32_t kDoorbellSend = 1u << 24;
inline constexpr uint32_t kDoorbellRecv = 2u << 24;

// Where the provider looks for the engine.
inline constexpr const char* kSocketEnv = "ROCEMU_SOCKET";
inline constexpr const char* kNodeEnv = "ROCEMU_NODE";
// A control call whose reply takes longer fails with ETIMEDOUT.
inline constexpr const char* kRpcTimeoutEnv = "ROCEMU_RPC_TIMEOUT_MS";
inline constexpr int kRpcTimeoutMs = 20000;
// "process_vm": the provider shares no MR pages with the engine, which then
// reaches all of them with process_vm_readv/writev (the fallback path,
// kept tested this way).
inline constexpr const char* kDmaEnv = "ROCEMU_DMA";
// Microseconds ibv_get_cq_event polls for an event before it sleeps on the
// channel's fd (0, the default: it sleeps at once, and every event wakes
// it). On 2 cores polling lost more bandwidth than it saved (a polling
// thread, runnable all along, can sit behind the engine thread with no
// wake-up to move it); with a core of its own it saves the engine the
// wake-ups.
inline constexpr const char* kEventPollEnv = "ROCEMU_EVENT_POLL_US";
inline constexpr int kEventPollUs = 0;

}  // namespace rocemu::verbs
