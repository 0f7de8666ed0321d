// Memory windows (IBA 10.6.7; ibv_alloc_mw(3), ibv_bind_mw(3)): type 1
// windows bound by ibv_bind_mw, type 2 (2B) windows bound by IBV_WR_BIND_MW
// to one QP and freed by IBV_WR_LOCAL_INV or a peer's SEND with
// invalidate. Binds and local invalidates are send WQEs: the requester
// executes each when it reaches it (after everything posted before it has
// been sent) and it completes in order with IBV_WC_BIND_MW or
// IBV_WC_LOCAL_INV, or fails with IBV_WC_MW_BIND_ERR as mlx5's binds do
// (its local invalidate is a bind of length 0). The responder reaches the
// MR behind a window key through mw_grants.
#include "nic/nic.h"

namespace rocemu::nic {

namespace {

constexpr int kWindowRights = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

// A window's index (the rkey's upper 24 bits, kMwKeyBit included): the
// handle's slot and three bits of its generation.
uint32_t mw_index(uint32_t handle) {
  constexpr uint32_t kGenBits = KeyedTable<Mw, 19>::kGenBits;
  return kMwKeyBit >> 8 | (handle >> kGenBits) << 3 | (handle & 7);
}

// What a window of PD `pd` with remote `rights` needs of its MR, at the
// bind and again at each access (the MR may have been invalidated or
// reregistered in place since): not invalidated, the same PD, bind
// allowed (C10-73), not zero-based, local write behind remote write or
// atomic rights (C10-74).
bool mr_admits_window(const Mr& mr, const Pd* pd, int rights) {
  if (mr.invalidated || mr.pd != pd || !(mr.access & IBV_ACCESS_MW_BIND) || (mr.access & IBV_ACCESS_ZERO_BASED))
    return false;
  return !(rights & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) || (mr.access & IBV_ACCESS_LOCAL_WRITE);
}

// The lists of windows an MR or QP has bound (MwList); `links` names the
// window's links for that kind of list. Removing a window that is not on
// the list does nothing.
void mw_list_push(MwList& list, Mw& w, MwLinks Mw::*links) {
  MwLinks& l = w.*links;
  l.prev = nullptr;
  l.next = list.head;
  if (list.head != nullptr) (list.head->*links).prev = &w;
  list.head = &w;
  list.size++;
}

void mw_list_remove(MwList& list, Mw& w, MwLinks Mw::*links) {
  MwLinks& l = w.*links;
  if (l.prev == nullptr && list.head != &w) return;
  (l.prev != nullptr ? (l.prev->*links).next : list.head) = l.next;
  if (l.next != nullptr) (l.next->*links).prev = l.prev;
  l = MwLinks{};
  list.size--;
}

}  // namespace

int Nic::alloc_mw(HostContext* ctx, uint32_t pd_handle, int type, uint32_t& handle, uint32_t& rkey) {
  Pd* pd = pds_.find(pd_handle);
  if (pd == nullptr || pd->ctx != ctx) return EINVAL;
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) return EINVAL;
  if (mws_.size() >= cfg_.max_mr) return ENOMEM;
  if (int e = charge(ctx, &HostContext::Usage::mws, cfg_.app_quota.mws); e != 0) return e;
  auto mw = std::make_unique<Mw>();
  mw->pd = pd;
  mw->type = ibv_mw_type(type);
  const auto in = mws_.insert(std::move(mw));
  if (!in) {
    refund(ctx, &HostContext::Usage::mws);
    return ENOMEM;
  }
  Mw& w = *in->obj;
  w.handle = handle = in->key;
  w.rkey = rkey = mw_index(w.handle) << 8 | mw_key_byte_++;
  mw_by_index_[w.rkey >> 8] = &w;
  return 0;
}

int Nic::dealloc_mw(HostContext* ctx, uint32_t handle) {
  Mw* mw = mws_.find(handle);
  if (mw == nullptr || mw->pd->ctx != ctx) return EINVAL;
  unbind_mw(*mw);
  refund(ctx, &HostContext::Usage::mws);
  mw_by_index_.erase(mw->rkey >> 8);
  mws_.erase(handle);
  return 0;
}

Mw* Nic::find_mw(uint32_t rkey) const {
  const auto it = mw_by_index_.find(rkey >> 8);
  return it != mw_by_index_.end() && it->second->rkey == rkey ? it->second : nullptr;
}

Mr* Nic::mw_grants(const Qp& qp, const Pd* pd, uint32_t rkey, uint64_t va, uint64_t len, int access) const {
  const Mw* mw = find_mw(rkey);
  if (mw == nullptr || !mw->bound || mw->pd != pd || !(mw->access & access) || !(qp.access & access) ||
      !mw->contains(va, len))
    return nullptr;
  if (mw->type == IBV_MW_TYPE_2 && mw->qpn != qp.qpn) return nullptr;
  // The MR as it is now. It cannot be deregistered under a bound window;
  // reregistering it to other memory, PD or key unbinds its windows
  // (unbind_windows); what the bind checked of it is checked again, for
  // this access (an in-place rereg may have taken local write away, an
  // invalidation everything).
  Mr* mr = mrs_.find(mw->mr_key);
  if (mr == nullptr || !mr_admits_window(*mr, mw->pd, access) || !mr->contains(va, len)) return nullptr;
  return mr;
}

