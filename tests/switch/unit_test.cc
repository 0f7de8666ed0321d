// Pure logic of the switch: dynamic thresholds, WRED, headroom, DWRR, PFC
// timing and frames, trimming, profiles, validation, NVUE commands, YAML.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/config/topology.h"
#include "common/wire/build.h"
#include "switch/dynamic_threshold.h"
#include "switch/ecn.h"
#include "switch/headroom.h"
#include "switch/mmu.h"
#include "switch/nvue.h"
#include "switch/pfc.h"
#include "switch/scheduler.h"
#include "switch/switch_kind.h"
#include "switch/trim.h"

using namespace rocemu;
using namespace rocemu::sw;

TEST_CASE("Dynamic threshold: limit is alpha x free buffer, N queues settle at aB/(1+Na)", "[unit][switch]") {
  CHECK(dynamic_threshold(1.0, 1000, 400) == 600);
  CHECK(dynamic_threshold(8.0, 1000, 900) == 800);
  CHECK(dynamic_threshold(2.0, 1000, 1000) == 0);
  CHECK(alpha_from_dynamic_th(3) == 8.0);
  CHECK(alpha_from_dynamic_th(-2) == 0.25);
  CHECK(alpha_from_dynamic_th(-8) == 0.0);
  CHECK(dynamic_threshold_share(1.0, 1000000, 4) == Approx(200000));

  // The MMU reaches that share when 4 lossy PGs on 4 ports fill one pool.
  for (double alpha : {0.5, 1.0, 8.0}) {
    QosConfig q = qos_default_global();
    q.buffer.size = 4'000'000;
    q.buffer.ingress_lossy_alpha = alpha;
    q.buffer.egress_lossy_alpha = 128;  // let ingress decide
    Mmu mmu;
    mmu.configure(q, std::vector<Mmu::PortHeadroom>(5));
    const uint32_t len = 1000;
    bool progress = true;
    while (progress) {  // round robin until every port is refused
      progress = false;
      for (uint16_t port = 0; port < 4; port++) {
        Admission a = mmu.check(port, 0, 4, uint8_t(port), len);
        if (!a.ok()) continue;
        mmu.commit(port, 0, 4, uint8_t(port), len, a.ingress);
        progress = true;
      }
    }
    const double share = dynamic_threshold_share(alpha, 4'000'000, 4);
    for (uint16_t port = 0; port < 4; port++) {
      INFO("alpha " << alpha << " port " << port);
      CHECK(double(mmu.pg(port, 0).shared) == Approx(share).margin(2 * len));
    }
    // Whatever the threshold left is free for a newcomer.
    CHECK(mmu.check(4, 0, 0, 0, len).ok());
  }
}

TEST_CASE("Lossless PG: XOFF at the threshold, headroom absorbs, XON after xon bytes drain", "[unit][switch]") {
  QosConfig q = qos_roce_profile(RoceMode::kLossless);
  q.buffer.size = 1'000'000;  // roce pool 500 000
  Mmu mmu;
  mmu.configure(q, {{20000, 5000}, {20000, 5000}});
  const uint8_t pg = q.pg_of(3);
  REQUIRE(pg == 3);
  REQUIRE(mmu.pg(0, pg).lossless);
  uint64_t in = 0;
  // alpha 1 alone in the pool: threshold = pool - used, so XOFF near 250 000.
  while (!mmu.pg_wants_xoff(0, pg)) {
    Admission a = mmu.check(0, pg, 1, 3, 1000);
    REQUIRE(a.ok());
    REQUIRE(a.ingress == IngressPlace::kShared);
    mmu.commit(0, pg, 1, 3, 1000, a.ingress);
    in += 1000;
  }
  CHECK(double(in) == Approx(250000).margin(1000));
  // Headroom takes the in-flight bytes, then no more: a no-buffer-discard.
  for (int i = 0; i < 20; i++) {
    Admission a = mmu.check(0, pg, 1, 3, 1000);
    REQUIRE(a.ingress == IngressPlace::kHeadroom);
    mmu.commit(0, pg, 1, 3, 1000, a.ingress);
  }
  CHECK(mmu.check(0, pg, 1, 3, 1000).ingress == IngressPlace::kNone);
  CHECK(mmu.pg(0, pg).headroom == 20000);
  // Draining empties headroom first; XON needs xon bytes below the threshold.
  mmu.pg(0, pg).xoff = true;
  int drained = 0;
  while (!mmu.pg_may_xon(0, pg)) {
    mmu.release(0, pg, 1, 3, 1000);
    drained++;
  }
  CHECK(mmu.pg(0, pg).headroom == 0);
  CHECK(drained >= 20 + 3);
  CHECK(drained <= 20 + 6);
  // Lossless queues are never refused at egress.
  CHECK(mmu.check(1, pg, 1, 3, 1000).egress_ok);
}

