// rocemu doctor's checks over snapshots of real fabrics in virtual time:
// the built-in topology (what `rocemu up` and `rocemu demo` run) is clean;
// each misconfiguration, made in the fabric (its topology, the switch's
// configuration applied while it runs, the hosts' QPs) or, for a host
// setting no topology key reaches, in the snapshot, is found by its check
// with the evidence. Counter checks read two samples taken in virtual time.
#include <catch2/catch.hpp>

#include <algorithm>

#include "apps/doctor.h"
#include "apps/fabric.h"
#include "apps/snapshot.h"
#include "tests/integration/incast.h"
#include "tests/support/eal.h"

using namespace rocemu;
using namespace rocemu::test;
using app::Finding;

namespace {

std::vector<std::string> checks_of(const std::vector<Finding>& f) {
  std::vector<std::string> names;
  for (const auto& x : f) names.push_back(x.check);
  return names;
}

std::string describe(const std::vector<Finding>& f) {
  std::string s;
  for (const auto& x : f) s += "[" + x.check + "] " + x.subject + ": " + x.problem + " | " + x.evidence + "\n";
  return s;
}

const Finding* find(const std::vector<Finding>& f, const std::string& check) {
  auto it = std::find_if(f.begin(), f.end(), [&](const Finding& x) { return x.check == check; });
  return it == f.end() ? nullptr : &*it;
}

std::vector<Finding> doctor(const app::FabricSnapshot& now, const app::FabricSnapshot* before = nullptr) {
  return app::run_doctor({now, before});
}

// The JSON the engine's `snapshot` command carries, read back.
app::FabricSnapshot round_trip(const app::FabricSnapshot& s) {
  return nlohmann::json::parse(nlohmann::json(s).dump()).get<app::FabricSnapshot>();
}

// A lossless star as the built-in topology configures sw1 (watchdog on).
StarSpec healthy_star() {
  StarSpec sp;
  sp.seed = 41;
  sp.roce_mode = "lossless";
  sp.extra_qos = "      pfc-watchdog: {state: enable}\n";
  return sp;
}

IncastSpec small_incast() {
  IncastSpec is;
  is.messages = 2;
  is.message_len = 256 * 1024;
  return is;
}

}  // namespace

TEST_CASE("doctor: the built-in topology (rocemu up, rocemu demo) with live QPs has no findings",
          "[sim][integration][doctor]") {
  auto topo = app::load("");
  REQUIRE(topo.ok());
  topo->engine.mode = TimeMode::kVirtual;
  require_eal();
  auto e = Engine::create(topo->engine);
  REQUIRE(e.ok());
  Engine& engine = *e.value();
  REQUIRE(build_fabric(*topo, engine).ok());
  engine.start();
  auto* n1 = dynamic_cast<nic::Nic*>(engine.find_node("h1"));
  auto* n2 = dynamic_cast<nic::Nic*>(engine.find_node("h2"));
  REQUIRE(n1 != nullptr);
  REQUIRE(n2 != nullptr);
  nic::SimHost a(engine, *n1), b(engine, *n2);
  // A connected RC pair, as ib_write_bw makes it (MTU 4096, default traffic class).
  auto* ca = a.create_cq(64);
  auto* cb = b.create_cq(64);
  ibv_qp_cap cap{};
  cap.max_send_wr = cap.max_recv_wr = 16;
  cap.max_send_sge = cap.max_recv_sge = 1;
  auto* qa = a.create_qp(nic::QpType::kRc, ca, ca, cap);
  auto* qb = b.create_qp(nic::QpType::kRc, cb, cb, cap);
  nic::SimHost::ConnectOpts o;
  o.mtu = IBV_MTU_4096;
  REQUIRE(nic::SimHost::connect(a, qa, b, qb, o) == 0);
  const app::FabricSnapshot before = app::take_snapshot(engine);
  engine.run_for(ms(1));
  const app::FabricSnapshot now = round_trip(app::take_snapshot(engine));
  REQUIRE(now.nics.size() == 2);
  REQUIRE(now.nics[0].qps.size() == 1);  // the live QP is seen
  CHECK(now.nics[0].qps[0].dscp == 26);
  REQUIRE(now.switches.size() == 1);
  CHECK(now.links.size() == 2);
  const auto f = doctor(now, &before);
  INFO(describe(f));
  CHECK(f.empty());
  CHECK(app::findings_json(f, {now, &before})["healthy"] == true);
  a.destroy_qp(qa);
  b.destroy_qp(qb);
}

