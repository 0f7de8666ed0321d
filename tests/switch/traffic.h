// Traffic for switch tests, standing in for the emulated NIC (which is
// written elsewhere): a host that ARPs for its gateway, sends RoCEv2
// RDMA WRITE packets per flow (DSCP, ECN, rate, count), pauses a priority
// when it receives PFC for it as a NIC does, and as a receiver counts
// per flow, records CE marks, recognises trimmed packets, checks the ICRC
// and can answer CE with CNPs. It can also send PFC itself (a receiver
// asserting pause, or a storm).
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/engine/node.h"
#include "common/wire/build.h"
#include "common/wire/packet.h"

namespace rocemu::test {

struct FlowSpec {
  wire::IpAddr dst;
  uint32_t qpn = 0x100;            // BTH DestQP; names the flow at the receiver
  uint8_t dscp = 26;
  wire::Ecn ecn = wire::Ecn::kEct0;
  std::optional<uint8_t> priority; // the NIC priority PFC pauses; default dscp >> 3 (mlx5 dscp2prio)
  uint32_t payload = 1024;         // RDMA WRITE payload bytes per packet
  uint64_t rate_bps = 0;           // 0: line rate (as PFC allows)
  uint64_t count = UINT64_MAX;     // packets to send
  Time start{0};
  Time stop = kTimeNever;
  bool cnp = false;                // send CNPs (opcode 0x81) instead of data
  uint8_t ttl = 64;
  std::optional<wire::IpAddr> src; // default: the host's address (set for IPv6)
};

struct FlowStats {
  uint64_t packets = 0, bytes = 0;
  uint64_t ce = 0;             // arrived with CE
  uint64_t trimmed = 0;        // arrived with the trim DSCP
  uint64_t icrc_errors = 0;
  Time first{kTimeNever}, last{0};
  Duration latency_max{0}, latency_min = Duration::max(), latency_sum{0};
  std::vector<uint8_t> marks;  // CE per packet in arrival order (when recording)
};

class TestHost final : public Node {
 public:
  TestHost(std::string name, wire::IpAddr ip, wire::MacAddr mac, wire::IpAddr gateway);
  std::string_view kind() const override { return "test-host"; }
  void on_start(Time now) override;
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t port, Time now) override;

  // Adds a flow (before or during the run); returns its index.
  size_t add_flow(const FlowSpec& f);
  uint64_t sent(size_t flow) const { return flows_[flow].sent; }
  const FlowSpec& flow(size_t i) const { return flows_[i].spec; }
  // Receive side.
  const FlowStats& received(uint32_t qpn) { return rx_[qpn]; }
  bool has_received(uint32_t qpn) const { return rx_.count(qpn) != 0; }
  void record_marks(bool on) { record_marks_ = on; }
  uint8_t trim_dscp = 11;
  bool cnp_on_ce = false;       // answer CE-marked packets with a CNP to the sender
  uint64_t cnps_sent() const { return cnps_sent_; }
  uint64_t pfc_received() const { return pfc_rx_; }
  Duration paused_for(uint8_t prio, Time now) const;

  // PFC sent by this host: one frame; or XOFF held (refreshed) until released.
  void send_pfc(uint8_t priorities, uint16_t quanta, Time now);
  void hold_pause(uint8_t priorities, Time now, Duration refresh = us(100));
  void release_pause(Time now);
  bool gateway_resolved() const { return gateway_mac_.has_value(); }
  wire::MacAddr mac() const { return mac_; }
  wire::IpAddr ip() const { return ip_; }

 private:
  struct Flow {
    FlowSpec spec;
    uint8_t prio = 0;
    uint64_t sent = 0;
    uint32_t psn = 0;
    Time next{0};
  };
  void pump(Time now);
  rte_mbuf* build(Flow& f, Time now);
  rte_mbuf* build_cnp(const wire::IpAddr& to, uint32_t qpn);
  void queue_control(rte_mbuf* m);
  void on_frame(rte_mbuf* m, Time now);
  void on_timer(Time now);
  void on_refresh(Time now);

  wire::IpAddr ip_, gateway_;
  wire::MacAddr mac_;
  std::optional<wire::MacAddr> gateway_mac_;
  std::vector<Flow> flows_;
  size_t rr_ = 0;
  std::deque<rte_mbuf*> control_;
  Time pause_until_[8]{};
  Time pause_start_[8]{};
  Duration paused_total_[8]{};
  uint8_t held_ = 0;
  Duration hold_refresh_{0};
  std::map<uint32_t, FlowStats> rx_;
  bool record_marks_ = false;
  bool started_ = false;
  uint64_t cnps_sent_ = 0, pfc_rx_ = 0;
  Timer timer_, refresh_;
};

// Sends the frames it is given at start, keeps every frame it receives.
class FrameNode final : public Node {
 public:
  FrameNode(std::string name, std::vector<std::vector<uint8_t>> frames)
      : Node(std::move(name), 1), frames_(std::move(frames)) {}
  std::string_view kind() const override { return "frame-node"; }
  void on_start(Time now) override;
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t, Time now) override { on_start(now); }
  const std::vector<std::vector<uint8_t>>& received() const { return received_; }
  // Sends `frame` now (after those given at start).
  void send(std::vector<uint8_t> frame, Time now) {
    frames_.push_back(std::move(frame));
    on_start(now);
  }
  void clear_received() { received_.clear(); }

 private:
  std::vector<std::vector<uint8_t>> frames_;
  size_t next_ = 0;
  std::vector<std::vector<uint8_t>> received_;
};

// 02:00:00:00:00:xx / 10.0.x.1 for host x, gateway 10.0.x.254.
wire::MacAddr host_mac(int i);
wire::IpAddr host_ip(int i);
wire::IpAddr gateway_ip(int i);

}  // namespace rocemu::test
