// RDMA ATOMIC WRITE (IBA 1.5, opcode 0x1D; Linux rxe since 6.2): RETH and
// 8 bytes, stored at once by the responder after everything before it,
// answered by an empty READ RESPONSE ONLY. The rules are rxe's
// (rxe_resp.c check_rkey / atomic_write_reply, rxe_comp.c check_ack):
// the key, remote write access and range, then exactly 8 bytes, then an
// address aligned at the requester and in the MR's memory (else NAK
// Invalid Request), one responder resource, RC only.
#include <arpa/inet.h>

#include <cstring>

#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "tests/nic/fabric.h"
#include "tests/nic/probe.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::sge;

namespace atomic_write_test {

constexpr uint64_t kValue = 0x0123456789abcdefull;

// The 8 payload bytes as they sit in memory (the wire carries them as is).
std::vector<uint8_t> value_bytes(uint64_t v) {
  std::vector<uint8_t> b(8);
  std::memcpy(b.data(), &v, 8);
  return b;
}

wire::RoceFields atomic_write(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len = 8) {
  wire::RoceFields f;
  f.opcode = wire::op::kAtomicWrite;
  f.psn = psn;
  f.ack_req = true;
  f.reth_va = va;
  f.reth_rkey = rkey;
  f.reth_len = len;
  return f;
}

bool all_zero(const uint8_t* p, size_t n) {
  return std::all_of(p, p + n, [](uint8_t x) { return x == 0; });
}

// One ibv_send_wr of IBV_WR_ATOMIC_WRITE taking its 8 bytes from `value`.
ibv_send_wr atomic_write_wr(ibv_sge* s, uint64_t remote, uint32_t rkey, uint64_t id) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return wr;
}

}  // namespace atomic_write_test


TEST_CASE("ATOMIC WRITE: stored once, answered by an empty READ response, a duplicate answered again", "[protocol][nic]") {
  test::ProbeBench b;
  const auto payload = atomic_write_test::value_bytes(atomic_write_test::kValue);
  b.deliver({b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey), payload)});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kReadRespOnly);
  CHECK(r[0].bth().psn() == 0);
  CHECK(r[0].bth().dest_qp() == test::kProbeQpn);
  CHECK(r[0].payload_len == 0);
  CHECK(r[0].aeth().syndrome() == wire::aeth_ack());
  CHECK(r[0].aeth().msn() == 1);
  uint64_t stored = 0;
  std::memcpy(&stored, b.mem.data() + 64, 8);
  CHECK(stored == atomic_write_test::kValue);
  CHECK(atomic_write_test::all_zero(b.mem.data(), 64));
  CHECK(atomic_write_test::all_zero(b.mem.data() + 72, b.mem.size() - 72));
  CHECK(b.nic->counters()[NicCounters::rx_atomic_write_requests] == 1);

  // The same request again (its answer lost): answered again, not stored
  // again -- the application changed the word meanwhile and keeps it.
  std::memset(b.mem.data() + 64, 0x44, 8);
  b.deliver({b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey), payload)});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kReadRespOnly);
  CHECK(r[0].bth().psn() == 0);
  CHECK(r[0].payload_len == 0);
  CHECK(b.mem[64] == 0x44);
  CHECK(b.mem[71] == 0x44);
  CHECK(b.nic->counters()[NicCounters::duplicate_request] == 1);
  CHECK(b.nic->counters()[NicCounters::rx_atomic_write_requests] == 1);
}

TEST_CASE("ATOMIC WRITE over the middle of a WRITE in one burst: stored after the WRITE's bytes", "[protocol][nic]") {
  // The host reached as another process is (batched_dma): the WRITE's
  // bytes wait for a flush, so a store not ordered after them would be
  // overwritten by them at the burst's end.
  test::ProbeBench b(0, QpType::kRc, 12, LossRecovery::kGoBackN, true);
  const auto payload = atomic_write_test::value_bytes(atomic_write_test::kValue);
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 0, false, b.addr(1000), 24), std::vector<uint8_t>(24, 0x77)),
             b.packet(atomic_write_test::atomic_write(1, b.addr(1008), b.rkey), payload)});
  auto r = b.replies();
  // (The WRITE's own ACK may follow: responses go out before ACKs.)
  REQUIRE(!r.empty());
  CHECK(r[0].opcode == wire::op::kReadRespOnly);
  CHECK(r[0].bth().psn() == 1);
  CHECK(r[0].payload_len == 0);
  uint64_t stored = 0;
  std::memcpy(&stored, b.mem.data() + 1008, 8);
  CHECK(stored == atomic_write_test::kValue);
  CHECK(b.mem[1007] == 0x77);
  CHECK(b.mem[1016] == 0x77);
}

