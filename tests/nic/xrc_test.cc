// XRC (IBA annex A14): XRC domains, XRC SRQs with their own CQs, initiator
// (send-only) and target (receive-only) QPs; requests carry the XRCETH
// naming the SRQ at the target, which must be in the target's domain.
#include <arpa/inet.h>
#include <fcntl.h>

#include "tests/nic/fabric.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::sge;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace xrc_test {

const ibv_qp_cap kIniCap{16, 0, 1, 0, 0};

// h2: an XRC domain, a target QP in it and an SRQ completing to its own
// CQ; h1: an initiator connected to the target.
struct XrcPair {
  SimHost::Cq* send_cq = nullptr;  // h1
  SimHost::Cq* recv_cq = nullptr;  // h2, the SRQ's
  uint32_t xrcd = 0;
  SimHost::Srq* srq = nullptr;
  SimHost::Qp* ini = nullptr;
  SimHost::Qp* tgt = nullptr;
};

XrcPair make_xrc_pair(TwoNics& f) {
  XrcPair p;
  p.send_cq = f.h1->create_cq(64);
  p.recv_cq = f.h2->create_cq(64);
  p.xrcd = f.h2->open_xrcd();
  REQUIRE(p.xrcd != 0);
  p.srq = f.h2->create_xrc_srq(p.xrcd, p.recv_cq, 16);
  REQUIRE(p.srq != nullptr);
  p.ini = f.h1->create_xrc_send_qp(p.send_cq, kIniCap);
  p.tgt = f.h2->create_xrc_recv_qp(p.xrcd);
  REQUIRE(p.ini != nullptr);
  REQUIRE(p.tgt != nullptr);
  REQUIRE(SimHost::connect(*f.h1, p.ini, *f.h2, p.tgt) == 0);
  return p;
}

void post_srq_buffers(SimHost& h, SimHost::Srq* srq, std::vector<uint8_t>& buf, uint32_t lkey, uint32_t n,
                      uint32_t each) {
  for (uint32_t i = 0; i < n; i++) {
    ibv_sge s = sge(buf.data() + size_t(i) * each, each, lkey);
    ibv_recv_wr r{};
    r.wr_id = 100 + i;
    r.sg_list = &s;
    r.num_sge = 1;
    REQUIRE(h.post_srq_recv(srq, &r) == 0);
  }
}

ibv_send_wr xrc_send(ibv_sge* s, uint32_t srqn, uint64_t id, ibv_wr_opcode op = IBV_WR_SEND) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = s;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = srqn;
  return wr;
}

}  // namespace xrc_test

using namespace xrc_test;

