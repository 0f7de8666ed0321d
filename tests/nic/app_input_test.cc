// What an application controls -- ring indices in shared memory, the
// sizes it asks for, how many objects it makes -- cannot make the NIC loop,
// overflow or take the device from other applications.
#include "tests/nic/fabric.h"
#include "tests/nic/nic_test_peer.h"
#include <set>

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::TwoNics;

TEST_CASE("round_up_pow2 of sizes above 2^31 is 0 (refused), not an endless loop", "[unit][nic]") {
  CHECK(round_up_pow2(0) == 1);
  CHECK(round_up_pow2(1) == 1);
  CHECK(round_up_pow2(1000) == 1024);
  CHECK(round_up_pow2(1u << 31) == 1u << 31);
  CHECK(round_up_pow2((1u << 31) + 1) == 0);
  CHECK(round_up_pow2(0xffffffffu) == 0);
}

TEST_CASE("A receive queue flush is bounded by the ring, whatever producer index the application wrote",
          "[sim][nic]") {
  TwoNics f;
  auto* cq = f.h1->create_cq(64);
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  auto* qp = f.h1->create_qp(QpType::kRc, cq, cq, cap);
  REQUIRE(qp != nullptr);
  const uint32_t entries = qp->rq.ring.entries();
  std::vector<uint8_t> buf(64);
  const uint32_t lkey = f.h1->reg_mr(buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge s{uint64_t(buf.data()), 64, lkey};
  ibv_recv_wr r{};
  r.sg_list = &s;
  r.num_sge = 1;
  for (uint32_t i = 0; i < 3; i++) {
    r.wr_id = i;
    REQUIRE(f.h1->post_recv(qp, &r) == 0);
  }
  uint32_t flushed = 0;
  SECTION("three posted, as written") { flushed = 3; }
  SECTION("producer 2^31 ahead of the consumer") { qp->rq.ring.set_producer(0x80000000u); }
  SECTION("producer just behind the consumer (2^32 - 1 ahead)") { qp->rq.ring.set_producer(0xffffffffu); }
  SECTION("producer one more than a ring ahead") { qp->rq.ring.set_producer(entries + 1); }
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  REQUIRE(f.h1->modify(qp, a, IBV_QP_STATE) == 0);
  ibv_wc wc[64];
  const int n = f.h1->poll(cq, 64, wc);
  CHECK(uint32_t(n) == flushed);
  for (int i = 0; i < n; i++) CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR);
}

TEST_CASE("Per-application quotas and the advertised device limits give ENOMEM", "[sim][nic]") {
  auto engine = test::make_engine();
  NicConfig cfg;
  cfg.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  cfg.ips = {*wire::IpAddr::parse("10.0.0.1")};
  cfg.max_cq = 5;
  cfg.app_quota.cqs = 3;
  cfg.app_quota.qps = 2;
  cfg.app_quota.mrs = 2;
  cfg.app_quota.srqs = 1;
  auto& nic = engine->add<Nic>("h1", cfg);
  engine->start();
  SimHost a(*engine, nic), b(*engine, nic);
  std::vector<SimHost::Cq*> cqs;
  for (int i = 0; i < 3; i++) cqs.push_back(a.create_cq(16));
  for (auto* c : cqs) REQUIRE(c != nullptr);
  CHECK(a.create_cq(16) == nullptr);  // the application's quota
  REQUIRE(b.create_cq(16) != nullptr);
  REQUIRE(b.create_cq(16) != nullptr);
  CHECK(b.create_cq(16) == nullptr);  // max_cq of the device: 5 in all
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  int err = 0;
  REQUIRE(a.create_qp(QpType::kRc, cqs[0], cqs[0], cap) != nullptr);
  auto* q2 = a.create_qp(QpType::kRc, cqs[0], cqs[0], cap);
  REQUIRE(q2 != nullptr);
  CHECK(a.create_qp(QpType::kRc, cqs[0], cqs[0], cap, false, nullptr, &err) == nullptr);
  CHECK(err == ENOMEM);
  REQUIRE(a.destroy_qp(q2) == 0);  // given back
  CHECK(a.create_qp(QpType::kRc, cqs[0], cqs[0], cap) != nullptr);
  std::vector<uint8_t> buf(4096);
  CHECK(a.reg_mr(buf.data(), 100, IBV_ACCESS_LOCAL_WRITE) != 0);
  const uint32_t k = a.reg_mr(buf.data(), 200, IBV_ACCESS_LOCAL_WRITE);
  CHECK(k != 0);
  CHECK(a.reg_mr(buf.data(), 300, IBV_ACCESS_LOCAL_WRITE, &err) == 0);
  CHECK(err == ENOMEM);
  REQUIRE(a.dereg_mr(k) == 0);
  CHECK(a.reg_mr(buf.data(), 300, IBV_ACCESS_LOCAL_WRITE) != 0);
  CHECK(a.create_srq(16) != nullptr);
  CHECK(a.create_srq(16) == nullptr);
}