TEST_CASE("ATOMIC WRITE refused: each error its NAK, nothing stored", "[protocol][nic]") {
  test::ProbeBench b;
  const auto payload = atomic_write_test::value_bytes(atomic_write_test::kValue);
  // Memory a peer may read and use atomics on, but not write.
  std::vector<uint8_t> no_write(4096, 0);
  const uint32_t no_write_key =
      b.host->reg_mr(no_write.data(), no_write.size(),
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  std::vector<uint8_t> frame;
  uint8_t nak = 0;
  const char* what = "";
  SECTION("misaligned address") {
    what = "misaligned";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(68), b.rkey), payload);
    nak = wire::aeth_nak(wire::NakCode::kInvalidRequest);
  }
  SECTION("MR without remote write access (remote atomic is not enough)") {
    what = "no remote write";
    const uint64_t va = reinterpret_cast<uint64_t>(no_write.data()) + 64;
    frame = b.packet(atomic_write_test::atomic_write(0, va, no_write_key), payload);
    nak = wire::aeth_nak(wire::NakCode::kRemoteAccessError);
  }
  SECTION("past the end of the MR") {
    what = "out of bounds";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(b.mem.size() - 4), b.rkey), payload);
    nak = wire::aeth_nak(wire::NakCode::kRemoteAccessError);
  }
  SECTION("wrong rkey") {
    what = "wrong rkey";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey ^ 0x100), payload);
    nak = wire::aeth_nak(wire::NakCode::kRemoteAccessError);
  }
  SECTION("RETH announces other than 8 bytes") {
    what = "dma length 4";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey, 4), payload);
    nak = wire::aeth_nak(wire::NakCode::kInvalidRequest);
  }
  SECTION("wrong rkey and a RETH of 4 bytes: the key is checked first (rxe)") {
    what = "wrong rkey, dma length 4";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey ^ 0x100, 4), payload);
    nak = wire::aeth_nak(wire::NakCode::kRemoteAccessError);
  }
  SECTION("past the end of the MR and a payload of 4 bytes: the range is checked first (rxe)") {
    what = "out of bounds, payload 4";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(b.mem.size() - 4), b.rkey), std::vector<uint8_t>(4, 0x55));
    nak = wire::aeth_nak(wire::NakCode::kRemoteAccessError);
  }
  SECTION("misaligned and a RETH of 4 bytes: the length is checked before the alignment") {
    what = "misaligned, dma length 4";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(68), b.rkey, 4), payload);
    nak = wire::aeth_nak(wire::NakCode::kInvalidRequest);
  }
  SECTION("payload other than 8 bytes") {
    what = "payload 4";
    frame = b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey), std::vector<uint8_t>(4, 0x55));
    nak = wire::aeth_nak(wire::NakCode::kInvalidRequest);
  }
  INFO(what);
  b.deliver({frame});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAck);
  CHECK(r[0].aeth().syndrome() == nak);
  CHECK(r[0].bth().psn() == 0);
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
  CHECK(atomic_write_test::all_zero(b.mem.data(), b.mem.size()));
  CHECK(atomic_write_test::all_zero(no_write.data(), no_write.size()));
}

