#include "nic/sim_host.h"

#include <cerrno>
#include <cstring>

namespace rocemu::nic {

SimHost::SimHost(Engine& engine, Nic& nic, bool batched_dma)
    : SimHost(engine, nic,
              batched_dma ? std::unique_ptr<HostMemory>(std::make_unique<DeferringLocalMemory>())
                          : std::make_unique<LocalMemory>()) {}

SimHost::SimHost(Engine& engine, Nic& nic, std::unique_ptr<HostMemory> memory)
    : engine_(engine), nic_(nic), memory_(std::move(memory)), ctx_(nic.open_context(memory_.get())) {
  nic_.alloc_pd(ctx_, pd_);
}

SimHost::~SimHost() { nic_.close_context(ctx_); }

namespace sim_host_rings {

// A ring's memory: `bytes` on a 64-byte boundary inside `v`.
void* aligned(std::vector<uint8_t>& v, size_t bytes) {
  v.resize(bytes + 64);
  return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t(63));
}

}  // namespace sim_host_rings

uint32_t SimHost::reg_mr(void* addr, size_t len, int access, int* err, std::optional<uint64_t> iova) {
  uint32_t key = 0;
  const int e = nic_.reg_mr(ctx_, pd_, reinterpret_cast<uint64_t>(addr), len, access, key, iova);
  if (err != nullptr) *err = e;
  return e == 0 ? key : 0;
}

SimHost::Cq* SimHost::create_cq(uint32_t entries) {
  auto cq = std::make_unique<Cq>();
  const uint32_t n = round_up_pow2(entries);
  void* base = sim_host_rings::aligned(cq->mem, ring_bytes(n, sizeof(Cqe)));
  if (nic_.create_cq(ctx_, base, entries, cq->handle) != 0) return nullptr;
  cq->shadow.ring = Ring(base, n, sizeof(Cqe), false);
  cqs_.push_back(std::move(cq));
  return cqs_.back().get();
}

SimHost::Srq* SimHost::create_srq(uint32_t entries, uint32_t max_sge, uint32_t limit) {
  auto srq = std::make_unique<Srq>();
  const uint32_t n = round_up_pow2(entries);
  const uint32_t stride = recv_wqe_stride(max_sge);
  void* base = sim_host_rings::aligned(srq->mem, ring_bytes(n, stride));
  if (nic_.create_srq(ctx_, pd_, base, entries, max_sge, limit, srq->handle) != 0) return nullptr;
  srq->rq.ring = Ring(base, n, stride, false);
  srq->rq.max_sge = max_sge;
  srqs_.push_back(std::move(srq));
  return srqs_.back().get();
}

SimHost::Qp* SimHost::create_qp(QpType type, Cq* send_cq, Cq* recv_cq, ibv_qp_cap cap, bool sq_sig_all, Srq* srq,
                                int* err) {
  // What is asked for is held to the caps, as the provider's server does.
  if (const int e = nic_.check_qp_caps(cap); e != 0) {
    if (err != nullptr) *err = e;
    return nullptr;
  }
  auto qp = std::make_unique<Qp>();
  qp->type = type;
  uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
  Nic::qp_ring_sizes(cap, sq_entries, sq_stride, rq_entries, rq_stride);
  void* sq = sim_host_rings::aligned(qp->sq_mem, ring_bytes(sq_entries, sq_stride));
  void* rq = srq != nullptr ? nullptr : sim_host_rings::aligned(qp->rq_mem, ring_bytes(rq_entries, rq_stride));
  Nic::QpInit init;
  init.type = type;
  init.pd = pd_;
  init.send_cq = send_cq->handle;
  init.recv_cq = recv_cq->handle;
  init.srq = srq != nullptr ? srq->handle : 0;
  init.cap = cap;
  init.sq_sig_all = sq_sig_all;
  init.sq_ring = sq;
  init.rq_ring = rq;
  const int e = nic_.create_qp(ctx_, init, qp->qpn, now());
  if (err != nullptr) *err = e;
  if (e != 0) return nullptr;
  qp->sq.ring = Ring(sq, sq_entries, sq_stride, false);
  qp->sq.max_sge = std::max(cap.max_send_sge, 1u);
  qp->sq.max_inline = cap.max_inline_data;
  qp->sq.sig_all = sq_sig_all;
  if (rq != nullptr) {
    qp->rq.ring = Ring(rq, rq_entries, rq_stride, false);
    qp->rq.max_sge = std::max(cap.max_recv_sge, 1u);
  }
  qp->nic_qp = nic_.find_qp(qp->qpn);
  qps_.push_back(std::move(qp));
  return qps_.back().get();
}

