// The verbs control path: contexts, PDs, MRs, CQs, SRQs, AHs and QPs, with
// the checks and errno values of a real provider.
#include <fcntl.h>

#include <cerrno>

#include "common/engine/lazy_payload.h"
#include "nic/nic.h"

namespace rocemu::nic {

namespace {

constexpr int kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                             IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING;

using Usage = HostContext::Usage;

// The 4 KiB pages [addr, addr + length) touches.
uint64_t pages_spanned(uint64_t addr, uint64_t length) { return ((addr + length - 1) >> 12) - (addr >> 12) + 1; }
// Access flags mlx5 changes in an mkey in place (UMR): others need a new mkey.
constexpr int kAccessChangedInPlace = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                      IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;

uint64_t cq_bytes(const Cq& cq) { return ring_bytes(cq.capacity(), sizeof(Cqe)); }
uint64_t srq_bytes(Srq& srq) { return ring_bytes(srq.rq.ring().entries(), srq.rq.ring().stride()); }
uint64_t qp_bytes(Qp& qp) {
  return (qp.sq.valid() ? ring_bytes(qp.sq.entries(), qp.sq.stride()) : 0) +
         (qp.rq.valid() ? ring_bytes(qp.rq.ring().entries(), qp.rq.ring().stride()) : 0);
}

}  // namespace

int Nic::charge(HostContext* ctx, uint32_t Usage::*field, uint32_t limit, uint64_t bytes) {
  Usage& u = *ctx->usage;
  const uint64_t bytes_limit = cfg_.app_quota.queue_bytes;
  if (u.*field >= limit || bytes > bytes_limit || u.queue_bytes > bytes_limit - bytes) return ENOMEM;
  u.*field += 1;
  u.queue_bytes += bytes;
  return 0;
}

void Nic::refund(HostContext* ctx, uint32_t Usage::*field, uint64_t bytes) {
  Usage& u = *ctx->usage;
  u.*field -= 1;
  u.queue_bytes -= bytes;
}

HostContext* Nic::open_context(HostMemory* memory, uint64_t owner) {
  auto ctx = std::make_unique<HostContext>();
  ctx->id = next_ctx_id_++;
  ctx->memory = memory;
  ctx->owner = owner;
  std::erase_if(usage_by_owner_, [](const auto& kv) { return kv.second.expired(); });
  if (owner != 0) ctx->usage = usage_by_owner_[owner].lock();
  if (!ctx->usage) {
    ctx->usage = std::make_shared<HostContext::Usage>();
    if (owner != 0) usage_by_owner_[owner] = ctx->usage;
  }
  contexts_.push_back(std::move(ctx));
  return contexts_.back().get();
}

void Nic::close_context(HostContext* ctx) {
  if (ctx == nullptr) return;
  ctx->dead = true;
  flush_dma();  // nothing of this host may stay queued
  // Windows first (each unbound as it goes: off its MR's and QP's lists,
  // so that no QP or MR has any left to unbind), then QPs (they reference
  // CQs, SRQs and the PD), then the rest.
  std::vector<uint32_t> keys;
  mws_.for_each([&](const Mw& w) {
    if (w.pd->ctx == ctx) keys.push_back(w.handle);
  });
  for (uint32_t k : keys) dealloc_mw(ctx, k);
  keys.clear();
  std::vector<uint32_t> qpns;
  for (auto& [qpn, qp] : qps_)
    if (qp->held_by(ctx)) qpns.push_back(qpn);
  for (uint32_t qpn : qpns)
    while (find_qp(qpn) != nullptr && find_qp(qpn)->held_by(ctx)) destroy_qp(ctx, qpn);  // each of its holds
  ahs_.for_each([&](const Ah& a) {
    if (a.pd->ctx == ctx) keys.push_back(a.handle);
  });
  for (uint32_t k : keys) ahs_.erase(k);
  keys.clear();
  // Each given back to the application's quota, which its other contexts
  // go on using.
  srqs_.for_each([&](const Srq& s) {
    if (s.pd->ctx == ctx) keys.push_back(s.handle);
  });
  for (uint32_t k : keys) {
    Srq* s = srqs_.find(k);
    refund(ctx, &Usage::srqs, srq_bytes(*s));
    forget_srq(*s);
    srqs_.erase(k);
  }
  keys.clear();
  // Its opens of XRC domains (its SRQs and target QPs are gone): a domain
  // another application opened too stays.
  xrcd_refs_.for_each([&](const XrcdRef& x) {
    if (x.ctx == ctx) keys.push_back(x.handle);
  });
  for (uint32_t k : keys) {
    xrcd_refs_.find(k)->users = 0;
    close_xrcd(ctx, k);
  }
  keys.clear();
  mrs_.for_each([&](const Mr& m) {
    if (m.pd->ctx != ctx) return;
    keys.push_back(m.key);
    refund(ctx, &Usage::mrs);
  });
  for (uint32_t k : keys) mrs_.erase(k);
  keys.clear();
  cqs_.for_each([&](const Cq& c) {
    if (c.ctx() != ctx) return;
    keys.push_back(c.handle());
    refund(ctx, &Usage::cqs, cq_bytes(c));
  });
  for (uint32_t k : keys) cqs_.erase(k);
  keys.clear();
  pds_.for_each([&](const Pd& p) {
    if (p.ctx == ctx) keys.push_back(p.handle);
  });
  for (uint32_t k : keys) pds_.erase(k);
  std::erase_if(contexts_, [ctx](const auto& c) { return c.get() == ctx; });
}

HostContext* Nic::find_context(uint32_t id) const {
  for (const auto& c : contexts_)
    if (c->id == id) return c.get();
  return nullptr;
}

int Nic::alloc_pd(HostContext* ctx, uint32_t& handle) {
  auto pd = std::make_unique<Pd>();
  pd->ctx = ctx;
  const auto in = pds_.insert(std::move(pd));
  if (!in) return ENOMEM;
  handle = in->obj->handle = in->key;
  return 0;
}

int Nic::dealloc_pd(HostContext* ctx, uint32_t handle) {
  Pd* pd = pds_.find(handle);
  if (pd == nullptr || pd->ctx != ctx) return EINVAL;
  bool busy = false;
  mrs_.for_each([&](const Mr& m) { busy = busy || m.pd == pd; });
  srqs_.for_each([&](const Srq& s) { busy = busy || s.pd == pd; });
  mws_.for_each([&](const Mw& w) { busy = busy || w.pd == pd; });
  ahs_.for_each([&](const Ah& a) { busy = busy || a.pd == pd; });
  for (auto& [qpn, qp] : qps_) busy = busy || qp->pd == pd;
  if (busy) return EBUSY;
  pds_.erase(handle);
  return 0;
}

int Nic::check_mr_access(int access) {
  if (access & ~kKnownAccess) return EINVAL;
  // Remote write or atomic access needs local write (IBA 10.6.3.1).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  // No on-demand paging (explicit or implicit): ib_check_mr_access in
  // Linux 6.1 for a device without IBK_ON_DEMAND_PAGING, as Soft-RoCE.
  if (access & IBV_ACCESS_ON_DEMAND) return EINVAL;
  return 0;
}

int Nic::query_pd(HostContext* ctx, uint32_t handle) const {
  const Pd* pd = pds_.find(handle);
  return pd != nullptr && pd->ctx == ctx ? 0 : ENOENT;
}

int Nic::query_mr(HostContext* ctx, uint32_t key, uint64_t& iova, uint64_t& length) const {
  const Mr* mr = mrs_.find(key);
  if (mr == nullptr || mr->pd->ctx != ctx) return ENOENT;
  iova = mr->addr;
  length = mr->length;
  return 0;
}

int Nic::reg_mr(HostContext* ctx, uint32_t pd_handle, uint64_t addr, uint64_t length, int access, uint32_t& key,
                std::optional<uint64_t> iova) {
  Pd* pd = pds_.find(pd_handle);
  if (pd == nullptr || pd->ctx != ctx) return EINVAL;
  if (int e = check_mr_access(access); e != 0) return e;
  const uint64_t io = iova.value_or(addr);
  if (length == 0 || addr + length < addr || io + length < io) return EINVAL;
  if (mrs_.size() >= cfg_.max_mr) return ENOMEM;
  if (int e = charge(ctx, &Usage::mrs, cfg_.app_quota.mrs); e != 0) return e;
  auto mr = std::make_unique<Mr>();
  mr->pd = pd;
  mr->addr = io;
  mr->host_addr = addr;
  mr->length = length;
  mr->access = access;
  mr->pages = pages_spanned(addr, length);
  const auto in = mrs_.insert(std::move(mr));
  if (!in) {
    refund(ctx, &Usage::mrs);
    return ENOMEM;
  }
  key = in->obj->key = in->key;
  return 0;
}

int Nic::dereg_mr(HostContext* ctx, uint32_t key) {
  Mr* mr = mrs_.find(key);
  if (mr == nullptr || mr->pd->ctx != ctx) return EINVAL;
  // Not while a window is bound to it (ibv_reg_mr(3): "ibv_dereg_mr()
  // fails if any memory window is still bound to this MR"; rxe_dereg_mr's
  // EINVAL, IBA 10.6.7.2.6): the MR and its windows stay as they were.
  if (mr->windows.head != nullptr) return EINVAL;
  refund(ctx, &Usage::mrs);
  mrs_.erase(key);
  return 0;
}

int Nic::rereg_mr(HostContext* ctx, uint32_t key, int flags, uint32_t pd_handle, uint64_t addr, uint64_t length,
                  int access, uint32_t* new_key) {
  Mr* mr = mrs_.find(key);
  if (mr == nullptr || mr->pd->ctx != ctx) return EINVAL;
  // The kernel's checks (ib_uverbs_rereg_mr): some flag, no unknown one.
  if (flags == 0 || (flags & ~int(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS)))
    return EINVAL;
  Pd* pd = mr->pd;
  if (flags & IBV_REREG_MR_CHANGE_PD) {
    pd = pds_.find(pd_handle);
    if (pd == nullptr || pd->ctx != ctx) return EINVAL;
  }
  int new_access = mr->access;
  if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
    if (int e = check_mr_access(access); e != 0) return e;
    new_access = access;
  }
  if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (length == 0 || addr + length < addr)) return EINVAL;
  const bool grows = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) && pages_spanned(addr, length) > mr->pages;
  if (grows || ((new_access ^ mr->access) & ~kAccessChangedInPlace)) {
    // A new mkey: a new key; what the old one named (and windows bound to
    // it) is gone.
    auto copy = std::make_unique<Mr>(*mr);
    copy->windows = {};  // the old MR's windows stay on its list until unbound
    const auto in = mrs_.insert(std::move(copy));
    if (!in) return ENOMEM;
    unbind_windows(*mr);
    mrs_.erase(key);
    mr = in->obj;
    mr->key = in->key;
    if (grows) mr->pages = pages_spanned(addr, length);
  } else if (flags & (IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD)) {
    // The same key over other memory or in another PD: the windows were
    // bound to what it was (even if the new memory is at the same
    // addresses), and are unbound.
    unbind_windows(*mr);
  }
  if (new_key != nullptr) *new_key = mr->key;
  mr->pd = pd;
  mr->access = new_access;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    mr->addr = mr->host_addr = addr;
    mr->length = length;
  }
  return 0;
}