ibv_wc_status Nic::execute_local_wqe(Qp& qp, const SendWork& w) {
  return w.opcode == IBV_WR_BIND_MW ? bind_mw(qp, w) : local_invalidate(qp, w.imm);
}

// The bind WQE (queues.h): imm names the window by its key now, rkey is
// its new key, remote_addr/compare_add the range, swap the rights, ud_ah
// the MR's key (0: no MR).
ibv_wc_status Nic::bind_mw(Qp& qp, const SendWork& w) {
  const auto it = mw_by_index_.find(w.imm >> 8);
  Mw* mw = it != mw_by_index_.end() ? it->second : nullptr;
  const uint32_t new_rkey = w.rkey;
  const uint64_t addr = w.remote_addr, length = w.compare_add;
  // Remote rights only; local write, which means nothing for a window, is
  // let pass (mlx5 checks the flags only in debug builds of its provider).
  const int access = int(w.swap) & ~IBV_ACCESS_LOCAL_WRITE;
  // The window: this QP's PD, the new key of the same window (only its
  // key byte is the consumer's); a type 2 window must be free (o10-37.2.30).
  if (mw == nullptr || mw->pd != qp.pd || (new_rkey >> 8) != (mw->rkey >> 8)) return IBV_WC_MW_BIND_ERR;
  if (mw->type == IBV_MW_TYPE_2 && (mw->bound || w.ud_ah == 0 || length == 0)) return IBV_WC_MW_BIND_ERR;
  if (w.swap >> 32 != 0 || (access & ~kWindowRights) != 0) return IBV_WC_MW_BIND_ERR;  // zero-based and more
  Mr* mr = nullptr;
  if (w.ud_ah != 0) {
    mr = mrs_.find(w.ud_ah);
    // The MR: as a window needs it, the range inside it (C10-75).
    if (mr == nullptr || !mr_admits_window(*mr, mw->pd, access)) return IBV_WC_MW_BIND_ERR;
    if (length > 0 && !mr->contains(addr, length)) return IBV_WC_MW_BIND_ERR;
  } else if (addr != 0 || length != 0) {
    return IBV_WC_MW_BIND_ERR;
  }
  unbind_mw(*mw);  // a type 1 window bound again leaves what it had
  mw->rkey = new_rkey;  // whoever held the old key has lost the window
  mw->qpn = qp.qpn;
  if (mr == nullptr || length == 0) return IBV_WC_SUCCESS;
  mw->bound = true;
  mw->mr_key = mr->key;
  mw->addr = addr;
  mw->length = length;
  mw->access = access;
  mw_list_push(mr->windows, *mw, &Mw::on_mr);
  if (mw->type == IBV_MW_TYPE_2) mw_list_push(qp.windows, *mw, &Mw::on_qp);
  return IBV_WC_SUCCESS;
}

// A type 2 window that is free already (invalidated, or unbound when its
// QP went) is invalidated again without complaint, locally or remotely:
// rxe_check_invalidate_mw refuses only a type 1 or deallocated window (a
// free one would take rxe_do_invalidate_mw to its missing QP and MR), and
// no refusal of it was found in the IBA.
ibv_wc_status Nic::local_invalidate(Qp& qp, uint32_t rkey) {
  Mw* mw = find_mw(rkey);
  // Only a type 2 window of the QP's PD, by its key now (o10-37.2.26).
  if (mw == nullptr || mw->type != IBV_MW_TYPE_2 || mw->pd != qp.pd) return IBV_WC_MW_BIND_ERR;
  unbind_mw(*mw);
  return IBV_WC_SUCCESS;
}

bool Nic::remote_invalidate_mw(const Qp& qp, uint32_t rkey) {
  Mw* mw = find_mw(rkey);
  if (mw == nullptr || mw->type != IBV_MW_TYPE_2 || mw->pd != qp.pd) return false;
  unbind_mw(*mw);
  return true;
}

void Nic::unbind_mw(Mw& mw) {
  if (!mw.bound) return;
  if (Mr* mr = mrs_.find(mw.mr_key); mr != nullptr) mw_list_remove(mr->windows, mw, &Mw::on_mr);
  if (mw.type == IBV_MW_TYPE_2)  // only these are on their QP's list
    if (Qp* qp = find_qp(mw.qpn); qp != nullptr) mw_list_remove(qp->windows, mw, &Mw::on_qp);
  mw.bound = false;
  mw.mr_key = 0;
  mw.addr = mw.length = 0;
  mw.access = 0;
}

// Each taken off this list first, whatever unbind_mw finds under the
// window's MR key and QPN: the loop ends.
void Nic::unbind_windows(Mr& mr) {
  while (Mw* mw = mr.windows.head) {
    mw_list_remove(mr.windows, *mw, &Mw::on_mr);
    unbind_mw(*mw);
  }
}

void Nic::unbind_windows(Qp& qp) {
  while (Mw* mw = qp.windows.head) {
    mw_list_remove(qp.windows, *mw, &Mw::on_qp);
    unbind_mw(*mw);
  }
}

}  // namespace rocemu::nic
