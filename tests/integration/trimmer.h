// A two-port "switch" for minimal, deterministic reproductions of what a
// trimming switch does to a RoCE flow: every data packet from port 0 is
// held `queue_delay` (it waits in a deep TC3 queue), except the ones named
// in `trim` (PSN and which pass of that PSN: 1 = first transmission,
// 2 = first resend, ...), which are cut to `trim_size` bytes, remarked to
// `trim_dscp` and forwarded at once -- the trimmed header overtakes the
// queue, as it does on a real switch where it goes to another TC. Frames
// from port 1 (ACKs, NAKs) and everything else pass straight through.
#pragma once

#include <deque>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "common/engine/node.h"

namespace rocemu::test {

class Trimmer final : public Node {
 public:
  struct Rule {
    uint32_t psn;
    uint32_t pass;
    auto operator<=>(const Rule&) const = default;
  };

  Trimmer(std::string name, std::set<Rule> trim, Duration queue_delay, uint32_t trim_size = 256,
          uint8_t trim_dscp = 11);
  ~Trimmer() override;
  std::string_view kind() const override { return "trimmer"; }
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t port, Time now) override;

  uint64_t trimmed() const { return trimmed_; }
  uint64_t forwarded() const { return forwarded_; }

 private:
  void send(uint16_t out, rte_mbuf* m, Time now);
  void drain(uint16_t out, Time now);
  void on_release(Time now);

  std::set<Rule> trim_;
  Duration queue_delay_;
  uint32_t trim_size_;
  uint8_t trim_dscp_;
  std::map<uint32_t, uint32_t> passes_;  // PSN -> times seen
  std::deque<std::pair<Time, rte_mbuf*>> held_;
  std::deque<rte_mbuf*> out_[2];
  Timer release_timer_;
  uint64_t trimmed_ = 0, forwarded_ = 0;
};

}  // namespace rocemu::test