TEST_CASE("ATOMIC WRITE after a WRITE that failed to land: no store and the WRITE NAKed", "[protocol][nic]") {
  // The host reached as another process is: the WRITE's bytes are deferred
  // and fail at the flush (a hole). A flag stored after them would publish
  // data that is not there.
  test::ProbeBench b(0, QpType::kRc, 12, LossRecovery::kGoBackN, true);
  auto& memory = dynamic_cast<DeferringLocalMemory&>(b.host->memory());
  memory.set_hole(b.addr(1000), 24);
  const auto payload = atomic_write_test::value_bytes(atomic_write_test::kValue);
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 0, false, b.addr(1000), 24), std::vector<uint8_t>(24, 0x77)),
             b.packet(atomic_write_test::atomic_write(1, b.addr(2048), b.rkey), payload)});
  CHECK(atomic_write_test::all_zero(b.mem.data() + 2048, 8));  // the flag word untouched
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAck);
  CHECK(r[0].aeth().syndrome() == wire::aeth_nak(wire::NakCode::kRemoteOperationalError));
  CHECK(r[0].bth().psn() == 0);  // the WRITE's: nothing after it is acknowledged
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
  CHECK(b.nic->counters()[NicCounters::dma_write_errors] == 1);
}

TEST_CASE("Atomics where iova and memory differ mod 8: NAK Invalid Request", "[protocol][nic]") {
  // ibv_reg_mr_iova with iova and addr 4 apart modulo 8: an aligned
  // address maps to a misaligned host address, where no store is atomic
  // (rxe checks the host address: NAK Invalid Request).
  test::ProbeBench b;
  const uint64_t iova = 0x10000004;
  const uint32_t key = b.host->reg_mr(b.mem.data(), 4096, test::kProbeAccessAll, nullptr, iova);
  REQUIRE(key != 0);
  const uint64_t va = iova + 4;  // aligned; b.mem.data() + 4 in the host
  std::vector<uint8_t> frame;
  const char* what = "";
  SECTION("ATOMIC WRITE") {
    what = "atomic write";
    frame = b.packet(atomic_write_test::atomic_write(0, va, key), atomic_write_test::value_bytes(atomic_write_test::kValue));
  }
  SECTION("compare and swap") {
    what = "cmp swap";
    wire::RoceFields f;
    f.opcode = wire::op::kCmpSwap;
    f.ack_req = true;
    f.atomic_va = va;
    f.atomic_rkey = key;
    f.atomic_compare = 0;
    f.atomic_swap_add = atomic_write_test::kValue;
    frame = b.packet(f);
  }
  SECTION("fetch and add") {
    what = "fetch add";
    wire::RoceFields f;
    f.opcode = wire::op::kFetchAdd;
    f.ack_req = true;
    f.atomic_va = va;
    f.atomic_rkey = key;
    f.atomic_swap_add = atomic_write_test::kValue;
    frame = b.packet(f);
  }
  INFO(what);
  b.deliver({frame});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAck);
  CHECK(r[0].aeth().syndrome() == wire::aeth_nak(wire::NakCode::kInvalidRequest));
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
  CHECK(atomic_write_test::all_zero(b.mem.data(), b.mem.size()));
}

TEST_CASE("ATOMIC WRITE is RC only: to a UC QP it is dropped", "[protocol][nic]") {
  test::ProbeBench b(0, QpType::kUc);
  const auto payload = atomic_write_test::value_bytes(atomic_write_test::kValue);
  b.deliver({b.packet(atomic_write_test::atomic_write(0, b.addr(64), b.rkey), payload)});
  CHECK(b.replies().empty());
  CHECK(atomic_write_test::all_zero(b.mem.data(), b.mem.size()));
  CHECK(b.nic->counters()[NicCounters::rx_atomic_write_requests] == 0);
}

