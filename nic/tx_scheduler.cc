#include "nic/tx_scheduler.h"

#include <algorithm>

#include "nic/qp.h"

namespace rocemu::nic {

const char* tx_gate_name(TxGate g) {
  switch (g) {
    case TxGate::kNone: return "none";
    case TxGate::kReady: return "ready";
    case TxGate::kPacing: return "pacing";
    case TxGate::kPfcPause: return "pfc-pause";
    case TxGate::kPortBusy: return "port-busy";
  }
  return "?";
}

void TxScheduler::bind(TimerWheel* timers, Timer::Callback on_due, void* ctx) {
  timers_ = timers;
  due_timer_.set_callback(on_due, ctx);
}

void TxScheduler::ready(Qp& qp) {
  if (qp.tx_gate != TxGate::kNone) return;
  qp.tx_gate = TxGate::kReady;
  ready_.push_back(&qp);
}

void TxScheduler::ready_front(Qp& qp) {
  if (qp.tx_gate != TxGate::kNone) return;
  qp.tx_gate = TxGate::kReady;
  ready_.push_front(&qp);
}

Qp* TxScheduler::take_ready() {
  if (ready_.empty()) return nullptr;
  Qp* qp = ready_.front();
  ready_.pop_front();
  qp->tx_gate = TxGate::kNone;
  return qp;
}

void TxScheduler::wait_pacing(Qp& qp, Time when) {
  qp.tx_gate = TxGate::kPacing;
  paced_.push_back({when, paced_seq_++, &qp, ++qp.pace_gen});
  std::push_heap(paced_.begin(), paced_.end(), std::greater<>());
  arm();
}

void TxScheduler::arm() {
  if (paced_.empty()) {
    if (due_timer_.armed()) timers_->cancel(due_timer_);
    return;
  }
  const Time first = paced_.front().when;
  if (!due_timer_.armed() || due_timer_.expiry() != first) timers_->schedule(due_timer_, first);
}

void TxScheduler::release_due(Time now) {
  while (!paced_.empty() && paced_.front().when <= now) {
    std::pop_heap(paced_.begin(), paced_.end(), std::greater<>());
    const Paced p = paced_.back();
    paced_.pop_back();
    if (p.qp->tx_gate != TxGate::kPacing || p.gen != p.qp->pace_gen) continue;  // stale
    p.qp->tx_gate = TxGate::kNone;
    ready(*p.qp);
  }
  arm();
}

void TxScheduler::wait_pause(Qp& qp) {
  qp.tx_gate = TxGate::kPfcPause;
  paused_.push_back(&qp);
}

std::vector<Qp*> TxScheduler::take_paused() {
  std::vector<Qp*> out = std::move(paused_);
  paused_.clear();
  for (Qp* qp : out) qp->tx_gate = TxGate::kNone;
  return out;
}

void TxScheduler::wait_port(Qp& qp, uint16_t port) {
  qp.tx_gate = TxGate::kPortBusy;
  blocked_[port].push_back(&qp);
}

std::vector<Qp*> TxScheduler::take_port(uint16_t port) {
  if (port >= kPorts) return {};
  std::vector<Qp*> out = std::move(blocked_[port]);
  blocked_[port].clear();
  for (Qp* qp : out) qp->tx_gate = TxGate::kNone;
  return out;
}

void TxScheduler::forget(Qp& qp) {
  std::erase(ready_, &qp);
  std::erase(paused_, &qp);
  for (auto& b : blocked_) std::erase(b, &qp);
  if (std::erase_if(paced_, [&](const Paced& p) { return p.qp == &qp; }) > 0) {
    std::make_heap(paced_.begin(), paced_.end(), std::greater<>());
    arm();
  }
  qp.tx_gate = TxGate::kNone;
}

Duration TxScheduler::slot(uint32_t wire_bytes, double rate_bps) {
  // A rate below 1 kbit/s is taken as 1 kbit/s: a slot stays finite (a
  // 4 KB frame's is then 33 s).
  const double ps = double(wire_bytes) * 8.0 * 1e12 / std::max(rate_bps, 1e3);
  const auto whole = int64_t(ps);
  return Duration(whole + (double(whole) < ps ? 1 : 0));
}

}  // namespace rocemu::nic
