// The engine side of the verbs provider. A control thread (Boost.Asio)
// accepts applications on a Unix socket, checks they belong to the
// engine's user (SO_PEERCRED), and turns their requests into NIC control
// calls, run on the engine thread between bursts. Queue memory is shared
// through memfds; DMA is a memcpy into the MR pages the provider shares
// as a memfd, else process_vm_readv/writev on the application's pid,
// guarded by a pidfd (process_memory.h). The HostAgent node, on the engine thread, drains the applications'
// doorbells and lets the engine sleep when none ring.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/engine/engine.h"
#include "common/status.h"
#include "nic/nic.h"
#include "nic/verbs/process_memory.h"
#include "nic/verbs/protocol.h"

namespace rocemu::verbs {

// A shared-memory region made with memfd_create.
struct SharedRegion {
  int fd = -1;
  void* addr = nullptr;
  size_t bytes = 0;
  static Result<SharedRegion> create(const char* name, size_t bytes);
  void release();
};

struct Session;

// A NIC context as the kernel's ib_uverbs_file: opened by one application
// (kHello) and shared by those that import it (ibv_import_device with its
// cmd_fd). PDs, MRs, MWs and AHs belong to it, whichever session made
// them, and live until the last session sharing it goes; a session's
// queues (CQs, SRQs, QPs, whose rings it maps) go with that session.
struct SharedContext {
  nic::Nic* nic = nullptr;
  nic::HostContext* ctx = nullptr;  // nullptr once closed (its last session left)
  // The opener's memory: every MR of the context names its pages (an
  // importer registers none, see README).
  std::shared_ptr<ProcessMemory> memory;
  // The command file (ibv_context::cmd_fd): a memfd the engine made and
  // keeps open, so its inode names this context alone for as long as it
  // lives. Handing it back (SCM_RIGHTS) proves holding it, the only way
  // into the context: its number or a handle is no key.
  int cmd_file = -1;
  uint64_t cmd_dev = 0, cmd_ino = 0;
  std::vector<Session*> sessions;  // engine thread: who gets its async events
  // Rings of queues a leaving session could not destroy (the NIC still
  // has them): mapped until the context closes (engine thread).
  std::vector<SharedRegion> kept_rings;
  SharedContext() = default;
  SharedContext(const SharedContext&) = delete;
  SharedContext& operator=(const SharedContext&) = delete;
  ~SharedContext();
};

// One application (one verbs context) attached to a NIC. Each field has
// one owner thread: the control thread (which serves the socket) or the
// engine thread (which runs the NIC; the control thread reaches it only
// through VerbsServer's on_engine(), which orders the two). Fields set
// once before the session is handed to the engine are read by both.
struct Session {
  // Set at connect or hello, before the engine sees the session: both.
  int fd = -1;
  pid_t pid = 0;
  int proc_dir = -1;                      // /proc/<pid>, opened at connect (a reused pid cannot answer)
  int pidfd = -1;                         // the process itself, from connect on
  uint64_t owner = 0;                     // the process, for quotas: its PID and start time
  // The eventfd this application writes to wake the engine: its own, so
  // that no other application can read away its wake-ups (nor be woken).
  int wake = -1;
  nic::Nic* nic = nullptr;
  nic::HostContext* ctx = nullptr;
  bool imported = false;                  // joined the context with ibv_import_device
  SharedRegion doorbell;
  // Engine thread only (made on the control thread before hello hands it over).
  std::shared_ptr<ProcessMemory> memory;  // the context's (SharedContext::memory)
  std::shared_ptr<SharedContext> shared;
  std::deque<Reply> events;               // async events not yet fetched
  uint32_t db_consumed = 0;
  std::vector<uint32_t> qpns;             // the QPs a doorbell rescan looks at
  // Control thread only.
  std::map<uint32_t, SharedRegion> cq_rings, srq_rings, qp_rings;
  std::multiset<uint32_t> xrc_targets;    // XRC targets it holds, created or opened (they have no rings)
  std::map<uint32_t, int> channels;       // id -> the write end of its pipe (the application reads the other)
  std::vector<int> hand_over;             // fds of the reply being sent, closed once it is
  std::map<uint32_t, uint32_t> cq_channel;  // CQ handle -> the channel it reports to
  uint32_t next_channel = 1;
  // A session that is an rdma_cm channel (kCmOpen) has no context.
  uint32_t cm_channel = 0;
  int cm_events = -1;                     // the channel's eventfd (the application holds the same file)
};

// What the provider reports for a NIC (ibv_query_device, ibv_query_port)
// and what its sysfs tree shows; engine thread.
DeviceInfo device_info(const nic::Nic& n);
PortInfo port_info(const nic::Nic& n);

class HostAgent final : public Node {
 public:
  HostAgent();
  ~HostAgent() override;
  std::string_view kind() const override { return "host-agent"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) override { dpdk::free_burst(pkts, n); }
  bool poll(Time now) override;
  bool prepare_sleep(Time now) override;
  int wake_fd() const override { return wake_fd_; }

  // Engine thread. The loop then also wakes on the session's own eventfd.
  void attach(Session* s);
  void detach(Session* s);

 private:
  bool drain(Session& s, Time now);
  int wake_fd_;
  std::vector<Session*> sessions_;
};

class VerbsServer {
 public:
  // `agent` must already be a node of `engine`.
  VerbsServer(Engine& engine, HostAgent& agent, std::string socket_path);
  ~VerbsServer();
  Status start();
  void stop();
  // The engine loop has returned: control requests run on the caller's
  // thread from now on.
  void engine_stopped();
  const std::string& socket_path() const { return path_; }
  size_t sessions() const;
  // Connections that could not be taken (out of descriptors, ...).
  uint64_t accept_errors() const;

  // Handles CLI commands (rocemu nv/counters/status ...) on the engine
  // thread: returns 0 and text, or an errno value and a message.
  using CliHandler = std::function<int(const std::vector<std::string>& words, std::string& out)>;
  void set_cli_handler(CliHandler h);

  // What the engine maps of applications' MR pages (moved onto memfds by
  // the provider), in bytes and windows: at most this per engine, half of
  // it per application. An MR beyond it is registered all the same and
  // reached with system calls (the fallback).
  struct WindowLimits {
    uint64_t bytes = 64ull << 30;
    uint64_t count = 16384;
  };
  void set_window_limits(const WindowLimits& limits);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

}  // namespace rocemu::verbs
