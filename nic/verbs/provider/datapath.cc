// The data path: posting to the shared send/receive queues and polling the
// shared completion queues, plus the ibv_qp_ex (ibv_wr_*) interface. No
// system call here except the doorbell's eventfd write when the engine
// sleeps.
#include <cerrno>
#include <cstring>

#include "nic/verbs/provider/provider.h"

using namespace rocemu;
using namespace rocemu::provider;

namespace {

Qp& qp_of(ibv_qp* qp) { return *reinterpret_cast<Qp*>(qp); }
Qp& qp_of(ibv_qp_ex* qpx) { return *reinterpret_cast<Qp*>(qpx); }

uint32_t ah_handle(const ibv_send_wr& wr) {
  return wr.wr.ud.ah != nullptr ? reinterpret_cast<const Ah*>(wr.wr.ud.ah)->handle : 0;
}

int post_send(ibv_qp* ibqp, ibv_send_wr* wr, ibv_send_wr** bad) {
  Qp& q = qp_of(ibqp);
  // As hardware providers do: no sending before RTS (a QP in ERR takes the
  // work and flushes it).
  // An XRC target has no send queue.
  if (ibqp->state == IBV_QPS_RESET || ibqp->state == IBV_QPS_INIT || ibqp->state == IBV_QPS_RTR ||
      ibqp->qp_type == IBV_QPT_XRC_RECV) {
    if (bad != nullptr) *bad = wr;
    return EINVAL;
  }
  int err = 0;
  {
    std::lock_guard lock(q.send_lock);
    const bool ud = ibqp->qp_type == IBV_QPT_UD, xrc = ibqp->qp_type == IBV_QPT_XRC_SEND;
    for (; wr != nullptr; wr = wr->next) {
      err = nic::write_send_wqe(q.sq, *wr, ud ? ah_handle(*wr) : 0, ud ? wr->wr.ud.remote_qpn : 0,
                                ud ? wr->wr.ud.remote_qkey : 0, xrc ? wr->qp_type.xrc.remote_srqn : 0);
      if (err != 0) {
        if (bad != nullptr) *bad = wr;
        break;
      }
    }
    nic::publish_send(q.sq);
  }
  ring_doorbell(*q.ctx, verbs::kDoorbellSend | ibqp->qp_num);
  return err;
}

// ibv_bind_mw (a type 1 window; libibverbs checked the type, the MR's PD
// and addr/length without an MR): a bind WR with the next key byte, as
// mlx5 posts it; the window has its new key once the WR is posted.
int bind_mw(ibv_qp* ibqp, ibv_mw* mw, ibv_mw_bind* mb) {
  const ibv_mw_bind_info& b = mb->bind_info;
  if (b.mr == nullptr && (b.addr != 0 || b.length != 0)) return EINVAL;
  if (b.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
  if (b.mr != nullptr && b.mr->pd != mw->pd) return EPERM;
  ibv_send_wr wr{};
  wr.wr_id = mb->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = mb->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = b;
  ibv_send_wr* bad = nullptr;
  if (const int e = post_send(ibqp, &wr, &bad); e != 0) return e;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

int post_recv(ibv_qp* ibqp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Qp& q = qp_of(ibqp);
  // Not on an SRQ's QP, nor an XRC one: neither has a receive queue.
  if (ibqp->state == IBV_QPS_RESET || ibqp->srq != nullptr || ibqp->qp_type == IBV_QPT_XRC_SEND ||
      ibqp->qp_type == IBV_QPT_XRC_RECV) {
    if (bad != nullptr) *bad = wr;
    return EINVAL;
  }
  int err = 0;
  {
    std::lock_guard lock(q.recv_lock);
    for (; wr != nullptr; wr = wr->next) {
      err = nic::write_recv_wqe(q.rq, *wr);
      if (err != 0) {
        if (bad != nullptr) *bad = wr;
        break;
      }
    }
    nic::publish_recv(q.rq);
  }
  // A QP in error flushes receives at once: tell the engine.
  if (ibqp->state == IBV_QPS_ERR) ring_doorbell(*q.ctx, verbs::kDoorbellRecv | ibqp->qp_num);
  return err;
}

int post_srq_recv(ibv_srq* ibsrq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Srq& s = *reinterpret_cast<Srq*>(ibsrq);
  std::lock_guard lock(s.lock);
  int err = 0;
  for (; wr != nullptr; wr = wr->next) {
    err = nic::write_recv_wqe(s.rq, *wr);
    if (err != 0) {
      if (bad != nullptr) *bad = wr;
      break;
    }
  }
  nic::publish_recv(s.rq);
  return err;
}

int poll_cq(ibv_cq* ibcq, int n, ibv_wc* wc) {
  Cq& q = *reinterpret_cast<Cq*>(ibcq);
  Context& c = *Context::of(ibcq->context);
  std::lock_guard lock(q.lock);
  const int got = nic::poll_cq_ring(q.shadow, n, wc, [&](uint32_t qpn, uint32_t index) {
    // A send completion vouches for every entry before it.
    std::lock_guard l(c.qps_lock);
    auto it = c.qps.find(qpn);
    if (it != c.qps.end()) it->second->sq.head = index + 1;
  });
  if (got > 0) {
    q.empty_polls = 0;
    return got;
  }
  // Polling an empty CQ is the common case; now and then check that the
  // engine (and so the NIC) is still there, and that the CQ did not
  // overflow.
  if ((++q.empty_polls & 0xfff) == 0 && engine_gone(c)) {
    errno = EIO;
    return -1;
  }
  if (q.shadow.ring.header()->overflow.load(std::memory_order_relaxed) != 0) {
    errno = EOVERFLOW;
    return -1;
  }
  return 0;
}

int req_notify_cq(ibv_cq* ibcq, int solicited_only) {
  Cq& q = *reinterpret_cast<Cq*>(ibcq);
  nic::arm_cq(q.shadow, solicited_only != 0);
  return 0;
}

void wr_atomic_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, const void* atomic_wr);

ibv_qp* create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex* a) {
  if (a == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (a->comp_mask & ~uint32_t(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  // ATOMIC WRITE on RC QPs only (rxe's RXE_SUP_RC_QP_SEND_OPS_FLAGS).
  const bool atomic_write =
      (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) && (a->send_ops_flags & IBV_QP_EX_WITH_ATOMIC_WRITE);
  if (atomic_write && a->qp_type != IBV_QPT_RC) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  ibv_qp_init_attr init{};
  init.qp_context = a->qp_context;
  init.cap = a->cap;
  init.qp_type = a->qp_type;
  init.sq_sig_all = a->sq_sig_all;
  ibv_qp* qp = nullptr;
  if (a->qp_type == IBV_QPT_XRC_RECV) {
    // A target: in a domain, with no PD, CQs or queues (mlx5 ignores them).
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || a->xrcd == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    init.cap = {};
    qp = create_qp(context, nullptr, &init, reinterpret_cast<Xrcd*>(a->xrcd));
  } else if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || a->pd == nullptr) {
    errno = EINVAL;
    return nullptr;
  } else if (a->qp_type == IBV_QPT_XRC_SEND) {
    // An initiator: a send queue (and its CQ) only.
    if (a->send_cq == nullptr) {
      errno = EINVAL;
      return nullptr;
    }
    init.send_cq = a->send_cq;
    init.cap.max_recv_wr = init.cap.max_recv_sge = 0;
    qp = create_qp(context, a->pd, &init, nullptr);
  } else {
    init.send_cq = a->send_cq;
    init.recv_cq = a->recv_cq;
    init.srq = a->srq;
    qp = ibv_create_qp(a->pd, &init);
  }
  if (qp == nullptr) return nullptr;
  a->cap = init.cap;
  if (atomic_write) qp_of(qp).qpx.wr_atomic_write = wr_atomic_write;  // else it refuses (init_qp_ex)
  return qp;
}

// ---- ibv_qp_ex: work requests built call by call ----

Qp::Pending& begin(ibv_qp_ex* qpx, ibv_wr_opcode opcode) {
  Qp& q = qp_of(qpx);
  q.pending.emplace_back();
  Qp::Pending& p = q.pending.back();
  p.wr.wr_id = qpx->wr_id;
  p.wr.send_flags = qpx->wr_flags;
  p.wr.opcode = opcode;
  return p;
}

void wr_start(ibv_qp_ex* qpx) {
  Qp& q = qp_of(qpx);
  q.pending.clear();
  q.pending_error = 0;
}

int wr_complete(ibv_qp_ex* qpx) {
  Qp& q = qp_of(qpx);
  ibv_qp* ibqp = &qpx->qp_base;
  int err = q.pending_error;
  if (err == 0 && (ibqp->state == IBV_QPS_RESET || ibqp->state == IBV_QPS_INIT || ibqp->state == IBV_QPS_RTR ||
                   ibqp->qp_type == IBV_QPT_XRC_RECV))
    err = EINVAL;
  if (err == 0) {
    std::lock_guard lock(q.send_lock);
    const uint32_t start = q.sq.tail;
    for (Qp::Pending& p : q.pending) {
      p.wr.sg_list = p.sge.data();
      p.wr.num_sge = int(p.sge.size());
      if (!p.inline_data.empty()) {
        // Inline data lists arrive as one buffer.
        p.sge = {ibv_sge{reinterpret_cast<uint64_t>(p.inline_data.data()), uint32_t(p.inline_data.size()), 0}};
        p.wr.sg_list = p.sge.data();
        p.wr.num_sge = 1;
        p.wr.send_flags |= IBV_SEND_INLINE;
      }
      const bool ud = ibqp->qp_type == IBV_QPT_UD, xrc = ibqp->qp_type == IBV_QPT_XRC_SEND;
      err = nic::write_send_wqe(q.sq, p.wr, ud ? p.ah : 0, ud ? p.wr.wr.ud.remote_qpn : 0,
                                ud ? p.wr.wr.ud.remote_qkey : 0, xrc ? p.wr.qp_type.xrc.remote_srqn : 0);
      if (err != 0) {
        q.sq.tail = start;  // nothing of this batch is posted
        break;
      }
    }
    if (err == 0) nic::publish_send(q.sq);
  }
  const bool posted = err == 0 && !q.pending.empty();
  q.pending.clear();
  q.pending_error = 0;
  if (posted) ring_doorbell(*q.ctx, verbs::kDoorbellSend | ibqp->qp_num);
  return err;
}

void wr_abort(ibv_qp_ex* qpx) {
  Qp& q = qp_of(qpx);
  q.pending.clear();
  q.pending_error = 0;
}

void wr_send(ibv_qp_ex* qpx) { begin(qpx, IBV_WR_SEND); }
void wr_send_imm(ibv_qp_ex* qpx, __be32 imm) { begin(qpx, IBV_WR_SEND_WITH_IMM).wr.imm_data = imm; }
void wr_send_inv(ibv_qp_ex* qpx, uint32_t rkey) { begin(qpx, IBV_WR_SEND_WITH_INV).wr.invalidate_rkey = rkey; }
void wr_rdma_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr) {
  auto& p = begin(qpx, IBV_WR_RDMA_WRITE);
  p.wr.wr.rdma.rkey = rkey;
  p.wr.wr.rdma.remote_addr = addr;
}
void wr_rdma_write_imm(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, __be32 imm) {
  auto& p = begin(qpx, IBV_WR_RDMA_WRITE_WITH_IMM);
  p.wr.wr.rdma.rkey = rkey;
  p.wr.wr.rdma.remote_addr = addr;
  p.wr.imm_data = imm;
}
void wr_rdma_read(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr) {
  auto& p = begin(qpx, IBV_WR_RDMA_READ);
  p.wr.wr.rdma.rkey = rkey;
  p.wr.wr.rdma.remote_addr = addr;
}
void wr_atomic_fetch_add(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, uint64_t add) {
  auto& p = begin(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD);
  p.wr.wr.atomic.rkey = rkey;
  p.wr.wr.atomic.remote_addr = addr;
  p.wr.wr.atomic.compare_add = add;
}
void wr_atomic_cmp_swp(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
  auto& p = begin(qpx, IBV_WR_ATOMIC_CMP_AND_SWP);
  p.wr.wr.atomic.rkey = rkey;
  p.wr.wr.atomic.remote_addr = addr;
  p.wr.wr.atomic.compare_add = compare;
  p.wr.wr.atomic.swap = swap;
}
void wr_set_sge(ibv_qp_ex* qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  Qp& q = qp_of(qpx);
  if (q.pending.empty()) {
    q.pending_error = EINVAL;
    return;
  }
  q.pending.back().sge = {ibv_sge{addr, length, lkey}};
}
void wr_set_sge_list(ibv_qp_ex* qpx, size_t n, const ibv_sge* list) {
  Qp& q = qp_of(qpx);
  if (q.pending.empty()) {
    q.pending_error = EINVAL;
    return;
  }
  q.pending.back().sge.assign(list, list + n);
}
void wr_set_inline_data(ibv_qp_ex* qpx, void* addr, size_t length) {
  Qp& q = qp_of(qpx);
  if (q.pending.empty()) {
    q.pending_error = EINVAL;
    return;
  }
  auto* b = static_cast<uint8_t*>(addr);
  q.pending.back().inline_data.assign(b, b + length);
}
void wr_set_inline_data_list(ibv_qp_ex* qpx, size_t n, const ibv_data_buf* list) {
  Qp& q = qp_of(qpx);
  if (q.pending.empty()) {
    q.pending_error = EINVAL;
    return;
  }
  auto& d = q.pending.back().inline_data;
  d.clear();
  for (size_t i = 0; i < n; i++) {
    auto* b = static_cast<uint8_t*>(list[i].addr);
    d.insert(d.end(), b, b + list[i].length);
  }
}
void wr_set_ud_addr(ibv_qp_ex* qpx, ibv_ah* ah, uint32_t qpn, uint32_t qkey) {
  Qp& q = qp_of(qpx);
  if (q.pending.empty()) {
    q.pending_error = EINVAL;
    return;
  }
  auto& p = q.pending.back();
  p.ah = ah != nullptr ? reinterpret_cast<Ah*>(ah)->handle : 0;
  p.wr.wr.ud.remote_qpn = qpn;
  p.wr.wr.ud.remote_qkey = qkey;
}
void wr_bind_mw(ibv_qp_ex* qpx, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  auto& p = begin(qpx, IBV_WR_BIND_MW);
  p.wr.bind_mw.mw = mw;
  p.wr.bind_mw.rkey = rkey;
  if (info != nullptr) p.wr.bind_mw.bind_info = *info;
}
void wr_local_inv(ibv_qp_ex* qpx, uint32_t rkey) { begin(qpx, IBV_WR_LOCAL_INV).wr.invalidate_rkey = rkey; }
void wr_unsupported_tso(ibv_qp_ex* qpx, void*, uint16_t, uint16_t) { qp_of(qpx).pending_error = EOPNOTSUPP; }
void wr_set_xrc_srqn(ibv_qp_ex* qpx, uint32_t remote_srqn) {
  Qp& q = qp_of(qpx);
  if (q.pending.empty()) {
    q.pending_error = EINVAL;
    return;
  }
  q.pending.back().wr.qp_type.xrc.remote_srqn = remote_srqn;
}
void wr_unsupported_atomic_write(ibv_qp_ex* qpx, uint32_t, uint64_t, const void*) {
  qp_of(qpx).pending_error = EOPNOTSUPP;
}
// The 8 bytes are copied now, as rxe's provider does: the caller's buffer
// may change once the call returns. They travel as the WR's inline data.
void wr_atomic_write(ibv_qp_ex* qpx, uint32_t rkey, uint64_t addr, const void* atomic_wr) {
  auto& p = begin(qpx, IBV_WR_ATOMIC_WRITE);
  p.wr.wr.rdma.rkey = rkey;
  p.wr.wr.rdma.remote_addr = addr;
  const auto* b = static_cast<const uint8_t*>(atomic_wr);
  p.inline_data.assign(b, b + 8);
}

}  // namespace

namespace rocemu::provider {

void init_context_ops(Context& c) {
  ibv_context_ops& ops = c.vctx.context.ops;
  ops.post_send = post_send;
  ops.post_recv = post_recv;
  ops.post_srq_recv = post_srq_recv;
  ops.poll_cq = poll_cq;
  ops.req_notify_cq = req_notify_cq;
  ops.alloc_mw = alloc_mw;
  ops.dealloc_mw = dealloc_mw;
  ops.bind_mw = bind_mw;
  c.vctx.create_qp_ex = create_qp_ex;
  c.vctx.open_xrcd = open_xrcd;
  c.vctx.close_xrcd = close_xrcd;
  c.vctx.create_srq_ex = create_srq_ex;
  c.vctx.get_srq_num = get_srq_num;
  c.vctx.open_qp = open_qp;
}

void init_qp_ex(Qp& q) {
  ibv_qp_ex& x = q.qpx;
  x.comp_mask = 0;
  x.wr_start = wr_start;
  x.wr_complete = wr_complete;
  x.wr_abort = wr_abort;
  x.wr_send = wr_send;
  x.wr_send_imm = wr_send_imm;
  x.wr_send_inv = wr_send_inv;
  x.wr_rdma_write = wr_rdma_write;
  x.wr_rdma_write_imm = wr_rdma_write_imm;
  x.wr_rdma_read = wr_rdma_read;
  x.wr_atomic_fetch_add = wr_atomic_fetch_add;
  x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
  x.wr_set_sge = wr_set_sge;
  x.wr_set_sge_list = wr_set_sge_list;
  x.wr_set_inline_data = wr_set_inline_data;
  x.wr_set_inline_data_list = wr_set_inline_data_list;
  x.wr_set_ud_addr = wr_set_ud_addr;
  x.wr_bind_mw = wr_bind_mw;
  x.wr_local_inv = wr_local_inv;
  x.wr_send_tso = wr_unsupported_tso;
  x.wr_set_xrc_srqn = wr_set_xrc_srqn;
  x.wr_atomic_write = wr_unsupported_atomic_write;
}

}  // namespace rocemu::provider