int Nic::mr_access(HostContext* ctx, uint32_t key) const {
  const Mr* mr = mrs_.find(key);
  return mr != nullptr && mr->pd->ctx == ctx ? mr->access : -1;
}

int Nic::create_cq(HostContext* ctx, void* ring, uint32_t entries, uint32_t& handle) {
  // The cap bounds the count asked for, not the ring rounded up from it.
  if (ring == nullptr || entries == 0 || entries > cfg_.max_cqe) return EINVAL;
  if (cqs_.size() >= cfg_.max_cq) return ENOMEM;
  const uint32_t slots = round_up_pow2(entries);
  const uint64_t bytes = ring_bytes(slots, sizeof(Cqe));
  if (int e = charge(ctx, &Usage::cqs, cfg_.app_quota.cqs, bytes); e != 0) return e;
  auto cq = std::make_unique<Cq>(0, ctx, Ring(ring, slots, sizeof(Cqe), true));
  const auto in = cqs_.insert(std::move(cq));
  if (!in) {
    refund(ctx, &Usage::cqs, bytes);
    return ENOMEM;
  }
  handle = in->key;
  *in->obj = Cq(handle, ctx, Ring(ring, slots, sizeof(Cqe), false));
  return 0;
}

Cq* Nic::find_cq(HostContext* ctx, uint32_t handle) const {
  Cq* cq = cqs_.find(handle);
  return cq != nullptr && cq->ctx() == ctx ? cq : nullptr;
}

