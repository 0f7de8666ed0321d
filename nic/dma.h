// The NIC's window onto host memory. A real NIC DMAs into the registered
// pages of a process; the emulated one copies with memcpy (tests and
// virtual time, everything in one process) or process_vm_readv/writev (the
// verbs provider, see verbs/). The NIC only ever calls these inside a
// registered MR whose bounds and access it has checked.
//
// Reaching another process costs a system call, so the interface lets the
// NIC batch: readv() gathers several pieces in one call, and writes may be
// deferred and flushed together -- the NIC flushes before anything that
// makes the data visible (a completion, an ACK, a read of the same memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rocemu::nic {

struct HostPiece {
  uint64_t addr;
  size_t len;
};

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Copies len bytes; false if the host cannot be reached (process gone).
  virtual bool read(uint64_t addr, void* dst, size_t len) = 0;
  virtual bool write(uint64_t addr, const void* src, size_t len) = 0;
  // Reads `n` pieces, one after the other, into `dst`.
  virtual bool readv(const HostPiece* pieces, size_t n, void* dst) {
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; i++) {
      if (!read(pieces[i].addr, p, pieces[i].len)) return false;
      p += pieces[i].len;
    }
    return true;
  }
  // A write that may wait for flush(); the source may be reused at once.
  virtual bool write_deferred(uint64_t addr, const void* src, size_t len) { return write(addr, src, len); }
  // The same, but the source stays valid until flush(): no copy is made.
  virtual bool write_deferred_ref(uint64_t addr, const void* src, size_t len) { return write(addr, src, len); }
  // Completes deferred writes; false if one failed.
  virtual bool flush() { return true; }
  // True if each call is expensive enough that the NIC should read ahead.
  virtual bool batches() const { return false; }
};

// This process's own memory: addresses are pointers.
class LocalMemory final : public HostMemory {
 public:
  bool read(uint64_t addr, void* dst, size_t len) override {
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return true;
  }
  bool write(uint64_t addr, const void* src, size_t len) override {
    std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return true;
  }
};

}  // namespace rocemu::nic