TEST_CASE("ATOMIC WRITE request on the wire: RETH, the 8 bytes, an ACK request", "[protocol][nic]") {
  test::ProbeBench b;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x123456;
  a.timeout = 20;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  REQUIRE(b.host->modify(b.qp, a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC) == 0);
  b.engine->run_for(us(5));
  b.probe->got.clear();
  // Two of them with max_rd_atomic 1: the second waits for the first's answer.
  uint64_t value = atomic_write_test::kValue;
  ibv_sge s{reinterpret_cast<uint64_t>(&value), 8, 0};
  ibv_send_wr w1 = atomic_write_test::atomic_write_wr(&s, 0x7000000000000040ull, 0xabcdef01u, 1);
  ibv_send_wr w2 = atomic_write_test::atomic_write_wr(&s, 0x7000000000000048ull, 0xabcdef01u, 2);
  w1.next = &w2;
  REQUIRE(b.host->post_send(b.qp, &w1) == 0);
  value = 0;  // taken at the post
  b.engine->run_for(us(20));
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  const wire::PacketView& v = r[0];
  CHECK(v.opcode == 0x1d);
  CHECK(v.bth().psn() == 0x123456);
  CHECK(v.bth().ack_req());
  CHECK(v.bth().pad_count() == 0);
  CHECK(v.bth().dest_qp() == test::kProbeQpn);
  CHECK(v.reth().va.get() == 0x7000000000000040ull);
  CHECK(v.reth().rkey.get() == 0xabcdef01u);
  CHECK(v.reth().dma_length.get() == 8);
  REQUIRE(v.payload_len == 8);
  CHECK(std::memcmp(v.data + v.payload_off, atomic_write_test::value_bytes(atomic_write_test::kValue).data(), 8) == 0);
  // IPv4 + UDP + BTH + RETH + 8 + ICRC.
  CHECK(v.payload_off + 8u + 4u == b.probe->got[0].bytes.size());
  CHECK(b.qp->nic_qp->req.rd_atomic_outstanding == 1);

  // Its answer (an empty READ response) completes it and lets the next go.
  wire::RoceFields resp;
  resp.opcode = wire::op::kReadRespOnly;
  resp.psn = 0x123456;
  resp.aeth_syndrome = wire::aeth_ack();
  resp.aeth_msn = 1;
  b.deliver({b.packet(resp)});
  ibv_wc wc[4];
  REQUIRE(b.host->poll(b.cq, 4, wc) == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(wc[0].opcode == IBV_WC_ATOMIC_WRITE);
  CHECK(wc[0].byte_len == 8);
  CHECK(wc[0].wr_id == 1);
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAtomicWrite);
  CHECK(r[0].bth().psn() == 0x123457);
  CHECK(r[0].reth().va.get() == 0x7000000000000048ull);
}

TEST_CASE("ATOMIC WRITE between two NICs: 8 bytes land, IBV_WC_ATOMIC_WRITE", "[sim][nic][rc]") {
  // The hosts reached as other processes are (batched_dma: writes wait for
  // a flush), as under the provider. (The two requests arrive in bursts
  // of their own here; the order within one burst is the probe test's.)
  test::TwoNics f(1, LossRecovery::kGoBackN, LinkParams{}, 16384, false, true);
  auto p = test::connect_rc(f);
  std::vector<uint8_t> dst(256, 0);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessRw);  // no remote atomic: not needed
  std::vector<uint8_t> src(32, 0x5c);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  uint64_t value = atomic_write_test::kValue;
  ibv_sge vs{reinterpret_cast<uint64_t>(&value), 8, 0};
  ibv_sge ws = sge(src.data(), 32, lkey);
  // A WRITE of 32 bytes, then an ATOMIC WRITE into its middle.
  ibv_send_wr w = test::rdma_wr(&ws, uint64_t(dst.data()) + 64, rkey, 1);
  ibv_send_wr aw = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()) + 72, rkey, 2);
  w.next = &aw;
  REQUIRE(f.h1->post_send(p.q1, &w) == 0);
  value = 0;
  auto wc = test::wait_cqes(f, *f.h1, p.cq1, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(wc[0].opcode == IBV_WC_RDMA_WRITE);
  CHECK(wc[1].status == IBV_WC_SUCCESS);
  CHECK(wc[1].opcode == IBV_WC_ATOMIC_WRITE);
  CHECK(wc[1].byte_len == 8);
  CHECK(wc[1].wr_id == 2);
  std::vector<uint8_t> want(256, 0);
  std::fill(want.begin() + 64, want.begin() + 96, 0x5c);
  std::memcpy(want.data() + 72, atomic_write_test::value_bytes(atomic_write_test::kValue).data(), 8);
  CHECK(dst == want);  // every byte
  CHECK(f.n2->counters()[NicCounters::rx_atomic_write_requests] == 1);
  CHECK(f.n1->counters()[NicCounters::req_cqe_error] == 0);
}

