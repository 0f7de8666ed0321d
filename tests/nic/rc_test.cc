#include <arpa/inet.h>

#include <numeric>

#include "tests/nic/fabric.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::rdma_wr;
using rocemu::test::sge;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace {


struct RcPair {
  SimHost::Cq *cq1, *cq2;
  SimHost::Qp *q1, *q2;
};

RcPair make_pair(TwoNics& f, SimHost::ConnectOpts o = {}, uint32_t depth = 256) {
  RcPair p{};
  p.cq1 = f.h1->create_cq(4096);
  p.cq2 = f.h2->create_cq(4096);
  ibv_qp_cap cap{depth, depth, 4, 4, 64};
  p.q1 = f.h1->create_qp(QpType::kRc, p.cq1, p.cq1, cap);
  p.q2 = f.h2->create_qp(QpType::kRc, p.cq2, p.cq2, cap);
  REQUIRE(p.q1 != nullptr);
  REQUIRE(p.q2 != nullptr);
  REQUIRE(SimHost::connect(*f.h1, p.q1, *f.h2, p.q2, o) == 0);
  return p;
}

std::vector<uint8_t> rc_pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (auto& b : v) {
    x = x * 1103515245u + 12345u;
    b = uint8_t(x >> 16);
  }
  return v;
}

}  // namespace

TEST_CASE("RC RDMA WRITE moves every byte and completes once", "[sim][nic][rc]") {
  TwoNics f;
  auto p = make_pair(f);
  auto src = rc_pattern(100000, 1);
  std::vector<uint8_t> dst(100000, 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge s = sge(src.data(), uint32_t(src.size()), lkey);
  ibv_send_wr wr{};
  wr.wr_id = 0xabc;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data());
  wr.wr.rdma.rkey = rkey;
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto wcs = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(wcs.size() == 1);
  CHECK(wcs[0].status == IBV_WC_SUCCESS);
  CHECK(wcs[0].opcode == IBV_WC_RDMA_WRITE);
  CHECK(wcs[0].wr_id == 0xabc);
  CHECK(dst == src);
  CHECK(f.n2->counters()[NicCounters::rx_write_requests] == 1);
  // 100000 bytes at MTU 1024 = 98 packets, none resent.
  CHECK(f.n1->counters()[NicCounters::tx_roce_packets] == 98);
  CHECK(f.n1->counters()[NicCounters::retransmitted_packets] == 0);
}