TEST_CASE("Lossless PG in real time: past its headroom it takes what a partner running ahead sends late, then no more",
          "[unit][switch]") {
  QosConfig q = qos_roce_profile(RoceMode::kLossless);
  q.buffer.size = 1'000'000;
  Mmu mmu;
  // Port 0's partner may run 7 000 bytes ahead; port 1's runs exactly.
  mmu.configure(q, {{20000, 5000, 7000}, {20000, 5000, 0}});
  const uint8_t pg = q.pg_of(3);
  for (uint16_t port : {0, 1}) {
    while (!mmu.pg_wants_xoff(port, pg)) mmu.commit(port, pg, 1, 3, 1000, mmu.check(port, pg, 1, 3, 1000).ingress);
    for (int i = 0; i < 20; i++) {
      const Admission a = mmu.check(port, pg, 1, 3, 1000);
      REQUIRE(a.ingress == IngressPlace::kHeadroom);
      mmu.commit(port, pg, 1, 3, 1000, a.ingress);
    }
  }
  // Port 1: the headroom was all there is.
  CHECK(mmu.check(1, pg, 1, 3, 1000).ingress == IngressPlace::kNone);
  // Port 0: 7 more frames of 1000 bytes, then a no-buffer-discard.
  for (int i = 0; i < 7; i++) {
    const Admission a = mmu.check(0, pg, 1, 3, 1000);
    REQUIRE(a.ingress == IngressPlace::kSlack);
    mmu.commit(0, pg, 1, 3, 1000, a.ingress);
  }
  CHECK(mmu.check(0, pg, 1, 3, 1000).ingress == IngressPlace::kNone);
  CHECK(mmu.pg(0, pg).slack == 7000);
  CHECK(mmu.pg(0, pg).slack_watermark == 7000);
  CHECK(mmu.pg(0, pg).headroom == 20000);
  // Draining gives back the slack first, then the headroom; XON waits for both.
  mmu.release(0, pg, 1, 3, 1000);
  CHECK(mmu.pg(0, pg).slack == 6000);
  CHECK(mmu.pg(0, pg).headroom == 20000);
  CHECK(mmu.pg_wants_xoff(0, pg));
  int drained = 1;
  while (!mmu.pg_may_xon(0, pg)) {
    mmu.release(0, pg, 1, 3, 1000);
    drained++;
  }
  CHECK(mmu.pg(0, pg).slack == 0);
  CHECK(mmu.pg(0, pg).headroom == 0);
  CHECK(drained >= 27 + 3);
}

TEST_CASE("WRED: probability rises linearly from min to max, marks ECT only", "[unit][switch]") {
  WredProfile w{150000, 1500000, 100};
  CHECK(w.probability_at(0) == 0.0);
  CHECK(w.probability_at(149999) == 0.0);
  CHECK(w.probability_at(150000) == 0.0);
  CHECK(w.probability_at(825000) == Approx(0.5));
  CHECK(w.probability_at(1500000) == 1.0);
  WredProfile w5{163 * 1024, 234 * 1024, 5};
  CHECK(w5.probability_at((163 + 234) * 512) == Approx(0.025));
  CHECK(w5.probability_at(234 * 1024) == 1.0);

  Rng rng(42);
  for (uint64_t depth : {300000ull, 825000ull, 1300000ull}) {
    const int n = 20000;
    int marks = 0;
    for (int i = 0; i < n; i++) marks += wred_decide(w, depth, true, true, false, rng) == EcnVerdict::kMark;
    const double p = w.probability_at(depth);
    const double sigma = std::sqrt(p * (1 - p) / n);
    INFO("depth " << depth);
    CHECK(std::abs(double(marks) / n - p) < 5 * sigma);
  }
  // Non-ECT: passes inside the band (RED off), dropped above max on lossy only.
  CHECK(wred_decide(w, 825000, false, true, false, rng) == EcnVerdict::kPass);
  CHECK(wred_decide(w, 2000000, false, true, false, rng) == EcnVerdict::kDrop);
  CHECK(wred_decide(w, 2000000, false, false, false, rng) == EcnVerdict::kPass);
  CHECK(wred_decide(w, 2000000, true, true, false, rng) == EcnVerdict::kMark);
}

