// ECMP: the hash of the 5-tuple (each NVUE field on and off, the seed),
// its spread over a group's members, per-packet spraying, and the switch
// sending each flow down one member with per-member counters that match
// what the next hops received.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "common/config/topology.h"
#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "switch/ecmp.h"
#include "switch/nvue_yaml.h"
#include "switch/route.h"
#include "switch/switch_kind.h"
#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;
using F = sw::EcmpHashField;

namespace {

sw::FlowKey roce_key(uint16_t sport) {
  sw::FlowKey k;
  k.src = *wire::IpAddr::parse("10.1.1.1");
  k.dst = *wire::IpAddr::parse("10.2.1.1");
  k.protocol = 17;
  k.sport = sport;
  k.dport = 4791;
  return k;
}

// Every counter a node reports, by "scope/name".
struct MapSink final : CounterSink {
  std::map<std::string, uint64_t> v;
  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    v[std::string(scope) + "/" + std::string(name)] = value;
  }
};

}  // namespace

TEST_CASE("ECMP hash: each field counts only when enabled, and the seed changes the choice", "[unit][switch]") {
  const sw::EcmpConfig all;
  const sw::FlowKey base = roce_key(0xc123);
  CHECK(sw::ecmp_hash(all, base) == sw::ecmp_hash(all, base));  // deterministic

  // Variants of the key differing in one field each.
  struct Variant {
    F::Id field;
    sw::FlowKey key;
  };
  std::vector<Variant> variants;
  for (int f = 0; f < F::kCount; f++) {
    sw::FlowKey k = base;
    switch (F::Id(f)) {
      case F::ip_protocol: k.protocol = 6; break;
      case F::source_ip: k.src = *wire::IpAddr::parse("10.1.1.2"); break;
      case F::destination_ip: k.dst = *wire::IpAddr::parse("10.2.1.2"); break;
      case F::source_port: k.sport = 0xc124; break;
      case F::destination_port: k.dport = 4792; break;
      case F::ipv6_label: k.flow_label = 0x12345; break;
      case F::kCount: break;
    }
    variants.push_back({F::Id(f), k});
  }
  for (const Variant& v : variants) {
    INFO(F::kNames[v.field]);
    sw::EcmpConfig without = all;
    without.hash_fields = uint8_t(all.hash_fields & ~(1u << v.field));
    CHECK(sw::ecmp_hash(all, v.key) != sw::ecmp_hash(all, base));
    CHECK(sw::ecmp_hash(without, v.key) == sw::ecmp_hash(without, base));
  }
  sw::EcmpConfig seeded = all;
  seeded.hash_seed = 1;
  CHECK(sw::ecmp_hash(seeded, base) != sw::ecmp_hash(all, base));
}

TEST_CASE("ECMP hash: RoCE source ports spread evenly over 2, 3, 4 and 8 members", "[unit][switch]") {
  // 4096 consecutive source ports (what 4096 QPs' flow labels give, near
  // enough): each member's share within 4 sigma of the binomial.
  const sw::EcmpConfig c;
  for (int members : {2, 3, 4, 8}) {
    std::vector<int> n(size_t(members), 0);
    constexpr int kPorts = 4096;
    for (int p = 0; p < kPorts; p++) n[sw::ecmp_hash(c, roce_key(uint16_t(0xc000 + p))) % uint32_t(members)]++;
    const double q = 1.0 / members;
    const double sigma = std::sqrt(kPorts * q * (1 - q));
    for (int m = 0; m < members; m++) {
      INFO(members << " members, member " << m << ": " << n[size_t(m)]);
      CHECK(std::abs(n[size_t(m)] - kPorts * q) < 4 * sigma);
    }
  }
}

