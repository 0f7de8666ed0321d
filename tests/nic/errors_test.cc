// Errors reach the right side with the right status, and bad requests
// never touch memory.
#include <arpa/inet.h>

#include "tests/nic/fabric.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::rdma_wr;
using rocemu::test::sge;
using rocemu::test::connect_rc;
using rocemu::test::RcPair;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace {


// A host's memory that can vanish as a killed process's does: from then on
// every access fails and gone() says why.
class VanishingMemory final : public HostMemory {
 public:
  explicit VanishingMemory(bool batched)
      : inner_(batched ? std::unique_ptr<HostMemory>(std::make_unique<DeferringLocalMemory>())
                       : std::make_unique<LocalMemory>()) {}
  void vanish() { gone_ = true; }
  bool read(uint64_t a, void* d, size_t n) override { return !gone_ && inner_->read(a, d, n); }
  bool write(uint64_t a, const void* s, size_t n) override { return !gone_ && inner_->write(a, s, n); }
  // Deferred writes fail only when flushed, as the engine's writes into an application do.
  bool write_deferred(uint64_t a, const void* s, size_t n, DmaTag t) override {
    return inner_->write_deferred(a, s, n, t);
  }
  bool write_deferred_ref(uint64_t a, const void* s, size_t n, DmaTag t) override {
    return inner_->write_deferred_ref(a, s, n, t);
  }
  bool flush() override {
    return !gone_ && inner_->flush();  // gone: what was held is never written
  }
  bool batches() const override { return inner_->batches(); }

 private:
  std::unique_ptr<HostMemory> inner_;
};

}  // namespace

