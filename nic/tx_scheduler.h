// The NIC's transmit scheduler: which QP sends next, and when.
//
// A QP with something to send waits at exactly one place, its gate:
//   kReady     may send now; served round robin
//   kPacing    its congestion-control rate allows the next packet when
//              its last packet's slot ends (a timer-ordered wait list;
//              waiting again after a rate change leaves stale entries,
//              told apart by qp.pace_gen)
//   kPfcPause  its priority is paused by PFC from the link partner
//   kPortBusy  the port takes no more for now (backpressure); released by
//              on_tx_ready
// A shortage of packet buffers holds the whole NIC: pump() retries after a
// moment. The scheduler owns only the lists; Nic::pump decides the gate of
// each QP it looks at and builds the packets.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "common/engine/time.h"
#include "common/engine/timer_wheel.h"

namespace rocemu::nic {

struct Qp;

enum class TxGate : uint8_t { kNone, kReady, kPacing, kPfcPause, kPortBusy };
const char* tx_gate_name(TxGate g);

class TxScheduler {
 public:
  static constexpr uint16_t kPorts = 3;

  // `on_due` fires (on `timers`) when the earliest paced QP may send.
  void bind(TimerWheel* timers, Timer::Callback on_due, void* ctx);

  // Queues a QP at the back of the ready list, unless it already waits.
  void ready(Qp& qp);
  // ... at the front (it was taken and could not be served).
  void ready_front(Qp& qp);
  // The next ready QP (its gate becomes kNone), or nullptr.
  Qp* take_ready();
  bool has_ready() const { return !ready_.empty(); }

  void wait_pacing(Qp& qp, Time when);
  // Paced QPs whose time has come join the ready list.
  void release_due(Time now);

  void wait_pause(Qp& qp);
  // Every QP waiting for a pause to end (gate kNone again).
  std::vector<Qp*> take_paused();

  void wait_port(Qp& qp, uint16_t port);
  std::vector<Qp*> take_port(uint16_t port);

  // The QP goes away: out of every list.
  void forget(Qp& qp);

  // How long `wire_bytes` take at `rate_bps`, rounded up so that a flow
  // never runs above its rate.
  static Duration slot(uint32_t wire_bytes, double rate_bps);

 private:
  struct Paced {
    Time when;
    uint64_t seq;
    Qp* qp;
    uint32_t gen;
    bool operator>(const Paced& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };
  void arm();

  std::deque<Qp*> ready_;
  std::vector<Paced> paced_;  // min-heap on (when, seq)
  uint64_t paced_seq_ = 0;
  std::vector<Qp*> paused_;
  std::array<std::vector<Qp*>, kPorts> blocked_;
  TimerWheel* timers_ = nullptr;
  Timer due_timer_;
};

}  // namespace rocemu::nic