TEST_CASE("ECMP load balancing strategies: hash keeps a flow on one member, per-packet takes turns", "[unit][switch]") {
  sw::EcmpConfig c;
  const auto hash = sw::ecmp_pick(sw::LoadBalancing::kHash);
  const auto spray = sw::ecmp_pick(sw::LoadBalancing::kPerPacket);
  // A packet of one flow.
  std::vector<uint8_t> frame(128);
  wire::PathHeaders path;
  path.src_ip = *wire::IpAddr::parse("10.1.1.1");
  path.dst_ip = *wire::IpAddr::parse("10.2.1.1");
  path.udp_sport = 0xc321;
  wire::RoceFields bth;
  bth.opcode = wire::op::kSendOnly;
  bth.dest_qp = 0x11;
  const uint32_t len = wire::encode_roce(frame, path, bth, {});
  REQUIRE(len > 0);
  wire::PacketView v;
  REQUIRE(wire::decode({frame.data(), len}, v) == wire::DecodeError::kOk);
  uint32_t turn = 0;
  const uint16_t first = hash(c, v, 4, turn);
  for (int i = 0; i < 10; i++) CHECK(hash(c, v, 4, turn) == first);
  std::vector<uint16_t> seq;
  for (int i = 0; i < 7; i++) seq.push_back(spray(c, v, 3, turn));
  CHECK(seq == std::vector<uint16_t>{0, 1, 2, 0, 1, 2, 0});
  CHECK(sw::parse_load_balancing("per-packet") == sw::LoadBalancing::kPerPacket);
  CHECK(!sw::parse_load_balancing("adaptive"));
}

namespace {

// h0 on swp1 sends to 10.9.0.0/24, routed over an ECMP group of swp2..swp5
// whose next hops are h1..h4 (static MACs).
sw::SwitchConfig ecmp_star(sw::LoadBalancing lb, uint32_t seed = 0) {
  sw::SwitchConfig cfg = star_config(5, sw::qos_roce_profile(sw::RoceMode::kLossless));
  for (int i = 1; i <= 4; i++) cfg.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.9.0.0/24"), uint16_t(i), {}, host_mac(i)});
  cfg.ecmp.load_balancing = lb;
  cfg.ecmp.hash_seed = seed;
  return cfg;
}

// Packets of each flow (qpn) as h1..h4 received them.
std::map<uint32_t, std::vector<uint64_t>> received_by_member(Star& s, uint32_t flows) {
  std::map<uint32_t, std::vector<uint64_t>> out;
  for (uint32_t f = 0; f < flows; f++)
    for (int h = 1; h <= 4; h++)
      out[f].push_back(s.host(h).has_received(0x100 + f) ? s.host(h).received(0x100 + f).packets : 0);
  return out;
}

}  // namespace

TEST_CASE("ECMP in the switch: each QP's packets take one member; per-member counters match the next hops",
          "[sim][switch]") {
  require_eal();
  constexpr uint32_t kFlows = 64, kPackets = 20;
  Star s = make_star(ecmp_star(sw::LoadBalancing::kHash), 3, {}, 16384);
  for (uint32_t f = 0; f < kFlows; f++) {
    FlowSpec fs;
    fs.dst = *wire::IpAddr::parse("10.9.0.1");
    fs.qpn = 0x100 + f;  // the test host's source port follows the QPN
    fs.count = kPackets;
    fs.payload = 1000;
    fs.rate_bps = 2'000'000'000ull;
    s.host(0).add_flow(fs);
  }
  s.engine->run_for(ms(1));
  const auto got = received_by_member(s, kFlows);
  std::vector<uint64_t> per_member(4, 0);
  std::vector<int> flows_on(4, 0);
  for (const auto& [f, v] : got) {
    INFO("flow " << f);
    int members_used = 0;
    for (int m = 0; m < 4; m++) {
      per_member[size_t(m)] += v[size_t(m)];
      if (v[size_t(m)] > 0) members_used++, flows_on[size_t(m)]++;
    }
    CHECK(members_used == 1);
    CHECK(v[0] + v[1] + v[2] + v[3] == kPackets);
  }
  // 64 flows over 4 members: none idle, none with more than half.
  for (int m = 0; m < 4; m++) {
    INFO("member " << m << ": " << flows_on[size_t(m)] << " flows");
    CHECK(flows_on[size_t(m)] >= 6);
    CHECK(flows_on[size_t(m)] <= 32);
  }
  MapSink c;
  s.sw->report_counters(c);
  for (int m = 0; m < 4; m++) {
    const std::string scope = "sw1/swp" + std::to_string(m + 2);
    CHECK(c.v[scope + "/ecmp.tx-packets"] == per_member[size_t(m)]);
    CHECK(c.v[scope + "/ecmp.tx-bytes"] == s.sw->counters(uint16_t(m + 1))[sw::PortCounters::tx_roce_bytes]);
  }
  CHECK(!c.v.contains("sw1/swp1/ecmp.tx-packets"));  // in no group
  // The routes reloaded unchanged keep the members' counters; clearing a
  // port's counters clears its members'.
  REQUIRE(s.sw->apply(s.sw->config()).ok());
  MapSink again;
  s.sw->report_counters(again);
  CHECK(again.v["sw1/swp2/ecmp.tx-packets"] == per_member[0]);
  s.sw->clear_counters(1);
  MapSink cleared;
  s.sw->report_counters(cleared);
  CHECK(cleared.v["sw1/swp2/ecmp.tx-packets"] == 0);
  CHECK(cleared.v["sw1/swp3/ecmp.tx-packets"] == per_member[1]);

  // Another seed moves flows between members, deterministically.
  Star t = make_star(ecmp_star(sw::LoadBalancing::kHash, 12345), 3, {}, 16384);
  for (uint32_t f = 0; f < kFlows; f++) {
    FlowSpec fs;
    fs.dst = *wire::IpAddr::parse("10.9.0.1");
    fs.qpn = 0x100 + f;
    fs.count = kPackets;
    fs.payload = 1000;
    fs.rate_bps = 2'000'000'000ull;
    t.host(0).add_flow(fs);
  }
  t.engine->run_for(ms(1));
  CHECK(received_by_member(t, kFlows) != got);
}