TEST_CASE("Work-queue memory is a quota of its own", "[sim][nic]") {
  auto engine = test::make_engine();
  NicConfig cfg;
  cfg.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  cfg.ips = {*wire::IpAddr::parse("10.0.0.1")};
  cfg.app_quota.queue_bytes = 3 * ring_bytes(4096, sizeof(Cqe));
  auto& nic = engine->add<Nic>("h1", cfg);
  engine->start();
  SimHost a(*engine, nic);
  for (int i = 0; i < 3; i++) CHECK(a.create_cq(4096) != nullptr);
  CHECK(a.create_cq(4096) == nullptr);
}

TEST_CASE("QPNs go round from 0xffffff to 0x11, never onto the special QPs 0..0x10", "[unit][nic]") {
  std::set<uint32_t> used;
  auto in_use = [&](uint32_t q) { return used.count(q) != 0; };
  CHECK(next_free_qpn(0xfffffe, in_use) == 0xffffff);
  CHECK(next_free_qpn(0xffffff, in_use) == kFirstQpn);
  used = {0xffffff};
  CHECK(next_free_qpn(0xfffffe, in_use) == kFirstQpn);  // not 0, as a mask of 2^24 - 1 gives
  used = {0xffffff, 0x11, 0x12};
  CHECK(next_free_qpn(0xfffffe, in_use) == 0x13);
  used.clear();
  CHECK(next_free_qpn(0, in_use) == kFirstQpn);
}

TEST_CASE("Memory windows are a per-application quota: ENOMEM beyond it, given back by dealloc and exit",
          "[unit][nic][mw]") {
  auto engine = test::make_engine();
  NicConfig cfg;
  cfg.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  cfg.ips = {*wire::IpAddr::parse("10.0.0.1")};
  cfg.app_quota.mws = 3;
  auto& nic = engine->add<Nic>("h1", cfg);
  engine->start();
  // Two contexts of one application (owner 7), and another application.
  HostContext* first = nic.open_context(nullptr, 7);
  HostContext* second = nic.open_context(nullptr, 7);
  HostContext* other = nic.open_context(nullptr, 8);
  uint32_t pd1, pd2, pd3;
  REQUIRE(nic.alloc_pd(first, pd1) == 0);
  REQUIRE(nic.alloc_pd(second, pd2) == 0);
  REQUIRE(nic.alloc_pd(other, pd3) == 0);
  auto alloc = [&](HostContext* ctx, uint32_t pd, uint32_t* handle = nullptr) {
    uint32_t h = 0, rkey = 0;
    const int e = nic.alloc_mw(ctx, pd, IBV_MW_TYPE_2, h, rkey);
    if (handle != nullptr) *handle = h;
    return e;
  };
  uint32_t w1 = 0;
  REQUIRE(alloc(first, pd1, &w1) == 0);
  REQUIRE(alloc(first, pd1) == 0);
  REQUIRE(alloc(second, pd2) == 0);
  CHECK(alloc(second, pd2) == ENOMEM);  // the application has its three
  CHECK(alloc(first, pd1) == ENOMEM);
  CHECK(alloc(other, pd3) == 0);  // another application has its own
  REQUIRE(nic.dealloc_mw(first, w1) == 0);  // given back
  CHECK(alloc(second, pd2) == 0);
  CHECK(alloc(second, pd2) == ENOMEM);
  nic.close_context(first);  // its one window goes back to the application
  CHECK(alloc(second, pd2) == 0);
  CHECK(alloc(second, pd2) == ENOMEM);
  nic.close_context(second);
  nic.close_context(other);
  CHECK(NicTestPeer::mws(nic) == 0);
  CHECK(NicTestPeer::window_count_errors(nic) == "");
}
