// DMA into another process: process_vm_readv / process_vm_writev on the
// application's pid. The NIC only calls these inside MRs it has checked,
// and an application that went away makes them fail (ESRCH), never the
// engine. Each call pays for a permission check and a page walk, so
// deferred writes are gathered (copied aside, neighbours of one operation
// merged) and go in one call on flush(). process_vm_writev stops at the
// first piece it cannot write: flush() then names that piece's tag and
// goes on with the pieces behind it.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <vector>

#include "nic/dma.h"

namespace rocemu::verbs {

class ProcessMemory final : public nic::HostMemory {
 public:
  explicit ProcessMemory(pid_t pid);
  bool read(uint64_t addr, void* dst, size_t len) override;
  bool write(uint64_t addr, const void* src, size_t len) override;
  bool readv(const nic::HostPiece* pieces, size_t n, void* dst) override;
  bool readv_scatter(const nic::HostPiece* pieces, size_t n, const iovec* dst, size_t nd) override;
  bool write_deferred(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) override;
  bool write_deferred_ref(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) override;
  bool flush() override;
  bool batches() const override { return true; }
  pid_t pid() const { return pid_; }
  uint64_t failures() const { return failures_; }
  uint64_t calls() const { return calls_; }

 private:
  static constexpr size_t kStaging = 512 * 1024;
  static constexpr size_t kMaxIov = 512;
  pid_t pid_;
  uint64_t failures_ = 0;
  uint64_t calls_ = 0;
  bool fail(ssize_t result);  // counts a failed call; notes ESRCH
  bool add(uint64_t addr, const void* src, size_t len, nic::DmaTag tag);
  // One process_vm_writev of the pending pieces from remote_[first] on;
  // the bytes it wrote, or -1.
  ssize_t write_from(size_t first, size_t local_skip);
  void clear_pending();
  std::vector<uint8_t> staging_;  // copies of sources the caller reuses at once
  size_t staged_ = 0;
  size_t pending_ = 0;            // bytes waiting for flush()
  std::vector<iovec> local_;      // where the pending bytes are, in order
  std::vector<iovec> remote_;     // where they go, in order (neighbours merged)
  std::vector<nic::DmaTag> tags_;  // whose each remote_ piece is
  std::vector<iovec> retry_;      // local pieces behind a failed one
};

}  // namespace rocemu::verbs
