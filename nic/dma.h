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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <sys/uio.h>

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
  // Reads `n` pieces, one after the other, scattered over the `nd` local
  // buffers `dst` (of as many bytes in all).
  virtual bool readv_scatter(const HostPiece* pieces, size_t n, const iovec* dst, size_t nd) {
    size_t d = 0, d_off = 0;
    for (size_t i = 0; i < n; i++) {
      uint64_t addr = pieces[i].addr;
      size_t left = pieces[i].len;
      while (left > 0) {
        if (d == nd) return false;
        const size_t k = std::min(left, dst[d].iov_len - d_off);
        if (!read(addr, static_cast<uint8_t*>(dst[d].iov_base) + d_off, k)) return false;
        addr += k;
        left -= k;
        d_off += k;
        if (d_off == dst[d].iov_len) d++, d_off = 0;
      }
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
  // True once a call failed because the host itself is gone (its process
  // exited; the engine may not have heard yet). A real NIC's QPs die with
  // the process: the NIC then drops what arrives for them and answers
  // nothing, rather than NAK with an operational error.
  bool gone() const { return gone_; }

 protected:
  bool gone_ = false;  // set by implementations that can tell
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

// This process's memory, reached the way another process's is: the NIC
// reads ahead and defers writes, and a deferred write lands only at
// flush(). Tests use it to check that the NIC flushes before anything
// makes data visible and that read-ahead frames carry the right bytes.
class DeferringLocalMemory final : public HostMemory {
 public:
  bool read(uint64_t addr, void* dst, size_t len) override {
    if (!flush()) return false;
    calls_++;
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return true;
  }
  bool write(uint64_t addr, const void* src, size_t len) override {
    if (!flush()) return false;
    calls_++;
    std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return true;
  }
  bool readv(const HostPiece* pieces, size_t n, void* dst) override {
    if (!flush()) return false;
    calls_++;
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; p += pieces[i].len, i++)
      std::memcpy(p, reinterpret_cast<const void*>(pieces[i].addr), pieces[i].len);
    return true;
  }
  bool readv_scatter(const HostPiece* pieces, size_t n, const iovec* dst, size_t nd) override {
    if (!flush()) return false;
    const uint64_t before = calls_;
    const bool ok = HostMemory::readv_scatter(pieces, n, dst, nd);
    calls_ = before + 1;
    return ok;
  }
  bool write_deferred(uint64_t addr, const void* src, size_t len) override {
    const auto* s = static_cast<const uint8_t*>(src);
    pending_.push_back({addr, std::vector<uint8_t>(s, s + len), nullptr, len});
    return true;
  }
  bool write_deferred_ref(uint64_t addr, const void* src, size_t len) override {
    pending_.push_back({addr, {}, src, len});
    return true;
  }
  bool flush() override {
    if (pending_.empty()) return true;
    calls_++;
    for (const auto& w : pending_)
      std::memcpy(reinterpret_cast<void*>(w.addr), w.ref != nullptr ? w.ref : w.copy.data(), w.len);
    pending_.clear();
    return true;
  }
  bool batches() const override { return true; }
  uint64_t calls() const { return calls_; }  // "system calls" made

 private:
  struct Pending {
    uint64_t addr;
    std::vector<uint8_t> copy;
    const void* ref;
    size_t len;
  };
  std::vector<Pending> pending_;
  uint64_t calls_ = 0;
};

}  // namespace rocemu::nic
