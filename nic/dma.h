// The NIC's window onto host memory. A real NIC DMAs into the registered
// pages of a process; the emulated one copies with memcpy: in tests and
// virtual time everything is in one process, and for the verbs provider
// (verbs/process_memory.h) into the MR's pages, which the engine maps from
// the application's memfd -- or, for an MR whose pages could not be moved
// there, with process_vm_readv/writev guarded by a pidfd. The NIC only
// ever calls these inside a registered MR whose bounds and access it has
// checked.
//
// Reaching another process costs a system call, so the interface lets the
// NIC batch: readv() gathers several pieces in one call, and writes may be
// deferred and flushed together -- the NIC flushes before anything that
// makes the data visible (a completion, an ACK, a read of the same memory).
//
// Each deferred write carries a tag naming the operation it belongs to. A
// flush does every write it can, also behind one that fails, and names the
// tags of those it could not do (take_failed()): the NIC fails exactly
// those operations, never one whose bytes landed.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include <sys/uio.h>

namespace rocemu::nic {

struct HostPiece {
  uint64_t addr;
  size_t len;
};

// Which operation a deferred write belongs to (numbered by the NIC).
using DmaTag = uint32_t;

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // Copies len bytes; false if the host cannot be reached (process gone).
  virtual bool read(uint64_t addr, void* dst, size_t len) = 0;
  virtual bool write(uint64_t addr, const void* src, size_t len) = 0;
  // One 8-byte store the host's CPUs see whole, never half of it (an RDMA
  // ATOMIC WRITE), after the deferred writes before it. `addr` is 8-byte
  // aligned (the responder NAKs any other). Where the host can only be
  // reached by a copy, that copy.
  virtual bool store64(uint64_t addr, uint64_t value) { return write(addr, &value, 8); }
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
  // False if it failed already (then it is not named by take_failed()).
  virtual bool write_deferred(uint64_t addr, const void* src, size_t len, DmaTag) { return write(addr, src, len); }
  // The same, but the source stays valid until flush(): no copy is made.
  virtual bool write_deferred_ref(uint64_t addr, const void* src, size_t len, DmaTag) {
    return write(addr, src, len);
  }
  // Completes deferred writes: all that can be done are done, in order;
  // false if one failed. Reads and immediate writes flush first, and their
  // own result does not depend on how the earlier writes fared.
  virtual bool flush() { return true; }
  // The tags of deferred writes that failed since the last call, in order,
  // each once.
  std::vector<DmaTag> take_failed() { return std::exchange(failed_, {}); }
  // True if each call is expensive enough that the NIC should read ahead.
  virtual bool batches() const { return false; }
  // Where this process may read [addr, addr + len) by load for as long as a
  // frame needs it, or nullptr: memory the engine maps, whose unmapping
  // first copies those bytes into every frame still pointing at them
  // (dpdk::materialize_from, see common/engine/lazy_payload.h). The NIC
  // then sends the frame without copying its payload in.
  virtual const uint8_t* lend(uint64_t /*addr*/, size_t /*len*/) { return nullptr; }
  // True once a call failed because the host itself is gone (its process
  // exited; the engine may not have heard yet). A real NIC's QPs die with
  // the process: the NIC then drops what arrives for them and answers
  // nothing, rather than NAK with an operational error.
  bool gone() const { return gone_; }

 protected:
  void failed(DmaTag tag) {
    if (failed_.empty() || failed_.back() != tag) failed_.push_back(tag);
  }
  bool gone_ = false;  // set by implementations that can tell

 private:
  std::vector<DmaTag> failed_;
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
  bool store64(uint64_t addr, uint64_t value) override { return store64_at(addr, value); }
  // The store itself, in this process: one aligned 8-byte release store.
  static bool store64_at(uint64_t addr, uint64_t value) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(addr), value, __ATOMIC_RELEASE);
    return true;
  }
};

// This process's memory, reached the way another process's is: the NIC
// reads ahead and defers writes, and a deferred write lands only at
// flush(). Tests use it to check that the NIC flushes before anything
// makes data visible and that read-ahead frames carry the right bytes;
// with a hole (an address range no process has mapped) they check what a
// failed flush fails.
class DeferringLocalMemory final : public HostMemory {
 public:
  // Deferred writes touching [addr, addr + len) fail at flush().
  void set_hole(uint64_t addr, size_t len) { hole_ = {addr, len}; }
  bool read(uint64_t addr, void* dst, size_t len) override {
    flush();
    calls_++;
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return true;
  }
  bool write(uint64_t addr, const void* src, size_t len) override {
    flush();
    calls_++;
    std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return true;
  }
  bool store64(uint64_t addr, uint64_t value) override {
    flush();
    calls_++;
    return LocalMemory::store64_at(addr, value);
  }
  bool readv(const HostPiece* pieces, size_t n, void* dst) override {
    flush();
    calls_++;
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t i = 0; i < n; p += pieces[i].len, i++)
      std::memcpy(p, reinterpret_cast<const void*>(pieces[i].addr), pieces[i].len);
    return true;
  }
  bool readv_scatter(const HostPiece* pieces, size_t n, const iovec* dst, size_t nd) override {
    flush();
    const uint64_t before = calls_;
    const bool ok = HostMemory::readv_scatter(pieces, n, dst, nd);
    calls_ = before + 1;
    return ok;
  }
  bool write_deferred(uint64_t addr, const void* src, size_t len, DmaTag tag) override {
    const auto* s = static_cast<const uint8_t*>(src);
    pending_.push_back({addr, std::vector<uint8_t>(s, s + len), nullptr, len, tag});
    return true;
  }
  bool write_deferred_ref(uint64_t addr, const void* src, size_t len, DmaTag tag) override {
    pending_.push_back({addr, {}, src, len, tag});
    return true;
  }
  bool flush() override {
    if (pending_.empty()) return true;
    calls_++;
    bool ok = true;
    for (const auto& w : pending_) {
      if (w.addr < hole_.addr + hole_.len && hole_.addr < w.addr + w.len) {
        failed(w.tag);
        ok = false;
        continue;
      }
      std::memcpy(reinterpret_cast<void*>(w.addr), w.ref != nullptr ? w.ref : w.copy.data(), w.len);
    }
    pending_.clear();
    return ok;
  }
  bool batches() const override { return true; }
  uint64_t calls() const { return calls_; }  // "system calls" made

 private:
  struct Pending {
    uint64_t addr;
    std::vector<uint8_t> copy;
    const void* ref;
    size_t len;
    DmaTag tag;
  };
  std::vector<Pending> pending_;
  HostPiece hole_{0, 0};
  uint64_t calls_ = 0;
};

}  // namespace rocemu::nic