TEST_CASE("Retry exhaustion gives IBV_WC_RETRY_EXC_ERR and flushes the rest", "[sim][nic][errors]") {
  TwoNics f;
  SimHost::ConnectOpts o;
  o.timeout = 8;  // 1.05 ms
  o.retry_cnt = 3;
  auto p = connect_rc(f, o);
  std::vector<uint8_t> src(4096, 1), dst(4096, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  f.run([] { return false; }, ms(5));  // ARP settles
  FaultConfig down;
  down.link_down = true;
  f.link->set_faults(0, down);
  ibv_sge s = sge(src.data(), 4096, lkey);
  ibv_send_wr w1 = rdma_wr(&s, uint64_t(dst.data()), rkey, 1), w2 = rdma_wr(&s, uint64_t(dst.data()), rkey, 2);
  w1.next = &w2;
  const Time start = f.engine->now();
  REQUIRE(f.h1->post_send(p.q1, &w1) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 2, ms(100));
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].wr_id == 1);
  CHECK(wc[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(wc[1].wr_id == 2);
  CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
  // 1 try + 3 retries, each 4.096 us * 2^8.
  CHECK(f.n1->counters()[NicCounters::local_ack_timeout_err] == 4);
  CHECK(f.engine->now() - start >= ns(4096) * 256 * 4);
  CHECK(p.q1->nic_qp->state == IBV_QPS_ERR);
  // Posting on a QP in ERR completes at once with a flush error.
  ibv_send_wr w3 = rdma_wr(&s, uint64_t(dst.data()), rkey, 3);
  REQUIRE(f.h1->post_send(p.q1, &w3) == 0);
  auto wc3 = wait_cqes(f, *f.h1, p.cq1, 1, ms(1));
  REQUIRE(wc3.size() == 1);
  CHECK(wc3[0].status == IBV_WC_WR_FLUSH_ERR);
}

TEST_CASE("RNR: retried after the RNR timer, exhaustion gives IBV_WC_RNR_RETRY_EXC_ERR", "[sim][nic][errors]") {
  TwoNics f;
  SimHost::ConnectOpts o;
  o.rnr_retry = 2;
  o.min_rnr_timer = 1;  // 10 us
  auto p = connect_rc(f, o);
  std::vector<uint8_t> msg(100, 7), rbuf(100, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  ibv_sge s = sge(msg.data(), 100, lkey);
  ibv_send_wr wr{};
  wr.wr_id = 9;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;

  SECTION("a receive posted in time completes the SEND") {
    REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
    f.run([&] { return f.n2->counters()[NicCounters::rnr_nak_sent] >= 1; }, ms(10));
    CHECK(f.n2->counters()[NicCounters::rnr_nak_sent] == 1);
    ibv_sge rs = sge(rbuf.data(), 100, rlkey);
    ibv_recv_wr r{};
    r.wr_id = 5;
    r.sg_list = &rs;
    r.num_sge = 1;
    REQUIRE(f.h2->post_recv(p.q2, &r) == 0);
    auto wc = wait_cqes(f, *f.h1, p.cq1, 1, ms(10));
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(rbuf == msg);
    CHECK(f.n1->counters()[NicCounters::rnr_nak_retry_err] >= 1);
  }
  SECTION("no receive: retries run out") {
    REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
    auto wc = wait_cqes(f, *f.h1, p.cq1, 1, ms(10));
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_RNR_RETRY_EXC_ERR);
    CHECK(f.n1->counters()[NicCounters::rnr_nak_retry_err] == 3);  // first try + 2 retries
    CHECK(f.n2->counters()[NicCounters::rnr_nak_sent] == 3);
  }
  SECTION("rnr_retry 7 retries forever") {
    SimHost::ConnectOpts o7 = o;
    o7.rnr_retry = 7;
    TwoNics g;
    auto q = connect_rc(g, o7);
    std::vector<uint8_t> m2(100, 3);
    const uint32_t k2 = g.h1->reg_mr(m2.data(), m2.size(), test::kAccessAll);
    ibv_sge s2 = sge(m2.data(), 100, k2);
    wr.sg_list = &s2;
    REQUIRE(g.h1->post_send(q.q1, &wr) == 0);
    auto wc = wait_cqes(g, *g.h1, q.cq1, 1, ms(20));
    CHECK(wc.empty());
    CHECK(g.n1->counters()[NicCounters::rnr_nak_retry_err] > 100);
  }
}

TEST_CASE("Remote access errors: nothing written, both sides told", "[sim][nic][errors]") {
  TwoNics f;
  auto p = connect_rc(f);
  std::vector<uint8_t> src(2048, 0xaa), dst(4096, 0), guard(4096, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  const uint32_t ro_key = f.h2->reg_mr(guard.data(), guard.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  std::vector<ibv_async_event> events;
  f.h2->context()->on_async_event = [&](const ibv_async_event& e) { events.push_back(e); };
  // A receive on h2 that the error must flush.
  std::vector<uint8_t> rbuf(64);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  ibv_sge rs = sge(rbuf.data(), 64, rlkey);
  ibv_recv_wr r{};
  r.wr_id = 44;
  r.sg_list = &rs;
  r.num_sge = 1;
  REQUIRE(f.h2->post_recv(p.q2, &r) == 0);

  ibv_sge s = sge(src.data(), 2048, lkey);
  ibv_send_wr wr{};
  const char* what = "";
  SECTION("wrong rkey") {
    what = "wrong rkey";
    wr = rdma_wr(&s, uint64_t(dst.data()), rkey ^ 0x100, 1);
  }
  SECTION("out of bounds") {
    what = "out of bounds";
    wr = rdma_wr(&s, uint64_t(dst.data()) + 3000, rkey, 1);
  }
  SECTION("no remote write access") {
    what = "no remote write access";
    wr = rdma_wr(&s, uint64_t(guard.data()), ro_key, 1);
  }
  INFO(what);
  ibv_send_wr after = rdma_wr(&s, uint64_t(dst.data()), rkey, 2);
  wr.next = &after;
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(f.n1->counters()[NicCounters::req_remote_access_errors] == 1);
  CHECK(f.n2->counters()[NicCounters::resp_remote_access_errors] == 1);
  // Responder: QP in error, an async event, the posted receive flushed.
  CHECK(p.q2->nic_qp->state == IBV_QPS_ERR);
  REQUIRE(events.size() == 1);
  CHECK(events[0].event_type == IBV_EVENT_QP_ACCESS_ERR);
  auto rwc = wait_cqes(f, *f.h2, p.cq2, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].wr_id == 44);
  CHECK(rwc[0].status == IBV_WC_WR_FLUSH_ERR);
  // Not a byte written anywhere.
  CHECK(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; }));
  CHECK(std::all_of(guard.begin(), guard.end(), [](uint8_t b) { return b == 0; }));
}

