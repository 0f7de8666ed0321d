// DMA into another process: process_vm_readv / process_vm_writev on the
// application's pid. The NIC only calls these inside MRs it has checked,
// and an application that went away makes them fail (ESRCH), never the
// engine.
#pragma once

#include <sys/types.h>

#include "nic/dma.h"

namespace rocemu::verbs {

class ProcessMemory final : public nic::HostMemory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}
  bool read(uint64_t addr, void* dst, size_t len) override;
  bool write(uint64_t addr, const void* src, size_t len) override;
  pid_t pid() const { return pid_; }
  uint64_t failures() const { return failures_; }

 private:
  pid_t pid_;
  uint64_t failures_ = 0;
};

}  // namespace rocemu::verbs