TEST_CASE("Headroom follows SONiC's Mellanox formula", "[unit][switch]") {
  CHECK(peer_response_quanta(100'000'000'000ull) == 394);
  CHECK(peer_response_quanta(25'000'000'000ull) == 80);
  CHECK(peer_response_quanta(400'000'000'000ull) == 905);
  // 100G, MTU 9216, 100 m: cell 144 -> worst case 2.25; peer 394 x 64 =
  // 25216; cable 2x100x100000x1e9/1.98e8/8192 = 12330.3; propagation
  // 9216 + 12330.3 + 819 + 25216 = 47581.3; xoff = 1024 + 2.25 x 47581.3 =
  // 108081.9 -> 108544; xon 18432; size 126976.
  CHECK(bytes_on_cable(100, 100'000'000'000ull) == Approx(12330.3).margin(0.1));
  Headroom h = compute_headroom(100'000'000'000ull, 9216, 100);
  CHECK(h.xoff == 108544);
  CHECK(h.xon == 18432);
  CHECK(h.size == 126976);
  // Longer cables and faster ports need more; every value is a whole KiB.
  Headroom h300 = compute_headroom(100'000'000'000ull, 9216, 300);
  Headroom h25 = compute_headroom(25'000'000'000ull, 9216, 100);
  CHECK(h300.xoff > h.xoff);
  CHECK(h25.xoff < h.xoff);
  CHECK(h300.xoff % 1024 == 0);
  // A Spectrum-1 cell (96 B) uses the other worst-case branch: 2x96/97.
  HeadroomParams spc1;
  spc1.cell_size = 96;
  Headroom h1 = compute_headroom(100'000'000'000ull, 9216, 100, spc1);
  const double expect = 1024 + (9216 + 12330.3 + 819 + 25216) * (2.0 * 96 / 97);
  CHECK(h1.xoff == uint64_t(std::ceil(expect / 1024)) * 1024);
}

TEST_CASE("Scheduler: strict first, DWRR by weight, paused classes skipped", "[unit][switch]") {
  std::array<TcSchedule, kNumTc> tcs{};
  for (auto& t : tcs) t = {SchedulerMode::kDwrr, 0};
  tcs[0] = {SchedulerMode::kDwrr, 25};
  tcs[3] = {SchedulerMode::kDwrr, 75};
  tcs[6] = {SchedulerMode::kStrict, 0};
  Scheduler s;
  s.configure(tcs);
  uint32_t len[kNumTc];
  std::fill(len, len + kNumTc, 1000u);
  len[3] = 4000;
  uint64_t bytes[kNumTc] = {};
  for (int i = 0; i < 100000; i++) {
    const int tc = s.select(0b00001001, len);
    REQUIRE((tc == 0 || tc == 3));
    bytes[tc] += len[tc];
  }
  CHECK(double(bytes[3]) / double(bytes[0]) == Approx(3.0).epsilon(0.01));
  CHECK(s.select(0b01001001, len) == 6);           // strict wins
  CHECK(s.select(0b00000001, len) == 0);           // TC3 paused: TC0 alone
  CHECK(s.select(0b00000010, len) == 1);           // weight 0 only when nothing else
  CHECK(s.select(0, len) == -1);
  // Equal weights share equally whatever the packet sizes.
  tcs[0].bw_percent = 50;
  tcs[3].bw_percent = 50;
  s.configure(tcs);
  bytes[0] = bytes[3] = 0;
  len[0] = 64;
  len[3] = 9000;
  for (int i = 0; i < 200000; i++) {
    const int tc = s.select(0b00001001, len);
    bytes[tc] += len[tc];
  }
  CHECK(double(bytes[3]) / double(bytes[0]) == Approx(1.0).epsilon(0.02));
}

TEST_CASE("PFC timing: 512-bit quanta, refresh and zero-quanta release", "[unit][switch]") {
  CHECK(quanta_to_duration(1, 10'000'000'000ull) == ps(51200));
  CHECK(quanta_to_duration(1, 100'000'000'000ull) == ps(5120));
  CHECK(quanta_to_duration(0xffff, 100'000'000'000ull) == ps(335539200));
  PauseTimer t;
  t.on_frame(0xffff, 100'000'000'000ull, us(10));
  CHECK(t.paused(us(10)));
  CHECK(t.until() == us(10) + ps(335539200));
  t.on_frame(1000, 100'000'000'000ull, us(20));  // refreshed: from now
  CHECK(t.until() == us(20) + ns(5120));
  CHECK(!t.paused(us(26)));
  CHECK(t.duration(us(30)) == us(10) + ns(5120));
  t.on_frame(0xffff, 100'000'000'000ull, us(40));
  t.on_frame(0, 100'000'000'000ull, us(45));  // released early
  CHECK(!t.paused(us(45)));
  CHECK(t.duration(us(100)) == us(15) + ns(5120));

  // The frame on the wire: 802.1Qbb, opcode 0x0101, enable vector, 8 times.
  uint8_t f[60];
  uint16_t q[8] = {0, 0, 0, 0xffff, 0, 0, 7, 0};
  REQUIRE(wire::encode_pfc(f, *wire::MacAddr::parse("02:53:57:00:00:01"), 0x48, q) == 60);
  CHECK(f[0] == 0x01);
  CHECK(f[5] == 0x01);
  CHECK(f[12] == 0x88);
  CHECK(f[13] == 0x08);
  CHECK(f[14] == 0x01);
  CHECK(f[15] == 0x01);
  CHECK(f[16] == 0x00);
  CHECK(f[17] == 0x48);
  CHECK((f[18 + 6] << 8 | f[19 + 6]) == 0xffff);  // priority 3
  CHECK((f[18 + 12] << 8 | f[19 + 12]) == 7);     // priority 6
}

TEST_CASE("Trimming keeps the headers, fixes lengths, remarks and reseals", "[unit][switch]") {
  wire::PathHeaders path;
  path.src_mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  path.dst_mac = *wire::MacAddr::parse("02:00:00:00:00:02");
  path.src_ip = *wire::IpAddr::parse("10.0.0.1");
  path.dst_ip = *wire::IpAddr::parse("10.0.1.1");
  path.dscp = 26;
  path.ecn = wire::Ecn::kEct0;
  for (bool v6 : {false, true}) {
    if (v6) {
      path.ipv6 = true;
      path.src_ip = *wire::IpAddr::parse("fd00::1");
      path.dst_ip = *wire::IpAddr::parse("fd00::2");
    }
    wire::RoceFields rf;
    rf.opcode = wire::op::kWriteFirst;
    rf.dest_qp = 0x123;
    rf.psn = 77;
    std::vector<uint8_t> payload(4093, 0x5a);
    std::vector<uint8_t> frame(4400);
    const uint32_t len = wire::encode_roce(frame, path, rf, payload);
    frame.resize(len);
    wire::PacketView v;
    REQUIRE(wire::decode(frame, v) == wire::DecodeError::kOk);
    const uint32_t cut = trim_frame(frame, v, 256, 11);
    REQUIRE(cut > 0);
    CHECK(cut <= 256);
    frame.resize(cut);
    wire::PacketView t;
    INFO("ipv6 " << v6);
    REQUIRE(wire::decode(frame, t) == wire::DecodeError::kOk);
    CHECK(t.is_roce);
    CHECK(t.dscp == 11);
    CHECK(t.ecn == wire::Ecn::kEct0);
    CHECK(t.opcode == wire::op::kWriteFirst);
    CHECK(t.bth().psn() == 77);
    CHECK(t.reth().dma_length.get() == 0);  // RETH kept as sent
    CHECK(t.pad == 0);
    CHECK(t.payload_len % 4 == 0);
    CHECK(t.icrc_ok());
  }
  // No longer than the size: left alone.
  std::vector<uint8_t> small(200);
  wire::RoceFields rf;
  rf.opcode = wire::op::kWriteMiddle;
  path.ipv6 = false;
  path.src_ip = *wire::IpAddr::parse("10.0.0.1");
  path.dst_ip = *wire::IpAddr::parse("10.0.1.1");
  std::vector<uint8_t> p64(64, 1);
  small.resize(wire::encode_roce(small, path, rf, p64));
  wire::PacketView v;
  REQUIRE(wire::decode(small, v) == wire::DecodeError::kOk);
  CHECK(trim_frame(small, v, 256, 11) == 0);
}

TEST_CASE("qos roce profiles carry NVUE's defaults; unset returns to default-global", "[unit][switch]") {
  const QosConfig l = qos_roce_profile(RoceMode::kLossless);
  CHECK(l.roce.enable);
  CHECK(l.mapping.trust == Trust::kBoth);
  CHECK(l.mapping.dscp_to_sp[26] == 3);
  CHECK(l.mapping.dscp_to_sp[48] == 6);
  CHECK(l.mapping.dscp_to_sp[24] == 0);
  CHECK(l.sp_to_tc[3] == 3);
  CHECK(l.sp_to_tc[6] == 6);
  CHECK(l.sp_to_tc[0] == 0);
  CHECK(l.scheduler[6].mode == SchedulerMode::kStrict);
  CHECK(l.scheduler[3].bw_percent == 50);
  CHECK(l.scheduler[0].bw_percent == 50);
  CHECK(l.congestion[3].ecn);
  CHECK(l.congestion[0].ecn);
  CHECK(l.congestion[3].wred.min_threshold == 150000);
  CHECK(l.congestion[3].wred.max_threshold == 1500000);
  CHECK(l.congestion[3].wred.probability == 100);
  CHECK(l.pfc.switch_priorities == 0x08);
  CHECK(l.pfc.cable_length == 100);
  CHECK(!l.trim.enable);
  CHECK(l.buffer.roce_pool_percent == 50);
  CHECK(l.lossless_tcs() == 0x08);
  const QosConfig y = qos_roce_profile(RoceMode::kLossy);
  CHECK(y.pfc.switch_priorities == 0);
  CHECK(y.mapping.dscp_to_sp[26] == 3);
  CHECK(y.scheduler[6].mode == SchedulerMode::kStrict);

  SwitchConfig cfg = SwitchConfig::with_ports(4);
  REQUIRE(nv_edit(cfg, {"set", "qos", "roce"}).ok());
  CHECK(cfg.qos.roce.mode == RoceMode::kLossless);
  CHECK(cfg.qos.pfc.switch_priorities == 0x08);
  REQUIRE(nv_edit(cfg, {"set", "qos", "roce", "mode", "lossy"}).ok());
  CHECK(cfg.qos.pfc.switch_priorities == 0);
  CHECK(cfg.qos.roce.mode == RoceMode::kLossy);
  REQUIRE(nv_edit(cfg, {"unset", "qos", "roce"}).ok());
  CHECK(!cfg.qos.roce.enable);
  CHECK(cfg.qos.mapping.dscp_to_sp[26] == 3);  // default-global: dscp >> 3
  CHECK(cfg.qos.mapping.trust == Trust::kL2);
  CHECK(cfg.qos.scheduler[6].mode == SchedulerMode::kDwrr);
  CHECK(cfg.validate().ok());
}

TEST_CASE("Configuration is validated whole and errors name the field", "[unit][switch]") {
  SwitchConfig cfg = SwitchConfig::with_ports(4);
  cfg.qos = qos_roce_profile(RoceMode::kLossless);
  REQUIRE(cfg.validate().ok());
  auto bad = [&](auto edit, const std::string& field) {
    SwitchConfig c = cfg;
    edit(c);
    const Status s = c.validate();
    INFO(s.message());
    CHECK(!s.ok());
    CHECK(s.message().find(field) != std::string::npos);
  };
  bad([](SwitchConfig& c) { c.qos.congestion[3].wred.min_threshold = 2000000; },
      "qos.congestion-control.traffic-class.3.min-threshold");
  bad([](SwitchConfig& c) { c.qos.scheduler[0].bw_percent = 80; }, "qos.egress-scheduler.traffic-class");
  bad([](SwitchConfig& c) { c.qos.sp_to_tc[0] = 3; }, "qos.egress-queue-mapping.switch-priority.0.traffic-class");
  bad([](SwitchConfig& c) { c.qos.watchdog.detection_time = ms(0); }, "qos.pfc-watchdog.detection-time");
  bad([](SwitchConfig& c) { c.qos.trim.remark_dscp = 64; }, "qos.packet-trim.remark-dscp");
  bad([](SwitchConfig& c) {
        c.qos.trim.enable = true;
        c.qos.trim.switch_priority = 3;
      },
      "packet-trim.switch-priority");
  bad([](SwitchConfig& c) { c.interfaces[1].faults.loss = 2; }, "interfaces.swp2.faults");
  bad([](SwitchConfig& c) { c.routes.push_back(Route{*IpPrefix::parse("10.0.0.0/8"), 9, {}, {}}); },
      "routes[0].interface");

  // NVUE commands: a bad word is named, and the switch keeps its config.
  SwitchConfig c = cfg;
  Status s = nv_edit(c, {"set", "qos", "roce", "mode", "lossles"});
  CHECK(s.message().find("nv set qos roce mode") != std::string::npos);
  CHECK(s.message().find("lossles") != std::string::npos);
  s = nv_edit(c, {"set", "qos", "congestion-control", "default-global", "traffic-class", "3", "min-threshold", "x"});
  CHECK(s.message().find("min-threshold") != std::string::npos);
  REQUIRE(nv_edit(c, {"set", "qos", "congestion-control", "default-global", "traffic-class", "3", "min-threshold",
                      "300KB", "max-threshold", "3MB", "probability", "20"})
              .ok());
  CHECK(c.qos.congestion[3].wred.min_threshold == 300000);
  CHECK(c.qos.congestion[3].wred.max_threshold == 3000000);
  CHECK(c.qos.congestion[3].wred.probability == 20);
  REQUIRE(nv_edit(c, {"set", "qos", "pfc", "default-global", "cable-length", "5"}).ok());
  CHECK(c.qos.pfc.cable_length == 5);
  REQUIRE(nv_edit(c, {"set", "interface", "swp3", "qos", "pfc-watchdog"}).ok());
  CHECK(c.interfaces[2].pfc_watchdog == true);
  REQUIRE(nv_edit(c, {"set", "system", "forwarding", "packet-trim", "state", "enabled"}).ok());
  CHECK(c.qos.trim.enable);
  REQUIRE(nv_edit(c, {"set", "vrf", "default", "router", "static", "10.9.0.0/16", "via", "10.0.1.1", "interface",
                      "swp2"})
              .ok());
  CHECK(c.routes.size() == 1);
  REQUIRE(nv_edit(c, {"set", "interface", "swp1", "fault", "loss", "0.01"}).ok());
  CHECK(c.interfaces[0].faults.loss == 0.01);
  CHECK(c.validate().ok());
  CHECK(parse_index_list("0,3") == uint8_t(0x09));
  CHECK(parse_index_list("1-3") == uint8_t(0x0e));
  CHECK(!parse_index_list("8"));
}

TEST_CASE("Topology YAML: a switch node with routes, interfaces and qos", "[unit][switch]") {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  register_switch_kinds(reg);
  const std::string good = R"(
nodes:
  sw1:
    kind: switch
    ports: 3
    interfaces:
      swp1: {address: 10.0.0.254/24, cable-length: 300, pfc-watchdog: enabled}
      swp3: {speed: 25G, faults: {loss: 0.01}, pfc-storm: {switch-priority: [3]}}
    routes:
      - {prefix: 10.1.0.0/16, via: 10.0.0.1, interface: swp1}
    neighbors:
      - {ip: 10.0.0.1, mac: "02:00:00:00:00:01", interface: swp1}
    qos:
      roce: {mode: lossless}
      congestion-control: {3: {min-threshold: 100KB, max-threshold: 1MB, probability: 50}}
      pfc-watchdog: {detection-time: 100ms, action: forward}
      packet-trim: {state: disabled, size: 512}
)";
  auto topo = parse_topology(good, "t.yaml", reg);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  const auto& cfg = std::any_cast<const SwitchConfig&>(topo.value().nodes[0].config);
  CHECK(cfg.num_ports == 3);
  CHECK(cfg.qos.roce.enable);
  CHECK(cfg.qos.pfc.switch_priorities == 0x08);
  CHECK(cfg.qos.congestion[3].wred.min_threshold == 100000);
  CHECK(cfg.qos.congestion[3].wred.probability == 50);
  CHECK(cfg.qos.watchdog.action == WatchdogAction::kForward);
  CHECK(cfg.interfaces[0].cable_length == 300);
  CHECK(cfg.interfaces[0].pfc_watchdog == true);
  CHECK(cfg.interfaces[2].speed == 25'000'000'000ull);
  CHECK(cfg.interfaces[2].pfc_storm.enable);
  CHECK(cfg.routes.size() == 1);
  CHECK(cfg.neighbors.size() == 1);
  CHECK(cfg.qos.trim.size == 512);

  const std::string bad = R"(
nodes:
  sw1:
    kind: switch
    ports: 2
    interfaces:
      swp6: {mtu: 9000}
    qos:
      roce: {mode: losless}
      congestion-control: {3: {min-threshold: 2MB, max-threshold: 1MB}}
      pfc: {cable-lenght: 5}
)";
  auto t2 = parse_topology(bad, "bad.yaml", reg);
  REQUIRE(!t2.ok());
  const std::string msg = t2.status().message();
  INFO(msg);
  CHECK(msg.find("bad.yaml:7: nodes.sw1.interfaces.swp6") != std::string::npos);
  CHECK(msg.find("nodes.sw1.qos.roce.mode") != std::string::npos);
  CHECK(msg.find("nodes.sw1.qos.pfc.cable-lenght: unknown field") != std::string::npos);
}

TEST_CASE("Topology YAML: an error elsewhere in the file does not lose a good switch", "[unit][switch]") {
  // The switch is read after a bad generator; its links must still find it
  // (no "no node named 'sw1'") and only the generator's error is reported.
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  register_switch_kinds(reg);
  const std::string text = R"(
nodes:
  g0: {kind: generator, size: 10}
  sw1: {kind: switch, ports: 2}
  s0: {kind: sink}
links:
  - {a: s0, b: "sw1:1"}
)";
  auto t = parse_topology(text, "t.yaml", reg);
  REQUIRE(!t.ok());
  const std::string msg = t.status().message();
  INFO(msg);
  CHECK(msg.find("t.yaml:3: nodes.g0.size") != std::string::npos);
  CHECK(msg.find("sw1") == std::string::npos);
}

TEST_CASE("The YAML example in switch/README.md parses and validates", "[unit][switch]") {
  std::ifstream in(std::string(ROCEMU_SOURCE_DIR) + "/switch/README.md");
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const auto begin = doc.find("```yaml\n");
  REQUIRE(begin != std::string::npos);
  const auto end = doc.find("```", begin + 8);
  const std::string yaml = doc.substr(begin + 8, end - begin - 8);
  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto topo = parse_topology(yaml, "README.md", reg);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  const auto& cfg = std::any_cast<const SwitchConfig&>(topo.value().nodes[0].config);
  CHECK(cfg.qos.roce.enable);
  CHECK(cfg.qos.mapping.dscp_to_sp[24] == 3);
  CHECK(cfg.qos.trim.enable);
  CHECK(cfg.interfaces[3].pfc_storm.enable);
  CHECK(cfg.qos.pfc.xoff == uint64_t(100000));
}

TEST_CASE("Switch ports are numbered as on Cumulus: port 0 is swp1, a bare number is not a name", "[unit][switch]") {
  CHECK(port_name(0) == "swp1");
  CHECK(port_name(31) == "swp32");
  CHECK(parse_port_name("swp1") == uint16_t(0));
  CHECK(parse_port_name("swp32") == uint16_t(31));
  for (const char* bad : {"swp0", "swp", "swp01", "3", "swp1x", "eth1", "swp-1", "swp70000"}) {
    INFO(bad);
    CHECK(!parse_port_name(bad));
  }
  const SwitchConfig cfg = SwitchConfig::with_ports(4);
  CHECK(cfg.interfaces[0].name == "swp1");
  CHECK(cfg.interfaces[3].name == "swp4");
  CHECK(cfg.find_interface("swp1") == 0);
  CHECK(cfg.find_interface("swp4") == 3);
  CHECK(cfg.find_interface("swp5") == -1);
  CHECK(cfg.find_interface("swp0") == -1);
  CHECK(cfg.find_interface("1") == -1);  // refused: was port 1 (swp2), a bare number reads as either
  CHECK(cfg.interface_range() == "swp1..swp4");

  // NVUE and the topology's interface keys, routes and neighbours use the same names.
  SwitchConfig c = cfg;
  REQUIRE(nv_edit(c, {"set", "interface", "swp1", "link", "mtu", "1500"}).ok());
  CHECK(c.interfaces[0].mtu == 1500u);
  const Status s = nv_edit(c, {"set", "interface", "swp0", "link", "mtu", "1500"});
  CHECK(s.message() == "nv set interface swp0: no interface 'swp0' (swp1..swp4)");
  CHECK(!nv_edit(c, {"set", "interface", "2", "link", "mtu", "1500"}).ok());

  NodeKindRegistry reg;
  register_basic_kinds(reg);
  register_switch_kinds(reg);
  auto topo = parse_topology(R"(
nodes:
  sw1:
    kind: switch
    ports: 2
    interfaces:
      swp1: {mtu: 1500}
      swp2: {mtu: 9000}
    routes:
      - {prefix: 10.1.0.0/16, interface: swp2}
)",
                             "t.yaml", reg);
  INFO(topo.status().message());
  REQUIRE(topo.ok());
  const auto& y = std::any_cast<const SwitchConfig&>(topo.value().nodes[0].config);
  CHECK(y.interfaces[0].mtu == 1500u);
  CHECK(y.interfaces[1].mtu == 9000u);
  CHECK(y.routes.at(0).port == 1);
  auto bad = parse_topology(
      "nodes:\n  sw1:\n    kind: switch\n    ports: 2\n    interfaces:\n      swp0: {mtu: 1500}\n",
      "b.yaml", reg);
  REQUIRE(!bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("interfaces.swp0: no such port (the switch has swp1..swp2)"));
}

TEST_CASE("Lists and ranges of ports as NVUE takes them: swp1,swp3, swp1-4, swp1-2,4", "[unit][switch]") {
  const SwitchConfig cfg = SwitchConfig::with_ports(6);
  const auto ports = [&](const char* list) {
    auto r = cfg.find_interfaces(list);
    INFO(list << ": " << r.status().message());
    REQUIRE(r.ok());
    return r.value();
  };
  CHECK(ports("swp2") == std::vector<uint16_t>{1});
  CHECK(ports("swp1,swp3") == std::vector<uint16_t>{0, 2});
  CHECK(ports("swp1-4") == std::vector<uint16_t>{0, 1, 2, 3});
  CHECK(ports("swp1-2,5-6") == std::vector<uint16_t>{0, 1, 4, 5});
  CHECK(ports("swp3,1") == std::vector<uint16_t>{2, 0});
  CHECK(ports("swp2,swp1-3") == std::vector<uint16_t>{1, 0, 2});  // each once
  for (const char* bad : {"", "swp0-2", "swp1-7", "swp3-1", "swp1,", "swp1,swp9", "1-2", "swp1-x"}) {
    INFO(bad);
    auto r = cfg.find_interfaces(bad);
    CHECK(!r.ok());
    if (!r.ok()) CHECK_THAT(r.status().message(), Catch::Contains("(swp1..swp6)"));
  }
  // The same words on each port of the list; a bad one changes nothing.
  SwitchConfig c = cfg;
  REQUIRE(nv_edit(c, {"set", "interface", "swp1,swp3-4", "link", "mtu", "4200"}).ok());
  CHECK(c.interfaces[0].mtu == 4200u);
  CHECK(!c.interfaces[1].mtu);
  CHECK(c.interfaces[2].mtu == 4200u);
  CHECK(c.interfaces[3].mtu == 4200u);
  REQUIRE(nv_edit(c, {"unset", "interface", "swp1-6", "link", "mtu"}).ok());
  for (const auto& f : c.interfaces) CHECK(!f.mtu);
  const Status s = nv_edit(c, {"set", "interface", "swp1-9", "link", "mtu", "4200"});
  CHECK(s.message() == "nv set interface swp1-9: no interface 'swp1-9' (swp1..swp6)");
}

namespace {

// A switch section with one setting, through the topology reader.
Status yaml_takes(const std::string& section) {
  NodeKindRegistry reg;
  register_basic_kinds(reg);
  register_switch_kinds(reg);
  auto t = parse_topology("nodes:\n  sw1:\n    kind: switch\n    ports: 2\n" + section, "f.yaml", reg);
  return t.ok() ? Status{} : t.status();
}

}  // namespace

TEST_CASE("One range per setting: YAML, NVUE and validate take the same values, refuse the others alike",
          "[unit][switch]") {
  struct Row {
    const char* nv;       // nv set words before the value
    const char* yaml;     // section with {} for the value
    int64_t lo, hi;
    const char* range;    // as every front end prints it
  };
  const Row rows[] = {
      {"interface swp1 link mtu", "    interfaces: {swp1: {mtu: {}}}\n", 68, 9216, "68..9216 bytes"},
      {"interface swp1 cable-length", "    interfaces: {swp1: {cable-length: {}}}\n", 0, 100000, "0..100000 m"},
      {"qos pfc cable-length", "    qos: {pfc: {cable-length: {}}}\n", 0, 100000, "0..100000 m"},
      {"qos roce cable-length", "    qos: {roce: lossless, pfc: {cable-length: {}}}\n", 0, 100000, "0..100000 m"},
      {"qos pfc pause-quanta", "    qos: {pfc: {pause-quanta: {}}}\n", 2, 0xffff, "2..65535 quanta"},
      {"system forwarding packet-trim size", "    qos: {packet-trim: {size: {}}}\n", 64, 9216, "64..9216 bytes"},
      {"system forwarding packet-trim remark dscp", "    qos: {packet-trim: {remark-dscp: {}}}\n", 0, 63, "0..63"},
      {"qos buffer roce-pool-percent", "    qos: {roce: lossless, buffer: {roce-pool-percent: {}}}\n", 0, 90,
       "0..90 %"},
      {"qos mapping port-default-sp", "    qos: {mapping: {port-default-sp: {}}}\n", 0, 7, "0..7"},
      {"qos congestion-control traffic-class 3 probability", "    qos: {congestion-control: {3: {probability: {}}}}\n",
       0, 100, "0..100 %"},
      {"interface swp2 pfc-storm quanta", "    interfaces: {swp2: {pfc-storm: {quanta: {}}}}\n", 1, 0xffff,
       "1..65535 quanta"},
      {"system forwarding hash-seed", "    forwarding: {hash-seed: {}}\n", 0, 4294967295, "0..4294967295"},
  };
  for (const Row& r : rows) {
    for (const int64_t v : {r.lo - 1, r.lo, r.hi, r.hi + 1}) {
      const bool in = v >= r.lo && v <= r.hi;
      std::vector<std::string> words = {"set"};
      std::istringstream ws(r.nv);
      for (std::string w; ws >> w;) words.push_back(w);
      words.push_back(std::to_string(v));
      SwitchConfig c = SwitchConfig::with_ports(2);
      c.qos = qos_roce_profile(RoceMode::kLossless);
      Status nv = nv_edit(c, words);
      if (nv.ok()) nv = c.validate();
      std::string y = r.yaml;
      y.replace(y.find("{}"), 2, std::to_string(v));
      const Status yaml = yaml_takes(y);
      INFO(r.nv << " " << v << ": nv says '" << nv.message() << "', yaml says '" << yaml.message() << "'");
      CHECK(nv.ok() == in);
      CHECK(yaml.ok() == in);
      if (in) continue;
      // Refused in the same words by both, after the place each names.
      const std::string why = "'" + std::to_string(v) + "' is out of range (" + r.range + ")";
      CHECK_THAT(nv.message(), Catch::EndsWith(": " + why));
      CHECK_THAT(yaml.message(), Catch::EndsWith(": " + why));
    }
  }
  // Sizes and durations: their own forms, the same words.
  const std::pair<std::vector<std::string>, std::string> other[] = {
      {{"set", "qos", "pfc-watchdog", "detection-time", "6s"}, "    qos: {pfc-watchdog: {detection-time: 6s}}\n"},
      {{"set", "qos", "buffer", "size", "20GiB"}, "    qos: {buffer: {size: 20GiB}}\n"},
  };
  for (const auto& [words, y] : other) {
    SwitchConfig c = SwitchConfig::with_ports(2);
    const Status nv = nv_edit(c, words);
    const Status yaml = yaml_takes(y);
    INFO(nv.message() << " / " << yaml.message());
    REQUIRE(!nv.ok());
    REQUIRE(!yaml.ok());
    const std::string why = "'" + words.back() + "' is out of range";
    CHECK_THAT(nv.message(), Catch::Contains(why));
    CHECK(nv.message().substr(nv.message().find(why)) == yaml.message().substr(yaml.message().find(why)));
  }
  // validate() says it of a value set in code, with the YAML path.
  SwitchConfig c = SwitchConfig::with_ports(2);
  c.qos.pfc.cable_length = 100001;
  CHECK(c.validate().message() == "qos.pfc.cable-length: '100001' is out of range (0..100000 m)");
  c.qos.pfc.cable_length = 100;
  c.qos.watchdog.detection_time = ms(6000);
  CHECK(c.validate().message() == "qos.pfc-watchdog.detection-time: '6000ms' is out of range (1ms..5000ms)");
}