TEST_CASE("ECMP per-packet load balancing sprays one QP's packets evenly over the members", "[sim][switch]") {
  require_eal();
  Star s = make_star(ecmp_star(sw::LoadBalancing::kPerPacket), 3, {}, 16384);
  FlowSpec fs;
  fs.dst = *wire::IpAddr::parse("10.9.0.1");
  fs.count = 400;
  fs.payload = 1000;
  s.host(0).add_flow(fs);
  s.engine->run_for(ms(1));
  for (int h = 1; h <= 4; h++) {
    INFO("h" << h);
    REQUIRE(s.host(h).has_received(fs.qpn));
    CHECK(s.host(h).received(fs.qpn).packets == 100);
  }
}

TEST_CASE("Topology files: next-hops lists and equal prefixes make ECMP groups; forwarding sets the hash",
          "[unit][switch]") {
  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto parse = [&](const std::string& sw) { return parse_topology("nodes:\n  sw1:\n" + sw, "t.yaml", reg); };
  auto t = parse(R"(    kind: switch
    ports: 4
    forwarding: {ecmp-hash: {source-port: off, ipv6-label: off}, hash-seed: 99, load-balancing: per-packet}
    routes:
      - {prefix: 10.2.0.0/16, next-hops: [{interface: swp2, via: 10.255.0.2}, {interface: swp3, via: 10.255.0.6}]}
      - {prefix: 10.3.0.0/16, interface: swp2, via: 10.255.0.2}
      - {prefix: 10.3.0.0/16, interface: swp4, via: 10.255.0.10}
)");
  INFO(t.status().message());
  REQUIRE(t.ok());
  const auto& cfg = std::any_cast<const sw::SwitchConfig&>(t->nodes[0].config);
  REQUIRE(cfg.routes.size() == 4);
  CHECK(cfg.routes[1].port == 2);
  CHECK(cfg.routes[1].via->str() == "10.255.0.6");
  CHECK(!cfg.ecmp.hashes(F::source_port));
  CHECK(!cfg.ecmp.hashes(F::ipv6_label));
  CHECK(cfg.ecmp.hashes(F::destination_port));
  CHECK(cfg.ecmp.hash_seed == 99);
  CHECK(cfg.ecmp.load_balancing == sw::LoadBalancing::kPerPacket);
  // `nv config show -o yaml` writes them back as they were read.
  const std::string yaml = sw::switch_config_text(cfg);
  auto back = parse("    " + [&] {
    std::string indented;
    for (char ch : yaml) indented += ch == '\n' ? std::string("\n    ") : std::string(1, ch);
    return indented;
  }());
  INFO(yaml);
  INFO(back.status().message());
  REQUIRE(back.ok());
  const auto& again = std::any_cast<const sw::SwitchConfig&>(back->nodes[0].config);
  CHECK(again.ecmp == cfg.ecmp);
  CHECK(sw::switch_config_text(again) == yaml);

  // Bad input names the field.
  auto bad = [&](const std::string& sw, const std::string& field) {
    auto r = parse("    kind: switch\n    ports: 4\n" + sw);
    INFO(sw);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains(field));
  };
  bad("    forwarding: {ecmp-hash: {source-mac: on}}\n", "forwarding.ecmp-hash");
  bad("    forwarding: {hash-seed: -1}\n", "forwarding.hash-seed");
  bad("    forwarding: {load-balancing: adaptive}\n", "forwarding.load-balancing");
  bad("    forwarding: {ecmp-hash: {ip-protocol: off, source-ip: off, destination-ip: off, source-port: off, "
      "destination-port: off, ipv6-label: off}}\n",
      "forwarding.ecmp-hash");
  bad("    routes:\n      - {prefix: 10.2.0.0/16, next-hops: [{interface: swp2}, {interface: swp9}]}\n",
      "routes[0].next-hops[1].interface");
  bad("    routes:\n      - {prefix: 10.2.0.0/16, next-hops: []}\n", "routes[0].next-hops");
  bad("    routes:\n      - {prefix: 10.2.0.0/16, interface: swp2, next-hops: [{interface: swp3}]}\n",
      "routes[0].next-hops");
  bad("    routes:\n      - {prefix: 10.2.0.0/16, next-hops: [{interface: swp2, via: 10.0.0.1}, {interface: swp2, via: "
      "10.0.0.1}]}\n",
      "routes[0].next-hops[1]: the same next hop");
  {
    std::string hops;
    for (int i = 1; i <= 65; i++) hops += std::string(i > 1 ? ", " : "") + "{interface: swp2, via: 10.0.1." + std::to_string(i) + "}";
    bad("    routes:\n      - {prefix: 10.2.0.0/16, next-hops: [" + hops + "]}\n", "routes[0].next-hops[64]: more than 64");
  }
  // Not a mapping where one is expected: an error naming the field, not an exception.
  bad("    forwarding: hash\n", "forwarding: expected a mapping");
  bad("    forwarding: {ecmp-hash: all}\n", "forwarding.ecmp-hash: expected a mapping");
  bad("    routes:\n      - {prefix: 10.2.0.0/16, next-hops: [swp2, swp3]}\n", "routes[0].next-hops[0]: expected a mapping");
  bad("    routes:\n      - 10.2.0.0/16\n", "routes[0]: expected a mapping");
  bad("    neighbors: [10.0.0.1]\n", "neighbors[0]: expected a mapping");
}

