// libibverbs' conversions of kernel ABI structures (rdma-core's
// marshall.c), which librdmacm calls on what /dev/infiniband/rdma_cm
// answers: rdma_init_qp_attr, rdma_get_cm_event, the route query. Plain
// field copies, done here: the real libibverbs is not always reachable by
// dlsym(RTLD_NEXT) from a preloaded library (UCX dlopens libuct_rdmacm,
// and with it librdmacm and libibverbs, RTLD_LOCAL), and a conversion
// that did nothing left librdmacm's caller with uninitialised attributes.
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

#include <cstring>

namespace kern_abi_path {

// The fields a path record has under the same name in both layouts (the
// GIDs are arrays in one, unions in the other).
template <typename To, typename From>
void copy_scalars(To& dst, const From& src) {
  dst.dlid = src.dlid;
  dst.slid = src.slid;
  dst.raw_traffic = src.raw_traffic;
  dst.flow_label = src.flow_label;
  dst.hop_limit = src.hop_limit;
  dst.traffic_class = src.traffic_class;
  dst.reversible = src.reversible;
  dst.numb_path = src.numb_path;
  dst.pkey = src.pkey;
  dst.sl = src.sl;
  dst.mtu_selector = src.mtu_selector;
  dst.mtu = src.mtu;
  dst.rate_selector = src.rate_selector;
  dst.rate = src.rate;
  dst.packet_life_time_selector = src.packet_life_time_selector;
  dst.packet_life_time = src.packet_life_time;
  dst.preference = src.preference;
}

}  // namespace kern_abi_path

extern "C" {

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid.raw);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = ibv_qp_state(src->cur_qp_state);
  dst->path_mtu = ibv_mtu(src->path_mtu);
  dst->path_mig_state = ibv_mig_state(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid.raw);
  std::memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid.raw);
  kern_abi_path::copy_scalars(*dst, *src);
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof dst->dgid);
  std::memcpy(dst->sgid, src->sgid.raw, sizeof dst->sgid);
  kern_abi_path::copy_scalars(*dst, *src);
}

}  // extern "C"