int Nic::destroy_cq(HostContext* ctx, uint32_t handle) {
  Cq* cq = find_cq(ctx, handle);
  if (cq == nullptr) return EINVAL;
  for (auto& [qpn, qp] : qps_)
    if (qp->send_cq == cq || qp->recv_cq == cq) return EBUSY;
  bool srq_busy = false;
  srqs_.for_each([&](const Srq& s) { srq_busy = srq_busy || s.cq == cq; });
  if (srq_busy) return EBUSY;
  refund(ctx, &Usage::cqs, cq_bytes(*cq));
  cqs_.erase(handle);
  return 0;
}

int Nic::create_srq(HostContext* ctx, uint32_t pd_handle, void* ring, uint32_t entries, uint32_t max_sge,
                    uint32_t limit, uint32_t& handle, uint32_t xrcd_handle, uint32_t cq_handle) {
  Pd* pd = pds_.find(pd_handle);
  if (pd == nullptr || pd->ctx != ctx || ring == nullptr || entries == 0 || max_sge == 0 ||
      max_sge > cfg_.max_sge || entries > cfg_.max_qp_wr)
    return EINVAL;
  // An XRC SRQ: its domain and CQ, both the context's (ibv_create_srq_ex).
  XrcdRef* xrcd = nullptr;
  Cq* cq = nullptr;
  if (xrcd_handle != 0 || cq_handle != 0) {
    xrcd = find_xrcd(ctx, xrcd_handle);
    cq = find_cq(ctx, cq_handle);
    if (xrcd == nullptr || cq == nullptr) return EINVAL;
    if (xrc_srqs_.size() >= (1u << 24) - 2) return ENOMEM;
  }
  const uint32_t slots = round_up_pow2(entries);
  if (limit > slots) return EINVAL;
  if (srqs_.size() >= cfg_.max_srq) return ENOMEM;
  const uint64_t bytes = ring_bytes(slots, recv_wqe_stride(max_sge));
  if (int e = charge(ctx, &Usage::srqs, cfg_.app_quota.srqs, bytes); e != 0) return e;
  auto srq = std::make_unique<Srq>();
  srq->pd = pd;
  srq->rq = RecvQueue(Ring(ring, slots, recv_wqe_stride(max_sge), true), max_sge);
  srq->limit = limit;
  srq->armed = limit > 0;
  srq->xrcd = xrcd;
  srq->cq = cq;
  const auto in = srqs_.insert(std::move(srq));
  if (!in) {
    refund(ctx, &Usage::srqs, bytes);
    return ENOMEM;
  }
  handle = in->obj->handle = in->key;
  if (xrcd != nullptr) {
    // Numbered as QPNs are: the next free one, from 1 round to 0xffffff.
    const uint32_t srqn = next_srqn_;
    do next_srqn_ = next_srqn_ >= 0xffffff ? 1 : next_srqn_ + 1;
    while (xrc_srqs_.count(next_srqn_) != 0);
    in->obj->srqn = srqn;
    xrc_srqs_[srqn] = in->obj;
    xrcd->users++;
  }
  return 0;
}

