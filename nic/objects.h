// Verbs objects as the NIC keeps them: protection domains, memory regions
// (lkey/rkey, access, bounds), completion queues, shared receive queues and
// address handles. Each belongs to a host context (one application) whose
// memory the NIC reaches through a HostMemory.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "common/wire/ip.h"
#include "nic/dma.h"
#include "nic/queues.h"

namespace rocemu::nic {

// A host: one application process (or a test) using the NIC.
struct HostContext {
  uint32_t id = 0;
  HostMemory* memory = nullptr;
  bool dead = false;  // the process went away; its objects are being torn down
  // What its application holds, against NicConfig::app_quota: shared by
  // every context the application has opened on this NIC.
  struct Usage {
    uint32_t qps = 0, cqs = 0, mrs = 0, mws = 0, srqs = 0;
    uint64_t queue_bytes = 0;
  };
  uint64_t owner = 0;
  std::shared_ptr<Usage> usage;
  // Asynchronous events (CQ overflow, QP fatal errors, ...).
  std::function<void(const ibv_async_event&)> on_async_event;
};

struct Pd {
  uint32_t handle = 0;
  HostContext* ctx = nullptr;
};

struct Mw;

// The memory windows bound to an MR or through a QP: a list threaded
// through the windows themselves (Mw::on_mr, Mw::on_qp), so that binding
// and unbinding allocate nothing and unbinding them all looks at these
// only (nic/memory_window.cc).
struct MwList {
  Mw* head = nullptr;
  uint32_t size = 0;
};
struct MwLinks {
  Mw* prev = nullptr;
  Mw* next = nullptr;
};

struct Mr {
  uint32_t key = 0;  // lkey == rkey
  Pd* pd = nullptr;
  uint64_t addr = 0;       // I/O virtual address: what WQEs and RETHs name
  uint64_t host_addr = 0;  // where the bytes live in the host
  uint64_t length = 0;
  int access = 0;          // enum ibv_access_flags
  bool invalidated = false;
  uint64_t pages = 0;      // 4 KiB pages its translation was made for (mlx5's mkey size)
  MwList windows;          // memory windows bound to it now (it may not go; unbound when it changes)

  bool contains(uint64_t a, uint64_t len) const {
    return a >= addr && len <= length && a - addr <= length - len;
  }
  // The host address of I/O address `a` (inside the MR).
  uint64_t host(uint64_t a) const { return host_addr + (a - addr); }
};

// A memory window (ibv_alloc_mw): a key granting remote access to part of
// an MR, bound and unbound by work requests on a QP (IBA 10.6.7), and
// unbound when its MR is reregistered to other memory, PD or key, or
// (type 2) when the QP it is bound to is destroyed; its MR cannot be
// deregistered while it is bound. Its rkey is kMwKeyBit | index << 8 |
// key byte: MR keys never have kMwKeyBit, so one rkey space holds both;
// the low byte is the consumer's (ibv_inc_rkey), chosen anew by each bind.
inline constexpr uint32_t kMwKeyBit = 0x80000000u;
struct Mw {
  uint32_t handle = 0;  // the NIC's name for it (dealloc)
  uint32_t rkey = 0;    // the key now: a peer's key must equal it
  Pd* pd = nullptr;
  ibv_mw_type type = IBV_MW_TYPE_1;
  // Bound: [addr, addr + length) of MR `mr_key` with `access` (remote
  // rights); a type 2 window only through QP `qpn`. Type 1 binds with
  // length 0 (no MR) leave it valid but granting nothing; a type 2 window
  // is free until bound and again once invalidated.
  bool bound = false;
  uint32_t mr_key = 0;
  uint64_t addr = 0, length = 0;
  int access = 0;
  uint32_t qpn = 0;
  MwLinks on_mr, on_qp;  // on its MR's list while bound; a type 2 one on its QP's too

  bool contains(uint64_t a, uint64_t len) const {
    return a >= addr && len <= length && a - addr <= length - len;
  }
};

// Keys are (slot + 1) << kGenBits | generation, so a stale key never finds
// a new object. Freed slots are reused first in, first out, and only once
// kReuseDelay others wait behind them: a slot's key comes back after at
// least 2^kGenBits * (kReuseDelay + 1) insertions (4.2 million), not 256
// as with last-in-first-out slots and 8-bit generations (a key a peer kept
// would reach the next MR of the slot). The table holds at most what is
// live plus kReuseDelay free slots. When all 2^SlotBits - 1 slots are
// taken, insert refuses (and the object goes): the caller gets neither a
// key nor the object, only the refusal to pass on (ENOMEM). SlotBits is a
// parameter for tests to fill a small table.
template <typename T, uint32_t SlotBits = 20>
class KeyedTable {
 public:
  static constexpr uint32_t kGenBits = 12;
  static constexpr uint32_t kSlotBits = SlotBits;
  static constexpr uint32_t kReuseDelay = 1024;
  static_assert(kSlotBits + kGenBits <= 32);

