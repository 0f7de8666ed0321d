// A node's attachment to the outside: one end of an internal link or a
// DPDK ethdev. The burst contract of DPDK: tx_burst takes what it can and
// returns how many it took; the caller keeps the rest.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <string>

#include "common/counters.h"
#include "common/engine/time.h"

namespace rocemu {

class Node;
class Capture;

#define ROCEMU_PORT_COUNTERS(X)                                        \
  X(rx_packets, "frames received")                                     \
  X(rx_bytes, "bytes received (frame length)")                         \
  X(tx_packets, "frames transmitted")                                  \
  X(tx_bytes, "bytes transmitted (frame length)")                      \
  X(tx_drop_link_down, "frames dropped because the link was down")     \
  X(tx_drop_oversize, "frames longer than the link MTU allows")        \
  X(tx_drop_fault, "frames dropped by the fault injector")             \
  X(tx_corrupted_fault, "frames corrupted by the fault injector")      \
  X(tx_duplicated_fault, "frames duplicated by the fault injector")    \
  X(tx_delayed_fault, "frames delayed or reordered by the fault injector") \
  X(rx_no_mbuf, "frames lost for want of a packet buffer")                 \
  X(rx_drop_multisegment, "frames longer than one packet buffer")

ROCEMU_COUNTER_SET(PortCounters, ROCEMU_PORT_COUNTERS);

class Port {
 public:
  Port(Node* owner, uint16_t index, std::string name) : owner_(owner), index_(index), name_(std::move(name)) {}
  virtual ~Port() = default;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  // Takes up to n packets for transmission at `now`; returns how many.
  virtual uint16_t tx_burst(rte_mbuf** pkts, uint16_t n, Time now) = 0;
  // True if tx_burst would take a packet now. If not, the owner gets one
  // on_tx_ready() callback once it can.
  virtual bool tx_ready(Time now) = 0;
  // The owner has nothing to send for now. For the order of events the
  // same as tx_ready(), but a port may then skip the on_tx_ready() that
  // nobody waits for -- unless the owner asks again (tx_ready, tx_burst)
  // before it comes.
  virtual void tx_idle(Time now) { (void)tx_ready(now); }
  virtual uint64_t rate_bps() const = 0;
  // Largest IP packet (Ethernet MTU) the port carries.
  virtual uint32_t mtu() const = 0;
  virtual bool link_up() const { return true; }
  // How far ahead of the engine's clock the link partner may put frames on
  // the wire towards this port (the real-time links' tx_slack): it sees a
  // PFC PAUSE only that late, so a lossless receiver absorbs that much more
  // after XOFF than the modelled fabric would. 0 where the model is exact.
  virtual Duration peer_tx_slack() const { return Duration(0); }

  Node* owner() const { return owner_; }
  uint16_t index() const { return index_; }
  const std::string& name() const { return name_; }
  PortCounters& counters() { return counters_; }
  const PortCounters& counters() const { return counters_; }
  // The port's counters, then what the device behind it counts on its own
  // (report_device), under the port's name.
  void report(CounterSink& sink) const {
    counters_.report(sink, name_);
    report_device(sink, name_);
  }
  // Counters of the device behind the port, under `scope` (an external
  // port's NIC or PMD: drops in its rings, errors); none for a link end.
  virtual void report_device(CounterSink& /*sink*/, std::string_view /*scope*/) const {}

 protected:
  Node* owner_;
  uint16_t index_;
  std::string name_;
  PortCounters counters_;
};

}  // namespace rocemu
