// A star fabric for switch scenarios: one switch, host i on port i
// (10.0.i.1, gateway 10.0.i.254 on swp<i+1>), 100G links.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "common/engine/engine.h"
#include "switch/switch.h"
#include "tests/support/eal.h"
#include "tests/switch/traffic.h"

namespace rocemu::test {

inline constexpr uint64_t k100G = 100'000'000'000ull;

// A switch section (switch_config_text, `nv config show -o yaml`) indented
// to sit under a node's name in a topology, for reading it back.
inline std::string indent_switch_section(const std::string& text) {
  std::string indented;
  for (size_t b = 0, e; b < text.size(); b = e + 1) {
    e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    if (e > b) indented += "    " + text.substr(b, e - b) + "\n";
  }
  return indented;
}

// What `nv <words>` prints on the switch (REQUIREs that it succeeds).
inline std::string nv_text(sw::Switch& s, const std::vector<std::string>& words) {
  nlohmann::json j;
  const Status st = s.nv(words, &j);
  INFO(st.message());
  REQUIRE(st.ok());
  return j.is_string() ? j.get<std::string>() : j.dump();
}

struct Star {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  std::vector<TestHost*> hosts;
  std::vector<InternalLink*> links;

  TestHost& host(int i) { return *hosts[size_t(i)]; }
  Time now() const { return engine->now(); }
};

// A switch configuration for `n` ports with the star's addresses and `qos`.
inline sw::SwitchConfig star_config(int n, const sw::QosConfig& qos) {
  sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(uint16_t(n));
  for (int i = 0; i < n; i++) {
    sw::IpPrefix p;
    p.addr = gateway_ip(i);
    p.length = 24;
    cfg.interfaces[size_t(i)].address = p;
  }
  cfg.qos = qos;
  return cfg;
}

inline Star make_star(const sw::SwitchConfig& cfg, uint64_t seed = 1, LinkParams lp = {}, uint32_t mbufs = 16384) {
  Star s;
  s.engine = make_engine(seed, mbufs);
  s.sw = &s.engine->add<sw::Switch>("sw1", cfg);
  for (int i = 0; i < cfg.num_ports; i++) {
    auto& h = s.engine->add<TestHost>("h" + std::to_string(i), host_ip(i), host_mac(i), gateway_ip(i));
    s.hosts.push_back(&h);
    auto link = s.engine->connect(h, 0, *s.sw, uint16_t(i), lp);
    REQUIRE(link.ok());
    s.links.push_back(link.value());
  }
  // Hosts resolve their gateway in the first microseconds.
  const bool resolved = s.engine->run_until(
      [&] {
        for (auto* h : s.hosts)
          if (!h->gateway_resolved()) return false;
        return true;
      },
      ms(1));
  REQUIRE(resolved);
  return s;
}

}  // namespace rocemu::test