TEST_CASE("Route table: a neighbour refused by a full table leaves no next hop behind", "[unit][switch]") {
  require_eal();
  auto t = sw::RouteTable::create("ecmp_full_test");
  REQUIRE(t.ok());
  sw::RouteTable& rt = **t;
  sw::SwitchConfig cfg;
  cfg.num_ports = 4;
  REQUIRE(rt.load(cfg).ok());
  const wire::MacAddr mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  auto ip = [](uint32_t i) { return wire::IpAddr::v4(0x0a000000u + i); };
  uint32_t learned = 0;
  while (learned < 100000 && rt.learn(ip(learned), mac, 1)) learned++;
  REQUIRE(learned < 100000);  // the table filled up
  const size_t hops = rt.num_next_hops();
  for (uint32_t i = 0; i < 1000; i++) CHECK_FALSE(rt.learn(ip(learned + 1 + i), mac, 1));
  CHECK(rt.num_next_hops() == hops);
  CHECK(rt.neighbors().size() == learned);
}

TEST_CASE("Route table: a reload that fails partway keeps the ECMP members' counters", "[unit][switch]") {
  require_eal();
  auto t = sw::RouteTable::create("ecmp_reload_test");
  REQUIRE(t.ok());
  sw::RouteTable& rt = **t;
  sw::SwitchConfig cfg;
  cfg.num_ports = 4;
  const sw::IpPrefix group = *sw::IpPrefix::parse("10.9.0.0/16");
  for (uint16_t p = 1; p < 3; p++)
    cfg.routes.push_back(sw::Route{group, p, wire::IpAddr::v4(0x0a000000u + p), std::nullopt});
  REQUIRE(rt.load(cfg).ok());
  // One packet down the group.
  wire::PathHeaders path;
  path.src_ip = *wire::IpAddr::parse("10.1.0.1");
  path.dst_ip = *wire::IpAddr::parse("10.9.0.1");
  wire::RoceFields rf;
  rf.opcode = wire::op::kSendOnly;
  std::vector<uint8_t> payload(64, 0), frame(256);
  frame.resize(wire::encode_roce(frame, path, rf, payload));
  wire::PacketView v;
  REQUIRE(wire::decode(frame, v) == wire::DecodeError::kOk);
  uint32_t member;
  REQUIRE(rt.route(v, member) != nullptr);
  rt.count_ecmp(member, uint32_t(frame.size()));
  auto packets = [&] {
    uint64_t n = 0;
    for (uint32_t i = 0; i < 2; i++) n += rt.ecmp_member(rt.ecmp_groups().at(0).first + i).counters[sw::EcmpCounters::packets];
    return n;
  };
  REQUIRE(packets() == 1);
  // The group, then more /32s in distinct /24s than rte_lpm has tbl8 groups:
  // the load fails after the group was installed.
  sw::SwitchConfig big = cfg;
  for (uint32_t i = 0; i < 400; i++)
    big.routes.push_back(sw::Route{sw::IpPrefix{wire::IpAddr::v4(0x14000001u + (i << 8)), 32}, 3, std::nullopt,
                                   wire::MacAddr::parse("02:00:00:00:00:03")});
  REQUIRE_FALSE(rt.load(big).ok());
  CHECK(packets() == 1);
  // Rolled back: the member still has its packet.
  REQUIRE(rt.load(cfg).ok());
  CHECK(packets() == 1);
}