TEST_CASE("A SEND longer than the receive buffer fails on both sides", "[sim][nic][errors]") {
  TwoNics f;
  auto p = connect_rc(f);
  std::vector<uint8_t> msg(3000, 1), rbuf(1000, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  ibv_sge rs = sge(rbuf.data(), 1000, rlkey);
  ibv_recv_wr r{};
  r.wr_id = 8;
  r.sg_list = &rs;
  r.num_sge = 1;
  REQUIRE(f.h2->post_recv(p.q2, &r) == 0);
  ibv_sge s = sge(msg.data(), 3000, lkey);
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_REM_INV_REQ_ERR);
  auto rwc = wait_cqes(f, *f.h2, p.cq2, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].status == IBV_WC_LOC_LEN_ERR);
}

TEST_CASE("Local errors: bad lkey and too many SGEs", "[sim][nic][errors]") {
  TwoNics f;
  auto p = connect_rc(f);
  std::vector<uint8_t> src(100, 1), dst(100, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge s = sge(src.data(), 100, lkey ^ 0x300);
  ibv_send_wr wr = rdma_wr(&s, uint64_t(dst.data()), rkey, 1);
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_LOC_PROT_ERR);
  CHECK(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; }));
  // The provider refuses too many SGEs at post time with EINVAL.
  ibv_sge many[3] = {s, s, s};
  ibv_send_wr w2 = rdma_wr(many, uint64_t(dst.data()), rkey, 2);
  w2.num_sge = 3;
  ibv_send_wr* bad = nullptr;
  CHECK(f.h1->post_send(p.q1, &w2, &bad) == EINVAL);
  CHECK(bad == &w2);
}

