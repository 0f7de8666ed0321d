// DMA into another process: process_vm_readv / process_vm_writev, each
// call guarded by a pidfd of the application taken when it connected. A
// PID is only a number: once its process has exited and been reaped it
// can be given to another process, and a call on it would reach that one.
// The pidfd names the process itself and becomes readable the moment it
// exits -- before it can be reaped, so before its PID can be reused. Each
// call is made only after the pidfd shows the process has not exited; the
// PID is then still its own (the kernel resolves it at the start of the
// call and holds that process's memory to the end). What is left is the
// instant between that check and the call: too short for an exit, a reap
// and the PID counter coming round to the same number (process creation
// alone takes tens of microseconds), which only root could shortcut.
//
// A descriptor of /proc/PID/mem would hold the address space itself, but
// measured here it moves 64 KiB blocks at 3.0 GB/s against
// process_vm_writev's 9.9 GB/s in the same run (tests/bench/provider/
// vmcopy.cc): the guard costs one poll() per call instead.
//
// The NIC only calls these inside MRs it has checked, and an application
// that went away makes them fail, never the engine. Each call pays for a
// permission check and a page walk, so deferred writes are gathered
// (copied aside, neighbours of one operation merged) and go in one call on
// flush(). process_vm_writev stops at the first piece it cannot write:
// flush() then names that piece's tag and goes on with the pieces behind
// it.
//
// Most of that cost goes away for an MR whose pages the provider could
// move onto a sealed memfd (nic/verbs/provider/mr_pages.cc): the engine
// maps the same file, and an access that falls wholly inside such a
// window is one memcpy, as a real NIC's DMA into pinned pages. Anything
// else (memory that could not be moved, a piece straddling two windows)
// takes the system calls above, which reach the same pages either way.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <vector>

#include "common/status.h"
#include "nic/dma.h"

namespace rocemu::verbs {

class ProcessMemory final : public nic::HostMemory {
 public:
  // The memory of the process `pid` that `pidfd` names (duplicated: the
  // caller keeps its own).
  static Result<std::unique_ptr<ProcessMemory>> open(int pidfd, pid_t pid);
  ~ProcessMemory() override;
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;

  bool read(uint64_t addr, void* dst, size_t len) override;
  bool write(uint64_t addr, const void* src, size_t len) override;
  // Atomic in a window (the shared pages); elsewhere process_vm_writev's copy.
  bool store64(uint64_t addr, uint64_t value) override;
  bool readv(const nic::HostPiece* pieces, size_t n, void* dst) override;
  bool readv_scatter(const nic::HostPiece* pieces, size_t n, const iovec* dst, size_t nd) override;
  bool write_deferred(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) override;
  bool write_deferred_ref(uint64_t addr, const void* src, size_t len, nic::DmaTag tag) override;
  bool flush() override;
  bool batches() const override { return true; }
  // Inside a window: its mapping here (lent until the window goes, which
  // first fills in the frames still pointing at it). Off with
  // ROCEMU_ZERO_COPY=0 in the engine's environment.
  const uint8_t* lend(uint64_t addr, size_t len) override;
  pid_t pid() const { return pid_; }

  // Windows: the pages [addr, addr + bytes) of the application, mapped in
  // this process at `local` (munmap'ed when the window is removed or this
  // object destroyed). One per MR `key`; they may overlap. Engine thread.
  void add_window(uint32_t key, uint64_t addr, size_t bytes, void* local);
  void remove_window(uint32_t key);
  // Removes the windows meeting [addr, addr + bytes): an MR there without
  // one may be new memory where the application unmapped a window's
  // pages, which only the system calls reach.
  void remove_windows(uint64_t addr, uint64_t bytes);
  size_t windows() const { return windows_.size(); }
  // Unmaps every window (first filling in the frames they lent to). Engine
  // thread, when the context closes: the destructor may run on another
  // thread, where walking the packet pools or unmapping pages a frame's
  // payload is being copied from would race the engine.
  void unmap_all();
  // Windows the destructor found still mapped, over all instances (tests:
  // 0 while the engine thread runs).
  static uint64_t destructor_unmaps();
  // The process closed its context while others share it: from now on
  // only the windows are reached (what the MRs pinned); an access outside
  // them fails (the process may have mapped anything there since).
  void owner_left() { left_ = true; }
  uint64_t window_bytes() const { return window_bytes_; }
  // Totals over every ProcessMemory counting in `t`: windows and bytes.
  struct WindowTotals {
    std::atomic<uint64_t> bytes{0}, count{0};
  };
  void count_windows_in(std::shared_ptr<WindowTotals> t) { totals_ = std::move(t); }
  uint64_t copies() const { return copies_; }  // accesses served by memcpy
  uint64_t failures() const { return failures_; }
  uint64_t calls() const { return calls_; }

 private:
  ProcessMemory(int pidfd, pid_t pid);
  static constexpr size_t kStaging = 512 * 1024;
  static constexpr size_t kMaxIov = 512;
  int pidfd_;
  pid_t pid_;
  uint64_t failures_ = 0;
  uint64_t calls_ = 0;
  bool left_ = false;  // owner_left(): no system call on its memory any more
  // False once the process has exited (then gone()): no call may be made
  // on its PID any more.
  struct Window {
    uint64_t start, end;
    uint8_t* local;
    uint32_t key;
    bool lent = false;  // frames may point into it (lend())
    uint64_t lent_at = 0;  // dpdk::lazy_frames_made() at the last lend()
  };
  std::vector<Window> windows_;  // by start
  uint64_t window_bytes_ = 0;
  std::shared_ptr<WindowTotals> totals_;
  size_t last_ = 0;              // the window that served the last access
  uint64_t copies_ = 0;
  // Where [addr, addr + len) is mapped here, or nullptr if not wholly
  // inside one window.
  uint8_t* local_of(uint64_t addr, size_t len);
  // Unmaps a window, materializing the frames it lent to first.
  static void unmap(const Window& w);
  void drop_windows();  // unmap() each (one pool walk at most), forgotten
  static bool needs_walk(const Window& w);  // frames made lazy from it may not be filled in yet
  bool alive();
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
