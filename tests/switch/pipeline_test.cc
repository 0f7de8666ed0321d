// The forwarding pipeline packet by packet: routing (MAC rewrite, TTL,
// IPv6), drops by reason, ARP, the fault stage on a switch port, and the
// control API on a running switch.
#include <cstring>

#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

const wire::MacAddr kSinkMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0xaa}};

struct Bench3 {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  TestHost* h0 = nullptr;
  TestHost* h2 = nullptr;
  FrameNode* sink = nullptr;
};

Bench3 make_bench(std::vector<std::vector<uint8_t>> sink_frames = {}, sw::SwitchConfig cfg = {}) {
  Bench3 b;
  b.engine = make_engine(71);
  if (cfg.num_ports == 0) cfg = star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless));
  cfg.neighbors.push_back(sw::Neighbor{host_ip(1), kSinkMac, 1});
  cfg.neighbors.push_back(sw::Neighbor{*wire::IpAddr::parse("fd00:1::1"), kSinkMac, 1});
  cfg.routes.push_back(sw::Route{*sw::IpPrefix::parse("fd00:1::/64"), 1, {}, {}});
  b.sw = &b.engine->add<sw::Switch>("sw1", cfg);
  b.h0 = &b.engine->add<TestHost>("h0", host_ip(0), host_mac(0), gateway_ip(0));
  b.sink = &b.engine->add<FrameNode>("sink", std::move(sink_frames));
  b.h2 = &b.engine->add<TestHost>("h2", host_ip(2), host_mac(2), gateway_ip(2));
  REQUIRE(b.engine->connect(*b.h0, 0, *b.sw, 0, LinkParams{}).ok());
  REQUIRE(b.engine->connect(*b.sink, 0, *b.sw, 1, LinkParams{}).ok());
  REQUIRE(b.engine->connect(*b.h2, 0, *b.sw, 2, LinkParams{}).ok());
  b.engine->run_until(us(20));
  REQUIRE(b.h0->gateway_resolved());
  return b;
}

FlowSpec to(const char* dst, uint32_t qpn, uint64_t count) {
  FlowSpec f;
  f.dst = *wire::IpAddr::parse(dst);
  f.qpn = qpn;
  f.count = count;
  f.payload = 256;
  f.rate_bps = 10'000'000'000ull;
  return f;
}

}  // namespace

TEST_CASE("Routing rewrites MACs and TTL, keeps the ICRC, routes IPv6; drops are counted by reason", "[sim][switch]") {
  Bench3 b = make_bench();
  b.h0->add_flow(to("10.0.1.1", 0x10, 10));
  FlowSpec v6 = to("fd00:1::1", 0x11, 10);
  v6.src = *wire::IpAddr::parse("fd00::1");
  b.h0->add_flow(v6);
  FlowSpec expiring = to("10.0.1.1", 0x12, 5);
  expiring.ttl = 1;
  b.h0->add_flow(expiring);
  b.h0->add_flow(to("192.168.9.9", 0x13, 3));
  b.h0->add_flow(to("10.0.0.254", 0x14, 2));
  b.engine->run_to_idle(ms(1));

  int v4 = 0, v6n = 0;
  for (const auto& f : b.sink->received()) {
    wire::PacketView v;
    REQUIRE(wire::decode(f, v) == wire::DecodeError::kOk);  // IPv4 checksum included
    if (!v.is_roce) continue;
    CHECK(v.eth().dst == kSinkMac);
    CHECK(v.eth().src == b.sw->port_mac(1));
    CHECK(v.icrc_ok());
    if (v.is_ipv4()) {
      CHECK(v.ipv4().ttl == 63);
      v4++;
    } else {
      CHECK(v.ipv6().hop_limit == 63);
      v6n++;
    }
  }
  CHECK(v4 == 10);
  CHECK(v6n == 10);
  const auto& c = b.sw->counters(0);
  CHECK(c[sw::PortCounters::drop_ttl_expired] == 5);
  CHECK(c[sw::PortCounters::drop_no_route] == 3);
  CHECK(c[sw::PortCounters::drop_to_switch] == 2);
  const auto shown = b.sw->show_interface(0)["counters"];
  CHECK(shown["discards.ttl-expired"] == 5);
}

