#include "nic/verbs/process_memory.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/engine/lazy_payload.h"

namespace rocemu::verbs {

Result<std::unique_ptr<ProcessMemory>> ProcessMemory::open(int pidfd, pid_t pid) {
  const int fd = fcntl(pidfd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Status::error(std::string("pidfd: ") + std::strerror(errno));
  return std::unique_ptr<ProcessMemory>(new ProcessMemory(fd, pid));
}

ProcessMemory::ProcessMemory(int pidfd, pid_t pid) : pidfd_(pidfd), pid_(pid), staging_(kStaging) {
  local_.reserve(kMaxIov);
  remote_.reserve(kMaxIov);
}

namespace {
std::atomic<uint64_t> g_destructor_unmaps{0};
}

ProcessMemory::~ProcessMemory() {
  // Normally unmap_all() ran on the engine thread already; what is left
  // here is for when that thread has stopped (nothing else touches the
  // packet pools then).
  g_destructor_unmaps += windows_.size();
  drop_windows();
  close(pidfd_);
}

uint64_t ProcessMemory::destructor_unmaps() { return g_destructor_unmaps.load(); }

void ProcessMemory::unmap_all() {
  // Writes waiting for flush() may point into the windows.
  flush();
  drop_windows();
}

void ProcessMemory::drop_windows() {
  // One walk for all of them, not one per window.
  if (std::any_of(windows_.begin(), windows_.end(), [](const Window& w) { return needs_walk(w); }))
    dpdk::materialize_all();
  for (const Window& w : windows_) unmap(w);
  if (totals_ != nullptr) {
    totals_->bytes -= window_bytes_;
    totals_->count -= windows_.size();
  }
  windows_.clear();
  window_bytes_ = 0;
  last_ = 0;
}

void ProcessMemory::add_window(uint32_t key, uint64_t addr, size_t bytes, void* local) {
  const Window w{addr, addr + bytes, static_cast<uint8_t*>(local), key};
  auto at = std::upper_bound(windows_.begin(), windows_.end(), addr,
                             [](uint64_t a, const Window& x) { return a < x.start; });
  windows_.insert(at, w);
  last_ = 0;
  window_bytes_ += bytes;
  if (totals_ != nullptr) {
    totals_->bytes += bytes;
    totals_->count++;
  }
}

void ProcessMemory::remove_window(uint32_t key) {
  for (auto it = windows_.begin(); it != windows_.end(); ++it) {
    if (it->key != key) continue;
    // Writes waiting for flush() may point into it.
    flush();
    unmap(*it);
    window_bytes_ -= it->end - it->start;
    if (totals_ != nullptr) {
      totals_->bytes -= it->end - it->start;
      totals_->count--;
    }
    windows_.erase(it);
    last_ = 0;
    return;
  }
}

void ProcessMemory::remove_windows(uint64_t addr, uint64_t bytes) {
  for (size_t i = 0; i < windows_.size();) {
    const Window& w = windows_[i];
    if (w.start < addr + bytes && addr < w.end) {
      remove_window(w.key);
    } else {
      i++;
    }
  }
}

uint8_t* ProcessMemory::local_of(uint64_t addr, size_t len) {
  if (windows_.empty()) return nullptr;
  const uint64_t end = addr + len;
  if (end < addr) return nullptr;
  if (last_ < windows_.size()) {
    const Window& w = windows_[last_];
    if (addr >= w.start && end <= w.end) return w.local + (addr - w.start);
  }
  // The windows starting at or below addr, nearest first (a few: windows
  // overlap only where MRs share pages).
  auto it = std::upper_bound(windows_.begin(), windows_.end(), addr,
                             [](uint64_t a, const Window& x) { return a < x.start; });
  for (int k = 0; k < 8 && it != windows_.begin(); k++) {
    --it;
    if (end <= it->end) {
      last_ = size_t(it - windows_.begin());
      return it->local + (addr - it->start);
    }
  }
  return nullptr;
}

bool ProcessMemory::needs_walk(const Window& w) {
  // A frame made lazy from it was made at lazy_frames_made() > lent_at;
  // a walk since (lazy_walked_at() > lent_at) filled it in.
  return w.lent && dpdk::lazy_walked_at() <= w.lent_at;
}

void ProcessMemory::unmap(const Window& w) {
  // The whole pool is walked (1-8 ms for 65536 buffers) only if the window
  // lent since the last walk; that walk fills in every lazy frame, so the
  // next dereg usually has none to do.
  if (needs_walk(w)) dpdk::materialize_all();
  munmap(w.local, w.end - w.start);
}

const uint8_t* ProcessMemory::lend(uint64_t addr, size_t len) {
  static const bool off = [] {
    const char* e = std::getenv("ROCEMU_ZERO_COPY");
    return e != nullptr && std::strcmp(e, "0") == 0;
  }();
  if (off) return nullptr;
  // The bytes as a read now would see them: after the writes waiting.
  flush();
  uint8_t* p = local_of(addr, len);
  if (p != nullptr) {  // local_of() leaves last_ on the window it used
    windows_[last_].lent = true;
    windows_[last_].lent_at = dpdk::lazy_frames_made();  // the caller makes its frame lazy next
  }
  return p;
}

bool ProcessMemory::alive() {
  if (gone_) return false;
  if (left_) {
    failures_++;
    return false;
  }
  pollfd p{pidfd_, POLLIN, 0};
  const int r = poll(&p, 1, 0);
  if (r < 0 || (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) != 0)) {
    gone_ = true;  // exited (or the pidfd cannot tell): not to be reached any more
    failures_++;
    return false;
  }
  return true;
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
  flush();
  if (!windows_.empty()) {
    size_t i = 0;
    for (; i < n && local_of(pieces[i].addr, pieces[i].len) != nullptr; i++) {}
    if (i == n) {
      auto* d = static_cast<uint8_t*>(dst);
      for (i = 0; i < n; d += pieces[i].len, i++) std::memcpy(d, local_of(pieces[i].addr, pieces[i].len), pieces[i].len);
      copies_++;
      return true;
    }
  }
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
    if (!alive()) return false;
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
  flush();
  if (!windows_.empty()) {
    size_t i = 0;
    for (; i < n && local_of(pieces[i].addr, pieces[i].len) != nullptr; i++) {}
    // HostMemory's loop calls read(), which copies each piece's parts.
    if (i == n) return HostMemory::readv_scatter(pieces, n, dst, nd);
  }
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
  if (!alive()) return false;
  calls_++;
  const ssize_t r = process_vm_readv(pid_, dst, nd, remote, n, 0);
  if (r != ssize_t(bytes)) return fail(r);
  return true;
}

bool ProcessMemory::write(uint64_t addr, const void* src, size_t len) {
  flush();
  if (uint8_t* to = local_of(addr, len)) {
    std::memcpy(to, src, len);
    copies_++;
    return true;
  }
  iovec local{const_cast<void*>(src), len};
  iovec remote{reinterpret_cast<void*>(addr), len};
  if (!alive()) return false;
  calls_++;
  const ssize_t r = process_vm_writev(pid_, &local, 1, &remote, 1, 0);
  if (r != ssize_t(len)) return fail(r);
  return true;
}

bool ProcessMemory::store64(uint64_t addr, uint64_t value) {
  flush();
  // The window maps whole pages: an aligned address is aligned here too.
  if (uint8_t* to = local_of(addr, 8); to != nullptr) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(to), value, __ATOMIC_RELEASE);
    copies_++;
    return true;
  }
  return write(addr, &value, 8);
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
  // Into a window: at once (after any earlier writes still waiting, which
  // may touch the same bytes).
  if (uint8_t* to = local_of(addr, len)) {
    flush();
    std::memcpy(to, src, len);
    copies_++;
    return true;
  }
  if (len > kStaging) return write(addr, src, len);
  if (staged_ + len > kStaging) flush();
  uint8_t* copy = staging_.data() + staged_;
  std::memcpy(copy, src, len);
  staged_ += len;
  return add(addr, copy, len, tag);
}