TEST_CASE("RC SEND with immediate, READ and atomics", "[sim][nic][rc]") {
  TwoNics f;
  auto p = make_pair(f);
  auto msg = rc_pattern(5000, 2);
  std::vector<uint8_t> rbuf(8192, 0);
  const uint32_t lkey = f.h1->reg_mr(msg.data(), msg.size(), test::kAccessAll);
  const uint32_t rlkey = f.h2->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  ibv_sge rs = sge(rbuf.data(), uint32_t(rbuf.size()), rlkey);
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  REQUIRE(f.h2->post_recv(p.q2, &rwr) == 0);
  ibv_sge s = sge(msg.data(), uint32_t(msg.size()), lkey);
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(0xdeadbeef);
  wr.send_flags = IBV_SEND_SIGNALED;
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto rw = wait_cqes(f, *f.h2, p.cq2, 1);
  REQUIRE(rw.size() == 1);
  CHECK(rw[0].status == IBV_WC_SUCCESS);
  CHECK(rw[0].opcode == IBV_WC_RECV);
  CHECK(rw[0].wr_id == 77);
  CHECK(rw[0].byte_len == 5000);
  CHECK((rw[0].wc_flags & IBV_WC_WITH_IMM));
  CHECK(ntohl(rw[0].imm_data) == 0xdeadbeef);
  CHECK(std::equal(msg.begin(), msg.end(), rbuf.begin()));
  CHECK(wait_cqes(f, *f.h1, p.cq1, 1).size() == 1);

  // READ back 3000 bytes of what h2 received, into a fresh buffer.
  std::vector<uint8_t> back(3000, 0);
  const uint32_t bkey = f.h1->reg_mr(back.data(), back.size(), test::kAccessAll);
  ibv_sge bs = sge(back.data(), 3000, bkey);
  ibv_send_wr rd{};
  rd.wr_id = 2;
  rd.sg_list = &bs;
  rd.num_sge = 1;
  rd.opcode = IBV_WR_RDMA_READ;
  rd.send_flags = IBV_SEND_SIGNALED;
  rd.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(rbuf.data()) + 100;
  rd.wr.rdma.rkey = rlkey;
  REQUIRE(f.h1->post_send(p.q1, &rd) == 0);
  auto rdw = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(rdw.size() == 1);
  CHECK(rdw[0].status == IBV_WC_SUCCESS);
  CHECK(rdw[0].opcode == IBV_WC_RDMA_READ);
  CHECK(rdw[0].byte_len == 3000);
  CHECK(std::equal(back.begin(), back.end(), msg.begin() + 100));

  // FETCH_ADD then CMP_SWAP on a counter in h2's memory.
  alignas(8) uint64_t counter[1] = {1000};
  alignas(8) uint64_t result[2] = {0, 0};
  const uint32_t ckey = f.h2->reg_mr(counter, sizeof counter, test::kAccessAll);
  const uint32_t reskey = f.h1->reg_mr(result, sizeof result, test::kAccessAll);
  ibv_sge as0 = sge(&result[0], 8, reskey), as1 = sge(&result[1], 8, reskey);
  ibv_send_wr fa{}, cs{};
  fa.wr_id = 3;
  fa.sg_list = &as0;
  fa.num_sge = 1;
  fa.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  fa.send_flags = IBV_SEND_SIGNALED;
  fa.wr.atomic.remote_addr = reinterpret_cast<uint64_t>(counter);
  fa.wr.atomic.rkey = ckey;
  fa.wr.atomic.compare_add = 5;
  cs = fa;
  cs.wr_id = 4;
  cs.sg_list = &as1;
  cs.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  cs.wr.atomic.compare_add = 1005;
  cs.wr.atomic.swap = 42;
  fa.next = &cs;
  REQUIRE(f.h1->post_send(p.q1, &fa) == 0);
  auto aw = wait_cqes(f, *f.h1, p.cq1, 2);
  REQUIRE(aw.size() == 2);
  CHECK(aw[0].wr_id == 3);
  CHECK(aw[0].opcode == IBV_WC_FETCH_ADD);
  CHECK(aw[1].wr_id == 4);
  CHECK(aw[1].opcode == IBV_WC_COMP_SWAP);
  CHECK(result[0] == 1000);
  CHECK(result[1] == 1005);
  CHECK(counter[0] == 42);
  CHECK(f.n2->counters()[NicCounters::rx_atomic_requests] == 2);
  CHECK(f.n2->counters()[NicCounters::rx_read_requests] == 1);
}

