// A deferred write into host memory that fails when flushed (the page went
// away, process_vm_writev stopped short) fails exactly the operation whose
// data it carried, with the status a real RNIC gives, and nothing else: no
// ACK and no success completion for bytes that are not there.
#include <algorithm>

#include "tests/nic/fabric.h"
#include "tests/nic/probe.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::rdma_wr;
using rocemu::test::sge;
using rocemu::test::connect_rc;
using rocemu::test::RcPair;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace {


DeferringLocalMemory& deferring(SimHost& h) { return dynamic_cast<DeferringLocalMemory&>(h.memory()); }

bool all(const uint8_t* p, size_t n, uint8_t v) { return std::all_of(p, p + n, [v](uint8_t b) { return b == v; }); }

}  // namespace

TEST_CASE("A WRITE whose data did not land is NAKed, and another QP's WRITE beside it completes",
          "[sim][nic][errors]") {
  TwoNics f(1, LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  auto bad = connect_rc(f), good = connect_rc(f);
  std::vector<uint8_t> src(2048, 0xaa), dst(8192, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  deferring(*f.h2).set_hole(uint64_t(dst.data()) + 4096, 4096);  // registered, but not there when written
  ibv_sge s = sge(src.data(), 2048, lkey);
  ibv_send_wr w1 = rdma_wr(&s, uint64_t(dst.data()) + 4096, rkey, 1);
  ibv_send_wr w2 = rdma_wr(&s, uint64_t(dst.data()), rkey, 2);
  REQUIRE(f.h1->post_send(bad.q1, &w1) == 0);
  REQUIRE(f.h1->post_send(good.q1, &w2) == 0);
  auto wc_bad = wait_cqes(f, *f.h1, bad.cq1, 1);
  auto wc_good = wait_cqes(f, *f.h1, good.cq1, 1);
  REQUIRE(wc_bad.size() == 1);
  CHECK(wc_bad[0].status == IBV_WC_REM_OP_ERR);
  CHECK(bad.q2->nic_qp->state == IBV_QPS_ERR);
  REQUIRE(wc_good.size() == 1);
  CHECK(wc_good[0].status == IBV_WC_SUCCESS);
  CHECK(all(dst.data(), 2048, 0xaa));
  CHECK(good.q2->nic_qp->state == IBV_QPS_RTS);
}

TEST_CASE("A SEND whose data did not land completes with an error on both sides", "[sim][nic][errors]") {
  TwoNics f(1, LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  auto p = connect_rc(f);
  std::vector<uint8_t> msg(3000, 0x5a), rbuf(4096, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  deferring(*f.h2).set_hole(uint64_t(rbuf.data()) + 2048, 16);  // in the message's last packet
  ibv_sge rs = sge(rbuf.data(), 4096, rlkey);
  ibv_recv_wr r{};
  r.wr_id = 7;
  r.sg_list = &rs;
  r.num_sge = 1;
  REQUIRE(f.h2->post_recv(p.q2, &r) == 0);
  ibv_sge s = sge(msg.data(), 3000, lkey);
  ibv_send_wr wr = rdma_wr(&s, 0, 0, 8, IBV_WR_SEND);
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto rwc = wait_cqes(f, *f.h2, p.cq2, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].wr_id == 7);
  CHECK(rwc[0].status == IBV_WC_LOC_PROT_ERR);
  auto swc = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(swc.size() == 1);
  CHECK(swc[0].status == IBV_WC_REM_OP_ERR);
}

TEST_CASE("A READ whose response did not land fails locally; the WQE behind it is flushed", "[sim][nic][errors]") {
  TwoNics f(1, LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  auto p = connect_rc(f);
  std::vector<uint8_t> local(4096, 0), remote(4096, 0x33);
  const uint32_t lkey = f.h1->reg_mr(local.data(), local.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(remote.data(), remote.size(), test::kAccessAll);
  deferring(*f.h1).set_hole(uint64_t(local.data()) + 1024, 1024);
  ibv_sge s = sge(local.data(), 4096, lkey);
  ibv_send_wr rd = rdma_wr(&s, uint64_t(remote.data()), rkey, 1, IBV_WR_RDMA_READ);
  ibv_sge s2 = sge(local.data(), 16, lkey);
  ibv_send_wr after = rdma_wr(&s2, uint64_t(remote.data()), rkey, 2);
  rd.next = &after;
  REQUIRE(f.h1->post_send(p.q1, &rd) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].wr_id == 1);
  CHECK(wc[0].status == IBV_WC_LOC_PROT_ERR);
  CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(p.q1->nic_qp->state == IBV_QPS_ERR);
}

TEST_CASE("A UC SEND whose middle packet did not land, in an earlier burst than its last, completes with an error",
          "[sim][nic][errors][uc]") {
  // At 100 Gbit/s every packet of the message arrives in a burst of its own.
  TwoNics f(1, LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  auto* q1 = f.h1->create_qp(QpType::kUc, cq1, cq1, cap);
  auto* q2 = f.h2->create_qp(QpType::kUc, cq2, cq2, cap);
  SimHost::ConnectOpts o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  REQUIRE(SimHost::connect(*f.h1, q1, *f.h2, q2, o) == 0);
  std::vector<uint8_t> msg(3000, 0x5a), rbuf(4096, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  deferring(*f.h2).set_hole(uint64_t(rbuf.data()) + 1500, 16);  // in the middle packet (MTU 1024)
  ibv_sge rs = sge(rbuf.data(), 4096, rlkey);
  ibv_recv_wr r{};
  r.wr_id = 7;
  r.sg_list = &rs;
  r.num_sge = 1;
  REQUIRE(f.h2->post_recv(q2, &r) == 0);
  ibv_sge s = sge(msg.data(), 3000, lkey);
  ibv_send_wr wr = rdma_wr(&s, 0, 0, 8, IBV_WR_SEND);
  REQUIRE(f.h1->post_send(q1, &wr) == 0);
  auto rwc = wait_cqes(f, *f.h2, cq2, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].wr_id == 7);
  CHECK(rwc[0].status == IBV_WC_LOC_PROT_ERR);
}

TEST_CASE("Of two UD datagrams in one burst, only the one whose data did not land fails", "[sim][nic][errors][ud]") {
  auto engine = rocemu::test::make_engine(3);
  const NicConfig c = rocemu::test::probe_peer_config();
  Nic& nic = engine->add<Nic>("h1", c);
  auto& probe = engine->add<rocemu::test::Probe>();
  REQUIRE(engine->connect(nic, 0, probe, 0, LinkParams{}).ok());
  engine->start();
  SimHost host(*engine, nic, /*batched_dma=*/true);
  auto* cq = host.create_cq(64);
  auto* u = host.create_qp(QpType::kUd, cq, cq, ibv_qp_cap{16, 16, 1, 1, 0});
  REQUIRE(host.activate_ud(u, 0x2222) == 0);
  std::vector<uint8_t> rbuf(2 * 1024, 0);
  const uint32_t rlkey = host.reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  dynamic_cast<DeferringLocalMemory&>(host.memory()).set_hole(uint64_t(rbuf.data()) + 100, 16);  // first buffer only
  for (uint64_t i = 0; i < 2; i++) {
    ibv_sge rs = sge(rbuf.data() + i * 1024, 1024, rlkey);
    ibv_recv_wr r{};
    r.wr_id = 1 + i;
    r.sg_list = &rs;
    r.num_sge = 1;
    REQUIRE(host.post_recv(u, &r) == 0);
  }
  const std::vector<uint8_t> payload(512, 0x77);
  std::vector<rte_mbuf*> burst;
  for (uint32_t psn : {0u, 1u}) {
    wire::RoceFields f;
    f.opcode = wire::op::ud(wire::op::kSendOnly);
    f.psn = psn;
    f.dest_qp = u->qpn;
    f.deth_qkey = 0x2222;
    f.deth_src_qp = 0x99;
    std::vector<uint8_t> frame(2048);
    frame.resize(wire::encode_roce(frame, rocemu::test::probe_to_nic(c), f, payload));
    burst.push_back(engine->pool().alloc_copy(frame));
    REQUIRE(burst.back() != nullptr);
  }
  nic.on_rx(0, burst.data(), uint16_t(burst.size()), engine->now());
  engine->run_for(us(20));
  ibv_wc wc[2];
  REQUIRE(host.poll(cq, 2, wc) == 2);
  CHECK(wc[0].wr_id == 1);
  CHECK(wc[0].status == IBV_WC_LOC_PROT_ERR);
  CHECK(wc[1].wr_id == 2);
  CHECK(wc[1].status == IBV_WC_SUCCESS);
  CHECK(all(rbuf.data() + 1024 + 40, 512, 0x77));
}

TEST_CASE("An ACK in a burst does not split the burst's deferred writes", "[sim][nic][dma]") {
  // One RC QP towards the probe: the burst carries two WRITEs to its
  // responder and, between them, the ACK of its own WRITE. The requester's
  // completion has no local data; the burst's writes go in one flush.
  auto engine = rocemu::test::make_engine(3);
  const NicConfig c = rocemu::test::probe_peer_config();
  Nic& nic = engine->add<Nic>("h1", c);
  auto& probe = engine->add<rocemu::test::Probe>();
  REQUIRE(engine->connect(nic, 0, probe, 0, LinkParams{}).ok());
  engine->start();
  SimHost host(*engine, nic, /*batched_dma=*/true);
  auto* cq = host.create_cq(64);
  auto* qp = host.create_qp(QpType::kRc, cq, cq, ibv_qp_cap{16, 16, 1, 1, 0});
  std::vector<uint8_t> mem(8192, 0x11);
  const uint32_t key = host.reg_mr(mem.data(), mem.size(), test::kAccessAll);
  rocemu::test::probe_qp_to_rtr(host, qp, QpType::kRc, 0x99, test::kAccessAll);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 20;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  REQUIRE(host.modify(qp, a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_MAX_QP_RD_ATOMIC) == 0);
  ibv_sge s = sge(mem.data(), 64, key);
  ibv_send_wr wr = rdma_wr(&s, 0x1000, 0x1234, 5);
  REQUIRE(host.post_send(qp, &wr) == 0);
  engine->run_for(us(5));  // the WRITE went out, PSN 0
  const wire::PathHeaders to_nic = rocemu::test::probe_to_nic(c);
  auto frame = [&](const wire::RoceFields& f, std::span<const uint8_t> payload) {
    std::vector<uint8_t> out(512);
    out.resize(wire::encode_roce(out, to_nic, f, payload));
    rte_mbuf* m = engine->pool().alloc_copy(out);
    REQUIRE(m != nullptr);
    return m;
  };
  const std::vector<uint8_t> data(64, 0x22);
  auto write_to = [&](uint32_t psn, size_t off) {
    wire::RoceFields f;
    f.opcode = wire::op::kWriteOnly;
    f.dest_qp = qp->qpn;
    f.psn = psn;
    f.reth_va = uint64_t(mem.data()) + off;
    f.reth_rkey = key;
    f.reth_len = 64;
    return frame(f, data);
  };
  wire::RoceFields ack;
  ack.opcode = wire::op::kAck;
  ack.dest_qp = qp->qpn;
  ack.psn = 0;
  ack.aeth_syndrome = wire::aeth_ack();
  ack.aeth_msn = 1;
  std::vector<rte_mbuf*> burst = {write_to(0, 4096), frame(ack, {}), write_to(1, 6144)};
  const uint64_t before = deferring(host).calls();
  nic.on_rx(0, burst.data(), uint16_t(burst.size()), engine->now());
  CHECK(deferring(host).calls() - before == 1);
  ibv_wc wc[1];
  REQUIRE(host.poll(cq, 1, wc) == 1);
  CHECK(wc[0].wr_id == 5);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(all(mem.data() + 4096, 64, 0x22));
  CHECK(all(mem.data() + 6144, 64, 0x22));
}