TEST_CASE("A frame from outside with a wrong IPv4 checksum is dropped as a parse error", "[sim][switch]") {
  // Frames the engine built skip the sum (kMetaIcrcValid); one a node hands
  // over as bytes, like a port from outside, is still checked.
  Bench3 b = make_bench();
  auto frame = [&b](bool good) {
    wire::PathHeaders path;
    path.src_mac = kSinkMac;
    path.dst_mac = b.sw->port_mac(1);
    path.src_ip = host_ip(1);
    path.dst_ip = host_ip(0);
    // The test host reads a send time from the payload's first 8 bytes.
    std::vector<uint8_t> payload(64, 0x5a);
    const int64_t sent = b.engine->now().count();
    std::memcpy(payload.data(), &sent, sizeof sent);
    std::vector<uint8_t> f(256);
    const wire::RoceFields rf{.opcode = wire::op::kSendOnly, .dest_qp = 0x30, .psn = 1};
    f.resize(wire::encode_roce(f, path, rf, payload));
    if (!good) f[14 + 10] ^= 0x01;
    return f;
  };
  for (const bool good : {true, false, true}) b.sink->send(frame(good), b.engine->now());
  b.engine->run_to_idle(ms(1));
  CHECK(b.sw->counters(1)[sw::PortCounters::drop_parse_error] == 1);
  CHECK(b.h0->received(0x30).packets == 2);
}

TEST_CASE("ARP: the switch answers for its address and for routed hosts, and learns", "[sim][switch]") {
  auto request = [](const char* target) {
    std::vector<uint8_t> f(60);
    wire::encode_arp(f, wire::kArpRequest, kSinkMac, host_ip(1).v4_host_order(), wire::MacAddr{},
                     wire::IpAddr::parse(target)->v4_host_order(), wire::kBroadcastMac);
    return f;
  };
  sw::SwitchConfig cfg = star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless));
  Bench3 b = make_bench({request("10.0.1.254"), request("10.0.2.1"), request("10.0.9.9")}, cfg);
  b.engine->run_to_idle(ms(1));
  std::vector<uint32_t> answered;
  for (const auto& f : b.sink->received()) {
    wire::PacketView v;
    REQUIRE(wire::decode(f, v) == wire::DecodeError::kOk);
    if (v.kind != wire::PacketKind::kArp) continue;
    CHECK(v.arp().oper.get() == wire::kArpReply);
    CHECK(v.arp().sha == b.sw->port_mac(1));
    CHECK(v.eth().dst == kSinkMac);
    answered.push_back(v.arp().spa.get());
  }
  CHECK(answered == std::vector<uint32_t>{gateway_ip(1).v4_host_order(), host_ip(2).v4_host_order()});
  // The unknown target was asked for on the other ports (h0 and h2 ignore it).
  CHECK(b.sw->counters(0)[sw::PortCounters::tx_arp] >= 2);
  CHECK(b.sw->counters(2)[sw::PortCounters::tx_arp] >= 2);
  // Hosts were learned from their ARP requests.
  const auto& n = b.sw->routes()->neighbors();
  CHECK(n.count(host_ip(0)) == 1);
  CHECK(n.count(host_ip(2)) == 1);
  CHECK(n.at(host_ip(2)).port == 2);
  CHECK(b.sw->show_routes()["neighbors"].size() >= 4);
}

TEST_CASE("Fault stage on a switch port: Bernoulli loss and a lower rate", "[sim][switch]") {
  sw::SwitchConfig cfg = star_config(3, sw::qos_roce_profile(sw::RoceMode::kLossless));
  cfg.interfaces[0].faults.loss = 0.1;
  cfg.interfaces[2].faults.rate_bps = 10'000'000'000ull;
  Bench3 b = make_bench({}, cfg);
  FlowSpec f = to("10.0.2.1", 0x20, 20000);
  f.payload = 1024;
  f.rate_bps = 0;
  b.h0->add_flow(f);
  b.engine->run_to_idle(ms(50));
  const auto& got = b.h2->received(0x20);
  const uint64_t lost = b.sw->counters(0)[sw::PortCounters::drop_fault];
  CHECK(got.packets + lost == 20000);
  CHECK(double(lost) == Approx(2000).margin(5 * 42.4));  // 5 sigma of Binomial(20000, 0.1)
  // The egress port ran at 10G: PFC held the 100G sender back, nothing lost.
  const double gbps = double(got.bytes + 24 * got.packets) * 8 / to_seconds(got.last - got.first) / 1e9;
  CHECK(gbps == Approx(10).margin(0.2));
  CHECK(b.sw->pfc_tx_frames(0, 3) > 0);
  CHECK(b.sw->queue_counters(2, 3)[sw::QueueCounters::drop_packets] == 0);
}