TEST_CASE("Batched DMA: payload read ahead into the frames, written before the completion", "[sim][nic][rc]") {
  // The NIC reaches the hosts as it reaches other processes (each access a
  // system call): one read per 512 KiB fills 128 frames (of eight
  // messages), and deferred writes land before the ACK that lets the
  // requester complete.
  TwoNics f(1, nic::LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  SimHost::ConnectOpts o;
  o.mtu = IBV_MTU_4096;
  auto p = make_pair(f, o);
  constexpr uint32_t kMsg = 65536, kN = 12;
  auto src = rc_pattern(kMsg * kN, 9);
  std::vector<uint8_t> dst(src.size(), 0);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  auto& mem1 = dynamic_cast<DeferringLocalMemory&>(f.h1->memory());
  const uint64_t calls0 = mem1.calls();
  for (uint32_t i = 0; i < kN; i++) {
    ibv_sge s = sge(src.data() + i * kMsg, kMsg, lkey);
    ibv_send_wr wr = rdma_wr(&s, reinterpret_cast<uint64_t>(dst.data() + i * kMsg), rkey, i);
    REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  }
  // Each completion finds its message in place.
  size_t done = 0;
  f.run([&] {
    ibv_wc wc[4];
    int got;
    while ((got = f.h1->poll(p.cq1, 4, wc)) > 0) {
      for (int k = 0; k < got; k++) {
        const uint64_t i = wc[k].wr_id;
        CHECK(wc[k].status == IBV_WC_SUCCESS);
        CHECK(std::equal(src.begin() + long(i * kMsg), src.begin() + long((i + 1) * kMsg), dst.begin() + long(i * kMsg)));
      }
      done += size_t(got);
    }
    return done == kN;
  });
  REQUIRE(done == kN);
  CHECK(dst == src);
  CHECK(f.n1->counters()[NicCounters::tx_roce_packets] == kN * 16);
  CHECK(mem1.calls() - calls0 == 2);  // one read per eight messages, not per packet
}

TEST_CASE("Batched DMA: READ responses read ahead across the READs owed", "[sim][nic][rc]") {
  TwoNics f(1, nic::LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  SimHost::ConnectOpts o;
  o.mtu = IBV_MTU_4096;
  auto p = make_pair(f, o);
  constexpr uint32_t kMsg = 65536, kN = 12;
  auto remote = rc_pattern(kMsg * kN, 31);
  std::vector<uint8_t> local(remote.size(), 0);
  const uint32_t lkey = f.h1->reg_mr(local.data(), local.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(remote.data(), remote.size(), test::kAccessAll);
  auto& mem2 = dynamic_cast<DeferringLocalMemory&>(f.h2->memory());
  const uint64_t calls0 = mem2.calls();
  for (uint32_t i = 0; i < kN; i++) {
    ibv_sge s = sge(local.data() + i * kMsg, kMsg, lkey);
    ibv_send_wr wr = rdma_wr(&s, reinterpret_cast<uint64_t>(remote.data() + i * kMsg), rkey, i, IBV_WR_RDMA_READ);
    REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  }
  auto wc = wait_cqes(f, *f.h1, p.cq1, kN);
  REQUIRE(wc.size() == kN);
  for (uint32_t i = 0; i < kN; i++) CHECK(wc[i].status == IBV_WC_SUCCESS);
  CHECK(local == remote);
  CHECK(f.n2->counters()[NicCounters::rx_read_requests] == kN);
  // The responder reads what it owes 128 frames at a time, not a packet at
  // a time (192 packets). How many READs it owes at once depends on when
  // the requests arrive, so at most a few calls.
  const uint64_t calls = mem2.calls() - calls0;
  CHECK(calls >= 2);
  CHECK(calls <= kN / 3);
}

TEST_CASE("Batched DMA: a WQE read ahead whose MR goes before its turn fails", "[sim][nic][rc]") {
  TwoNics f(1, nic::LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  SimHost::ConnectOpts o;
  o.mtu = IBV_MTU_4096;
  auto p = make_pair(f, o);
  constexpr uint32_t kMsg = 65536;
  auto a = rc_pattern(kMsg, 1), b = rc_pattern(kMsg, 2);
  std::vector<uint8_t> dst(2 * kMsg, 0);
  const uint32_t ka = f.h1->reg_mr(a.data(), a.size(), test::kAccessAll);
  const uint32_t kb = f.h1->reg_mr(b.data(), b.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge sa = sge(a.data(), kMsg, ka), sb = sge(b.data(), kMsg, kb);
  ibv_send_wr w[2] = {rdma_wr(&sa, reinterpret_cast<uint64_t>(dst.data()), rkey, 0),
                      rdma_wr(&sb, reinterpret_cast<uint64_t>(dst.data() + kMsg), rkey, 1)};
  w[0].next = &w[1];
  REQUIRE(f.h1->post_send(p.q1, &w[0]) == 0);
  // The first packet of WRITE 0 is out: WRITE 1's payload was read with it.
  REQUIRE(f.run([&] { return f.n1->counters()[NicCounters::tx_roce_packets] >= 1; }));
  REQUIRE(f.h1->dereg_mr(kb) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(wc[1].status == IBV_WC_LOC_PROT_ERR);
  CHECK(std::equal(a.begin(), a.end(), dst.begin()));
  CHECK(std::all_of(dst.begin() + kMsg, dst.end(), [](uint8_t x) { return x == 0; }));
}

TEST_CASE("Batched DMA: read-ahead stops at a fence and at a WQE it cannot read", "[sim][nic][rc]") {
  TwoNics f(1, nic::LossRecovery::kGoBackN, LinkParams{}, 16384, false, /*batched_dma=*/true);
  SimHost::ConnectOpts o;
  o.mtu = IBV_MTU_4096;
  auto p = make_pair(f, o);
  constexpr uint32_t kMsg = 65536;
  auto src = rc_pattern(kMsg * 5, 5);
  auto dst = rc_pattern(kMsg * 5, 77);
  const auto src0 = src, dst0 = dst;
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  auto& mem1 = dynamic_cast<DeferringLocalMemory&>(f.h1->memory());
  struct Step {
    ibv_wr_opcode op;
    int flags;
    uint32_t lkey;
    uint32_t local, remote;  // message slots in src and dst
  };
  auto msg = [&](const std::vector<uint8_t>& v, uint32_t slot) {
    return std::vector<uint8_t>(v.begin() + long(slot * kMsg), v.begin() + long((slot + 1) * kMsg));
  };
  std::vector<Step> steps;
  std::vector<ibv_wc_status> want;
  uint64_t calls_expected = 0;
  SECTION("a fenced WRITE sends what the READ before it brought") {
    // READ dst[0] into src[0]; WRITE src[1]; fenced WRITE src[0] to dst[2];
    // two more WRITEs. The first WRITE's read-ahead must not take the
    // fenced one's payload: the READ has not brought it yet.
    steps = {{IBV_WR_RDMA_READ, 0, lkey, 0, 0},
             {IBV_WR_RDMA_WRITE, 0, lkey, 1, 1},
             {IBV_WR_RDMA_WRITE, IBV_SEND_FENCE, lkey, 0, 2},
             {IBV_WR_RDMA_WRITE, 0, lkey, 3, 3},
             {IBV_WR_RDMA_WRITE, 0, lkey, 4, 4}};
    want.assign(5, IBV_WC_SUCCESS);
    // The READ's 16 responses written as each arrives, WRITE 1 alone, then
    // WRITEs 2-4 in one read.
    calls_expected = 16 + 1 + 1;
  }
  SECTION("a WRITE with a bad lkey fails alone") {
    steps = {{IBV_WR_RDMA_WRITE, 0, lkey, 0, 0},
             {IBV_WR_RDMA_WRITE, 0, lkey, 1, 1},
             {IBV_WR_RDMA_WRITE, 0, lkey ^ 0x100, 2, 2},
             {IBV_WR_RDMA_WRITE, 0, lkey, 3, 3},
             {IBV_WR_RDMA_WRITE, 0, lkey, 4, 4}};
    want = {IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_WC_LOC_PROT_ERR, IBV_WC_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR};
    calls_expected = 1;  // WRITEs 0-1; the read-ahead stopped before the bad one
  }
  const uint64_t calls0 = mem1.calls();
  for (uint32_t i = 0; i < steps.size(); i++) {
    ibv_sge s = sge(src.data() + steps[i].local * kMsg, kMsg, steps[i].lkey);
    ibv_send_wr wr = rdma_wr(&s, reinterpret_cast<uint64_t>(dst.data() + steps[i].remote * kMsg), rkey, i, steps[i].op);
    wr.send_flags |= steps[i].flags;
    REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  }
  auto wc = wait_cqes(f, *f.h1, p.cq1, steps.size());
  REQUIRE(wc.size() == steps.size());
  for (uint32_t i = 0; i < steps.size(); i++) {
    INFO("wr " << i);
    CHECK(wc[i].wr_id == i);
    CHECK(wc[i].status == want[i]);
  }
  for (uint32_t i = 0; i < steps.size(); i++) {
    INFO("wr " << i);
    const Step& st = steps[i];
    if (want[i] != IBV_WC_SUCCESS) {
      CHECK(msg(dst, st.remote) == msg(dst0, st.remote));  // untouched
    } else if (st.op == IBV_WR_RDMA_READ) {
      CHECK(msg(src, st.local) == msg(dst0, st.remote));
    } else {
      // What the WQE's buffer held when its turn came: after a READ into
      // it, what the READ brought.
      const bool read_into = i > 0 && steps[0].op == IBV_WR_RDMA_READ && steps[0].local == st.local;
      CHECK(msg(dst, st.remote) == (read_into ? msg(dst0, steps[0].remote) : msg(src0, st.local)));
    }
  }
  CHECK(mem1.calls() - calls0 == calls_expected);
}