int Nic::srq_number(HostContext* ctx, uint32_t handle, uint32_t& srqn) const {
  const Srq* s = find_srq(ctx, handle);
  if (s == nullptr || s->xrcd == nullptr) return EINVAL;
  srqn = s->srqn;
  return 0;
}

void Nic::forget_srq(Srq& srq) {
  if (srq.xrcd == nullptr) return;
  for (auto& [qpn, qp] : qps_) {
    if (qp->xrcd == nullptr || qp->srq != &srq) continue;
    // A message in progress loses its receive WQE with the SRQ.
    qp->srq = nullptr;
    qp->pd = nullptr;
    qp->recv_cq = nullptr;
    qp->resp.recv_valid = false;
  }
  xrc_srqs_.erase(srq.srqn);
  srq.xrcd->users--;
  srq.xrcd = nullptr;
}

XrcdRef* Nic::find_xrcd(HostContext* ctx, uint32_t handle) const {
  XrcdRef* x = xrcd_refs_.find(handle);
  return x != nullptr && x->ctx == ctx ? x : nullptr;
}

int Nic::open_xrcd(HostContext* ctx, uint64_t inode_dev, uint64_t inode, int oflags, uint32_t& handle) {
  const bool shared = inode_dev != 0 || inode != 0;
  Xrcd* xrcd = nullptr;
  if (shared) {
    for (const auto& d : xrcds_)
      if (d->inode_dev == inode_dev && d->inode == inode) xrcd = d.get();
    if (xrcd == nullptr && !(oflags & O_CREAT)) return EAGAIN;  // none yet, and not to be created
    if (xrcd != nullptr && (oflags & O_EXCL)) return EINVAL;
  }
  auto ref = std::make_unique<XrcdRef>();
  ref->ctx = ctx;
  const auto in = xrcd_refs_.insert(std::move(ref));
  if (!in) return ENOMEM;
  if (xrcd == nullptr) {
    xrcds_.push_back(std::make_unique<Xrcd>());
    xrcd = xrcds_.back().get();
    xrcd->inode_dev = inode_dev;
    xrcd->inode = inode;
  }
  xrcd->opens++;
  in->obj->xrcd = xrcd;
  handle = in->obj->handle = in->key;
  return 0;
}

int Nic::close_xrcd(HostContext* ctx, uint32_t handle) {
  XrcdRef* x = find_xrcd(ctx, handle);
  if (x == nullptr) return EINVAL;
  if (x->users != 0) return EBUSY;  // ib_uverbs' uxrcd refcnt: its SRQs and target QPs
  Xrcd* d = x->xrcd;
  xrcd_refs_.erase(handle);
  if (--d->opens == 0) std::erase_if(xrcds_, [d](const auto& p) { return p.get() == d; });
  return 0;
}

Srq* Nic::find_srq(HostContext* ctx, uint32_t handle) const {
  Srq* s = srqs_.find(handle);
  return s != nullptr && s->pd->ctx == ctx ? s : nullptr;
}

int Nic::modify_srq(HostContext* ctx, uint32_t handle, uint32_t limit) {
  Srq* s = find_srq(ctx, handle);
  if (s == nullptr || limit > s->rq.ring().entries()) return EINVAL;
  s->limit = limit;
  s->armed = limit > 0;
  return 0;
}

int Nic::destroy_srq(HostContext* ctx, uint32_t handle) {
  Srq* s = find_srq(ctx, handle);
  if (s == nullptr) return EINVAL;
  // A QP created on it holds it; an XRC target only delivers to it.
  for (auto& [qpn, qp] : qps_)
    if (qp->srq == s && qp->xrcd == nullptr) return EBUSY;
  refund(ctx, &Usage::srqs, srq_bytes(*s));
  forget_srq(*s);
  srqs_.erase(handle);
  return 0;
}

