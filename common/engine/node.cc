#include "common/engine/node.h"

#include "common/engine/engine.h"

namespace rocemu {

Node::Node(std::string name, uint16_t num_ports) : name_(std::move(name)), ports_(num_ports, nullptr) {}

void Node::bind(Engine* engine, uint32_t id, uint64_t seed) {
  engine_ = engine;
  id_ = id;
  rng_.reseed(seed);
}

TimerWheel& Node::timers() const { return engine_->timers(); }
dpdk::PacketPool& Node::pool() const { return engine_->pool(); }

void Node::report_counters(CounterSink&) const {}

}  // namespace rocemu