uint32_t SimHost::open_xrcd(int* err) {
  uint32_t handle = 0;
  const int e = nic_.open_xrcd(ctx_, 0, 0, 0, handle);
  if (err != nullptr) *err = e;
  return e == 0 ? handle : 0;
}

SimHost::Srq* SimHost::create_xrc_srq(uint32_t xrcd, Cq* cq, uint32_t entries, int* err, uint32_t pd) {
  auto srq = std::make_unique<Srq>();
  const uint32_t n = round_up_pow2(entries);
  const uint32_t stride = recv_wqe_stride(1);
  void* base = sim_host_rings::aligned(srq->mem, ring_bytes(n, stride));
  int e = nic_.create_srq(ctx_, pd != 0 ? pd : pd_, base, entries, 1, 0, srq->handle, xrcd, cq != nullptr ? cq->handle : 0);
  if (e == 0) e = nic_.srq_number(ctx_, srq->handle, srq->srqn);
  if (err != nullptr) *err = e;
  if (e != 0) return nullptr;
  srq->rq.ring = Ring(base, n, stride, false);
  srq->rq.max_sge = 1;
  srqs_.push_back(std::move(srq));
  return srqs_.back().get();
}

int SimHost::destroy_srq(Srq* srq) {
  const int e = nic_.destroy_srq(ctx_, srq->handle);
  if (e == 0) std::erase_if(srqs_, [srq](const auto& p) { return p.get() == srq; });
  return e;
}

SimHost::Qp* SimHost::create_xrc_send_qp(Cq* send_cq, ibv_qp_cap cap, int* err) {
  cap.max_recv_wr = cap.max_recv_sge = 0;
  auto qp = std::make_unique<Qp>();
  qp->type = QpType::kXrcSend;
  uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
  Nic::qp_ring_sizes(cap, sq_entries, sq_stride, rq_entries, rq_stride);
  void* sq = sim_host_rings::aligned(qp->sq_mem, ring_bytes(sq_entries, sq_stride));
  Nic::QpInit init;
  init.type = QpType::kXrcSend;
  init.pd = pd_;
  init.send_cq = send_cq->handle;
  init.cap = cap;
  init.sq_ring = sq;
  const int e = nic_.create_qp(ctx_, init, qp->qpn, now());
  if (err != nullptr) *err = e;
  if (e != 0) return nullptr;
  qp->sq.ring = Ring(sq, sq_entries, sq_stride, false);
  qp->sq.max_sge = std::max(cap.max_send_sge, 1u);
  qp->sq.max_inline = cap.max_inline_data;
  qp->nic_qp = nic_.find_qp(qp->qpn);
  qps_.push_back(std::move(qp));
  return qps_.back().get();
}

SimHost::Qp* SimHost::create_xrc_recv_qp(uint32_t xrcd, int* err) {
  auto qp = std::make_unique<Qp>();
  qp->type = QpType::kXrcRecv;
  Nic::QpInit init;  // no queues
  init.type = QpType::kXrcRecv;
  init.xrcd = xrcd;
  const int e = nic_.create_qp(ctx_, init, qp->qpn, now());
  if (err != nullptr) *err = e;
  if (e != 0) return nullptr;
  qp->nic_qp = nic_.find_qp(qp->qpn);
  qps_.push_back(std::move(qp));
  return qps_.back().get();
}

SimHost::Qp* SimHost::open_xrc_recv_qp(uint32_t xrcd, uint32_t qpn, int* err) {
  const int e = nic_.open_qp(ctx_, xrcd, qpn);
  if (err != nullptr) *err = e;
  if (e != 0) return nullptr;
  auto qp = std::make_unique<Qp>();
  qp->type = QpType::kXrcRecv;
  qp->qpn = qpn;
  qp->nic_qp = nic_.find_qp(qpn);
  qps_.push_back(std::move(qp));
  return qps_.back().get();
}

int SimHost::destroy_qp(Qp* qp) {
  const int e = nic_.destroy_qp(ctx_, qp->qpn);
  if (e == 0) std::erase_if(qps_, [qp](const auto& p) { return p.get() == qp; });
  return e;
}

uint32_t SimHost::create_ah(const ibv_gid& dgid, uint8_t sgid_index, uint8_t traffic_class) {
  ibv_ah_attr attr{};
  attr.is_global = 1;
  attr.grh.dgid = dgid;
  attr.grh.sgid_index = sgid_index;
  attr.grh.traffic_class = traffic_class;
  attr.grh.hop_limit = 64;
  attr.port_num = 1;
  uint32_t handle = 0;
  return nic_.create_ah(ctx_, pd_, attr, handle) == 0 ? handle : 0;
}