TEST_CASE("doctor: each misconfiguration of a running fabric is found, with evidence and a fix",
          "[sim][integration][doctor]") {
  SECTION("a healthy star after an incast is clean (the baseline the others change)") {
    auto star = make_star(healthy_star());
    const auto before = app::take_snapshot(*star->engine);
    REQUIRE(run_incast(*star, small_incast()).finished);
    const auto f = doctor(app::take_snapshot(*star->engine), &before);
    INFO(describe(f));
    CHECK(f.empty());
  }
  SECTION("host-dscp: hosts mark DSCP 24, the switch's RoCE DSCP is 26") {
    StarSpec sp = healthy_star();
    auto star = make_star(sp);
    IncastSpec is = small_incast();
    is.connect.traffic_class = 24 << 2 | 2;
    REQUIRE(run_incast(*star, is).finished);
    const auto f = doctor(app::take_snapshot(*star->engine));
    INFO(describe(f));
    const Finding* x = find(f, "host-dscp");
    REQUIRE(x != nullptr);
    CHECK(x->evidence.find("DSCP 24") != std::string::npos);
    CHECK(x->evidence.find("RoCE DSCP is 26") != std::string::npos);
    CHECK(x->fix.find("--tclass=106") != std::string::npos);
  }
  SECTION("ecn-off: ECN disabled on the RoCE TC while the fabric runs") {
    auto star = make_star(healthy_star());
    sw::SwitchConfig cfg = star->sw->config();
    cfg.qos.congestion[3].ecn = false;
    REQUIRE(star->sw->apply(cfg).ok());
    const auto f = doctor(app::take_snapshot(*star->engine));
    INFO(describe(f));
    REQUIRE(find(f, "ecn-off") != nullptr);
    CHECK(find(f, "ecn-off")->fix.find("traffic-class 3 ecn enable") != std::string::npos);
  }
  SECTION("watchdog-off: PFC on priority 3 and no watchdog") {
    StarSpec sp = healthy_star();
    sp.extra_qos = "";
    auto star = make_star(sp);
    const auto f = doctor(app::take_snapshot(*star->engine));
    INFO(describe(f));
    const Finding* x = find(f, "watchdog-off");
    REQUIRE(x != nullptr);
    CHECK(x->evidence.find(star->sw->config().interfaces[0].name) != std::string::npos);
    CHECK(checks_of(f) == std::vector<std::string>{"watchdog-off"});
  }
  SECTION("dscp26-lossy: DSCP 26 mapped to switch-priority 0 on a lossless fabric") {
    auto star = make_star(healthy_star());
    sw::SwitchConfig cfg = star->sw->config();
    cfg.qos.mapping.dscp_to_sp[26] = 0;
    REQUIRE(star->sw->apply(cfg).ok());
    const auto f = doctor(app::take_snapshot(*star->engine));
    INFO(describe(f));
    const Finding* x = find(f, "dscp26-lossy");
    REQUIRE(x != nullptr);
    CHECK(x->fix.find("dscp 26 switch-priority 3") != std::string::npos);
  }
  SECTION("cnp-class: the switch schedules the CNP TC by DWRR") {
    auto star = make_star(healthy_star());
    sw::SwitchConfig cfg = star->sw->config();
    cfg.qos.scheduler[6] = {sw::SchedulerMode::kDwrr, 10};
    cfg.qos.scheduler[0].bw_percent = 40;
    REQUIRE(star->sw->apply(cfg).ok());
    const auto f = doctor(app::take_snapshot(*star->engine));
    INFO(describe(f));
    const Finding* x = find(f, "cnp-class");
    REQUIRE(x != nullptr);
    CHECK(x->evidence.find("TC 6 (lossy, dwrr)") != std::string::npos);
  }
  SECTION("pfc-without-ecn: ECN thresholds above the PFC point; PFC climbs between two samples, marks do not") {
    auto star = make_star(healthy_star());
    sw::SwitchConfig cfg = star->sw->config();
    cfg.qos.congestion[3].wred.min_threshold = 14'000'000;
    cfg.qos.congestion[3].wred.max_threshold = 15'000'000;
    REQUIRE(star->sw->apply(cfg).ok());
    IncastSpec is;
    is.messages = 4;
    is.message_len = 1 << 20;
    const auto before = app::take_snapshot(*star->engine);
    REQUIRE(run_incast(*star, is).finished);
    const auto after = app::take_snapshot(*star->engine);
    const auto f = doctor(after, &before);
    INFO(describe(f));
    const Finding* x = find(f, "pfc-without-ecn");
    REQUIRE(x != nullptr);
    CHECK(x->evidence.find("marked 0 packets") != std::string::npos);
    // Sampled again with nothing running, the pauses are not climbing.
    star->engine->run_for(ms(1));
    const auto later = app::take_snapshot(*star->engine);
    CHECK(find(doctor(later, &after), "pfc-without-ecn") == nullptr);
  }
  SECTION("lossless-drops: headroom sized for 1 m of cable on 2 km of fibre") {
    StarSpec sp = healthy_star();
    sp.delay = "10us";
    sp.extra_qos += "      pfc: {cable-length: 1}\n";
    auto star = make_star(sp);
    IncastSpec is;
    is.messages = 4;
    is.message_len = 1 << 20;
    is.limit = ms(2000);
    const auto before = app::take_snapshot(*star->engine);
    run_incast(*star, is);
    const auto f = doctor(app::take_snapshot(*star->engine), &before);
    INFO(describe(f));
    const Finding* x = find(f, "lossless-drops");
    REQUIRE(x != nullptr);
    CHECK(x->evidence.find("sized for 1 m") != std::string::npos);
    CHECK(x->fix.find("cable-length") != std::string::npos);
  }
  SECTION("pfc-priorities and mtu: host settings, in the snapshot") {
    auto star = make_star(healthy_star());
    app::FabricSnapshot s = app::take_snapshot(*star->engine);
    REQUIRE(doctor(s).empty());
    s.nics[1].pfc_priorities = 1u << 4;  // mlnx_qos --pfc 0,0,0,0,1,0,0,0
    s.links[2].a.mtu = 1500;             // h2's port
    const auto f = doctor(s);
    INFO(describe(f));
    const Finding* p = find(f, "pfc-priorities");
    REQUIRE(p != nullptr);
    CHECK(p->evidence.find("h1 has PFC on priorities 4") != std::string::npos);
    CHECK(p->fix.find("pfc: [3]") != std::string::npos);
    const Finding* m = find(f, "mtu");
    REQUIRE(m != nullptr);
    CHECK(m->evidence.find("MTU 1500") != std::string::npos);
  }
}

