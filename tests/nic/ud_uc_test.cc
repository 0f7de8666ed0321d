// UD (GRH in the first 40 bytes, Q_Key), UC (no ACKs, a gap drops the
// message), SRQ, loopback on one NIC, and the QP state machine.
#include <arpa/inet.h>

#include <set>

#include "tests/nic/fabric.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::sge;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace {
}

TEST_CASE("UD SEND delivers the GRH in the first 40 bytes and checks the Q_Key", "[sim][nic][ud]") {
  TwoNics f;
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  auto* u1 = f.h1->create_qp(QpType::kUd, cq1, cq1, cap);
  auto* u2 = f.h2->create_qp(QpType::kUd, cq2, cq2, cap);
  REQUIRE(f.h1->activate_ud(u1, 0x1111) == 0);
  REQUIRE(f.h2->activate_ud(u2, 0x2222) == 0);
  std::vector<uint8_t> msg(512);
  for (size_t i = 0; i < msg.size(); i++) msg[i] = uint8_t(i * 7);
  std::vector<uint8_t> rbuf(40 + 1024, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  for (uint64_t id : {1, 2}) {
    ibv_sge rs = sge(rbuf.data(), uint32_t(rbuf.size()), rlkey);
    ibv_recv_wr r{};
    r.wr_id = id;
    r.sg_list = &rs;
    r.num_sge = 1;
    REQUIRE(f.h2->post_recv(u2, &r) == 0);
  }
  const uint32_t ah = f.h1->create_ah(f.h2->gid(3), 3);
  REQUIRE(ah != 0);
  ibv_sge s = sge(msg.data(), 512, lkey);
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(0x5151);
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = reinterpret_cast<ibv_ah*>(uintptr_t(ah));
  wr.wr.ud.remote_qpn = u2->qpn;
  // Wrong Q_Key first: silently dropped. Then the right one.
  wr.wr_id = 10;
  wr.wr.ud.remote_qkey = 0x3333;
  REQUIRE(f.h1->post_send(u1, &wr) == 0);
  wr.wr_id = 11;
  wr.wr.ud.remote_qkey = 0x2222;
  REQUIRE(f.h1->post_send(u1, &wr) == 0);
  auto swc = wait_cqes(f, *f.h1, cq1, 2);
  REQUIRE(swc.size() == 2);
  CHECK(swc[0].status == IBV_WC_SUCCESS);
  CHECK(swc[1].status == IBV_WC_SUCCESS);
  auto rwc = wait_cqes(f, *f.h2, cq2, 1, ms(5));
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].wr_id == 1);
  CHECK(rwc[0].byte_len == 40 + 512);
  CHECK((rwc[0].wc_flags & IBV_WC_GRH));
  // The RoCE packet type in sl, as mlx5 reports it: UDP (RoCEv2), IPv4.
  // UCX's ud_verbs reads it to find the destination GID in the GRH area.
  CHECK(rwc[0].sl == 0xa);
  CHECK((rwc[0].wc_flags & IBV_WC_WITH_IMM));
  CHECK(ntohl(rwc[0].imm_data) == 0x5151);
  CHECK(rwc[0].src_qp == u1->qpn);
  // IPv4: 20 zero bytes then the IPv4 header with h1's address.
  CHECK(std::all_of(rbuf.begin(), rbuf.begin() + 20, [](uint8_t b) { return b == 0; }));
  CHECK(rbuf[20] == 0x45);
  CHECK(rbuf[20 + 12] == 10);
  CHECK(rbuf[20 + 15] == 1);
  CHECK(std::equal(msg.begin(), msg.end(), rbuf.begin() + 40));
}

