#include "common/engine/basic_nodes.h"

#include <algorithm>
#include <cstring>

namespace rocemu {

Generator::Generator(std::string name, std::vector<uint8_t> frame, uint64_t count, uint64_t rate_bps)
    : Node(std::move(name), 1), frame_(std::move(frame)), count_(count), rate_bps_(rate_bps) {
  pace_.bind<&Generator::on_pace>(this);
}

void Generator::on_start(Time now) {
  next_send_ = now;
  pump(now);
}

void Generator::on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) { dpdk::free_burst(pkts, n); }

void Generator::on_tx_ready(uint16_t, Time now) { pump(now); }

void Generator::pump(Time now) {
  Port* p = port(0);
  if (p == nullptr) return;
  while (sent_ < count_) {
    if (rate_bps_ != 0 && next_send_ > now) {
      if (!pace_.armed()) timers().schedule(pace_, next_send_);
      return;
    }
    if (!p->tx_ready(now)) return;
    rte_mbuf* m = pool().alloc_copy(frame_);
    if (m == nullptr) {
      timers().schedule(pace_, now + us(1));  // pool empty: try again shortly
      return;
    }
    if (stamp) stamp(dpdk::bytes(m), sent_);
    if (p->tx_burst(&m, 1, now) != 1) {
      rte_pktmbuf_free(m);
      return;
    }
    sent_++;
    if (rate_bps_ != 0) next_send_ = std::max(next_send_, now) + serialization_time(wire_bytes(uint32_t(frame_.size())), rate_bps_);
  }
}

Sink::Sink(std::string name, uint16_t ports, bool keep) : Node(std::move(name), ports), keep_(keep) {}

void Sink::on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time now) {
  for (uint16_t i = 0; i < n; i++) {
    packets_++;
    bytes_ += rte_pktmbuf_pkt_len(pkts[i]);
    if (keep_) {
      dpdk::seal(pkts[i]);
      auto b = dpdk::bytes(pkts[i]);
      kept_.emplace_back(b.begin(), b.end());
    }
    rte_pktmbuf_free(pkts[i]);
  }
  last_ = now;
}

void Forwarder::on_rx(uint16_t in, rte_mbuf** pkts, uint16_t n, Time now) {
  const uint16_t out = uint16_t(1 - in);
  Port* p = port(out);
  if (p == nullptr) {
    dropped_ += n;
    dpdk::free_burst(pkts, n);
    return;
  }
  uint16_t sent = 0;
  if (queue_[out].empty()) sent = p->tx_burst(pkts, n, now);
  forwarded_ += sent;
  for (uint16_t i = sent; i < n; i++) {
    if (queue_[out].size() >= kQueueLimit) {
      dropped_++;
      rte_pktmbuf_free(pkts[i]);
    } else {
      queue_[out].push_back(pkts[i]);
    }
  }
  if (!queue_[out].empty()) drain(out, now);
}

void Forwarder::on_tx_ready(uint16_t port_index, Time now) { drain(port_index, now); }

void Forwarder::drain(uint16_t out, Time now) {
  Port* p = port(out);
  auto& q = queue_[out];
  constexpr size_t kBurst = 32;
  rte_mbuf* burst[kBurst];
  while (!q.empty() && p->tx_ready(now)) {
    const uint16_t n = uint16_t(std::min(q.size(), kBurst));
    std::copy_n(q.begin(), n, burst);
    const uint16_t sent = p->tx_burst(burst, n, now);
    q.erase(q.begin(), q.begin() + sent);
    forwarded_ += sent;
    if (sent < n) break;
  }
}

}  // namespace rocemu
