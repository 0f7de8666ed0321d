#include "nic/verbs/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rocemu::verbs {

namespace {

// The local pieces holding the next `len` bytes of `v` (from the cursor
// `i`, `off` on), appended to `out`; the cursor moves past them.
void take(const iovec* v, size_t nv, size_t& i, size_t& off, size_t len, std::vector<iovec>& out) {
  while (len > 0 && i < nv) {
    const size_t k = std::min(len, v[i].iov_len - off);
    if (k > 0) {
      auto* base = static_cast<uint8_t*>(v[i].iov_base) + off;
      // Back to back locally too (staged copies are): one piece.
      if (!out.empty() && static_cast<uint8_t*>(out.back().iov_base) + out.back().iov_len == base)
        out.back().iov_len += k;
      else
        out.push_back({base, k});
    }
    len -= k;
    off += k;
    if (off == v[i].iov_len) i++, off = 0;
  }
}

}  // namespace

Result<std::unique_ptr<ProcessMemory>> ProcessMemory::open(int proc_dir_fd, pid_t pid) {
  const int fd = openat(proc_dir_fd, "mem", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return Status::error("/proc/" + std::to_string(pid) + "/mem: " + std::strerror(errno));
  return std::unique_ptr<ProcessMemory>(new ProcessMemory(fd, pid));
}

ProcessMemory::ProcessMemory(int mem_fd, pid_t pid) : fd_(mem_fd), pid_(pid), staging_(kStaging) {
  local_.reserve(kMaxIov);
  remote_.reserve(kMaxIov);
}

ProcessMemory::~ProcessMemory() { close(fd_); }

bool ProcessMemory::transfer(bool write, uint64_t addr, const iovec* iov, int n, size_t len) {
  calls_++;
  const auto at = off_t(addr);
  const ssize_t r = write ? pwritev(fd_, iov, n, at) : preadv(fd_, iov, n, at);
  if (r == ssize_t(len)) return true;
  failures_++;
  // Nothing at all, and no error: the address space has gone with its
  // process. (An unmapped address is EIO or a short count.)
  if (r == 0 && len > 0) gone_ = true;
  return false;
}

bool ProcessMemory::read(uint64_t addr, void* dst, size_t len) {
  const nic::HostPiece p{addr, len};
  return readv(&p, 1, dst);
}

bool ProcessMemory::readv(const nic::HostPiece* pieces, size_t n, void* dst) {
  size_t total = 0;
  for (size_t i = 0; i < n; i++) total += pieces[i].len;
  const iovec d{dst, total};
  return readv_scatter(pieces, n, &d, 1);
}

bool ProcessMemory::readv_scatter(const nic::HostPiece* pieces, size_t n, const iovec* dst, size_t nd) {
  // What this process reads must include what it wrote before.
  flush();
  size_t room = 0, bytes = 0;
  for (size_t i = 0; i < nd; i++) room += dst[i].iov_len;
  for (size_t i = 0; i < n; i++) bytes += pieces[i].len;
  if (room != bytes) return false;
  size_t di = 0, doff = 0;
  for (size_t i = 0; i < n;) {
    // Pieces back to back in the application: one call.
    const uint64_t addr = pieces[i].addr;
    size_t len = pieces[i].len;
    for (i++; i < n && pieces[i].addr == addr + len; i++) len += pieces[i].len;
    slice_.clear();
    take(dst, nd, di, doff, len, slice_);
    if (!transfer(false, addr, slice_.data(), int(slice_.size()), len)) return false;
  }
  return true;
}

bool ProcessMemory::write(uint64_t addr, const void* src, size_t len) {
  flush();
  const iovec local{const_cast<void*>(src), len};
  return transfer(true, addr, &local, 1, len);
}

bool ProcessMemory::add(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) {
  if (local_.size() == kMaxIov || remote_.size() == kMaxIov) flush();
  local_.push_back({const_cast<void*>(src), len});
  pending_ += len;
  // Back to back in the application too, and the same operation: one piece.
  if (!remote_.empty() && tags_.back() == tag) {
    iovec& last = remote_.back();
    if (static_cast<uint8_t*>(last.iov_base) + last.iov_len == reinterpret_cast<uint8_t*>(addr)) {
      last.iov_len += len;
      return true;
    }
  }
  remote_.push_back({reinterpret_cast<void*>(addr), len});
  tags_.push_back(tag);
  return true;
}

bool ProcessMemory::write_deferred(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) {
  if (len > kStaging) return write(addr, src, len);
  if (staged_ + len > kStaging) flush();
  uint8_t* copy = staging_.data() + staged_;
  std::memcpy(copy, src, len);
  staged_ += len;
  return add(addr, copy, len, tag);
}

bool ProcessMemory::write_deferred_ref(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) {
  return add(addr, src, len, tag);
}

bool ProcessMemory::flush() {
  if (pending_ == 0) return true;
  bool ok = true;
  size_t li = 0, loff = 0;  // cursor in local_
  for (size_t r = 0; r < remote_.size(); r++) {
    const iovec& piece = remote_[r];
    slice_.clear();
    take(local_.data(), local_.size(), li, loff, piece.iov_len, slice_);
    if (gone_ || !transfer(true, reinterpret_cast<uint64_t>(piece.iov_base), slice_.data(), int(slice_.size()),
                           piece.iov_len)) {
      // That piece's operation fails; the pieces behind it are still
      // written, unless the whole process has gone.
      ok = false;
      failed(tags_[r]);
    }
  }
  clear_pending();
  return ok;
}

void ProcessMemory::clear_pending() {
  staged_ = 0;
  pending_ = 0;
  local_.clear();
  remote_.clear();
  tags_.clear();
}

}  // namespace rocemu::verbs