int SimHost::post_send(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  int e = 0;
  for (; wr != nullptr; wr = wr->next) {
    const uint32_t ah = qp->type == QpType::kUd ? uint32_t(reinterpret_cast<uintptr_t>(wr->wr.ud.ah)) : 0;
    const uint32_t rqpn = qp->type == QpType::kUd ? wr->wr.ud.remote_qpn : 0;
    const uint32_t qkey = qp->type == QpType::kUd ? wr->wr.ud.remote_qkey : 0;
    const uint32_t srqn = qp->type == QpType::kXrcSend ? wr->qp_type.xrc.remote_srqn : 0;
    e = write_send_wqe(qp->sq, *wr, ah, rqpn, qkey, srqn);
    if (e != 0) {
      if (bad != nullptr) *bad = wr;
      break;
    }
  }
  publish_send(qp->sq);
  nic_.sq_doorbell(*qp->nic_qp, now());
  return e;
}

int SimHost::post_recv(Qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  int e = 0;
  for (; wr != nullptr; wr = wr->next) {
    e = write_recv_wqe(qp->rq, *wr);
    if (e != 0) {
      if (bad != nullptr) *bad = wr;
      break;
    }
  }
  publish_recv(qp->rq);
  if (qp->nic_qp->state == IBV_QPS_ERR) nic_.sq_doorbell(*qp->nic_qp, now());
  return e;
}

int SimHost::post_srq_recv(Srq* srq, ibv_recv_wr* wr) {
  for (; wr != nullptr; wr = wr->next)
    if (int e = write_recv_wqe(srq->rq, *wr); e != 0) return e;
  publish_recv(srq->rq);
  return 0;
}

int SimHost::poll(Cq* cq, int n, ibv_wc* wc) {
  return poll_cq_ring(cq->shadow, n, wc, [this](uint32_t qpn, uint32_t index) {
    for (auto& q : qps_)
      if (q->qpn == qpn) q->sq.head = index + 1;
  });
}

ibv_gid SimHost::gid(int index) const {
  ibv_gid g{};
  const auto& table = nic_.gid_table();
  if (index >= 0 && size_t(index) < table.size()) std::memcpy(g.raw, table[size_t(index)].gid.b.data(), 16);
  return g;
}

int SimHost::connect(SimHost& a, Qp* qa, SimHost& b, Qp* qb, const ConnectOpts& o) {
  auto to_init = [&](SimHost& h, Qp* q) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = o.access;
    return h.modify(q, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  };
  auto to_rtr = [&](SimHost& h, Qp* q, SimHost& peer, Qp* pq, uint32_t rq_psn) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = o.mtu;
    attr.dest_qp_num = pq->qpn;
    attr.rq_psn = rq_psn;
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = peer.gid(o.gid_index);
    attr.ah_attr.grh.sgid_index = o.gid_index;
    attr.ah_attr.grh.hop_limit = 1;
    attr.ah_attr.grh.traffic_class = o.traffic_class;
    attr.ah_attr.port_num = 1;
    int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (q->type == QpType::kRc || q->type == QpType::kXrcRecv) {  // a receive side
      attr.max_dest_rd_atomic = o.max_rd_atomic;
      attr.min_rnr_timer = o.min_rnr_timer;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
    return h.modify(q, attr, mask);
  };
  auto to_rts = [&](SimHost& h, Qp* q, uint32_t sq_psn) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = sq_psn;
    int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
    if (q->type == QpType::kXrcRecv) {  // no send side: its timeout only
      attr.timeout = o.timeout;
      mask |= IBV_QP_TIMEOUT;
    } else if (q->type == QpType::kRc || q->type == QpType::kXrcSend) {
      attr.timeout = o.timeout;
      attr.retry_cnt = o.retry_cnt;
      attr.rnr_retry = o.rnr_retry;
      attr.max_rd_atomic = o.max_rd_atomic;
      mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    return h.modify(q, attr, mask);
  };
  if (int e = to_init(a, qa)) return e;
  if (int e = to_init(b, qb)) return e;
  if (int e = to_rtr(a, qa, b, qb, o.psn_b)) return e;
  if (int e = to_rtr(b, qb, a, qa, o.psn_a)) return e;
  if (int e = to_rts(a, qa, o.psn_a)) return e;
  return to_rts(b, qb, o.psn_b);
}

int SimHost::activate_ud(Qp* qp, uint32_t qkey, uint32_t sq_psn) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = 1;
  attr.qkey = qkey;
  if (int e = modify(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)) return e;
  attr.qp_state = IBV_QPS_RTR;
  if (int e = modify(qp, attr, IBV_QP_STATE)) return e;
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = sq_psn;
  return modify(qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

}  // namespace rocemu::nic
