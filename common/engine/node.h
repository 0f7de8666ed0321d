// Nodes are pure protocol code: they receive packets and timer callbacks
// with `now` passed in, and transmit through their ports. No sockets,
// threads, clocks or sleeps, which is what lets the same NIC and switch run
// in real time and in virtual time.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/counters.h"
#include "common/engine/dpdk.h"
#include "common/engine/port.h"
#include "common/engine/rng.h"
#include "common/engine/time.h"
#include "common/engine/timer_wheel.h"

namespace rocemu {

class Engine;

class Node {
 public:
  Node(std::string name, uint16_t num_ports);
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string_view kind() const = 0;
  const std::string& name() const { return name_; }
  uint16_t num_ports() const { return uint16_t(ports_.size()); }
  Port* port(uint16_t i) const { return i < ports_.size() ? ports_[i] : nullptr; }

  // The engine starts the node once all links exist.
  virtual void on_start(Time /*now*/) {}
  // A burst of received frames; the node owns them from here on.
  virtual void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) = 0;
  // A port that refused a packet can take more.
  virtual void on_tx_ready(uint16_t /*port*/, Time /*now*/) {}
  // Real time only: work that arrives from outside the fabric (host
  // queues). Returns true if it did something.
  virtual bool poll(Time /*now*/) { return false; }
  // Real time only: about to sleep; return false if work is pending. A node
  // that sleeps must arrange for its wake fd to be signalled.
  virtual bool prepare_sleep(Time /*now*/) { return true; }
  virtual int wake_fd() const { return -1; }

  virtual void report_counters(CounterSink& sink) const;

  // Set up by the engine.
  void bind(Engine* engine, uint32_t id, uint64_t seed);
  void set_port(uint16_t i, Port* p) { ports_.at(i) = p; }
  uint32_t id() const { return id_; }

 protected:
  Engine& engine() const { return *engine_; }
  TimerWheel& timers() const;
  dpdk::PacketPool& pool() const;
  Rng& rng() { return rng_; }

 private:
  std::string name_;
  std::vector<Port*> ports_;
  Engine* engine_ = nullptr;
  uint32_t id_ = 0;
  Rng rng_;
};

}  // namespace rocemu
