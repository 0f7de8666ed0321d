// What the kernel's ucma checks of a command before it does anything,
// checked the same way by the provider (before it waits) and by the engine
// (which validates again what the application wrote).
#pragma once

#include <netinet/in.h>  // before the kernel header: glibc owns the in6 structs
#include <rdma/rdma_user_cm.h>

#include <cstddef>
#include <cstdint>

namespace rocemu::verbs {

// The least room for the response (the header's `out`) a command needs:
// below it the kernel's write() fails with ENOSPC. QUERY_ROUTE takes a
// response without its trailing ibdev_index, GET_EVENT one without the
// reserved word and the ECE (older librdmacm); commands with no response 0.
inline size_t ucma_min_out(uint32_t cmd) {
  switch (cmd) {
    case RDMA_USER_CM_CMD_CREATE_ID: return sizeof(rdma_ucm_create_id_resp);
    case RDMA_USER_CM_CMD_DESTROY_ID: return sizeof(rdma_ucm_destroy_id_resp);
    case RDMA_USER_CM_CMD_QUERY_ROUTE: return offsetof(rdma_ucm_query_route_resp, ibdev_index);
    case RDMA_USER_CM_CMD_INIT_QP_ATTR: return sizeof(ib_uverbs_qp_attr);
    case RDMA_USER_CM_CMD_GET_EVENT:
      return sizeof(rdma_ucm_event_resp) - sizeof(rdma_ucm_event_resp::reserved) - sizeof(rdma_ucm_event_resp::ece);
    default: return 0;
  }
}

}  // namespace rocemu::verbs