TEST_CASE("XRC: a SEND reaches the SRQ its XRCETH names; the completion is on that SRQ's CQ with the target's QPN",
          "[sim][nic][xrc]") {
  TwoNics f;
  XrcPair p = make_xrc_pair(f);
  // A second SRQ in the same domain, with a CQ of its own: the target
  // delivers to whichever each message names.
  auto* cq_b = f.h2->create_cq(64);
  auto* srq_b = f.h2->create_xrc_srq(p.xrcd, cq_b, 16);
  REQUIRE(srq_b != nullptr);
  CHECK(srq_b->srqn != p.srq->srqn);
  CHECK(srq_b->srqn <= 0xffffff);
  std::vector<uint8_t> rbuf(4 * 4096, 0), msg(3000);
  for (size_t i = 0; i < msg.size(); i++) msg[i] = uint8_t(i * 13 + 1);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  post_srq_buffers(*f.h2, p.srq, rbuf, rlkey, 2, 4096);
  std::vector<uint8_t> rbuf_b(4096, 0);
  const uint32_t rlkey_b = f.h2->reg_mr(rbuf_b.data(), rbuf_b.size(), test::kAccessAll);
  post_srq_buffers(*f.h2, srq_b, rbuf_b, rlkey_b, 1, 4096);

  ibv_sge s = sge(msg.data(), uint32_t(msg.size()), lkey);  // three packets at MTU 1024
  ibv_send_wr w1 = xrc_send(&s, srq_b->srqn, 1);
  ibv_send_wr w2 = xrc_send(&s, p.srq->srqn, 2, IBV_WR_SEND_WITH_IMM);
  w2.imm_data = htonl(0xc0ffee);
  REQUIRE(f.h1->post_send(p.ini, &w1) == 0);
  REQUIRE(f.h1->post_send(p.ini, &w2) == 0);
  auto swc = wait_cqes(f, *f.h1, p.send_cq, 2);
  REQUIRE(swc.size() == 2);
  CHECK(swc[0].status == IBV_WC_SUCCESS);
  CHECK(swc[1].status == IBV_WC_SUCCESS);
  CHECK(swc[0].qp_num == p.ini->qpn);

  auto wc_b = wait_cqes(f, *f.h2, cq_b, 1);
  REQUIRE(wc_b.size() == 1);
  CHECK(wc_b[0].status == IBV_WC_SUCCESS);
  CHECK(wc_b[0].opcode == IBV_WC_RECV);
  CHECK(wc_b[0].byte_len == 3000);
  CHECK(wc_b[0].qp_num == p.tgt->qpn);  // as mlx5: the target QP (xsrq_pingpong's find_qp)
  CHECK(wc_b[0].wr_id == 100);
  CHECK(std::equal(msg.begin(), msg.end(), rbuf_b.begin()));
  auto wc_a = wait_cqes(f, *f.h2, p.recv_cq, 1);
  REQUIRE(wc_a.size() == 1);
  CHECK(wc_a[0].status == IBV_WC_SUCCESS);
  CHECK(wc_a[0].qp_num == p.tgt->qpn);
  CHECK((wc_a[0].wc_flags & IBV_WC_WITH_IMM));
  CHECK(ntohl(wc_a[0].imm_data) == 0xc0ffee);
  CHECK(std::equal(msg.begin(), msg.end(), rbuf.begin()));
  CHECK(f.n2->counters()[NicCounters::resp_remote_access_errors] == 0);
  // The transport is XRC on the wire both ways: the target's ACKs reached
  // the initiator (completions above) and nothing was taken for another QP.
  CHECK(f.n1->counters()[NicCounters::rx_not_for_us] == 0);
  CHECK(f.n2->counters()[NicCounters::rx_not_for_us] == 0);
}

