#include "nic/verbs/process_memory.h"

#include <cstring>

namespace rocemu::verbs {

ProcessMemory::ProcessMemory(pid_t pid) : pid_(pid), staging_(kStaging) { remote_.reserve(kMaxIov); }

bool ProcessMemory::read(uint64_t addr, void* dst, size_t len) {
  const nic::HostPiece p{addr, len};
  return readv(&p, 1, dst);
}

bool ProcessMemory::readv(const nic::HostPiece* pieces, size_t n, void* dst) {
  // What this process reads must include what it wrote before.
  if (staged_ > 0 && !flush()) return false;
  size_t total = 0;
  iovec remote[64];
  while (n > 0) {
    const size_t k = n < 64 ? n : 64;
    size_t bytes = 0;
    for (size_t i = 0; i < k; i++) {
      remote[i] = {reinterpret_cast<void*>(pieces[i].addr), pieces[i].len};
      bytes += pieces[i].len;
    }
    iovec local{static_cast<uint8_t*>(dst) + total, bytes};
    calls_++;
    if (process_vm_readv(pid_, &local, 1, remote, k, 0) != ssize_t(bytes)) {
      failures_++;
      return false;
    }
    total += bytes;
    pieces += k;
    n -= k;
  }
  return true;
}

bool ProcessMemory::write(uint64_t addr, const void* src, size_t len) {
  if (staged_ > 0 && !flush()) return false;
  iovec local{const_cast<void*>(src), len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  calls_++;
  if (process_vm_writev(pid_, &local, 1, &remote, 1, 0) != ssize_t(len)) {
    failures_++;
    return false;
  }
  return true;
}

bool ProcessMemory::write_deferred(uint64_t addr, const void* src, size_t len) {
  if (len > kStaging) return write(addr, src, len);
  if (staged_ + len > kStaging || remote_.size() == kMaxIov) {
    if (!flush()) return false;
  }
  std::memcpy(staging_.data() + staged_, src, len);
  staged_ += len;
  // Back to back in the application too: one piece.
  if (!remote_.empty()) {
    iovec& last = remote_.back();
    if (static_cast<uint8_t*>(last.iov_base) + last.iov_len == reinterpret_cast<uint8_t*>(addr)) {
      last.iov_len += len;
      return true;
    }
  }
  remote_.push_back({reinterpret_cast<void*>(addr), len});
  return true;
}

bool ProcessMemory::flush() {
  if (staged_ == 0) return true;
  iovec local{staging_.data(), staged_};
  calls_++;
  const bool ok = process_vm_writev(pid_, &local, 1, remote_.data(), remote_.size(), 0) == ssize_t(staged_);
  if (!ok) failures_++;
  staged_ = 0;
  remote_.clear();
  return ok;
}

}  // namespace rocemu::verbs
