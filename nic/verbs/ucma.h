// The engine side of /dev/infiniband/rdma_cm for programs under `rocemu
// exec`: the kernel's ucma ABI (version 4, <rdma/rdma_user_cm.h>) as
// librdmacm writes it, served by the NIC's connection manager (nic/cm).
// The provider forwards each write() of a command here (the bytes the
// application wrote, SET_OPTION's value appended) and copies the response
// back to the address the command names. AF_IB is not offered, so
// librdmacm uses BIND_IP, RESOLVE_IP and QUERY_ROUTE.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/engine/time.h"
#include "nic/nic.h"

namespace rocemu::verbs {

struct UcmaResponse {
  uint64_t address = 0;        // where the application wants it (0: none)
  std::vector<uint8_t> bytes;  // at most the header's `out`
};

// Runs one command of channel `channel` (engine thread). Returns 0 or an
// errno value, as the kernel's write() would fail.
int serve_ucma(nic::Nic& nic, uint32_t channel, std::span<const uint8_t> cmd, UcmaResponse& out, Time now);

}  // namespace rocemu::verbs
