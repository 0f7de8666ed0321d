// The text libibverbs' ibv_wc_status_str gives for each completion status:
// the NIC's messages and the provider's own ibv_wc_status_str use it.
#pragma once

#include <infiniband/verbs.h>

namespace rocemu::nic {

inline const char* wc_status_name(ibv_wc_status s) {
  static const char* const kNames[] = {
      "success", "local length error", "local QP operation error", "local EE context operation error",
      "local protection error", "Work Request Flushed Error", "memory management operation error",
      "bad response error", "local access error", "remote invalid request error", "remote access error",
      "remote operation error", "transport retry counter exceeded", "RNR retry counter exceeded",
      "local RDD violation error", "remote invalid RD request", "aborted error", "invalid EE context number",
      "invalid EE context state", "fatal error", "response timeout error", "general error", "TM error",
      "TM rendezvous error"};
  return unsigned(s) < sizeof kNames / sizeof kNames[0] ? kNames[s] : "unknown";
}

}  // namespace rocemu::nic