TEST_CASE("ECMP counters count only what a member sends: a member whose link is down counts nothing",
          "[sim][switch]") {
  require_eal();
  Star s = make_star(ecmp_star(sw::LoadBalancing::kPerPacket), 3, {}, 16384);
  sw::SwitchConfig down = s.sw->config();
  down.interfaces[2].faults.link_down = true;  // swp3
  REQUIRE(s.sw->apply(down).ok());
  FlowSpec fs;
  fs.dst = *wire::IpAddr::parse("10.9.0.1");
  fs.count = 400;
  fs.payload = 1000;
  s.host(0).add_flow(fs);
  s.engine->run_for(ms(1));
  MapSink c;
  s.sw->report_counters(c);
  CHECK(c.v["sw1/swp3/ecmp.tx-packets"] == 0);
  CHECK(c.v["sw1/swp3/ecmp.tx-bytes"] == 0);
  CHECK(c.v["sw1/swp1/discards.link-down"] == 100);
  for (int h : {1, 3, 4}) {
    INFO("h" << h);
    CHECK(c.v["sw1/swp" + std::to_string(h + 1) + "/ecmp.tx-packets"] == 100);
  }
}

TEST_CASE("Route table: a reload removes every route the new configuration does not have", "[unit][switch]") {
  require_eal();
  auto t = sw::RouteTable::create("route_reload_test");
  REQUIRE(t.ok());
  sw::RouteTable& rt = **t;
  auto route = [](const char* prefix, uint16_t port) {
    return sw::Route{*sw::IpPrefix::parse(prefix), port, std::nullopt, wire::MacAddr::parse("02:00:00:00:00:07")};
  };
  sw::SwitchConfig full;
  full.num_ports = 4;
  full.routes = {route("0.0.0.0/0", 1), route("10.2.0.0/16", 2), route("10.2.3.4/32", 0),
                 route("::/0", 1), route("fd00::/64", 2)};
  REQUIRE(rt.load(full).ok());
  auto port_of = [&](const char* ip) {
    const sw::NextHop* nh = rt.lookup(*wire::IpAddr::parse(ip));
    return nh == nullptr ? -1 : int(nh->port);
  };
  CHECK(port_of("192.0.2.1") == 1);
  CHECK(port_of("10.2.9.9") == 2);
  CHECK(port_of("10.2.3.4") == 0);
  CHECK(port_of("2001:db8::1") == 1);
  CHECK(port_of("fd00::5") == 2);
  // Without the default routes and the /32, the rest stays; with nothing, nothing matches.
  sw::SwitchConfig some = full;
  some.routes = {route("10.2.0.0/16", 2), route("fd00::/64", 2)};
  REQUIRE(rt.load(some).ok());
  CHECK(port_of("192.0.2.1") == -1);
  CHECK(port_of("10.2.3.4") == 2);
  CHECK(port_of("10.2.9.9") == 2);
  CHECK(port_of("2001:db8::1") == -1);
  CHECK(port_of("fd00::5") == 2);
  sw::SwitchConfig none;
  none.num_ports = 4;
  REQUIRE(rt.load(none).ok());
  for (const char* ip : {"192.0.2.1", "10.2.3.4", "10.2.9.9", "2001:db8::1", "fd00::5"}) CHECK(port_of(ip) == -1);
  // And back: the table is whole again.
  REQUIRE(rt.load(full).ok());
  CHECK(port_of("10.2.3.4") == 0);
  CHECK(port_of("2001:db8::1") == 1);
}