  struct Inserted {
    uint32_t key;
    T* obj;
  };
  [[nodiscard]] std::optional<Inserted> insert(std::unique_ptr<T> obj) {
    uint32_t slot;
    if (free_.size() > kReuseDelay) {
      slot = free_.front();
      free_.pop_front();
    } else if (items_.size() < (size_t(1) << kSlotBits) - 1) {
      slot = uint32_t(items_.size());
      items_.emplace_back();
      gens_.push_back(0);
    } else if (!free_.empty()) {
      slot = free_.front();
      free_.pop_front();
    } else {
      return std::nullopt;
    }
    gens_[slot] = (gens_[slot] + 1) & kGenMask;
    items_[slot] = std::move(obj);
    return Inserted{(slot + 1) << kGenBits | gens_[slot], items_[slot].get()};
  }
  T* find(uint32_t key) const {
    const uint32_t slot = (key >> kGenBits) - 1;
    if ((key >> kGenBits) == 0 || slot >= items_.size() || gens_[slot] != (key & kGenMask)) return nullptr;
    return items_[slot].get();
  }
  bool erase(uint32_t key) {
    if (find(key) == nullptr) return false;
    const uint32_t slot = (key >> kGenBits) - 1;
    items_[slot].reset();
    free_.push_back(slot);
    return true;
  }
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& p : items_)
      if (p) f(*p);
  }
  size_t size() const { return items_.size() - free_.size(); }

 private:
  static constexpr uint32_t kGenMask = (1u << kGenBits) - 1;
  std::vector<std::unique_ptr<T>> items_;
  std::vector<uint32_t> gens_;
  std::deque<uint32_t> free_;
};

class Cq {
 public:
  Cq(uint32_t handle, HostContext* ctx, Ring ring) : handle_(handle), ctx_(ctx), ring_(ring) {}
  uint32_t handle() const { return handle_; }
  HostContext* ctx() const { return ctx_; }
  uint32_t capacity() const { return ring_.entries(); }
  // Writes a completion; false (and the overflow flag) if the CQ is full.
  bool push(const Cqe& cqe, bool solicited);
  bool overflowed() const { return overflowed_; }
  // Called after a completion when the CQ was armed (completion channel).
  std::function<void()> on_event;
  uint32_t pending() const { return produced_ - ring_.consumer(); }

 private:
  uint32_t handle_;
  HostContext* ctx_;
  Ring ring_;
  uint32_t produced_ = 0;
  bool overflowed_ = false;
};

// A receive queue (a QP's own or shared). Entries are copied out and
// checked when consumed.
struct RecvEntry {
  uint64_t wr_id = 0;
  uint32_t num_sge = 0;
  Sge sge[16];
  uint64_t length = 0;  // sum of SGE lengths
};

class RecvQueue {
 public:
  RecvQueue() = default;
  RecvQueue(Ring ring, uint32_t max_sge) : ring_(ring), max_sge_(max_sge) {}
  bool valid() const { return ring_.valid(); }
  bool empty() const { return available() == 0; }
  // Entries posted and not yet taken. The producer index is the
  // application's to write: one more than a ring's worth ahead is not a
  // state the ring can be in, and the queue counts as empty (a flush then
  // ends, rather than completing 2^32 entries).
  uint32_t available() const {
    const uint32_t n = ring_.producer() - consumed_;
    return n <= ring_.entries() ? n : 0;
  }
  // Takes the next entry; false if empty. Malformed entries (too many SGEs)
  // come back with num_sge = UINT32_MAX so the caller reports an error.
  bool pop(RecvEntry& out);
  Ring& ring() { return ring_; }

 private:
  Ring ring_;
  uint32_t max_sge_ = 0;
  uint32_t consumed_ = 0;
};

// An XRC domain (ibv_open_xrcd): the scope in which XRC target QPs may
// deliver to XRC SRQs. Opened by one context with no file (fd -1), or
// shared by every context that opens it through the same file (keyed by
// the file's device and inode, as the kernel keys it). Each open is an
// XrcdRef the context holds; the domain goes with its last one.
struct Xrcd {
  uint64_t inode_dev = 0, inode = 0;  // both 0: private to its one opener
  uint32_t opens = 0;                 // XrcdRefs naming it
  uint32_t users = 0;                 // XRC SRQs and target QPs in it
};
struct XrcdRef {
  uint32_t handle = 0;
  HostContext* ctx = nullptr;
  Xrcd* xrcd = nullptr;
  uint32_t users = 0;  // SRQs and target QPs created through this open (close: EBUSY while any)
};

struct Srq {
  uint32_t handle = 0;
  Pd* pd = nullptr;
  RecvQueue rq;
  uint32_t limit = 0;  // srq_limit: event when fewer entries remain
  bool armed = false;
  // XRC SRQ (IBV_SRQT_XRC): its domain, the CQ its completions go to, and
  // the 24-bit number XRC requests name it by (XRCETH; ibv_get_srq_num).
  XrcdRef* xrcd = nullptr;
  Cq* cq = nullptr;
  uint32_t srqn = 0;
};

struct Ah {
  uint32_t handle = 0;
  Pd* pd = nullptr;
  wire::IpAddr dgid;
  uint8_t sgid_index = 0;
  uint32_t flow_label = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 64;
  uint8_t sl = 0;
};

}  // namespace rocemu::nic