TEST_CASE("CQ overflow is an async error and takes the QP to ERR", "[sim][nic][errors]") {
  TwoNics f;
  auto* cq_small = f.h1->create_cq(4);
  auto* cq2 = f.h2->create_cq(64);
  ibv_qp_cap cap{64, 16, 1, 1, 0};
  auto* q1 = f.h1->create_qp(QpType::kRc, cq_small, cq_small, cap);
  auto* q2 = f.h2->create_qp(QpType::kRc, cq2, cq2, cap);
  REQUIRE(SimHost::connect(*f.h1, q1, *f.h2, q2) == 0);
  std::vector<ibv_async_event> events;
  f.h1->context()->on_async_event = [&](const ibv_async_event& e) { events.push_back(e); };
  std::vector<uint8_t> src(64, 1), dst(64, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge s = sge(src.data(), 64, lkey);
  for (uint64_t i = 0; i < 8; i++) {
    ibv_send_wr wr = rdma_wr(&s, uint64_t(dst.data()), rkey, i);
    REQUIRE(f.h1->post_send(q1, &wr) == 0);
  }
  f.run([&] { return !events.empty(); }, ms(10));
  REQUIRE(!events.empty());
  CHECK(events[0].event_type == IBV_EVENT_CQ_ERR);
  CHECK(f.n1->counters()[NicCounters::cq_overflow] >= 1);
  CHECK(q1->nic_qp->state == IBV_QPS_ERR);
}

TEST_CASE("A host whose process died answers nothing: the peer retries until its retries run out",
          "[sim][nic][errors]") {
  // The engine hears of a death through the control socket, a little after
  // the process's memory is gone; packets arriving in between must not be
  // answered with NAKs as if the QP were alive.
  const bool batched = GENERATE(false, true);
  INFO("batched DMA: " << batched);
  TwoNics f;
  auto mem = std::make_unique<VanishingMemory>(batched);
  VanishingMemory* vm = mem.get();
  f.h2 = std::make_unique<SimHost>(*f.engine, *f.n2, std::move(mem));
  SimHost::ConnectOpts o;
  o.timeout = 8;  // 1.05 ms
  o.retry_cnt = 3;
  auto p = connect_rc(f, o);
  std::vector<uint8_t> src(8192, 0x5a), dst(8192, 0), rbuf(8192, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  ibv_sge s = sge(src.data(), 8192, lkey);
  ibv_send_wr w0 = rdma_wr(&s, uint64_t(dst.data()), rkey, 1);
  REQUIRE(f.h1->post_send(p.q1, &w0) == 0);
  auto wc0 = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(wc0.size() == 1);
  REQUIRE(wc0[0].status == IBV_WC_SUCCESS);
  REQUIRE(dst == src);

  vm->vanish();
  ibv_sge rs = sge(rbuf.data(), 8192, rlkey);
  ibv_recv_wr r{};
  r.wr_id = 7;
  r.sg_list = &rs;
  r.num_sge = 1;
  REQUIRE(f.h2->post_recv(p.q2, &r) == 0);
  ibv_send_wr w1{};
  const char* what = "";
  SECTION("a WRITE") {
    what = "WRITE";
    w1 = rdma_wr(&s, uint64_t(dst.data()), rkey, 2);
  }
  SECTION("a SEND") {
    what = "SEND";
    w1 = rdma_wr(&s, 0, 0, 2);
    w1.opcode = IBV_WR_SEND;
  }
  SECTION("an atomic") {
    what = "FETCH_ADD";
    s.length = 8;
    w1 = rdma_wr(&s, uint64_t(dst.data()), rkey, 2);
    w1.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    w1.wr.atomic.remote_addr = uint64_t(dst.data());
    w1.wr.atomic.rkey = rkey;
    w1.wr.atomic.compare_add = 1;
  }
  INFO(what);
  const uint64_t sent_before = f.n2->counters()[NicCounters::tx_roce_packets];
  REQUIRE(f.h1->post_send(p.q1, &w1) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 1, ms(100));
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].wr_id == 2);
  CHECK(wc[0].status == IBV_WC_RETRY_EXC_ERR);
  CHECK(f.n1->counters()[NicCounters::local_ack_timeout_err] == 4);
  // Not an ACK, not a NAK: the dead host's NIC side stayed silent.
  CHECK(f.n2->counters()[NicCounters::tx_roce_packets] == sent_before);
  CHECK(f.h2->context()->dead);
  CHECK(f.n2->counters()[NicCounters::rx_not_for_us] > 0);
}

// Caps need not be powers of two (rxe reports max_cqe 32767): every count
// up to the cap is accepted, although the ring behind it is rounded up,
// and one more is refused.
TEST_CASE("A CQ or SRQ cap that is not a power of two admits every count up to it", "[unit][nic][errors]") {
  auto engine = test::make_engine();
  NicConfig c;
  c.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  c.ips = {*wire::IpAddr::parse("10.0.0.1")};
  c.max_cqe = 32767;
  c.max_qp_wr = 1000;
  auto& nic = engine->add<Nic>("h1", c);
  engine->start();
  SimHost h(*engine, nic);
  CHECK(h.create_cq(32767) != nullptr);
  CHECK(h.create_cq(32768) == nullptr);
  CHECK(h.create_srq(1000) != nullptr);
  CHECK(h.create_srq(1001) == nullptr);
}

