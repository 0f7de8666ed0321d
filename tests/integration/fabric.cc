#include "tests/integration/fabric.h"

#include <catch2/catch.hpp>

#include <sstream>

#include "common/config/topology.h"
#include "nic/nic_kind.h"
#include "switch/switch_kind.h"
#include "tests/support/eal.h"

namespace rocemu::test {

std::string star_yaml(const StarSpec& s) {
  std::ostringstream y;
  y << "engine: {time: virtual, seed: " << s.seed << ", mbufs: 32768"
    << (s.virtual_lag.empty() ? "" : ", virtual_lag: " + s.virtual_lag) << "}\n";
  y << "nodes:\n";
  for (int i = 0; i < s.hosts; i++) {
    y << "  h" << i << ":\n"
      << "    kind: nic\n"
      << "    mac: \"02:00:00:00:" << (i < 16 ? "0" : "") << std::hex << i << std::dec << ":01\"\n"
      << "    ip: 10.0." << i << ".1\n"
      << "    prefix: 24\n"
      << "    gateway: 10.0." << i << ".254\n"
      << "    loss_recovery: " << s.loss_recovery << "\n";
    if (s.traffic_class >= 0) y << "    traffic_class: " << s.traffic_class << "\n";
    if (!s.cc.empty()) y << "    cc: " << s.cc << "\n";
    y << s.nic_extra;
  }
  y << "  sw1:\n"
    << "    kind: switch\n"
    << "    ports: " << s.hosts << "\n"
    << "    interfaces:\n";
  for (int i = 0; i < s.hosts; i++)
    y << "      " << sw::port_name(uint16_t(i)) << ": {address: 10.0." << i << ".254/24}\n";
  y << "    qos:\n"
    << "      roce: {mode: " << s.roce_mode << "}\n";
  if (!s.buffer_size.empty()) y << "      buffer: {size: " << s.buffer_size << "}\n";
  y << s.extra_qos;
  y << "links:\n";
  for (int i = 0; i < s.hosts; i++)
    y << "  - {a: h" << i << ", b: \"sw1:" << i << "\", rate: " << s.rate << ", delay: " << s.delay
      << ", mtu: 9000}\n";
  return y.str();
}

Star::~Star() {
  hosts.clear();  // contexts close before the NICs go
}

uint64_t Star::nic_sum(int first, int last, nic::NicCounters::Id id) const {
  uint64_t n = 0;
  for (int i = first; i < last; i++) n += nic_counter(i, id);
  return n;
}

std::unique_ptr<Star> make_star(const StarSpec& spec) {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  nic::register_nic_kind(reg);
  register_switch_kinds(reg);
  const std::string text = star_yaml(spec);
  auto topo = parse_topology(text, "star.yaml", reg);
  INFO(text);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  require_eal();
  auto e = Engine::create(topo->engine);
  INFO(e.status().message());
  REQUIRE(e.ok());
  auto star = std::make_unique<Star>();
  star->engine = std::move(e.value());
  const Status built = build_fabric(*topo, *star->engine);
  INFO(built.message());
  REQUIRE(built.ok());
  star->sw = dynamic_cast<sw::Switch*>(star->engine->find_node("sw1"));
  REQUIRE(star->sw != nullptr);
  for (int i = 0; i < spec.hosts; i++) {
    auto* n = dynamic_cast<nic::Nic*>(star->engine->find_node("h" + std::to_string(i)));
    REQUIRE(n != nullptr);
    star->nics.push_back(n);
  }
  if (!star->engine->started()) star->engine->start();
  for (auto* n : star->nics) star->hosts.push_back(std::make_unique<nic::SimHost>(*star->engine, *n));
  return star;
}

namespace {
class MapSink final : public CounterSink {
 public:
  std::map<std::string, uint64_t> values;
  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    values[std::string(scope) + "/" + std::string(name)] = value;
  }
};
}  // namespace

std::map<std::string, uint64_t> all_counters(const Engine& engine) {
  MapSink sink;
  engine.report_counters(sink);
  return sink.values;
}

}  // namespace rocemu::test
