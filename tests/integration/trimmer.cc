#include "tests/integration/trimmer.h"

#include "common/wire/packet.h"
#include "switch/trim.h"

namespace rocemu::test {

Trimmer::Trimmer(std::string name, std::set<Rule> trim, Duration queue_delay, uint32_t trim_size, uint8_t trim_dscp)
    : Node(std::move(name), 2),
      trim_(std::move(trim)),
      queue_delay_(queue_delay),
      trim_size_(trim_size),
      trim_dscp_(trim_dscp) {
  release_timer_.bind<&Trimmer::on_release>(this);
}

Trimmer::~Trimmer() {
  for (auto& [due, m] : held_) rte_pktmbuf_free(m);
  for (auto& q : out_)
    for (rte_mbuf* m : q) rte_pktmbuf_free(m);
}

void Trimmer::on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) {
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = pkts[i];
    const uint16_t out = port ^ 1;
    wire::PacketView v;
    const bool data = port == 0 && wire::decode(dpdk::bytes(m), v) == wire::DecodeError::kOk && v.is_roce &&
                      v.op().any(wire::kOpPayload);
    if (!data) {
      send(out, m, now);
      continue;
    }
    const uint32_t psn = v.bth().psn();
    const uint32_t pass = ++passes_[psn];
    if (trim_.count(Rule{psn, pass}) != 0) {
      const uint32_t len = sw::trim_frame(dpdk::bytes(m), v, trim_size_, trim_dscp_);
      if (len != 0) rte_pktmbuf_trim(m, uint16_t(rte_pktmbuf_pkt_len(m) - len));
      trimmed_++;
      send(out, m, now);
      continue;
    }
    held_.emplace_back(now + queue_delay_, m);
    if (!release_timer_.armed()) timers().schedule(release_timer_, held_.front().first);
  }
}

void Trimmer::on_release(Time now) {
  while (!held_.empty() && held_.front().first <= now) {
    rte_mbuf* m = held_.front().second;
    held_.pop_front();
    send(1, m, now);
  }
  if (!held_.empty()) timers().schedule(release_timer_, held_.front().first);
}

void Trimmer::send(uint16_t out, rte_mbuf* m, Time now) {
  out_[out].push_back(m);
  drain(out, now);
}

void Trimmer::drain(uint16_t out, Time now) {
  Port* p = port(out);
  while (!out_[out].empty()) {
    if (p == nullptr || !p->tx_ready(now)) return;  // on_tx_ready comes back
    rte_mbuf* m = out_[out].front();
    out_[out].pop_front();
    if (p->tx_burst(&m, 1, now) != 1) rte_pktmbuf_free(m);
    forwarded_++;
  }
}

void Trimmer::on_tx_ready(uint16_t port, Time now) { drain(port, now); }

}  // namespace rocemu::test