int Nic::create_ah(HostContext* ctx, uint32_t pd_handle, const ibv_ah_attr& attr, uint32_t& handle) {
  Pd* pd = pds_.find(pd_handle);
  if (pd == nullptr || pd->ctx != ctx) return EINVAL;
  // RoCE needs a GRH, and the source GID must be a RoCE v2 entry.
  if (!attr.is_global || attr.grh.sgid_index >= gids_.size() ||
      gids_[attr.grh.sgid_index].type != IBV_GID_TYPE_ROCE_V2)
    return EINVAL;
  auto ah = std::make_unique<Ah>();
  ah->pd = pd;
  std::memcpy(ah->dgid.b.data(), attr.grh.dgid.raw, 16);
  ah->sgid_index = attr.grh.sgid_index;
  ah->flow_label = attr.grh.flow_label;
  ah->traffic_class = attr.grh.traffic_class;
  ah->hop_limit = attr.grh.hop_limit;
  ah->sl = attr.sl;
  const auto in = ahs_.insert(std::move(ah));
  if (!in) return ENOMEM;
  handle = in->obj->handle = in->key;
  return 0;
}

int Nic::destroy_ah(HostContext* ctx, uint32_t handle) {
  Ah* ah = ahs_.find(handle);
  if (ah == nullptr || ah->pd->ctx != ctx) return EINVAL;
  ahs_.erase(handle);
  return 0;
}

Qp* Nic::find_qp(uint32_t qpn) const {
  auto it = qps_.find(qpn);
  return it == qps_.end() ? nullptr : it->second.get();
}

void Nic::qp_ring_sizes(const ibv_qp_cap& cap, uint32_t& sq_entries, uint32_t& sq_stride, uint32_t& rq_entries,
                        uint32_t& rq_stride) {
  sq_entries = round_up_pow2(std::max(cap.max_send_wr, 1u));
  sq_stride = send_wqe_stride(std::max(cap.max_send_sge, 1u), cap.max_inline_data);
  rq_entries = round_up_pow2(std::max(cap.max_recv_wr, 1u));
  rq_stride = recv_wqe_stride(std::max(cap.max_recv_sge, 1u));
}

int Nic::check_qp_caps(const ibv_qp_cap& cap) const {
  if (cap.max_send_wr > cfg_.max_qp_wr || cap.max_recv_wr > cfg_.max_qp_wr || cap.max_send_sge > cfg_.max_sge ||
      cap.max_recv_sge > cfg_.max_sge || cap.max_inline_data > kMaxInline)
    return EINVAL;
  return 0;
}

int Nic::create_qp(HostContext* ctx, const QpInit& init, uint32_t& qpn, Time) {
  // The host held what the application asked for to the caps
  // (check_qp_caps); init.cap may be that rounded up to the rings'
  // power-of-two sizes, so its work-request counts are bounded by the cap
  // rounded up the same way.
  ibv_qp_cap asked = init.cap;
  const uint32_t ring_max = round_up_pow2(cfg_.max_qp_wr);
  if (asked.max_send_wr > ring_max || asked.max_recv_wr > ring_max) return EINVAL;
  asked.max_send_wr = std::min(asked.max_send_wr, cfg_.max_qp_wr);
  asked.max_recv_wr = std::min(asked.max_recv_wr, cfg_.max_qp_wr);
  if (int e = check_qp_caps(asked); e != 0) return e;
  QpRefs refs;
  if (int e = find_qp_refs(ctx, init, refs); e != 0) return e;
  Srq* srq = refs.srq;
  if (qps_.size() >= cfg_.max_qp) return ENOMEM;
  uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
  qp_ring_sizes(init.cap, sq_entries, sq_stride, rq_entries, rq_stride);
  const bool own_rq = init.rq_ring != nullptr && srq == nullptr;
  const bool own_sq = init.sq_ring != nullptr;  // not a target's
  const uint64_t bytes = (own_sq ? ring_bytes(sq_entries, sq_stride) : 0) + (own_rq ? ring_bytes(rq_entries, rq_stride) : 0);
  if (int e = charge(ctx, &Usage::qps, cfg_.app_quota.qps, bytes); e != 0) return e;
  auto qp = std::make_unique<Qp>();
  qp->qpn = next_qpn_;
  next_qpn_ = next_free_qpn(next_qpn_, [this](uint32_t q) { return qps_.count(q) != 0; });
  qp->type = init.type;
  if (init.type == QpType::kUd) {
    // UD has no path MTU attribute: a message may fill the port's MTU.
    qp->path_mtu = active_mtu();
    qp->mtu = mtu_bytes(qp->path_mtu);
  }
  qp->ctx = ctx;
  qp->pd = refs.pd;
  qp->send_cq = refs.send_cq;
  qp->recv_cq = refs.recv_cq;
  qp->srq = srq;
  qp->xrcd = refs.xrcd;
  if (refs.xrcd != nullptr) {
    refs.xrcd->users++;
    qp->holds.push_back({ctx, refs.xrcd, true});
  }
  qp->cap = init.cap;
  qp->sq_sig_all = init.sq_sig_all;
  if (own_sq) qp->sq = Ring(init.sq_ring, sq_entries, sq_stride, true);
  if (own_rq) qp->rq = RecvQueue(Ring(init.rq_ring, rq_entries, rq_stride, true), std::max(init.cap.max_recv_sge, 1u));
  qp->swq.resize(sq_entries);
  qp->nic = this;
  qp->req.retry_timer.set_callback(&Nic::retry_thunk, qp.get());
  qp->req.rnr_timer.set_callback(&Nic::rnr_thunk, qp.get());
  Qp* raw = qp.get();
  qpn = raw->qpn;
  qps_[raw->qpn] = std::move(qp);
  return 0;
}

