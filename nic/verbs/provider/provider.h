// librocemu-verbs.so: a libibverbs provider loaded with LD_PRELOAD. It
// defines the public libibverbs functions so that an unmodified program
// (perftest, ibverbs-utils) sees one device, "rocemu0", backed by an
// emulated NIC in the rocemu engine. Control calls are RPCs on a Unix
// socket; the data path is shared-memory queues and a doorbell. Only the
// public <infiniband/verbs.h> is used. No DPDK, no threads of its own.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "nic/host_queue.h"
#include "nic/verbs/protocol.h"

namespace rocemu::provider {

struct Context;

struct Device {
  ibv_device dev;  // must stay first
  std::string node;
  std::string socket_path;
};

// A thread domain (ibv_alloc_td): accepted, counted, and otherwise without
// effect (each context has one doorbell page; no per-thread resources).
struct Td {
  ibv_td td;
  std::atomic<int> domains{0};  // parent domains on it (ibv_dealloc_td: EBUSY)
};

// A PD, or a parent domain (ibv_alloc_parent_domain) standing in for one:
// it names the same PD to the engine (`handle`), adds a thread domain and
// allocators, and counts what was made through it.
struct Pd {
  ibv_pd pd;
  uint32_t handle = 0;
  Pd* protection = nullptr;  // a parent domain's PD; nullptr for a PD
  Td* td = nullptr;
  void* (*alloc)(ibv_pd*, void*, size_t, size_t, uint64_t) = nullptr;
  void (*free)(ibv_pd*, void*, void*, uint64_t) = nullptr;
  void* pd_context = nullptr;
  // A PD: the parent domains on it. A parent domain: the QPs, SRQs, MRs,
  // MWs and AHs made through it. Either way ibv_dealloc_pd answers EBUSY
  // while nonzero, as mlx5's refcount does.
  std::atomic<int> users{0};
};

// The resource types a parent domain's allocator is called with (its man
// page: the driver id in the upper 32 bits, a provider code below): this
// provider presents itself as Soft-RoCE, and what it places there is the
// ring memory it shares with the engine.
inline constexpr uint64_t kResourceQpRings = uint64_t(RDMA_DRIVER_RXE) << 32 | 1;
inline constexpr uint64_t kResourceSrqRing = uint64_t(RDMA_DRIVER_RXE) << 32 | 2;

// Ring memory of a queue made through `pd`: the engine's memfd `fd` (taken)
// mapped where a parent domain's allocator says, else anywhere; `external`
// says which. nullptr and errno on failure (the allocator's NULL: ENOMEM).
void* map_queue(ibv_pd* pd, int fd, size_t bytes, uint64_t resource_type, bool& external);
void unmap_queue(ibv_pd* pd, void* map, size_t bytes, uint64_t resource_type, bool external);
// Counts an object made through `pd` (a parent domain) while it lives.
void hold_domain(ibv_pd* pd);
void release_domain(ibv_pd* pd);

// The pages of an MR as shared with the engine (mr_pages.cc).
struct SharedPages {
  uint64_t first = 0, last = 0;  // the MR's whole pages
  int fd = -1;                   // -1: not shared, the engine takes process_vm_readv/writev
  uint64_t offset = 0;           // of `first` in fd (the provider's own: not to be closed)
  uint64_t region = 0;
};
// The pages of [addr, addr + length) moved onto a memfd the engine can map
// if that is safe (and `may_move`), else the fallback; each call is undone
// by unshare_pages() once the MR is gone.
SharedPages share_pages(uint64_t addr, uint64_t length, bool may_move = true);
void unshare_pages(const SharedPages& p);
// The same for an MR whose pages the engine may go on reaching after its
// context closed here (other processes share it, or the engine did not
// answer): moved pages stay on their memfd for good, as pinned pages.
void keep_pages(const SharedPages& p);

struct Mr {
  ibv_mr mr;
  SharedPages pages;
  bool imported = false;  // ibv_import_mr: another process's pages, none shared from here
};

// Memory windows (objects.cc); bound through the send queue (datapath.cc).
ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type);
int dealloc_mw(ibv_mw* mw);

struct Cq;
struct Channel {
  ibv_comp_channel ch;
  Context* ctx = nullptr;
  uint32_t id = 0;
  std::mutex lock;
  std::vector<Cq*> cqs;  // CQs bound to this channel
  int wake_fd = -1;      // the pipe's write end (the engine holds another)
  // Threads in ibv_get_cq_event polling the CQs' event counts, and
  // sleeping on the fd (under `lock`): the CQs are marked `polling` only
  // while someone polls and nobody sleeps.
  int pollers = 0;
  int sleepers = 0;
};