TEST_CASE("ATOMIC WRITE errors reach the requester as completions", "[sim][nic][rc]") {
  test::TwoNics f;
  auto p = test::connect_rc(f);
  std::vector<uint8_t> dst(256, 0), no_write(256, 0);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  const uint32_t nw_key = f.h2->reg_mr(no_write.data(), no_write.size(),
                                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
  uint64_t value = atomic_write_test::kValue;
  ibv_sge vs{reinterpret_cast<uint64_t>(&value), 8, 0};
  ibv_send_wr wr{};
  ibv_wc_status want = IBV_WC_SUCCESS;
  const char* what = "";
  uint64_t invalid_request = 0, access = 0;
  SECTION("misaligned: NAK Invalid Request") {
    what = "misaligned";
    wr = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()) + 4, rkey, 1);
    want = IBV_WC_REM_INV_REQ_ERR;
    invalid_request = 1;
  }
  SECTION("no remote write access: NAK Remote Access Error") {
    what = "no remote write";
    wr = atomic_write_test::atomic_write_wr(&vs, uint64_t(no_write.data()), nw_key, 1);
    want = IBV_WC_REM_ACCESS_ERR;
    access = 1;
  }
  SECTION("out of bounds: NAK Remote Access Error") {
    what = "out of bounds";
    wr = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()) + 256, rkey, 1);
    want = IBV_WC_REM_ACCESS_ERR;
    access = 1;
  }
  INFO(what);
  ibv_send_wr after = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()), rkey, 2);
  wr.next = &after;
  REQUIRE(f.h1->post_send(p.q1, &wr) == 0);
  auto wc = test::wait_cqes(f, *f.h1, p.cq1, 2);
  REQUIRE(wc.size() == 2);
  CHECK(wc[0].status == want);
  CHECK(wc[0].opcode == IBV_WC_ATOMIC_WRITE);
  CHECK(wc[1].status == IBV_WC_WR_FLUSH_ERR);
  CHECK(f.n1->counters()[NicCounters::req_remote_invalid_request] == invalid_request);
  CHECK(f.n1->counters()[NicCounters::req_remote_access_errors] == access);
  CHECK(p.q2->nic_qp->state == IBV_QPS_ERR);
  CHECK(atomic_write_test::all_zero(dst.data(), dst.size()));
  CHECK(atomic_write_test::all_zero(no_write.data(), no_write.size()));
}

TEST_CASE("ATOMIC WRITE on UC and UD fails locally; not 8 bytes is refused at the post", "[sim][nic]") {
  test::TwoNics f;
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  const ibv_qp_cap cap{16, 16, 1, 1, 0};
  std::vector<uint8_t> dst(64, 0);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  uint64_t value = atomic_write_test::kValue;
  ibv_sge vs{reinterpret_cast<uint64_t>(&value), 8, 0};
  SECTION("UC") {
    auto* q1 = f.h1->create_qp(QpType::kUc, cq1, cq1, cap);
    auto* q2 = f.h2->create_qp(QpType::kUc, cq2, cq2, cap);
    REQUIRE(SimHost::connect(*f.h1, q1, *f.h2, q2) == 0);
    ibv_send_wr wr = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()), rkey, 5);
    REQUIRE(f.h1->post_send(q1, &wr) == 0);
    auto wc = test::wait_cqes(f, *f.h1, cq1, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_LOC_QP_OP_ERR);
    CHECK(wc[0].wr_id == 5);
  }
  SECTION("UD") {
    auto* u1 = f.h1->create_qp(QpType::kUd, cq1, cq1, cap);
    REQUIRE(f.h1->activate_ud(u1, 0x1111) == 0);
    ibv_send_wr wr = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()), rkey, 6);
    REQUIRE(f.h1->post_send(u1, &wr) == 0);
    auto wc = test::wait_cqes(f, *f.h1, cq1, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_LOC_QP_OP_ERR);
    CHECK(wc[0].wr_id == 6);
  }
  SECTION("RC, 4 or 12 bytes") {
    auto p = test::connect_rc(f);
    vs.length = 4;
    ibv_send_wr wr = atomic_write_test::atomic_write_wr(&vs, uint64_t(dst.data()), rkey, 7);
    CHECK(f.h1->post_send(p.q1, &wr) == EINVAL);
    uint64_t two[2] = {1, 2};
    ibv_sge s12{reinterpret_cast<uint64_t>(two), 12, 0};
    wr.sg_list = &s12;
    CHECK(f.h1->post_send(p.q1, &wr) == EINVAL);
    f.run([] { return false; }, us(50));
    CHECK(f.n1->counters()[NicCounters::tx_roce_packets] == 0);
  }
  CHECK(f.n2->counters()[NicCounters::rx_atomic_write_requests] == 0);
  CHECK(atomic_write_test::all_zero(dst.data(), dst.size()));
}