int Nic::find_qp_refs(HostContext* ctx, const QpInit& init, QpRefs& refs) const {
  if (init.type == QpType::kXrcRecv) {
    // A target: in an XRC domain; no PD, CQs or queues of its own (it
    // delivers to the SRQ each request names).
    refs.xrcd = find_xrcd(ctx, init.xrcd);
    if (refs.xrcd == nullptr || init.srq != 0 || init.sq_ring != nullptr || init.rq_ring != nullptr) return EINVAL;
    return 0;
  }
  if (init.sq_ring == nullptr || init.xrcd != 0) return EINVAL;
  Pd* pd = pds_.find(init.pd);
  refs.send_cq = find_cq(ctx, init.send_cq);
  if (pd == nullptr || pd->ctx != ctx || refs.send_cq == nullptr) return EINVAL;
  refs.pd = pd;
  if (init.type == QpType::kXrcSend) {
    // An initiator: a send queue only.
    if (init.srq != 0 || init.rq_ring != nullptr) return EINVAL;
    return 0;
  }
  refs.recv_cq = find_cq(ctx, init.recv_cq);
  if (refs.recv_cq == nullptr) return EINVAL;
  if (init.srq != 0) {
    refs.srq = find_srq(ctx, init.srq);
    // An XRC SRQ takes XRC requests only.
    if (refs.srq == nullptr || refs.srq->xrcd != nullptr) return EINVAL;
  } else if (init.rq_ring == nullptr) {
    return EINVAL;
  }
  return 0;
}

namespace {

// Only the lower 24 bits of a PSN or QPN mean anything.
bool fits24(uint32_t v) { return v <= 0xffffff; }

}  // namespace

void Nic::fill_path(Qp& qp) {
  const GidEntry& sgid = gids_[qp.ah.grh.sgid_index];
  std::memcpy(qp.dst_ip.b.data(), qp.ah.grh.dgid.raw, 16);
  wire::PathHeaders& p = qp.path;
  p.src_mac = cfg_.mac;
  p.src_ip = sgid.gid;
  p.dst_ip = qp.dst_ip;
  p.ipv6 = !qp.dst_ip.is_v4();
  const uint8_t tclass = qp.ah.grh.traffic_class != 0 ? qp.ah.grh.traffic_class : cfg_.default_traffic_class;
  p.dscp = uint8_t(tclass >> 2);
  p.ecn = (tclass & 3) != 0 ? wire::Ecn(tclass & 3) : cfg_.ecn ? wire::Ecn::kEct0 : wire::Ecn::kNotEct;
  // The kernel resolves the hop limit of a RoCEv2 path from the route
  // (ib_resolve_eth_dmac); applications' hop_limit 1 does not reach the wire.
  p.ttl = 64;
  const uint32_t fl = qp.ah.grh.flow_label != 0 ? qp.ah.grh.flow_label & 0xfffff
                                                : wire::calc_flow_label(qp.qpn, qp.dest_qpn);
  p.flow_label = fl;
  p.udp_sport = wire::flow_label_to_udp_sport(fl);
  qp.priority = prio_of(p.dscp);
  p.vlan = cfg_.vlan;
  p.vid = cfg_.vid;
  p.pcp = qp.priority;
}