TEST_CASE("UC: SEND and WRITE without ACKs; a lost packet drops its message only", "[sim][nic][uc]") {
  TwoNics f;
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  auto* q1 = f.h1->create_qp(QpType::kUc, cq1, cq1, cap);
  auto* q2 = f.h2->create_qp(QpType::kUc, cq2, cq2, cap);
  SimHost::ConnectOpts o;
  o.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  REQUIRE(SimHost::connect(*f.h1, q1, *f.h2, q2, o) == 0);
  std::vector<uint8_t> msg(3000);
  for (size_t i = 0; i < msg.size(); i++) msg[i] = uint8_t(i);
  std::vector<uint8_t> rbuf(4096 * 3, 0), wdst(4096, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  const uint32_t wkey = f.h2->reg_mr(wdst.data(), wdst.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  for (uint64_t i = 0; i < 3; i++) {
    ibv_sge rs = sge(rbuf.data() + i * 4096, 4096, rlkey);
    ibv_recv_wr r{};
    r.wr_id = 100 + i;
    r.sg_list = &rs;
    r.num_sge = 1;
    REQUIRE(f.h2->post_recv(q2, &r) == 0);
  }
  f.run([] { return false; }, ms(2));  // ARP
  // Drop the first or the second packet of the first SEND.
  const uint32_t lost = GENERATE(0u, 1u);
  INFO("lost PSN " << lost);
  FaultConfig fc;
  fc.drop.push_back(DropRule{.qpn = q2->qpn, .psn = lost, .opcode = std::nullopt, .every_nth = 1, .times = 1});
  f.link->set_faults(0, fc);
  ibv_sge s = sge(msg.data(), 3000, lkey);
  ibv_send_wr a{}, b{}, w{};
  a.wr_id = 1;
  a.sg_list = &s;
  a.num_sge = 1;
  a.opcode = IBV_WR_SEND;
  a.send_flags = IBV_SEND_SIGNALED;
  b = a;
  b.wr_id = 2;
  w = a;
  w.wr_id = 3;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.wr.rdma.remote_addr = uint64_t(wdst.data());
  w.wr.rdma.rkey = wkey;
  a.next = &b;
  b.next = &w;
  REQUIRE(f.h1->post_send(q1, &a) == 0);
  auto swc = wait_cqes(f, *f.h1, cq1, 3);
  REQUIRE(swc.size() == 3);
  for (auto& c : swc) CHECK(c.status == IBV_WC_SUCCESS);  // UC completes on send
  // UC completes when the packets leave: let the last ones land.
  auto rwc = wait_cqes(f, *f.h2, cq2, 2, ms(5));
  REQUIRE(rwc.size() == 1);  // the first SEND was lost; the second arrives
  CHECK(rwc[0].wr_id == 100);
  CHECK(rwc[0].byte_len == 3000);
  CHECK(std::equal(msg.begin(), msg.end(), rbuf.begin()));
  CHECK(std::equal(msg.begin(), msg.end(), wdst.begin()));
  CHECK(f.n2->counters()[NicCounters::rx_discards_uc] >= 1);
  // Resynchronising after a gap is loss, not a peer's protocol violation.
  CHECK(f.n2->counters()[NicCounters::resp_opcode_sequence_err] == 0);
  CHECK(f.n2->counters()[NicCounters::tx_roce_packets] == 0);  // no ACKs in UC
}

TEST_CASE("SRQ feeds several QPs and signals its limit", "[sim][nic][srq]") {
  TwoNics f;
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  auto* srq = f.h2->create_srq(16, 1, 2);
  REQUIRE(srq != nullptr);
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  auto* a1 = f.h1->create_qp(QpType::kRc, cq1, cq1, cap);
  auto* a2 = f.h1->create_qp(QpType::kRc, cq1, cq1, cap);
  auto* b1 = f.h2->create_qp(QpType::kRc, cq2, cq2, cap, false, srq);
  auto* b2 = f.h2->create_qp(QpType::kRc, cq2, cq2, cap, false, srq);
  REQUIRE(SimHost::connect(*f.h1, a1, *f.h2, b1) == 0);
  REQUIRE(SimHost::connect(*f.h1, a2, *f.h2, b2) == 0);
  std::vector<ibv_async_event> events;
  f.h2->context()->on_async_event = [&](const ibv_async_event& e) { events.push_back(e); };
  std::vector<uint8_t> rbuf(64 * 4, 0), msg(64, 9);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  for (uint64_t i = 0; i < 4; i++) {
    ibv_sge rs = sge(rbuf.data() + i * 64, 64, rlkey);
    ibv_recv_wr r{};
    r.wr_id = i;
    r.sg_list = &rs;
    r.num_sge = 1;
    REQUIRE(f.h2->post_srq_recv(srq, &r) == 0);
  }
  ibv_sge s = sge(msg.data(), 64, lkey);
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  REQUIRE(f.h1->post_send(a1, &wr) == 0);
  REQUIRE(f.h1->post_send(a2, &wr) == 0);
  REQUIRE(f.h1->post_send(a1, &wr) == 0);
  auto rwc = wait_cqes(f, *f.h2, cq2, 3);
  REQUIRE(rwc.size() == 3);
  std::set<uint32_t> qps;
  for (auto& c : rwc) {
    CHECK(c.status == IBV_WC_SUCCESS);
    qps.insert(c.qp_num);
  }
  CHECK(qps.size() == 2);
  REQUIRE(events.size() == 1);
  CHECK(events[0].event_type == IBV_EVENT_SRQ_LIMIT_REACHED);
}

TEST_CASE("Loopback: two QPs on one NIC talk through it", "[sim][nic][loopback]") {
  TwoNics f;
  auto* cq = f.h1->create_cq(64);
  ibv_qp_cap cap{16, 16, 1, 1, 0};
  auto* qa = f.h1->create_qp(QpType::kRc, cq, cq, cap);
  auto* qb = f.h1->create_qp(QpType::kRc, cq, cq, cap);
  REQUIRE(SimHost::connect(*f.h1, qa, *f.h1, qb) == 0);
  std::vector<uint8_t> src(10000), dst(10000, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = uint8_t(i * 3);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h1->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge s = sge(src.data(), 10000, lkey);
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = uint64_t(dst.data());
  wr.wr.rdma.rkey = rkey;
  REQUIRE(f.h1->post_send(qa, &wr) == 0);
  auto wc = wait_cqes(f, *f.h1, cq, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(dst == src);
  // No RoCE crossed the wire (only the NICs' gratuitous ARPs).
  CHECK(f.n2->counters()[NicCounters::rx_roce_packets] == 0);
  CHECK(f.link->end(0).counters()[PortCounters::tx_packets] == 1);
  CHECK(f.n1->port(1)->counters()[PortCounters::tx_packets] > 0);
}

TEST_CASE("modify_qp accepts exactly the attributes of each transition", "[unit][nic][qp]") {
  using nic::modify_qp_is_ok;
  const int init_rc = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  CHECK(modify_qp_is_ok(IBV_QPS_RESET, IBV_QPS_INIT, QpType::kRc, init_rc));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_RESET, IBV_QPS_INIT, QpType::kRc, init_rc & ~IBV_QP_PORT));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_RESET, IBV_QPS_INIT, QpType::kRc, init_rc | IBV_QP_SQ_PSN));
  CHECK(modify_qp_is_ok(IBV_QPS_RESET, IBV_QPS_INIT, QpType::kUd,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_RESET, IBV_QPS_RTR, QpType::kRc, IBV_QP_STATE));
  const int rtr_rc = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  CHECK(modify_qp_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, QpType::kRc, rtr_rc));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, QpType::kRc, rtr_rc & ~IBV_QP_MIN_RNR_TIMER));
  CHECK(modify_qp_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, QpType::kUc, rtr_rc & ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_INIT, IBV_QPS_RTR, QpType::kUc, rtr_rc));
  const int rts_rc = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                     IBV_QP_MAX_QP_RD_ATOMIC;
  CHECK(modify_qp_is_ok(IBV_QPS_RTR, IBV_QPS_RTS, QpType::kRc, rts_rc));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_RTR, IBV_QPS_RTS, QpType::kRc, rts_rc & ~IBV_QP_TIMEOUT));
  CHECK(modify_qp_is_ok(IBV_QPS_RTS, IBV_QPS_SQD, QpType::kRc, IBV_QP_STATE));
  CHECK(modify_qp_is_ok(IBV_QPS_SQD, IBV_QPS_RTS, QpType::kRc, IBV_QP_STATE));
  CHECK(modify_qp_is_ok(IBV_QPS_SQE, IBV_QPS_RTS, QpType::kUd, IBV_QP_STATE));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_SQE, IBV_QPS_RTS, QpType::kRc, IBV_QP_STATE));
  for (auto s : {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, IBV_QPS_ERR}) {
    CHECK(modify_qp_is_ok(s, IBV_QPS_ERR, QpType::kRc, IBV_QP_STATE));
    CHECK(modify_qp_is_ok(s, IBV_QPS_RESET, QpType::kRc, IBV_QP_STATE));
  }
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_INIT, IBV_QPS_RTS, QpType::kRc, rts_rc));
  CHECK_FALSE(modify_qp_is_ok(IBV_QPS_ERR, IBV_QPS_RTS, QpType::kRc, IBV_QP_STATE));
}