TEST_CASE("ATOMIC WRITEs under loss: resent and answered again, each word as last written, every completion once",
          "[sim][nic][rc]") {
  const auto mode = GENERATE(LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat);
  INFO((mode == LossRecovery::kGoBackN ? "go-back-N" : "selective repeat"));
  test::TwoNics f(31, mode);
  FaultConfig fc;
  fc.loss = 0.05;
  f.link->set_faults(0, fc);
  f.link->set_faults(1, fc);
  auto p = test::connect_rc(f);
  constexpr uint32_t kWords = 32, kRounds = 6;
  std::vector<uint8_t> dst(kWords * 8 + 64, 0);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessRw);
  std::vector<uint64_t> values(kWords * kRounds);
  std::vector<ibv_sge> sges(values.size());
  std::vector<ibv_send_wr> wrs(values.size());
  // Round r writes every word once; a word's last value is round kRounds-1's.
  for (uint32_t i = 0; i < values.size(); i++) {
    const uint32_t word = i % kWords;
    values[i] = 0x5100000000000000ull | (uint64_t(i / kWords) << 32) | (word * 0x01010101u);
    sges[i] = {reinterpret_cast<uint64_t>(&values[i]), 8, 0};
    wrs[i] = atomic_write_test::atomic_write_wr(&sges[i], uint64_t(dst.data()) + 8 * word, rkey, i);
    wrs[i].send_flags = i % 3 == 2 || i + 1 == values.size() ? IBV_SEND_SIGNALED : 0;
    if (i > 0) wrs[i - 1].next = &wrs[i];
  }
  // The send queue holds 64: post in chunks of 48 as completions come.
  uint32_t posted = 0, signaled = 0;
  std::vector<ibv_wc> wcs;
  while (posted < values.size()) {
    const uint32_t n = std::min<uint32_t>(48, uint32_t(values.size()) - posted);
    wrs[posted + n - 1].next = nullptr;
    wrs[posted + n - 1].send_flags = IBV_SEND_SIGNALED;
    for (uint32_t i = posted; i < posted + n; i++) signaled += (wrs[i].send_flags & IBV_SEND_SIGNALED) ? 1 : 0;
    REQUIRE(f.h1->post_send(p.q1, &wrs[posted]) == 0);
    posted += n;
    auto got = test::wait_cqes(f, *f.h1, p.cq1, signaled - wcs.size(), ms(2000));
    wcs.insert(wcs.end(), got.begin(), got.end());
    REQUIRE(wcs.size() == signaled);
  }
  for (const ibv_wc& w : wcs) {
    CHECK(w.status == IBV_WC_SUCCESS);
    CHECK(w.opcode == IBV_WC_ATOMIC_WRITE);
  }
  for (uint32_t word = 0; word < kWords; word++) {
    uint64_t got = 0;
    std::memcpy(&got, dst.data() + 8 * word, 8);
    CHECK(got == values[(kRounds - 1) * kWords + word]);
  }
  CHECK(atomic_write_test::all_zero(dst.data() + kWords * 8, 64));
  CHECK(f.n1->counters()[NicCounters::retransmitted_packets] > 0);
  CHECK(f.n2->counters()[NicCounters::duplicate_request] > 0);  // some answered again, not stored again
}