int Nic::modify_qp(HostContext* ctx, uint32_t qpn, const ibv_qp_attr& attr, int mask, Time now) {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr || !qp->held_by(ctx)) return EINVAL;
  const ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr.cur_qp_state : qp->state;
  const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr.qp_state : cur;
  if (cur != qp->state && !(cur == IBV_QPS_RTR || cur == IBV_QPS_RTS || cur == IBV_QPS_SQD || cur == IBV_QPS_SQE))
    return EINVAL;
  if (!modify_qp_is_ok(cur, next, qp->type, mask)) return EINVAL;

  // Values.
  if ((mask & IBV_QP_PORT) && attr.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && attr.pkey_index != 0) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (attr.path_mtu < IBV_MTU_256 || attr.path_mtu > active_mtu())) return EINVAL;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > cfg_.max_qp_init_rd_atom) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > cfg_.max_qp_rd_atom) return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && attr.timeout > 31) return EINVAL;
  if ((mask & IBV_QP_RETRY_CNT) && attr.retry_cnt > 7) return EINVAL;
  if ((mask & IBV_QP_RNR_RETRY) && attr.rnr_retry > 7) return EINVAL;
  if ((mask & IBV_QP_MIN_RNR_TIMER) && attr.min_rnr_timer > 31) return EINVAL;
  if ((mask & IBV_QP_DEST_QPN) && !fits24(attr.dest_qp_num)) return EINVAL;
  if ((mask & IBV_QP_ACCESS_FLAGS) &&
      (attr.qp_access_flags & ~(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING)))
    return EINVAL;
  if (mask & IBV_QP_AV) {
    // RoCE: a GRH with a RoCE v2 source GID (this NIC sends RoCEv2 only).
    if (!attr.ah_attr.is_global || attr.ah_attr.port_num > 1 || attr.ah_attr.grh.sgid_index >= gids_.size() ||
        gids_[attr.ah_attr.grh.sgid_index].type != IBV_GID_TYPE_ROCE_V2)
      return EINVAL;
  }

  // Apply.
  if (mask & IBV_QP_PKEY_INDEX) qp->pkey_index = attr.pkey_index;
  if (mask & IBV_QP_PORT) qp->port_num = attr.port_num;
  if (mask & IBV_QP_QKEY) qp->qkey = attr.qkey;
  if (mask & IBV_QP_ACCESS_FLAGS) qp->access = attr.qp_access_flags;
  if (mask & IBV_QP_PATH_MTU) {
    qp->path_mtu = attr.path_mtu;
    qp->mtu = mtu_bytes(attr.path_mtu);
  }
  if (mask & IBV_QP_DEST_QPN) qp->dest_qpn = attr.dest_qp_num;
  if (mask & IBV_QP_RQ_PSN) qp->rq_psn = attr.rq_psn & wire::kPsnMask;
  if (mask & IBV_QP_SQ_PSN) qp->sq_psn = attr.sq_psn & wire::kPsnMask;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) qp->max_rd_atomic = attr.max_rd_atomic;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) qp->max_dest_rd_atomic = attr.max_dest_rd_atomic;
  if (mask & IBV_QP_MIN_RNR_TIMER) qp->min_rnr_timer = attr.min_rnr_timer;
  if (mask & IBV_QP_TIMEOUT) qp->timeout = attr.timeout;
  if (mask & IBV_QP_RETRY_CNT) qp->retry_cnt = attr.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) qp->rnr_retry = attr.rnr_retry;
  if (mask & IBV_QP_AV) qp->ah = attr.ah_attr;

  if (next == qp->state && !(mask & IBV_QP_STATE)) return 0;
  const ibv_qp_state prev = qp->state;
  qp->state = next;
  switch (next) {
    case IBV_QPS_RESET: {
      // Queues start again from index 0 on both sides; nothing completes,
      // and the application may reuse its buffers at once: frames still in
      // flight get their bytes first (lazy_payload.h).
      dpdk::materialize_all();
      timers().cancel(qp->req.retry_timer);
      timers().cancel(qp->req.rnr_timer);
      drop_prefetch(*qp);
      for (rte_mbuf*& m : qp->lr.ooo)
        if (m != nullptr) {
          rte_pktmbuf_free(m);
          m = nullptr;
        }
      if (qp->sq.valid()) {
        qp->sq.set_producer(0);
        qp->sq.set_consumer(0);
      }
      if (qp->rq.valid()) {
        qp->rq.ring().set_producer(0);
        qp->rq.ring().set_consumer(0);
        qp->rq = RecvQueue(qp->rq.ring(), std::max(qp->cap.max_recv_sge, 1u));
      }
      qp->req.sq_fetched = qp->req.sq_head = qp->req.sq_send = 0;
      qp->req.any_outstanding = false;
      qp->req.rd_atomic_outstanding = 0;
      qp->req.rnr_waiting = qp->req.read_rewind_pending = false;
      qp->lr.resend_psns.clear();
      qp->resp.in_message = qp->resp.recv_valid = false;
      qp->resp.write_rkey = 0;
      qp->resp.tasks.clear();
      qp->resp.ack_pending = qp->lr.nak_sent = false;
      qp->resp.rd_atomic_log = {};
      qp->lr.ooo_count = 0;
      qp->lr.trim_lost_valid = false;
      std::fill(qp->lr.ooo_trimmed.begin(), qp->lr.ooo_trimmed.end(), 0);
      // A QP starts again at line rate, its congestion state new.
      sched_.forget(*qp);
      qp->cc.reset();
      qp->pace_from = Time{0};
      qp->pace_bytes = 0;
      break;
    }
    case IBV_QPS_RTR:
      if (prev == IBV_QPS_INIT) {
        qp->resp.epsn = qp->rq_psn;
        qp->resp.msn = 0;
        qp->resp.last_req_opcode = 0xff;
        qp->resp.in_message = false;
        if (qp->reliable()) recovery_->prepare_receive(*qp);
      }
      if (!qp->is_ud()) {
        fill_path(*qp);
        resolve_neighbor(*qp, now);
      }
      break;
    case IBV_QPS_RTS:
      if (prev == IBV_QPS_RTR) {
        qp->req.send_psn = qp->req.next_new_psn = qp->req.una_psn = qp->sq_psn;
        qp->req.retry_left = qp->retry_cnt;
        qp->req.rnr_left = qp->rnr_retry;
        if (qp->is_ud()) {
          qp->path.src_mac = cfg_.mac;
          qp->neighbor_ok = true;
        }
      }
      activate(*qp, now);
      break;
    case IBV_QPS_ERR:
      qp_to_error(*qp, now);
      break;
    default:
      break;
  }
  return 0;
}