TEST_CASE("Control API: apply validates whole; nv set/unset/show on a running switch", "[sim][switch]") {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.buffer.size = 2'000'000;
  Star s = make_star(star_config(3, q), 72);
  for (int i = 0; i < 2; i++) {
    FlowSpec f;
    f.dst = host_ip(2);
    f.qpn = 0x30 + uint32_t(i);
    f.payload = 4096;
    f.start = us(30);
    f.stop = us(2000);
    s.host(i).add_flow(f);
  }
  s.engine->run_until(us(500));
  const uint64_t pfc_before = s.sw->pfc_tx_frames(0, 3);
  CHECK(pfc_before > 0);

  // A bad configuration is refused whole, naming the field; nothing changes.
  sw::SwitchConfig bad = s.sw->config();
  bad.qos.roce.mode = sw::RoceMode::kLossy;
  bad.qos.congestion[3].wred.max_threshold = 1000;
  const Status st = s.sw->apply(bad);
  CHECK(!st.ok());
  CHECK(st.message().find("qos.congestion-control.traffic-class.3.min-threshold") != std::string::npos);
  CHECK(s.sw->config().qos.roce.mode == sw::RoceMode::kLossless);
  Status e = s.sw->nv({"set", "qos", "pfc", "switch-priority", "9"});
  CHECK(e.message().find("nv set qos pfc switch-priority") != std::string::npos);

  // Lossy, live: PFC stops (XON for what was asserted), TC3 drops begin.
  REQUIRE(s.sw->nv({"set", "qos", "roce", "mode", "lossy"}).ok());
  REQUIRE(s.sw->nv({"config", "apply"}).ok());
  s.engine->run_until(us(600));
  const uint64_t pfc_switch = s.sw->pfc_tx_frames(0, 3);
  s.engine->run_until(us(1900));
  CHECK(s.sw->pfc_tx_frames(0, 3) == pfc_switch);
  CHECK(s.sw->queue_counters(2, 3)[sw::QueueCounters::drop_packets] > 0);
  // -o json: NVUE's keys in NVUE's order, plain values (bytes as integers).
  const auto json_of = [&](std::vector<std::string> words) {
    words.insert(words.end(), {"-o", "json"});
    nlohmann::json out;
    const Status shown = s.sw->nv(words, &out);
    INFO(shown.message());
    REQUIRE(shown.ok());
    return nlohmann::ordered_json::parse(out.get<std::string>());
  };
  auto j = json_of({"show", "qos", "roce"});
  CHECK(j["mode"] == "lossy");
  CHECK(j["pfc"]["pfc-priority"] == nlohmann::ordered_json::array());
  CHECK(j["congestion-control"]["enabled-tc"] == nlohmann::ordered_json({0, 3}));
  CHECK(j["congestion-control"]["min-threshold"] == 150000);
  CHECK(j["congestion-control"]["max-threshold"] == 1500000);
  CHECK(j["trust"]["trust-mode"] == "pcp,dscp");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"enable", "mode", "pfc", "congestion-control", "trust", "lldp-app-tlv",
                                         "RoCE PCP/DSCP->SP mapping", "RoCE SP->TC mapping and ETS",
                                         "RoCE pool config", "Exception List"});
  CHECK(j["RoCE SP->TC mapping and ETS"][3] ==
        nlohmann::ordered_json({{"switch-prio", 3}, {"traffic-class", 3}, {"scheduler-weight", "DWRR-50%"}}));
  CHECK(j["RoCE SP->TC mapping and ETS"][6]["scheduler-weight"] == "strict");
  // -o yaml: the same, as YAML.
  {
    nlohmann::json y;
    REQUIRE(s.sw->nv({"show", "qos", "roce", "-o", "yaml"}, &y).ok());
    const YAML::Node n = YAML::Load(y.get<std::string>());
    CHECK(n["mode"].as<std::string>() == "lossy");
    CHECK(n["congestion-control"]["min-threshold"].as<uint64_t>() == 150000);
    CHECK(n.begin()->first.as<std::string>() == "enable");
    // on/off are strings here, quoted so that a YAML 1.1 reader (python3-yaml)
    // does not read them as booleans; numbers stay plain.
    INFO(y.get<std::string>());
    CHECK(n["enable"].as<std::string>() == "on");
    CHECK(n["enable"].Tag() == "!");
    CHECK(n["congestion-control"]["min-threshold"].Tag() == "?");
  }
  // The table, by default: operational and applied columns, nesting by indent.
  nlohmann::json t;
  REQUIRE(s.sw->nv({"show", "qos", "roce"}, &t).ok());
  const std::string roce = t.get<std::string>();
  INFO(roce);
  CHECK(roce.rfind("                    operational  applied\n"
                   "------------------  -----------  ---------\n"
                   "enable              on           on\n"
                   "mode                lossy        lossy\n"
                   "pfc\n"
                   "  pfc-priority      none         none\n",
                   0) == 0);
  CHECK_THAT(roce, Catch::Contains("\n  min-threshold     146.48 KB    146.48 KB\n"
                                   "  max-threshold     1.43 MB      1.43 MB\n"));
  CHECK_THAT(roce, Catch::Contains("\nRoCE SP->TC mapping and ETS\n===========================\n"
                                   "    switch-prio  traffic-class  scheduler-weight\n"
                                   "    -----------  -------------  ----------------\n"
                                   "    0            0              DWRR-50%\n"));
  CHECK_THAT(roce, Catch::Contains("\nRoCE PCP/DSCP->SP mapping\n") &&
                       Catch::Contains("    0-2,4,5,7  0-25,27-47,49-63  0\n    3          26                3\n") && Catch::Contains("\nException List\n") &&
                       !Catch::Contains("\"operational\""));

  j = json_of({"show", "interface", "swp3", "qos", "roce", "counters"});
  CHECK(j["tx-roce-stats"]["unicast-no-buffer-discard"].get<uint64_t>() > 0);
  keys.clear();
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"rx-non-roce-stats", "rx-pfc-stats", "rx-roce-stats", "tx-cnp-stats",
                                         "tx-ecn-stats", "tx-pfc-stats", "tx-roce-stats"});
  CHECK(j["tx-roce-stats"]["roce-bytes"] == s.sw->counters(2)[sw::PortCounters::tx_roce_bytes]);
  REQUIRE(s.sw->nv({"show", "interface", "swp3", "qos", "roce", "counters"}, &t).ok());
  {
    const std::string c = t.get<std::string>();
    INFO(c);
    // State only: one operational column; bytes humanised.
    CHECK(c.rfind("                             operational\n"
                  "---------------------------  -----------\n"
                  "rx-non-roce-stats\n"
                  "  buffer-max-usage ",
                  0) == 0);
    CHECK_THAT(c, Catch::Contains("\ntx-roce-stats\n") && Catch::Contains(" MB\n") && !Catch::Contains("applied"));
  }
  j = json_of({"show", "interface", "swp3", "queue"});
  CHECK(j[3]["TxQ"] == "UC3");
  CHECK(j[3]["drop-packets"].get<uint64_t>() > 0);
  j = json_of({"show", "pfc", "counters"});
  CHECK(j["Port Tx"][0]["Port"] == "swp1");
  CHECK(j["Port Tx"][0]["PFC3"] == pfc_switch);
  // NVUE's counters qos views: rows in NVUE's columns with -o json, a table by default.
  j = json_of({"show", "interface", "swp1", "counters", "qos", "pfc-stats"});
  REQUIRE(j.size() == 8);
  CHECK(j[3]["switch-priority"] == 3);
  CHECK(j[3]["tx-pause-frames"] == pfc_switch);
  CHECK(j[3]["tx-pause-duration"] == uint64_t(to_ns(s.sw->tx_pause_duration(0, 3, s.now())) / 1000));
  CHECK(j[3]["tx-pause-duration"].get<uint64_t>() > 0);
  CHECK(j[0]["tx-pause-frames"] == 0);
  j = json_of({"show", "interface", "swp3", "counters", "qos", "egress-queue-stats"});
  const auto& q3 = s.sw->queue_counters(2, 3);
  CHECK(j[3]["traffic-class"] == 3);
  CHECK(j[3]["tx-frames"] == q3[sw::QueueCounters::packets]);
  CHECK(j[3]["tx-bytes"] == q3[sw::QueueCounters::bytes]);
  CHECK(j[3]["tx-uc-buffer-discards"].get<uint64_t>() + j[3]["wred-discards"].get<uint64_t>() ==
        q3[sw::QueueCounters::drop_packets]);
  CHECK(j[3]["tx-uc-buffer-discards"].get<uint64_t>() > 0);
  // ingress-buffer-stats: frames per ingress PG; RoCE (SP3) is PG0 in lossy mode.
  j = json_of({"show", "interface", "swp1", "counters", "qos", "ingress-buffer-stats"});
  REQUIRE(j.size() == 8);
  CHECK(j[0]["priority-group"] == 0);
  uint64_t pg_frames = 0;
  for (const auto& row : j) pg_frames += row["rx-frames"].get<uint64_t>();
  CHECK(pg_frames == s.sw->counters(0)[sw::PortCounters::rx_roce_packets] +
                         s.sw->counters(0)[sw::PortCounters::rx_non_roce_packets]);
  CHECK(pg_frames > 0);
  REQUIRE(s.sw->nv({"show", "interface", "swp1", "counters", "qos", "pfc-stats"}, &t).ok());
  const std::string table = t.get<std::string>();
  INFO(table);
  CHECK(table.rfind("switch-priority  rx-pause-frames  rx-pause-duration  tx-pause-frames  tx-pause-duration\n"
                    "---------------  ---------------", 0) == 0);
  CHECK(table.find("\n3                ") != std::string::npos);
  REQUIRE(s.sw->nv({"show", "interface", "swp3", "counters", "qos", "egress-queue-stats"}, &t).ok());
  CHECK_THAT(t.get<std::string>(), Catch::Contains(" MB  ") || Catch::Contains(" KB  "));  // tx-bytes humanised
  REQUIRE(s.sw->nv({"show", "interface", "swp1", "counters", "qos"}, &t).ok());
  CHECK_THAT(t.get<std::string>(), Catch::Contains("pfc-stats\n=========\n    switch-priority  rx-pause-frames") &&
                                       Catch::Contains("egress-queue-stats\n==================\n") &&
                                       Catch::Contains("ingress-buffer-stats\n====================\n"
                                                       "    priority-group  rx-frames  rx-buffer-discards  "
                                                       "rx-shared-buffer-discards\n"));
  CHECK(!s.sw->nv({"show", "interface", "swp1", "counters", "qos", "bogus"}).ok());
  CHECK(!s.sw->nv({"show", "qos", "roce", "-o", "xml"}).ok());
  CHECK(!s.sw->nv({"show", "qos", "roce", "-o"}).ok());

  // Back to the non-RoCE default.
  REQUIRE(s.sw->nv({"unset", "qos", "roce"}).ok());
  REQUIRE(s.sw->nv({"config", "apply"}).ok());
  j = json_of({"show", "qos", "roce"});
  CHECK(j["enable"] == "off");
  CHECK(s.sw->config().qos.mapping.trust == sw::Trust::kL2);
  s.engine->run_to_idle(ms(20));
  // A clear that is not one of NVUE's forms clears nothing.
  const uint64_t before = s.sw->counters(2)[sw::PortCounters::tx_roce_packets];
  REQUIRE(before > 0);
  CHECK_FALSE(s.sw->nv({"action", "clear", "bogus", "words"}).ok());
  CHECK_FALSE(s.sw->nv({"action", "clear", "qos", "counters", "now"}).ok());
  CHECK_FALSE(s.sw->nv({"action", "clear", "interface", "swp3"}).ok());
  CHECK(s.sw->counters(2)[sw::PortCounters::tx_roce_packets] == before);
  REQUIRE(s.sw->nv({"action", "clear", "interface", "swp3", "qos", "roce", "counters"}).ok());
  CHECK(s.sw->counters(2)[sw::PortCounters::tx_roce_packets] == 0);
}

TEST_CASE("nv show qos pfc-watchdog -o json gives its times in integer µs", "[unit][switch]") {
  sw::QosConfig q = sw::qos_roce_profile(sw::RoceMode::kLossless);
  q.watchdog.detection_time = us(1500);
  Star s = make_star(star_config(2, q), 95);
  nlohmann::json j;
  REQUIRE(s.sw->nv({"show", "qos", "pfc-watchdog", "-o", "json"}, &j).ok());
  const auto plain = nlohmann::json::parse(j.get<std::string>());
  INFO(plain.dump());
  CHECK(plain["detection-time"] == 1500);
  CHECK(plain["polling-interval"] == to_ns(q.watchdog.polling_interval) / 1000);
}
