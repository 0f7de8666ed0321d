// NVUE's ECMP commands on a switch (`nv set system forwarding ecmp-hash
// FIELD on|off`, `hash-seed N`, their `nv unset`): once applied, each moves
// flows between the members of an ECMP group exactly as the hash of the
// new configuration says, `nv unset` puts them back, bad words and values
// are refused with the place and the expected values named, and `nv show
// system forwarding` and `nv config show` say what runs.
#include <catch2/catch.hpp>

#include <set>

#include "common/config/topology.h"
#include "switch/ecmp.h"
#include "switch/nvue.h"
#include "switch/nvue_yaml.h"
#include "switch/switch_kind.h"
#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

// File-local names in a namespace of their own (the unity build puts
// several test files in one translation unit); the test cases too.
namespace ecmp_nv_test {

using F = sw::EcmpHashField;

constexpr uint32_t kFlows = 16, kPackets = 5, kFirstQpn = 0x200;
constexpr int kMembers = 4;

// h0 on swp1 sends to 10.9.0.0/24, an ECMP group of swp2..swp5 (member m
// is swp<m+2>, next hop h<m+1>), hashed with NVUE's defaults.
sw::SwitchConfig ecmp_group_star() {
  sw::SwitchConfig cfg = star_config(5, sw::qos_roce_profile(sw::RoceMode::kLossless));
  for (int i = 1; i <= kMembers; i++)
    cfg.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.9.0.0/24"), uint16_t(i), {}, host_mac(i)});
  return cfg;
}

// Sends kPackets of each of the kFlows flows (QPs: one UDP source port
// each, everything else alike) and returns the member each flow took.
std::vector<int> members_taken(Star& s) {
  auto received = [&](int host, uint32_t qpn) {
    return s.host(host).has_received(qpn) ? s.host(host).received(qpn).packets : 0;
  };
  std::vector<std::vector<uint64_t>> before(kFlows, std::vector<uint64_t>(kMembers));
  for (uint32_t f = 0; f < kFlows; f++) {
    for (int m = 0; m < kMembers; m++) before[f][size_t(m)] = received(m + 1, kFirstQpn + f);
    FlowSpec fs;
    fs.dst = *wire::IpAddr::parse("10.9.0.1");
    fs.qpn = kFirstQpn + f;
    fs.count = kPackets;
    fs.payload = 1000;
    s.host(0).add_flow(fs);
  }
  s.engine->run_for(us(100));
  std::vector<int> taken;
  for (uint32_t f = 0; f < kFlows; f++) {
    int member = -1, members = 0;
    for (int m = 0; m < kMembers; m++) {
      const uint64_t got = received(m + 1, kFirstQpn + f) - before[f][size_t(m)];
      if (got == 0) continue;
      members++;
      member = m;
      INFO("flow " << f << " member " << m);
      CHECK(got == kPackets);
    }
    INFO("flow " << f);
    CHECK(members == 1);
    taken.push_back(member);
  }
  return taken;
}

// The members the hash of `e` picks for those flows (the test host's UDP
// source port is 0xc000 | the QPN's low 14 bits).
std::vector<int> members_hashed(const sw::EcmpConfig& e) {
  std::vector<int> out;
  for (uint32_t f = 0; f < kFlows; f++) {
    sw::FlowKey k;
    k.src = host_ip(0);
    k.dst = *wire::IpAddr::parse("10.9.0.1");
    k.protocol = 17;
    k.sport = uint16_t(0xc000 | ((kFirstQpn + f) & 0x3fff));
    k.dport = 4791;
    out.push_back(int(sw::ecmp_hash(e, k) % kMembers));
  }
  return out;
}

// Stages `words` and applies them.
void nv_apply(Star& s, const std::vector<std::string>& words) {
  const Status st = s.sw->nv(words);
  INFO(st.message());
  REQUIRE(st.ok());
  CHECK(nv_text(*s.sw, {"config", "apply"}) == "applied");
}

std::vector<std::string> forwarding_words(const char* verb, std::vector<std::string> rest) {
  std::vector<std::string> w = {verb, "system", "forwarding"};
  w.insert(w.end(), rest.begin(), rest.end());
  return w;
}


TEST_CASE("nv set system forwarding hash-seed and ecmp-hash move flows once applied; nv unset puts them back",
          "[sim][switch]") {
  require_eal();
  Star s = make_star(ecmp_group_star(), 3, {}, 16384);
  const std::vector<int> base = members_taken(s);
  CHECK(base == members_hashed(sw::EcmpConfig{}));
  CHECK(std::set<int>(base.begin(), base.end()).size() > 1);  // 16 source ports spread

  SECTION("hash-seed") {
    REQUIRE(s.sw->nv(forwarding_words("set", {"hash-seed", "12345"})).ok());
    CHECK(members_taken(s) == base);  // staged only
    CHECK(nv_text(*s.sw, {"config", "apply"}) == "applied");
    CHECK(s.sw->config().ecmp.hash_seed == 12345);
    const std::vector<int> seeded = members_taken(s);
    CHECK(seeded != base);
    CHECK(seeded == members_hashed(s.sw->config().ecmp));
    nv_apply(s, forwarding_words("unset", {"hash-seed"}));
    CHECK(s.sw->config().ecmp.hash_seed == 0);
    CHECK(members_taken(s) == base);
  }

  SECTION("ecmp-hash source-port off: the flows differ only there, so all take one member") {
    nv_apply(s, forwarding_words("set", {"ecmp-hash", "source-port", "off"}));
    CHECK(!s.sw->config().ecmp.hashes(F::source_port));
    const std::vector<int> one = members_taken(s);
    CHECK(std::set<int>(one.begin(), one.end()).size() == 1);
    CHECK(one == members_hashed(s.sw->config().ecmp));
    nv_apply(s, forwarding_words("set", {"ecmp-hash", "source-port", "on"}));
    CHECK(members_taken(s) == base);
    // Cumulus 5.15 spells them enabled|disabled.
    nv_apply(s, forwarding_words("set", {"ecmp-hash", "source-port", "disabled"}));
    CHECK(members_taken(s) == one);
    nv_apply(s, forwarding_words("unset", {"ecmp-hash", "source-port"}));
    CHECK(s.sw->config().ecmp.hash_fields == sw::kEcmpAllFields);
    CHECK(members_taken(s) == base);
  }

  SECTION("every other field: off leaves it out of the hash, so flows move; unset restores it") {
    for (int f = 0; f < F::kCount; f++) {
      if (F::Id(f) == F::source_port) continue;
      const std::string name(F::kNames[size_t(f)]);
      INFO(name);
      nv_apply(s, forwarding_words("set", {"ecmp-hash", name, "off"}));
      CHECK(!s.sw->config().ecmp.hashes(F::Id(f)));
      const std::vector<int> without = members_taken(s);
      CHECK(without != base);
      CHECK(without == members_hashed(s.sw->config().ecmp));
      nv_apply(s, forwarding_words("unset", {"ecmp-hash", name}));
      CHECK(members_taken(s) == base);
    }
    // `unset system forwarding ecmp-hash`: every field back to on.
    REQUIRE(s.sw->nv(forwarding_words("set", {"ecmp-hash", "ip-protocol", "off"})).ok());
    nv_apply(s, forwarding_words("set", {"ecmp-hash", "destination-port", "off"}));
    CHECK(members_taken(s) != base);
    nv_apply(s, forwarding_words("unset", {"ecmp-hash"}));
    CHECK(s.sw->config().ecmp.hash_fields == sw::kEcmpAllFields);
    CHECK(members_taken(s) == base);
  }

  SECTION("every field off is refused at apply, naming the field; nothing changes") {
    for (const std::string_view name : F::kNames)
      REQUIRE(s.sw->nv(forwarding_words("set", {"ecmp-hash", std::string(name), "off"})).ok());
    const Status st = s.sw->nv({"config", "apply"});
    REQUIRE(!st.ok());
    CHECK_THAT(st.message(), Catch::Contains("forwarding.ecmp-hash: at least one field must be hashed") &&
                                 Catch::Contains("nothing was applied"));
    CHECK(s.sw->config().ecmp.hash_fields == sw::kEcmpAllFields);
    CHECK(members_taken(s) == base);
  }
}

TEST_CASE("nv set system forwarding: bad fields, values and seeds are refused, naming what was expected",
          "[unit][switch]") {
  const std::string fields = "ip-protocol, source-ip, destination-ip, source-port, destination-port, ipv6-label";
  const std::pair<std::vector<std::string>, std::string> bad[] = {
      {forwarding_words("set", {"ecmp-hash", "source-mac", "on"}),
       "nv set system forwarding ecmp-hash source-mac: 'source-mac' is not a field of the hash (" + fields + ")"},
      // NVUE's fields rocemu does not model (inner headers, GTP, ingress port).
      {forwarding_words("set", {"ecmp-hash", "inner-source-ip", "on"}),
       "nv set system forwarding ecmp-hash inner-source-ip: 'inner-source-ip' is not a field of the hash (" + fields +
           ")"},
      {forwarding_words("set", {"ecmp-hash"}),
       "nv set system forwarding ecmp-hash: expected a field of the hash (" + fields + ")"},
      {forwarding_words("set", {"ecmp-hash", "source-port", "yes"}),
       "nv set system forwarding ecmp-hash source-port yes: 'yes' is not on or off"},
      {forwarding_words("set", {"ecmp-hash", "source-port"}),
       "nv set system forwarding ecmp-hash source-port: expected on or off"},
      {forwarding_words("set", {"ecmp-hash", "source-port", "off", "now"}),
       "nv set system forwarding ecmp-hash source-port off: expected the end of the command, got 'now'"},
      {forwarding_words("set", {"hash-seed", "4294967296"}),
       "nv set system forwarding hash-seed: '4294967296' is out of range (0..4294967295)"},
      {forwarding_words("set", {"hash-seed", "-1"}),
       "nv set system forwarding hash-seed: '-1' is out of range (0..4294967295)"},
      {forwarding_words("set", {"hash-seed", "abc"}), "nv set system forwarding hash-seed: 'abc' is not an integer"},
      {forwarding_words("set", {"hash-seed"}),
       "nv set system forwarding hash-seed: expected an integer (0..4294967295)"},
      {forwarding_words("set", {"hash-seed", "7", "8"}),
       "nv set system forwarding hash-seed 7: expected the end of the command, got '8'"},
      // Per-packet spraying is the topology's `forwarding.load-balancing`
      // only: NVUE's per-packet mode is adaptive routing, not modelled.
      {forwarding_words("set", {"load-balancing", "per-packet"}),
       "nv set system forwarding: expected ecmp-hash, hash-seed or packet-trim, got 'load-balancing'"},
      {forwarding_words("set", {}), "nv set system forwarding: expected ecmp-hash, hash-seed or packet-trim"},
  };
  for (const auto& [words, message] : bad) {
    sw::SwitchConfig c = sw::SwitchConfig::with_ports(2);
    const Status st = sw::nv_edit(c, words);
    INFO(message);
    REQUIRE(!st.ok());
    CHECK(st.message() == message);
  }
  // The good ones, at both ends of the seed's range.
  sw::SwitchConfig c = sw::SwitchConfig::with_ports(2);
  REQUIRE(sw::nv_edit(c, forwarding_words("set", {"hash-seed", "4294967295"})).ok());
  CHECK(c.ecmp.hash_seed == 4294967295u);
  REQUIRE(sw::nv_edit(c, forwarding_words("set", {"hash-seed", "0"})).ok());
  CHECK(c.ecmp.hash_seed == 0);
  REQUIRE(sw::nv_edit(c, forwarding_words("set", {"ecmp-hash", "ipv6-label", "off"})).ok());
  REQUIRE(sw::nv_edit(c, forwarding_words("set", {"ecmp-hash", "destination-ip", "disabled"})).ok());
  CHECK(c.ecmp.hash_fields == (sw::kEcmpAllFields & ~(1u << F::ipv6_label) & ~(1u << F::destination_ip)));
  REQUIRE(sw::nv_edit(c, forwarding_words("set", {"ecmp-hash", "ipv6-label", "enabled"})).ok());
  CHECK(c.ecmp.hashes(F::ipv6_label));
  CHECK(c.validate().ok());
}

TEST_CASE("nv show system forwarding and nv config show say what runs; config show loads back", "[sim][switch]") {
  require_eal();
  Star s = make_star(ecmp_group_star(), 4, {}, 16384);
  REQUIRE(s.sw->nv(forwarding_words("set", {"hash-seed", "7"})).ok());
  REQUIRE(s.sw->nv(forwarding_words("set", {"ecmp-hash", "source-port", "off"})).ok());
  REQUIRE(s.sw->nv(forwarding_words("set", {"ecmp-hash", "ipv6-label", "off"})).ok());
  // The diff: only what changed.
  const std::string diff = nv_text(*s.sw, {"config", "diff"});
  INFO(diff);
  const YAML::Node d = YAML::Load(diff);
  CHECK(d[0]["set"]["forwarding"]["hash-seed"].as<uint32_t>() == 7);
  CHECK(d[0]["set"]["forwarding"]["ecmp-hash"]["source-port"].as<std::string>() == "off");
  CHECK(d[0]["set"]["forwarding"]["ecmp-hash"]["ipv6-label"].as<std::string>() == "off");
  CHECK(!d[0]["set"]["forwarding"]["ecmp-hash"]["source-ip"]);
  // Shown is what runs, not what is staged.
  CHECK(nlohmann::json::parse(nv_text(*s.sw, {"show", "system", "forwarding", "-o", "json"}))["hash-seed"] == 0);
  REQUIRE(nv_text(*s.sw, {"config", "apply"}) == "applied");

  const auto j = nlohmann::json::parse(nv_text(*s.sw, {"show", "system", "forwarding", "-o", "json"}));
  INFO(j.dump(2));
  CHECK(j["hash-seed"] == 7);
  CHECK(j["load-balancing"] == "hash");
  CHECK(j["ecmp-hash"] == nlohmann::json{{"destination-ip", "on"}, {"destination-port", "on"}, {"ip-protocol", "on"},
                                         {"ipv6-label", "off"}, {"source-ip", "on"}, {"source-port", "off"}});
  CHECK(j["packet-trim"]["state"] == "disabled");
  CHECK(j["packet-trim"]["size"] == 256);
  // NVUE's order (by name) and layout: the fields under ecmp-hash, two columns.
  const std::string table = nv_text(*s.sw, {"show", "system", "forwarding"});
  INFO(table);
  CHECK(table.find("ecmp-hash\n  destination-ip ") != std::string::npos);
  CHECK(table.find("destination-ip") < table.find("source-port"));
  CHECK_THAT(table, Catch::Contains("\n  source-port       off          off\n"));
  CHECK_THAT(table, Catch::Contains("\nhash-seed           7            7\n"));
  const auto only = nlohmann::json::parse(nv_text(*s.sw, {"show", "system", "forwarding", "ecmp-hash", "-o", "json"}));
  CHECK(only == j["ecmp-hash"]);
  CHECK_THAT(s.sw->nv({"show", "system", "forwarding", "lag-hash"}).message(),
             Catch::Contains("system forwarding [ecmp-hash]"));

  // `nv config show -o yaml` is a switch section that loads back the same.
  const std::string yaml = nv_text(*s.sw, {"config", "show", "-o", "yaml"});
  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto back = parse_topology("nodes:\n  sw1:\n" + indent_switch_section(yaml), "show.yaml", reg);
  INFO(yaml);
  INFO(back.status().message());
  REQUIRE(back.ok());
  const auto& again = std::any_cast<const sw::SwitchConfig&>(back->nodes[0].config);
  CHECK(again.ecmp == s.sw->config().ecmp);
  CHECK(again.ecmp.hash_seed == 7);
  CHECK(sw::switch_config_text(again) == yaml);
}

}  // namespace ecmp_nv_test