int Nic::query_qp(HostContext* ctx, uint32_t qpn, ibv_qp_attr& attr, ibv_qp_init_attr& init) const {
  Qp* qp = find_qp(qpn);
  if (qp == nullptr || !qp->held_by(ctx)) return EINVAL;
  attr = ibv_qp_attr{};
  attr.qp_state = qp->state;
  attr.cur_qp_state = qp->state;
  attr.path_mtu = qp->path_mtu;
  attr.path_mig_state = IBV_MIG_MIGRATED;
  attr.qkey = qp->qkey;
  attr.rq_psn = qp->rq_psn;
  attr.sq_psn = qp->sq_psn;
  attr.dest_qp_num = qp->dest_qpn;
  attr.qp_access_flags = qp->access;
  attr.cap = qp->cap;
  attr.ah_attr = qp->ah;
  attr.pkey_index = qp->pkey_index;
  attr.sq_draining = 0;
  attr.max_rd_atomic = qp->max_rd_atomic;
  attr.max_dest_rd_atomic = qp->max_dest_rd_atomic;
  attr.min_rnr_timer = qp->min_rnr_timer;
  attr.port_num = qp->port_num;
  attr.timeout = qp->timeout;
  attr.retry_cnt = qp->retry_cnt;
  attr.rnr_retry = qp->rnr_retry;
  init = ibv_qp_init_attr{};
  init.cap = qp->cap;
  switch (qp->type) {
    case QpType::kRc: init.qp_type = IBV_QPT_RC; break;
    case QpType::kUc: init.qp_type = IBV_QPT_UC; break;
    case QpType::kUd: init.qp_type = IBV_QPT_UD; break;
    case QpType::kXrcSend: init.qp_type = IBV_QPT_XRC_SEND; break;
    case QpType::kXrcRecv: init.qp_type = IBV_QPT_XRC_RECV; break;
  }
  init.sq_sig_all = qp->sq_sig_all;
  return 0;
}

int Nic::open_qp(HostContext* ctx, uint32_t xrcd_handle, uint32_t qpn) {
  XrcdRef* x = find_xrcd(ctx, xrcd_handle);
  Qp* qp = find_qp(qpn);
  if (x == nullptr || qp == nullptr || qp->type != QpType::kXrcRecv || qp->xrcd->xrcd != x->xrcd) return EINVAL;
  x->users++;
  qp->holds.push_back({ctx, x, false});
  return 0;
}

int Nic::destroy_qp(HostContext* ctx, uint32_t qpn) {
  auto it = qps_.find(qpn);
  if (it == qps_.end() || !it->second->held_by(ctx)) return EINVAL;
  Qp* qp = it->second.get();
  if (qp->holds.size() > 1) {
    // One holder of an XRC target lets go (its creator too: the QP stays
    // with the others, in the first's name from now on).
    const auto h = std::find_if(qp->holds.begin(), qp->holds.end(), [ctx](const Qp::TargetHold& t) { return t.ctx == ctx; });
    h->xrcd->users--;
    if (h->creator) refund(ctx, &Usage::qps, qp_bytes(*qp));  // counted against its creator
    qp->holds.erase(h);
    qp->ctx = qp->holds.front().ctx;
    qp->xrcd = qp->holds.front().xrcd;
    return 0;
  }
  // Its frames in flight may point into buffers the application reuses
  // once the QP is gone (lazy_payload.h).
  dpdk::materialize_all();
  // Its type 2 windows are unbound: free to be bound again, and no later
  // QP with this QPN reaches them.
  unbind_windows(*qp);
  if (qp->xrcd != nullptr) qp->xrcd->users--;
  // A target whose creator let go was refunded then.
  if (qp->holds.empty() || qp->holds.front().creator) refund(ctx, &Usage::qps, qp_bytes(*qp));
  std::erase_if(dma_failed_, [qp](const DmaOwner& o) { return o.qp == qp; });
  sched_.forget(*qp);
  std::erase(waiting_for_arp_, qp);
  for (rte_mbuf* m : qp->lr.ooo)
    if (m != nullptr) rte_pktmbuf_free(m);
  drop_prefetch(*qp);
  qps_.erase(it);
  return 0;
}

}  // namespace rocemu::nic