// The provider's server hands the NIC the QP's rings as it made them: the
// counts asked for rounded up to powers of two (1000 -> 1024 rings).
TEST_CASE("A QP cap that is not a power of two admits every count up to it, rings rounded up", "[unit][nic][errors]") {
  auto engine = test::make_engine();
  NicConfig c;
  c.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  c.ips = {*wire::IpAddr::parse("10.0.0.1")};
  c.max_qp_wr = 1000;
  auto& nic = engine->add<Nic>("h1", c);
  engine->start();
  SimHost h(*engine, nic);
  auto* cq = h.create_cq(16);
  REQUIRE(cq != nullptr);
  CHECK(h.create_qp(QpType::kRc, cq, cq, ibv_qp_cap{1000, 1000, 1, 1, 0}) != nullptr);
  CHECK(h.create_qp(QpType::kRc, cq, cq, ibv_qp_cap{1001, 1, 1, 1, 0}) == nullptr);
  CHECK(h.create_qp(QpType::kRc, cq, cq, ibv_qp_cap{1, 1001, 1, 1, 0}) == nullptr);
  // As the server passes them: rings of 1024 for 1000 asked for.
  const ibv_qp_cap rounded{1024, 1024, 1, 1, 0};
  uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
  Nic::qp_ring_sizes(rounded, sq_entries, sq_stride, rq_entries, rq_stride);
  std::vector<uint8_t> sq(ring_bytes(sq_entries, sq_stride) + 64), rq(ring_bytes(rq_entries, rq_stride) + 64);
  const auto aligned = [](std::vector<uint8_t>& v) {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(v.data()) + 63) & ~uintptr_t(63));
  };
  Nic::QpInit init;
  init.type = QpType::kRc;
  init.pd = h.pd();
  init.send_cq = cq->handle;
  init.recv_cq = cq->handle;
  init.cap = rounded;
  init.sq_ring = aligned(sq);
  init.rq_ring = aligned(rq);
  uint32_t qpn = 0;
  CHECK(nic.create_qp(h.context(), init, qpn, engine->now()) == 0);
  CHECK(nic.destroy_qp(h.context(), qpn) == 0);
  init.cap.max_send_wr = 2048;  // more than any count the cap allows, rounded
  CHECK(nic.create_qp(h.context(), init, qpn, engine->now()) == EINVAL);
}

// The READ/atomic depths and SGE counts a topology sets are what modify_qp
// and create_srq accept: the cap itself, not one more.
TEST_CASE("Device caps bound max_dest_rd_atomic, max_rd_atomic and SRQ SGEs", "[unit][nic][errors]") {
  auto engine = test::make_engine();
  NicConfig c;
  c.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  c.ips = {*wire::IpAddr::parse("10.0.0.1")};
  c.max_qp_rd_atom = 8;
  c.max_qp_init_rd_atom = 4;
  c.max_sge = 3;
  auto& nic = engine->add<Nic>("h1", c);
  engine->start();
  SimHost h(*engine, nic);
  auto* cq = h.create_cq(16);
  REQUIRE(cq != nullptr);
  auto* q = h.create_qp(QpType::kRc, cq, cq, ibv_qp_cap{4, 4, 1, 1, 0});
  REQUIRE(q != nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = test::kAccessAll;
  REQUIRE(h.modify(q, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = 5;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = 3;
  a.ah_attr.port_num = 1;
  a.min_rnr_timer = 12;
  const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  a.max_dest_rd_atomic = 9;
  CHECK(h.modify(q, a, rtr) == EINVAL);
  CHECK(q->nic_qp->state == IBV_QPS_INIT);
  a.max_dest_rd_atomic = 8;
  REQUIRE(h.modify(q, a, rtr) == 0);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  const int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                  IBV_QP_MAX_QP_RD_ATOMIC;
  a.max_rd_atomic = 5;
  CHECK(h.modify(q, a, rts) == EINVAL);
  CHECK(q->nic_qp->state == IBV_QPS_RTR);
  a.max_rd_atomic = 4;
  CHECK(h.modify(q, a, rts) == 0);
  CHECK(q->nic_qp->state == IBV_QPS_RTS);
  CHECK(q->nic_qp->max_rd_atomic == 4);
  CHECK(q->nic_qp->max_dest_rd_atomic == 8);

  CHECK(h.create_srq(16, 4) == nullptr);
  CHECK(h.create_srq(16, 3) != nullptr);
}