TEST_CASE("doctor: a NIC with `pfc` listing priorities pauses only those", "[sim][integration][doctor]") {
  // The NIC's own PFC list (mlnx_qos --pfc), which the pfc-priorities
  // check compares with the switch: a NIC that does not honour priority 3
  // keeps sending into a lossless switch that pauses it.
  auto run = [](const std::string& pfc) {
    StarSpec sp = healthy_star();
    sp.nic_extra = pfc.empty() ? "" : "    pfc: " + pfc + "\n";
    auto star = make_star(sp);
    IncastSpec is;
    is.messages = 4;
    is.message_len = 1 << 20;
    run_incast(*star, is);
    uint64_t paused = 0;
    for (int i = 0; i < 4; i++) paused += star->nic_counter(i, nic::NicCounters::tx_pfc_paused_time_ps);
    const auto f = doctor(app::take_snapshot(*star->engine));
    return std::make_pair(paused, find(f, "pfc-priorities") != nullptr);
  };
  const auto [all_paused, all_found] = run("");
  const auto [three_paused, three_found] = run("[3]");
  const auto [four_paused, four_found] = run("[4]");
  CHECK(all_paused > 0);
  CHECK(three_paused > 0);
  CHECK(four_paused == 0);
  CHECK(!all_found);
  CHECK(!three_found);
  CHECK(four_found);
}
