#include "nic/verbs/process_memory.h"

#include <sys/uio.h>

namespace rocemu::verbs {

bool ProcessMemory::read(uint64_t addr, void* dst, size_t len) {
  iovec local{dst, len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  const ssize_t n = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
  if (n != ssize_t(len)) {
    failures_++;
    return false;
  }
  return true;
}

bool ProcessMemory::write(uint64_t addr, const void* src, size_t len) {
  iovec local{const_cast<void*>(src), len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  const ssize_t n = process_vm_writev(pid_, &local, 1, &remote, 1, 0);
  if (n != ssize_t(len)) {
    failures_++;
    return false;
  }
  return true;
}

}  // namespace rocemu::verbs
