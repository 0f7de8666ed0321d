// The NIC's window onto host memory. A real NIC DMAs into the registered
// pages of a process; the emulated one copies with memcpy (tests and
// virtual time, everything in one process) or process_vm_readv/writev (the
// verbs provider, see verbs/). The NIC only ever calls these inside a
// registered MR whose bounds and access it has checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rocemu::nic {

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Copies len bytes; false if the host cannot be reached (process gone).
  virtual bool read(uint64_t addr, void* dst, size_t len) = 0;
  virtual bool write(uint64_t addr, const void* src, size_t len) = 0;
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