struct Cq {
  ibv_cq cq;
  uint32_t handle = 0;
  void* map = nullptr;
  size_t map_bytes = 0;
  nic::CqShadow shadow;
  Channel* channel = nullptr;
  uint32_t events_seen = 0;
  uint32_t empty_polls = 0;
  std::mutex lock;
};

struct Srq {
  ibv_srq srq;
  uint32_t handle = 0;
  void* map = nullptr;
  size_t map_bytes = 0;
  bool map_external = false;  // placed by a parent domain's allocator
  nic::RecvQueueShadow rq;
  std::mutex lock;
};

struct Ah {
  ibv_ah ah;
  uint32_t handle = 0;
};
// An open of an XRC domain (objects.cc).
struct Xrcd {
  ibv_xrcd xrcd;
  uint32_t handle = 0;
};
// XRC and the _ex object calls libibverbs reaches through verbs_context
// (objects.cc).
ibv_xrcd* open_xrcd(ibv_context* context, ibv_xrcd_init_attr* attr);
int close_xrcd(ibv_xrcd* xrcd);
ibv_srq* create_srq_ex(ibv_context* context, ibv_srq_init_attr_ex* attr);
int get_srq_num(ibv_srq* srq, uint32_t* srq_num);
ibv_qp* open_qp(ibv_context* context, ibv_qp_open_attr* attr);
ibv_qp* make_target_qp(Context& c, uint32_t qpn, void* qp_context);
// A QP of any type: `pd` null and `xrcd` set for an XRC target, whose
// CQs and SRQ `init` leaves null; the caller has checked what the type needs.
ibv_qp* create_qp(ibv_context* context, ibv_pd* pd, ibv_qp_init_attr* init, Xrcd* xrcd);

struct Qp {
  ibv_qp_ex qpx;  // must stay first: ibv_qp is its first member
  Context* ctx = nullptr;
  void* map = nullptr;
  size_t map_bytes = 0;
  bool map_external = false;  // placed by a parent domain's allocator
  nic::SendQueueShadow sq;
  nic::RecvQueueShadow rq;
  std::mutex send_lock, recv_lock;
  // ibv_wr_* between wr_start and wr_complete
  struct Pending {
    ibv_send_wr wr{};
    std::vector<ibv_sge> sge;
    std::vector<uint8_t> inline_data;
    uint32_t ah = 0;
  };
  std::vector<Pending> pending;
  int pending_error = 0;
};

struct Context {
  verbs_context vctx;  // must stay first
  Device* device = nullptr;
  int sock = -1;
  std::mutex rpc;
  pid_t engine_pid = 0;
  verbs::DeviceInfo info{};
  verbs::PortInfo port{};
  verbs::DoorbellPage* db = nullptr;
  size_t db_bytes = 0;
  int wake_fd = -1;
  std::atomic<bool> dead{false};
  std::mutex qps_lock;
  std::unordered_map<uint32_t, Qp*> qps;
  std::mutex mrs_lock;
  std::unordered_set<Mr*> mrs;  // their pages go back at ibv_close_device

  static Context* of(ibv_context* c) {
    return reinterpret_cast<Context*>(reinterpret_cast<char*>(c) - offsetof(verbs_context, context));
  }
};

// One RPC; `fds_out` receives any descriptors sent back. Returns 0 or an
// errno value (the reply's, or EIO/EPIPE if the engine went away).
int call(Context& c, verbs::Request& req, verbs::Reply& rep, const std::vector<int>& fds_in = {},
         std::vector<int>* fds_out = nullptr);
// The same on any connection to the engine (an rdma_cm channel's).
int call(int sock, std::mutex& rpc, std::atomic<bool>& dead, verbs::Request& req, verbs::Reply& rep,
         const std::vector<int>& fds_in = {}, std::vector<int>* fds_out = nullptr);
// A new connection to the engine's socket, or -1 (errno).
int connect_engine(const std::string& path);
// Rings the doorbell of a QP.
void ring_doorbell(Context& c, uint32_t entry);
// True once the engine is gone (socket hung up); checked cheaply.
bool engine_gone(Context& c);
void* map_fd(int fd, size_t bytes);

// Filled in by datapath.cc and domains.cc.
void init_context_ops(Context& c);
void init_domain_ops(Context& c);
int dealloc_parent_domain(Pd* p);
void init_qp_ex(Qp& q);

}  // namespace rocemu::provider