bool ProcessMemory::write_deferred_ref(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) {
  if (uint8_t* to = local_of(addr, len)) {
    flush();
    std::memcpy(to, src, len);
    copies_++;
    return true;
  }
  return add(addr, src, len, tag);
}

ssize_t ProcessMemory::write_from(size_t first, size_t local_skip) {
  if (!alive()) {
    errno = ESRCH;
    return -1;
  }
  calls_++;
  if (first == 0) return process_vm_writev(pid_, local_.data(), local_.size(), remote_.data(), remote_.size(), 0);
  // The local bytes after the first `local_skip` ones.
  retry_.clear();
  for (const iovec& l : local_) {
    if (local_skip >= l.iov_len) {
      local_skip -= l.iov_len;
      continue;
    }
    retry_.push_back({static_cast<uint8_t*>(l.iov_base) + local_skip, l.iov_len - local_skip});
    local_skip = 0;
  }
  return process_vm_writev(pid_, retry_.data(), retry_.size(), remote_.data() + first, remote_.size() - first, 0);
}

bool ProcessMemory::flush() {
  if (pending_ == 0) return true;
  bool ok = true;
  size_t first = 0, done = 0;  // remote_ pieces and bytes dealt with
  while (first < remote_.size()) {
    const ssize_t r = write_from(first, done);
    if (r == ssize_t(pending_ - done)) break;
    ok = false;
    fail(r);
    if (r < 0 && errno != EFAULT) {
      // Not one bad piece (the process is gone, or may not be reached):
      // nothing behind can be written either.
      for (size_t i = first; i < remote_.size(); i++) failed(tags_[i]);
      break;
    }
    // The call stopped inside piece `first` after the good ones before it:
    // that piece's operation fails, the pieces behind it are tried again.
    size_t wrote = r < 0 ? 0 : size_t(r);
    while (wrote >= remote_[first].iov_len) {
      wrote -= remote_[first].iov_len;
      done += remote_[first].iov_len;
      first++;
    }
    failed(tags_[first]);
    done += remote_[first].iov_len;
    first++;
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
