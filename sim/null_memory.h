// Host memory for scenario hosts: a scenario measures the fabric, not the
// data, so payload is not kept. Reads give zeros (every packet carries the
// same bytes from run to run), writes are dropped. Memory regions need no
// backing store, so a flow may move gigabytes in any message size.
#pragma once

#include <cstring>

#include "nic/dma.h"

namespace rocemu::sim {

class NullMemory final : public nic::HostMemory {
 public:
  bool read(uint64_t, void* dst, size_t len) override {
    std::memset(dst, 0, len);
    return true;
  }
  bool write(uint64_t, const void*, size_t) override { return true; }
};

}  // namespace rocemu::sim
