// An application inside the engine's own process: verbs calls go straight
// to the NIC's control API, queues live in ordinary memory and DMA is
// memcpy. Virtual-time tests, scenarios and benchmarks use it to drive
// NICs exactly as the preloaded provider does over shared memory.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <vector>

#include "common/engine/engine.h"
#include "nic/host_queue.h"
#include "nic/nic.h"

namespace rocemu::nic {

class SimHost {
 public:
  struct Cq {
    uint32_t handle = 0;
    std::vector<uint8_t> mem;
    CqShadow shadow;
  };
  struct Qp {
    uint32_t qpn = 0;
    QpType type = QpType::kRc;
    std::vector<uint8_t> sq_mem, rq_mem;
    SendQueueShadow sq;
    RecvQueueShadow rq;
    nic::Qp* nic_qp = nullptr;
  };
  struct Srq {
    uint32_t handle = 0;
    uint32_t srqn = 0;  // XRC SRQ: its number
    std::vector<uint8_t> mem;
    RecvQueueShadow rq;
  };

  // With `batched_dma` the NIC reaches this host's memory as it reaches
  // another process's (read-ahead, deferred writes); see dma.h.
  SimHost(Engine& engine, Nic& nic, bool batched_dma = false);
  // The NIC reaches this host through `memory` (tests give it one that fails).
  SimHost(Engine& engine, Nic& nic, std::unique_ptr<HostMemory> memory);
  ~SimHost();
  SimHost(const SimHost&) = delete;
  SimHost& operator=(const SimHost&) = delete;

  Nic& nic() { return nic_; }
  HostContext* context() { return ctx_; }
  uint32_t pd() const { return pd_; }
  Time now() const { return engine_.now(); }
  HostMemory& memory() { return *memory_; }

  // Returns the key, or 0 with errno-style failure in `err`. With `iova`
  // the MR answers to that address instead of its own (ibv_reg_mr_iova2).
  uint32_t reg_mr(void* addr, size_t len, int access, int* err = nullptr, std::optional<uint64_t> iova = {});
  int dereg_mr(uint32_t key) { return nic_.dereg_mr(ctx_, key); }
  Cq* create_cq(uint32_t entries);
  Srq* create_srq(uint32_t entries, uint32_t max_sge = 1, uint32_t limit = 0);
  Qp* create_qp(QpType type, Cq* send_cq, Cq* recv_cq, ibv_qp_cap cap, bool sq_sig_all = false,
                Srq* srq = nullptr, int* err = nullptr);
  int destroy_qp(Qp* qp);
  // XRC: a domain of this host's own (fd -1; 0 and `err` on failure), an
  // SRQ in it completing to `cq`, an initiator (send queue only) and a
  // target in the domain. post_send takes an initiator's target SRQ from
  // wr.qp_type.xrc.remote_srqn; connect() pairs an initiator with a target.
  uint32_t open_xrcd(int* err = nullptr);
  int close_xrcd(uint32_t xrcd) { return nic_.close_xrcd(ctx_, xrcd); }
  // `pd` 0: the host's own.
  Srq* create_xrc_srq(uint32_t xrcd, Cq* cq, uint32_t entries, int* err = nullptr, uint32_t pd = 0);
  int destroy_srq(Srq* srq);
  Qp* create_xrc_send_qp(Cq* send_cq, ibv_qp_cap cap, int* err = nullptr);
  Qp* create_xrc_recv_qp(uint32_t xrcd, int* err = nullptr);
  // ibv_open_qp of another's target (through this host's open `xrcd` of its domain).
  Qp* open_xrc_recv_qp(uint32_t xrcd, uint32_t qpn, int* err = nullptr);
  int modify(Qp* qp, const ibv_qp_attr& attr, int mask) { return nic_.modify_qp(ctx_, qp->qpn, attr, mask, now()); }
  uint32_t create_ah(const ibv_gid& dgid, uint8_t sgid_index = 3, uint8_t traffic_class = 0);

  // Posts a chain of WRs and rings the doorbell; returns 0 or an errno,
  // `bad` pointing at the first one refused (as ibv_post_send does). UD
  // WRs carry the AH handle in wr.ud.ah as an integer.
  int post_send(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad = nullptr);
  int post_recv(Qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad = nullptr);
  int post_srq_recv(Srq* srq, ibv_recv_wr* wr);
  int poll(Cq* cq, int n, ibv_wc* wc);

  ibv_gid gid(int index) const;

  // INIT -> RTR -> RTS for an RC or UC pair, with perftest-like attributes.
  struct ConnectOpts {
    ibv_mtu mtu = IBV_MTU_1024;
    uint8_t timeout = 14;
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 12;
    uint8_t max_rd_atomic = 16;
    uint32_t psn_a = 0, psn_b = 0;
    uint8_t gid_index = 3;
    uint8_t traffic_class = 0;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                 IBV_ACCESS_REMOTE_ATOMIC;
  };
  static int connect(SimHost& a, Qp* qa, SimHost& b, Qp* qb, const ConnectOpts& o);
  static int connect(SimHost& a, Qp* qa, SimHost& b, Qp* qb) { return connect(a, qa, b, qb, ConnectOpts{}); }
  // RESET -> INIT -> RTR -> RTS for a UD QP.
  int activate_ud(Qp* qp, uint32_t qkey, uint32_t sq_psn = 0);

 private:
  Engine& engine_;
  Nic& nic_;
  std::unique_ptr<HostMemory> memory_;
  HostContext* ctx_;
  uint32_t pd_ = 0;
  std::vector<std::unique_ptr<Cq>> cqs_;
  std::vector<std::unique_ptr<Qp>> qps_;
  std::vector<std::unique_ptr<Srq>> srqs_;
};

}  // namespace rocemu::nic
