#include "nic/verbs/process_memory.h"

#include <cerrno>
#include <cstring>

namespace rocemu::verbs {

ProcessMemory::ProcessMemory(pid_t pid) : pid_(pid), staging_(kStaging) {
  local_.reserve(kMaxIov);
  remote_.reserve(kMaxIov);
}

bool ProcessMemory::fail(ssize_t result) {
  failures_++;
  if (result < 0 && errno == ESRCH) gone_ = true;
  return false;
}

bool ProcessMemory::read(uint64_t addr, void* dst, size_t len) {
  const nic::HostPiece p{addr, len};
  return readv(&p, 1, dst);
}

bool ProcessMemory::readv(const nic::HostPiece* pieces, size_t n, void* dst) {
  // What this process reads must include what it wrote before.
  if (pending_ > 0 && !flush()) return false;
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
    const ssize_t r = process_vm_readv(pid_, &local, 1, remote, k, 0);
    if (r != ssize_t(bytes)) return fail(r);
    total += bytes;
    pieces += k;
    n -= k;
  }
  return true;
}

bool ProcessMemory::readv_scatter(const nic::HostPiece* pieces, size_t n, const iovec* dst, size_t nd) {
  if (pending_ > 0 && !flush()) return false;
  // One call when both lists fit (the NIC's read-ahead: up to 128 frames).
  constexpr size_t kMax = 128;
  if (n > kMax || nd > kMax) return HostMemory::readv_scatter(pieces, n, dst, nd);
  iovec remote[kMax];
  size_t bytes = 0, room = 0;
  for (size_t i = 0; i < n; i++) {
    remote[i] = {reinterpret_cast<void*>(pieces[i].addr), pieces[i].len};
    bytes += pieces[i].len;
  }
  for (size_t i = 0; i < nd; i++) room += dst[i].iov_len;
  if (room != bytes) return false;
  calls_++;
  const ssize_t r = process_vm_readv(pid_, dst, nd, remote, n, 0);
  if (r != ssize_t(bytes)) return fail(r);
  return true;
}

bool ProcessMemory::write(uint64_t addr, const void* src, size_t len) {
  if (pending_ > 0 && !flush()) return false;
  iovec local{const_cast<void*>(src), len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  calls_++;
  const ssize_t r = process_vm_writev(pid_, &local, 1, &remote, 1, 0);
  if (r != ssize_t(len)) return fail(r);
  return true;
}

bool ProcessMemory::add(uint64_t addr, const void* src, size_t len) {
  if (local_.size() == kMaxIov || remote_.size() == kMaxIov) {
    if (!flush()) return false;
  }
  local_.push_back({const_cast<void*>(src), len});
  pending_ += len;
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

bool ProcessMemory::write_deferred(uint64_t addr, const void* src, size_t len) {
  if (len > kStaging) return write(addr, src, len);
  if (staged_ + len > kStaging && !flush()) return false;
  uint8_t* copy = staging_.data() + staged_;
  std::memcpy(copy, src, len);
  staged_ += len;
  return add(addr, copy, len);
}

bool ProcessMemory::write_deferred_ref(uint64_t addr, const void* src, size_t len) { return add(addr, src, len); }

bool ProcessMemory::flush() {
  if (pending_ == 0) return true;
  calls_++;
  const ssize_t r = process_vm_writev(pid_, local_.data(), local_.size(), remote_.data(), remote_.size(), 0);
  const bool ok = r == ssize_t(pending_);
  if (!ok) fail(r);
  staged_ = 0;
  pending_ = 0;
  local_.clear();
  remote_.clear();
  return ok;
}

}  // namespace rocemu::verbs