TEST_CASE("modify_qp refuses bad values with EINVAL; a RESET QP sends nothing", "[sim][nic][qp]") {
  TwoNics f;
  auto* cq = f.h1->create_cq(16);
  ibv_qp_cap cap{4, 4, 1, 1, 0};
  auto* q = f.h1->create_qp(QpType::kRc, cq, cq, cap);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 2;  // there is one port
  const int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  CHECK(f.h1->modify(q, a, mask) == EINVAL);
  a.port_num = 1;
  CHECK(f.h1->modify(q, a, mask | IBV_QP_SQ_PSN) == EINVAL);
  CHECK(q->nic_qp->state == IBV_QPS_RESET);
  // Work posted on a RESET QP stays put (no packet, no completion).
  std::vector<uint8_t> buf(16);
  const uint32_t lkey = f.h1->reg_mr(buf.data(), 16, test::kAccessAll);
  ibv_sge s = sge(buf.data(), 16, lkey);
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  REQUIRE(f.h1->post_send(q, &wr) == 0);
  CHECK(wait_cqes(f, *f.h1, cq, 1, ms(1)).empty());
  CHECK(f.n1->counters()[NicCounters::tx_roce_packets] == 0);
  CHECK(f.h1->modify(q, a, mask) == 0);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_4096;  // larger than the 9000-byte link allows? no: fits; use a bad dest QPN
  a.dest_qp_num = 0x1000000;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = 3;
  a.ah_attr.port_num = 1;
  const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  CHECK(f.h1->modify(q, a, rtr) == EINVAL);
  a.dest_qp_num = 5;
  a.ah_attr.grh.sgid_index = 2;  // a RoCE v1 GID
  CHECK(f.h1->modify(q, a, rtr) == EINVAL);
  a.ah_attr.grh.sgid_index = 3;
  a.ah_attr.is_global = 0;  // RoCE needs a GRH
  CHECK(f.h1->modify(q, a, rtr) == EINVAL);
  a.ah_attr.is_global = 1;
  CHECK(f.h1->modify(q, a, rtr) == 0);
  CHECK(q->nic_qp->state == IBV_QPS_RTR);
}