TEST_CASE("XRC: WRITE, READ and atomics through a target are checked against the named SRQ's PD", "[sim][nic][xrc]") {
  TwoNics f;
  XrcPair p = make_xrc_pair(f);
  std::vector<uint8_t> remote(8192, 0), local(8192);
  for (size_t i = 0; i < local.size(); i++) local[i] = uint8_t(i * 5 + 3);
  const uint32_t rkey = f.h2->reg_mr(remote.data(), remote.size(), test::kAccessAll);
  const uint32_t lkey = f.h1->reg_mr(local.data(), local.size(), test::kAccessAll);
  ibv_sge s = sge(local.data(), 5000, lkey);
  ibv_send_wr w = test::rdma_wr(&s, reinterpret_cast<uint64_t>(remote.data()), rkey, 1);
  w.qp_type.xrc.remote_srqn = p.srq->srqn;
  REQUIRE(f.h1->post_send(p.ini, &w) == 0);
  auto wc = wait_cqes(f, *f.h1, p.send_cq, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(std::equal(local.begin(), local.begin() + 5000, remote.begin()));
  // READ back into the second half.
  ibv_sge rs = sge(local.data() + 4096, 4000, lkey);
  std::fill(remote.begin() + 100, remote.begin() + 4100, uint8_t(0x77));
  ibv_send_wr r = test::rdma_wr(&rs, reinterpret_cast<uint64_t>(remote.data() + 100), rkey, 2, IBV_WR_RDMA_READ);
  r.qp_type.xrc.remote_srqn = p.srq->srqn;
  REQUIRE(f.h1->post_send(p.ini, &r) == 0);
  wc = wait_cqes(f, *f.h1, p.send_cq, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(wc[0].opcode == IBV_WC_RDMA_READ);
  CHECK(std::all_of(local.begin() + 4096, local.begin() + 8096, [](uint8_t b) { return b == 0x77; }));
  // FETCH_ADD on 8 aligned bytes.
  uint64_t counter = 40;
  const uint32_t ckey = f.h2->reg_mr(&counter, 8, test::kAccessAll);
  uint64_t orig = 0;
  const uint32_t okey = f.h1->reg_mr(&orig, 8, test::kAccessAll);
  ibv_sge as = sge(&orig, 8, okey);
  ibv_send_wr a{};
  a.wr_id = 3;
  a.sg_list = &as;
  a.num_sge = 1;
  a.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  a.send_flags = IBV_SEND_SIGNALED;
  a.wr.atomic.remote_addr = reinterpret_cast<uint64_t>(&counter);
  a.wr.atomic.rkey = ckey;
  a.wr.atomic.compare_add = 2;
  a.qp_type.xrc.remote_srqn = p.srq->srqn;
  REQUIRE(f.h1->post_send(p.ini, &a) == 0);
  wc = wait_cqes(f, *f.h1, p.send_cq, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(orig == 40);
  CHECK(counter == 42);
}

TEST_CASE("XRC: an empty SRQ gets an RNR NAK, and the SEND lands once a receive is posted", "[sim][nic][xrc]") {
  TwoNics f;
  XrcPair p = make_xrc_pair(f);
  std::vector<uint8_t> rbuf(256, 0), msg(128, 0x42);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  ibv_sge s = sge(msg.data(), 128, lkey);
  ibv_send_wr w = xrc_send(&s, p.srq->srqn, 1);
  REQUIRE(f.h1->post_send(p.ini, &w) == 0);
  f.run([] { return false; }, ms(1));
  CHECK(f.n2->counters()[NicCounters::rnr_nak_sent] >= 1);
  post_srq_buffers(*f.h2, p.srq, rbuf, rlkey, 1, 256);
  auto wc = wait_cqes(f, *f.h2, p.recv_cq, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(wc[0].byte_len == 128);
  CHECK(rbuf[127] == 0x42);
  auto swc = wait_cqes(f, *f.h1, p.send_cq, 1);
  REQUIRE(swc.size() == 1);
  CHECK(swc[0].status == IBV_WC_SUCCESS);
}

TEST_CASE("XRC bad flows: an XRCETH naming no SRQ, another domain's SRQ or none at all is a remote access error",
          "[sim][nic][xrc]") {
  enum class Bad { kNoSuchSrq, kOtherDomain, kUnset };
  const Bad bad = GENERATE(Bad::kNoSuchSrq, Bad::kOtherDomain, Bad::kUnset);
  TwoNics f;
  XrcPair p = make_xrc_pair(f);
  // Another domain on the same NIC, with an SRQ ready to take the SEND.
  auto* other_cq = f.h2->create_cq(16);
  const uint32_t other_xrcd = f.h2->open_xrcd();
  REQUIRE(other_xrcd != 0);
  auto* other_srq = f.h2->create_xrc_srq(other_xrcd, other_cq, 4);
  REQUIRE(other_srq != nullptr);
  std::vector<uint8_t> rbuf(256, 0), msg(64, 0x11);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  post_srq_buffers(*f.h2, other_srq, rbuf, rlkey, 1, 128);
  post_srq_buffers(*f.h2, p.srq, rbuf, rlkey, 1, 128);
  std::vector<ibv_async_event> events;
  f.h2->context()->on_async_event = [&](const ibv_async_event& e) { events.push_back(e); };
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  ibv_sge s = sge(msg.data(), 64, lkey);
  uint32_t srqn = 0;
  switch (bad) {
    case Bad::kNoSuchSrq: srqn = 0x777777; break;
    case Bad::kOtherDomain: srqn = other_srq->srqn; break;
    case Bad::kUnset: srqn = 0; break;  // wr.qp_type.xrc.remote_srqn never set: no SRQ has number 0
  }
  ibv_send_wr w = xrc_send(&s, srqn, 1);
  REQUIRE(f.h1->post_send(p.ini, &w) == 0);
  auto swc = wait_cqes(f, *f.h1, p.send_cq, 1);
  REQUIRE(swc.size() == 1);
  CHECK(swc[0].status == IBV_WC_REM_ACCESS_ERR);
  CHECK(f.n2->counters()[NicCounters::resp_remote_access_errors] == 1);
  CHECK(p.tgt->nic_qp->state == IBV_QPS_ERR);
  REQUIRE(events.size() == 1);
  CHECK(events[0].event_type == IBV_EVENT_QP_ACCESS_ERR);
  // Nothing landed anywhere, no completion on either SRQ's CQ.
  ibv_wc wc[4];
  CHECK(f.h2->poll(other_cq, 4, wc) == 0);
  CHECK(f.h2->poll(p.recv_cq, 4, wc) == 0);
  CHECK(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t b) { return b == 0; }));
}

TEST_CASE("XRC control path: what each object needs, EBUSY while a domain is in use, shared domains by file",
          "[unit][nic][xrc]") {
  TwoNics f;
  SimHost& h = *f.h2;
  Nic& n = *f.n2;
  HostContext* ctx = h.context();
  auto* cq = h.create_cq(16);
  int err = 0;
  // A target needs a domain.
  CHECK(h.create_xrc_recv_qp(0, &err) == nullptr);
  CHECK(err == EINVAL);
  const uint32_t xrcd = h.open_xrcd();
  REQUIRE(xrcd != 0);
  // An XRC SRQ needs a domain and a CQ of its own context.
  CHECK(h.create_xrc_srq(xrcd, nullptr, 4, &err) == nullptr);
  CHECK(err == EINVAL);
  CHECK(h.create_xrc_srq(xrcd + 1, cq, 4, &err) == nullptr);
  CHECK(err == EINVAL);
  // An initiator needs a PD and a send CQ, and has no receive queue.
  Nic::QpInit ini;
  ini.type = QpType::kXrcSend;
  ini.cap = kIniCap;
  std::vector<uint8_t> ring(ring_bytes(16, send_wqe_stride(1, 0)) + 64);
  ini.sq_ring = ring.data();
  uint32_t qpn = 0;
  CHECK(n.create_qp(ctx, ini, qpn, h.now()) == EINVAL);  // no PD
  ini.pd = h.pd();
  CHECK(n.create_qp(ctx, ini, qpn, h.now()) == EINVAL);  // no send CQ
  ini.send_cq = cq->handle;
  ini.rq_ring = ring.data();
  CHECK(n.create_qp(ctx, ini, qpn, h.now()) == EINVAL);  // a receive queue
  ini.rq_ring = nullptr;
  ini.xrcd = xrcd;
  CHECK(n.create_qp(ctx, ini, qpn, h.now()) == EINVAL);  // a domain is a target's
  ini.xrcd = 0;
  REQUIRE(n.create_qp(ctx, ini, qpn, h.now()) == 0);
  CHECK(n.find_qp(qpn)->type == QpType::kXrcSend);
  CHECK(n.destroy_qp(ctx, qpn) == 0);
  // An ordinary SRQ has no number; an XRC SRQ takes no RC QP.
  auto* plain = h.create_srq(4);
  REQUIRE(plain != nullptr);
  uint32_t srqn = 0;
  CHECK(n.srq_number(ctx, plain->handle, srqn) == EINVAL);
  auto* srq = h.create_xrc_srq(xrcd, cq, 4);
  REQUIRE(srq != nullptr);
  CHECK(h.create_qp(QpType::kRc, cq, cq, ibv_qp_cap{4, 4, 1, 1, 0}, false, srq, &err) == nullptr);
  CHECK(err == EINVAL);
  // In use: by its SRQ, then by a target; its CQ by the SRQ.
  CHECK(h.close_xrcd(xrcd) == EBUSY);
  CHECK(n.destroy_cq(ctx, cq->handle) == EBUSY);
  auto* tgt = h.create_xrc_recv_qp(xrcd);
  REQUIRE(tgt != nullptr);
  // A target delivering to an SRQ does not hold it.
  CHECK(h.destroy_srq(srq) == 0);
  CHECK(h.close_xrcd(xrcd) == EBUSY);
  CHECK(h.destroy_qp(tgt) == 0);
  CHECK(h.close_xrcd(xrcd) == 0);
  CHECK(h.close_xrcd(xrcd) == EINVAL);

  // Shared through a file (device, inode): none without O_CREAT (EAGAIN),
  // one with it, O_EXCL refused once it exists, every other open the same.
  uint32_t a = 0, b = 0, c = 0;
  CHECK(n.open_xrcd(ctx, 8, 1234, 0, a) == EAGAIN);
  REQUIRE(n.open_xrcd(ctx, 8, 1234, O_CREAT, a) == 0);
  CHECK(n.open_xrcd(ctx, 8, 1234, O_CREAT | O_EXCL, b) == EINVAL);
  SimHost other(*f.engine, n);  // another application on the same NIC
  REQUIRE(n.open_xrcd(other.context(), 8, 1234, 0, b) == 0);
  REQUIRE(n.open_xrcd(ctx, 8, 9999, O_CREAT, c) == 0);  // another file, another domain
  CHECK(n.close_xrcd(other.context(), a) == EINVAL);    // each open is its opener's
  CHECK(n.close_xrcd(ctx, a) == 0);
  CHECK(n.close_xrcd(ctx, c) == 0);
  // The domain lives on in the other application's open.
  uint32_t again = 0;
  CHECK(n.open_xrcd(ctx, 8, 1234, O_CREAT | O_EXCL, again) == EINVAL);
  CHECK(n.close_xrcd(other.context(), b) == 0);
  CHECK(n.open_xrcd(ctx, 8, 1234, 0, again) == EAGAIN);
}

TEST_CASE("XRC: a target of one application delivers to the SRQ of another that shares the domain by file",
          "[sim][nic][xrc]") {
  TwoNics f;
  SimHost other(*f.engine, *f.n2);
  // h2's application holds the target; `other` the SRQ, its CQ and memory.
  uint32_t x_tgt = 0, x_srq = 0;
  REQUIRE(f.n2->open_xrcd(f.h2->context(), 3, 77, O_CREAT, x_tgt) == 0);
  REQUIRE(f.n2->open_xrcd(other.context(), 3, 77, 0, x_srq) == 0);
  auto* cq = other.create_cq(16);
  auto* srq = other.create_xrc_srq(x_srq, cq, 4);
  REQUIRE(srq != nullptr);
  std::vector<uint8_t> rbuf(512, 0), msg(300);
  for (size_t i = 0; i < msg.size(); i++) msg[i] = uint8_t(i ^ 0x5a);
  const uint32_t rlkey = other.reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  post_srq_buffers(other, srq, rbuf, rlkey, 1, 512);
  auto* send_cq = f.h1->create_cq(16);
  auto* ini = f.h1->create_xrc_send_qp(send_cq, kIniCap);
  auto* tgt = f.h2->create_xrc_recv_qp(x_tgt);
  REQUIRE(SimHost::connect(*f.h1, ini, *f.h2, tgt) == 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  ibv_sge s = sge(msg.data(), 300, lkey);
  ibv_send_wr w = xrc_send(&s, srq->srqn, 9);
  REQUIRE(f.h1->post_send(ini, &w) == 0);
  auto swc = wait_cqes(f, *f.h1, send_cq, 1);
  REQUIRE(swc.size() == 1);
  CHECK(swc[0].status == IBV_WC_SUCCESS);
  auto rwc = wait_cqes(f, other, cq, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].status == IBV_WC_SUCCESS);
  CHECK(rwc[0].qp_num == tgt->qpn);
  CHECK(std::equal(msg.begin(), msg.end(), rbuf.begin()));
  // The SRQ's application closes its domain only once its SRQ is gone.
  CHECK(f.n2->close_xrcd(other.context(), x_srq) == EBUSY);
  CHECK(other.destroy_srq(srq) == 0);
  CHECK(f.n2->close_xrcd(other.context(), x_srq) == 0);
}

TEST_CASE("XRC: a READ's responses are checked against the PD of the SRQ it named, whatever the target's next message names",
          "[sim][nic][xrc]") {
  TwoNics f;
  XrcPair p = make_xrc_pair(f);  // p.srq in h2's PD
  // A second SRQ in the domain, in a PD of its own, with an MR only there.
  uint32_t pd_b = 0;
  REQUIRE(f.n2->alloc_pd(f.h2->context(), pd_b) == 0);
  auto* cq_b = f.h2->create_cq(16);
  auto* srq_b = f.h2->create_xrc_srq(p.xrcd, cq_b, 4, nullptr, pd_b);
  REQUIRE(srq_b != nullptr);
  std::vector<uint8_t> remote(16384);
  for (size_t i = 0; i < remote.size(); i++) remote[i] = uint8_t(i * 11 + 7);
  uint32_t rkey_b = 0;
  REQUIRE(f.n2->reg_mr(f.h2->context(), pd_b, reinterpret_cast<uint64_t>(remote.data()), remote.size(),
                       test::kAccessAll, rkey_b) == 0);
  std::vector<uint8_t> rbuf(256, 0);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  post_srq_buffers(*f.h2, p.srq, rbuf, rlkey, 1, 256);
  std::vector<uint8_t> local(16384 + 64, 0);
  const uint32_t lkey = f.h1->reg_mr(local.data(), local.size(), test::kAccessAll);
  // A READ of 16 packets through SRQ B's PD, then at once a SEND to SRQ A:
  // the target takes SRQ A (and its PD) for the SEND while the READ's
  // responses are still going out.
  ibv_sge rs = sge(local.data(), 16384, lkey);
  ibv_send_wr read = test::rdma_wr(&rs, reinterpret_cast<uint64_t>(remote.data()), rkey_b, 1, IBV_WR_RDMA_READ);
  read.qp_type.xrc.remote_srqn = srq_b->srqn;
  ibv_sge ss = sge(local.data() + 16384, 64, lkey);
  ibv_send_wr send = xrc_send(&ss, p.srq->srqn, 2);
  read.next = &send;
  REQUIRE(f.h1->post_send(p.ini, &read) == 0);
  auto wc = wait_cqes(f, *f.h1, p.send_cq, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(wc[1].status == IBV_WC_SUCCESS);
  CHECK(std::equal(remote.begin(), remote.end(), local.begin()));
  CHECK(f.n2->counters()[NicCounters::resp_remote_access_errors] == 0);
  auto rwc = wait_cqes(f, *f.h2, p.recv_cq, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].status == IBV_WC_SUCCESS);
}

TEST_CASE("XRC under 3% loss: SENDs, WRITEs and READs through a target arrive whole, in order, with either recovery",
          "[sim][nic][xrc]") {
  const auto mode = GENERATE(LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat);
  INFO((mode == LossRecovery::kGoBackN ? "go-back-N" : "selective repeat"));
  const uint64_t seed = GENERATE(31, 32, 33, 34);
  TwoNics f(seed, mode);
  FaultConfig fc;
  fc.loss = 0.03;
  f.link->set_faults(0, fc);
  f.link->set_faults(1, fc);
  XrcPair p = make_xrc_pair(f);
  constexpr uint32_t kMsgs = 8, kLen = 5000;
  std::vector<uint8_t> src(kMsgs * kLen), rbuf(kMsgs * 8192, 0), remote(kMsgs * kLen, 0), back(kMsgs * kLen, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = uint8_t(i * 29 + i / 251);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t bkey = f.h1->reg_mr(back.data(), back.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(remote.data(), remote.size(), test::kAccessAll);
  post_srq_buffers(*f.h2, p.srq, rbuf, rlkey, kMsgs, 8192);
  std::vector<ibv_sge> sges(3 * kMsgs);
  std::vector<ibv_send_wr> wrs(3 * kMsgs);
  for (uint32_t i = 0; i < kMsgs; i++) {
    sges[3 * i] = sge(src.data() + i * kLen, kLen, lkey);
    wrs[3 * i] = xrc_send(&sges[3 * i], p.srq->srqn, 3 * i);
    sges[3 * i + 1] = sge(src.data() + i * kLen, kLen, lkey);
    wrs[3 * i + 1] = test::rdma_wr(&sges[3 * i + 1], reinterpret_cast<uint64_t>(remote.data() + i * kLen), rkey, 3 * i + 1);
    wrs[3 * i + 1].qp_type.xrc.remote_srqn = p.srq->srqn;
    sges[3 * i + 2] = sge(back.data() + i * kLen, kLen, bkey);
    wrs[3 * i + 2] = test::rdma_wr(&sges[3 * i + 2], reinterpret_cast<uint64_t>(remote.data() + i * kLen), rkey,
                                   3 * i + 2, IBV_WR_RDMA_READ);
    wrs[3 * i + 2].qp_type.xrc.remote_srqn = p.srq->srqn;
  }
  // In batches the send queue (16) holds.
  size_t done = 0;
  for (uint32_t b = 0; b < wrs.size(); b += 12) {
    const uint32_t n = std::min<uint32_t>(12, uint32_t(wrs.size()) - b);
    for (uint32_t i = b; i + 1 < b + n; i++) wrs[i].next = &wrs[i + 1];
    wrs[b + n - 1].next = nullptr;
    REQUIRE(f.h1->post_send(p.ini, &wrs[b]) == 0);
    const auto wc = wait_cqes(f, *f.h1, p.send_cq, n, ms(2000));
    REQUIRE(wc.size() == n);
    for (const auto& c : wc) {
      INFO("wr " << c.wr_id);
      CHECK(c.status == IBV_WC_SUCCESS);
      CHECK(c.wr_id == done++);
    }
  }
  const auto rwc = wait_cqes(f, *f.h2, p.recv_cq, kMsgs);
  REQUIRE(rwc.size() == kMsgs);
  for (uint32_t i = 0; i < kMsgs; i++) {
    CHECK(rwc[i].status == IBV_WC_SUCCESS);
    CHECK(rwc[i].byte_len == kLen);
    CHECK(rwc[i].wr_id == 100 + i);
    CHECK(std::equal(src.begin() + i * kLen, src.begin() + (i + 1) * kLen, rbuf.begin() + i * 8192));
  }
  CHECK(remote == src);
  CHECK(back == src);
  CHECK(f.n1->counters()[NicCounters::retransmitted_packets] + f.n1->counters()[NicCounters::local_ack_timeout_err] +
            f.n2->counters()[NicCounters::out_of_sequence] >
        0);  // the loss was felt
}

TEST_CASE("XRC: ibv_open_qp -- a target held by two applications delivers until the last lets go", "[sim][nic][xrc]") {
  TwoNics f;
  uint32_t x_a = 0, x_b = 0, x_other = 0;
  auto b = std::make_unique<SimHost>(*f.engine, *f.n2);  // a second application on h2's NIC
  REQUIRE(f.n2->open_xrcd(f.h2->context(), 5, 55, O_CREAT, x_a) == 0);
  REQUIRE(f.n2->open_xrcd(b->context(), 5, 55, 0, x_b) == 0);
  REQUIRE(f.n2->open_xrcd(b->context(), 0, 0, 0, x_other) == 0);  // a domain of its own
  auto* rcq = f.h2->create_cq(16);
  auto* srq = f.h2->create_xrc_srq(x_a, rcq, 8);
  REQUIRE(srq != nullptr);
  auto* scq = f.h1->create_cq(16);
  auto* ini = f.h1->create_xrc_send_qp(scq, kIniCap);
  auto* tgt = f.h2->create_xrc_recv_qp(x_a);
  REQUIRE(SimHost::connect(*f.h1, ini, *f.h2, tgt) == 0);
  const uint32_t tgt_qpn = tgt->qpn;
  // Only a target, only through its domain.
  int err = 0;
  CHECK(b->open_xrc_recv_qp(x_other, tgt_qpn, &err) == nullptr);
  CHECK(err == EINVAL);
  auto* rc = f.h2->create_qp(QpType::kRc, rcq, rcq, ibv_qp_cap{4, 4, 1, 1, 0});
  REQUIRE(rc != nullptr);
  CHECK(b->open_xrc_recv_qp(x_b, rc->qpn, &err) == nullptr);
  CHECK(err == EINVAL);
  CHECK(b->open_xrc_recv_qp(x_b, 0xabcdef, &err) == nullptr);
  CHECK(err == EINVAL);
  auto* opened = b->open_xrc_recv_qp(x_b, tgt_qpn);
  REQUIRE(opened != nullptr);
  const uint32_t qps_before = f.h2->context()->usage->qps;
  // The creator lets go: the target stays, in b's name, and goes on delivering.
  CHECK(f.h2->destroy_qp(tgt) == 0);
  CHECK(f.h2->context()->usage->qps == qps_before - 1);
  REQUIRE(f.n2->find_qp(tgt_qpn) != nullptr);
  CHECK(f.n2->find_qp(tgt_qpn)->ctx == b->context());
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  CHECK(f.n2->query_qp(f.h2->context(), tgt_qpn, attr, init) == EINVAL);  // no longer h2's
  REQUIRE(f.n2->query_qp(b->context(), tgt_qpn, attr, init) == 0);
  CHECK(attr.qp_state == IBV_QPS_RTS);
  CHECK(init.qp_type == IBV_QPT_XRC_RECV);
  std::vector<uint8_t> rbuf(256, 0), msg(200, 0x3d);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  post_srq_buffers(*f.h2, srq, rbuf, rlkey, 1, 256);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  ibv_sge s = sge(msg.data(), 200, lkey);
  ibv_send_wr w = xrc_send(&s, srq->srqn, 1);
  REQUIRE(f.h1->post_send(ini, &w) == 0);
  auto rwc = wait_cqes(f, *f.h2, rcq, 1);
  REQUIRE(rwc.size() == 1);
  CHECK(rwc[0].status == IBV_WC_SUCCESS);
  CHECK(rwc[0].qp_num == tgt_qpn);
  CHECK(rbuf[199] == 0x3d);
  // b's open of the domain is held by the target; b's exit lets go of both.
  CHECK(f.n2->close_xrcd(b->context(), x_b) == EBUSY);
  b.reset();
  CHECK(f.n2->find_qp(tgt_qpn) == nullptr);
  CHECK(f.n2->close_xrcd(f.h2->context(), x_a) == EBUSY);  // its SRQ
  CHECK(f.h2->destroy_srq(srq) == 0);
  CHECK(f.n2->close_xrcd(f.h2->context(), x_a) == 0);
}
