// Small nodes for tests, benchmarks and demos: a frame generator, a sink
// and a two-port forwarder (what testpmd's io mode does).
#pragma once

#include <deque>
#include <functional>
#include <vector>

#include "common/engine/node.h"

namespace rocemu {

// Sends copies of a template frame at a fixed rate (or as fast as the
// port allows) on port 0, up to a count.
class Generator final : public Node {
 public:
  Generator(std::string name, std::vector<uint8_t> frame, uint64_t count, uint64_t rate_bps = 0);
  std::string_view kind() const override { return "generator"; }
  void on_start(Time now) override;
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t port, Time now) override;
  // Called on each frame before it is sent (e.g. to stamp a sequence number).
  std::function<void(std::span<uint8_t>, uint64_t seq)> stamp;
  uint64_t sent() const { return sent_; }

 private:
  void pump(Time now);
  void on_pace(Time now) { pump(now); }
  std::vector<uint8_t> frame_;
  uint64_t count_;
  uint64_t rate_bps_;
  uint64_t sent_ = 0;
  Time next_send_{0};
  Timer pace_;
};

// Counts and frees (or keeps) what it receives on any port.
class Sink final : public Node {
 public:
  explicit Sink(std::string name, uint16_t ports = 1, bool keep = false);
  std::string_view kind() const override { return "sink"; }
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  uint64_t packets() const { return packets_; }
  uint64_t bytes() const { return bytes_; }
  Time last_arrival() const { return last_; }
  const std::vector<std::vector<uint8_t>>& kept() const { return kept_; }

 private:
  bool keep_;
  uint64_t packets_ = 0, bytes_ = 0;
  Time last_{0};
  std::vector<std::vector<uint8_t>> kept_;
};

// Forwards every frame from port 0 to port 1 and back, holding what a
// port refuses until it is ready.
class Forwarder final : public Node {
 public:
  explicit Forwarder(std::string name) : Node(std::move(name), 2) {}
  std::string_view kind() const override { return "forwarder"; }
  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override;
  void on_tx_ready(uint16_t port, Time now) override;
  uint64_t forwarded() const { return forwarded_; }
  uint64_t dropped() const { return dropped_; }

 private:
  void drain(uint16_t out, Time now);
  static constexpr size_t kQueueLimit = 4096;
  std::deque<rte_mbuf*> queue_[2];  // by output port
  uint64_t forwarded_ = 0, dropped_ = 0;
};

}  // namespace rocemu
