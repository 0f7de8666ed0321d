// Packet-level tests: a probe node plays the far end, injects hand-made
// RoCEv2 packets into a NIC and looks at exactly what comes back.
#include <arpa/inet.h>

#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "tests/nic/fabric.h"
#include "tests/nic/probe.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::sge;

namespace {

using Bench = test::ProbeBench;

const std::vector<uint8_t> kPayload1k(1024, 0x5a);

}  // namespace

TEST_CASE("ACKs are coalesced: one ACK for a burst of requests", "[protocol][nic]") {
  Bench b;
  std::vector<std::vector<uint8_t>> burst;
  for (uint32_t i = 0; i < 4; i++)
    burst.push_back(b.packet(b.write(wire::op::kWriteOnly, i, true, b.addr(i * 1024), 1024), kPayload1k));
  b.deliver(burst);
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAck);
  CHECK(r[0].bth().psn() == 3);
  CHECK(r[0].bth().dest_qp() == test::kProbeQpn);
  CHECK(wire::aeth_kind(r[0].aeth().syndrome()) == wire::AethKind::kAck);
  CHECK(r[0].aeth().msn() == 4);
  CHECK(b.mem[0] == 0x5a);
  CHECK(b.mem[4095] == 0x5a);
  // A multi-packet message asks for one ACK, on its last packet.
  b.deliver({b.packet(b.write(wire::op::kWriteFirst, 4, false, b.addr(8192), 3000), kPayload1k),
             b.packet(b.write(wire::op::kWriteMiddle, 5, false), kPayload1k),
             b.packet(b.write(wire::op::kWriteLast, 6, true), std::vector<uint8_t>(952, 0x6b))});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].bth().psn() == 6);
  CHECK(r[0].aeth().msn() == 5);
  CHECK(b.mem[8192 + 2999] == 0x6b);
  CHECK(b.mem[8192 + 3000] == 0);
}

TEST_CASE("A PSN gap is NAKed once (go-back-N)", "[protocol][nic]") {
  Bench b;
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 0, true, b.addr(0), 8), std::vector<uint8_t>(8, 1)),
             b.packet(b.write(wire::op::kWriteOnly, 2, true, b.addr(8), 8), std::vector<uint8_t>(8, 2)),
             b.packet(b.write(wire::op::kWriteOnly, 3, true, b.addr(16), 8), std::vector<uint8_t>(8, 3))});
  auto r = b.replies();
  // One ACK for PSN 0 could be coalesced away by the NAK: what matters is
  // exactly one NAK, for PSN 1.
  int naks = 0;
  for (auto& v : r) {
    if (wire::aeth_kind(v.aeth().syndrome()) == wire::AethKind::kNak) {
      naks++;
      CHECK(v.aeth().syndrome() == 0x60);
      CHECK(v.bth().psn() == 1);
    }
  }
  CHECK(naks == 1);
  CHECK(b.mem[8] == 0);  // PSN 2 was not applied
  CHECK(b.nic->counters()[NicCounters::out_of_sequence] == 2);
  // The missing one, then the rest again: everything lands, one ACK.
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 1, false, b.addr(24), 8), std::vector<uint8_t>(8, 4)),
             b.packet(b.write(wire::op::kWriteOnly, 2, false, b.addr(8), 8), std::vector<uint8_t>(8, 2)),
             b.packet(b.write(wire::op::kWriteOnly, 3, true, b.addr(16), 8), std::vector<uint8_t>(8, 3))});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == 0x1f);
  CHECK(r[0].bth().psn() == 3);
  CHECK(b.mem[8] == 2);
  CHECK(b.mem[24] == 4);
}

TEST_CASE("Selective repeat keeps out-of-order packets and NAKs the hole", "[protocol][nic]") {
  Bench b(0, QpType::kRc, 12, LossRecovery::kSelectiveRepeat);
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 1, true, b.addr(8), 8), std::vector<uint8_t>(8, 2)),
             b.packet(b.write(wire::op::kWriteOnly, 2, true, b.addr(16), 8), std::vector<uint8_t>(8, 3))});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == 0x60);
  CHECK(r[0].bth().psn() == 0);
  CHECK(b.mem[8] == 0);  // kept, not applied yet
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 0, false, b.addr(0), 8), std::vector<uint8_t>(8, 1))});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == 0x1f);
  CHECK(r[0].bth().psn() == 2);  // cumulative: the kept ones applied too
  CHECK(b.mem[0] == 1);
  CHECK(b.mem[8] == 2);
  CHECK(b.mem[16] == 3);
}

TEST_CASE("RNR NAK carries the QP's min_rnr_timer", "[protocol][nic]") {
  Bench b(0, QpType::kRc, 14);
  wire::RoceFields f;
  f.opcode = wire::op::kSendOnly;
  f.psn = 0;
  f.ack_req = true;
  b.deliver({b.packet(f, std::vector<uint8_t>(64, 1))});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == wire::aeth_rnr_nak(14));
  CHECK(r[0].bth().psn() == 0);
  CHECK(b.nic->counters()[NicCounters::rnr_nak_sent] == 1);
  // With a receive posted, the same SEND is taken and ACKed.
  std::vector<uint8_t> rbuf(128);
  const uint32_t lk = b.host->reg_mr(rbuf.data(), rbuf.size(), test::kAccessAll);
  ibv_sge s = sge(rbuf.data(), 128, lk);
  ibv_recv_wr rw{};
  rw.sg_list = &s;
  rw.num_sge = 1;
  REQUIRE(b.host->post_recv(b.qp, &rw) == 0);
  b.deliver({b.packet(f, std::vector<uint8_t>(64, 1))});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == 0x1f);
  CHECK(rbuf[63] == 1);
}

TEST_CASE("Duplicates: WRITE re-ACKed, READ re-executed, atomic answered from the saved result", "[protocol][nic]") {
  Bench b;
  auto& counter = *reinterpret_cast<uint64_t*>(b.mem.data() + 4096);
  counter = 100;
  wire::RoceFields fa;
  fa.opcode = wire::op::kFetchAdd;
  fa.psn = 0;
  fa.atomic_va = b.addr(4096);
  fa.atomic_rkey = b.rkey;
  fa.atomic_swap_add = 7;
  b.deliver({b.packet(fa)});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAtomicAck);
  CHECK(r[0].atomic_ack().orig.get() == 100);
  CHECK(counter == 107);
  // The same request again: same answer, not executed twice.
  b.deliver({b.packet(fa)});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].atomic_ack().orig.get() == 100);
  CHECK(counter == 107);
  CHECK(b.nic->counters()[NicCounters::duplicate_request] == 1);

  // READ at PSN 1 of 8 bytes; then memory changes; the duplicate READ
  // reads it again.
  std::memset(b.mem.data() + 100, 0x11, 8);
  wire::RoceFields rd;
  rd.opcode = wire::op::kReadRequest;
  rd.psn = 1;
  rd.reth_va = b.addr(100);
  rd.reth_rkey = b.rkey;
  rd.reth_len = 8;
  b.deliver({b.packet(rd)});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kReadRespOnly);
  CHECK(r[0].bth().psn() == 1);
  CHECK(r[0].payload()[0] == 0x11);
  std::memset(b.mem.data() + 100, 0x22, 8);
  b.deliver({b.packet(rd)});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].payload()[0] == 0x22);

  // A duplicate WRITE is ACKed again, not applied again.
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 2, true, b.addr(200), 8), std::vector<uint8_t>(8, 9))});
  std::memset(b.mem.data() + 200, 0, 8);
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 2, true, b.addr(200), 8), std::vector<uint8_t>(8, 9))});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].opcode == wire::op::kAck);
  CHECK(r[0].bth().psn() == 2);
  CHECK(b.mem[200] == 0);
}

TEST_CASE("PSNs wrap at 0xFFFFFF", "[protocol][nic]") {
  Bench b(0xfffffe);
  b.deliver({b.packet(b.write(wire::op::kWriteFirst, 0xfffffe, false, b.addr(0), 4096), kPayload1k),
             b.packet(b.write(wire::op::kWriteMiddle, 0xffffff, false), kPayload1k),
             b.packet(b.write(wire::op::kWriteMiddle, 0, false), kPayload1k),
             b.packet(b.write(wire::op::kWriteLast, 1, true), kPayload1k)});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == 0x1f);
  CHECK(r[0].bth().psn() == 1);
  CHECK(b.mem[4095] == 0x5a);
  // 0xFFFFFF is now a duplicate, 2 is next.
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 0xffffff, true, b.addr(0), 8), std::vector<uint8_t>(8, 1))});
  r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].bth().psn() == 1);
  CHECK(b.nic->counters()[NicCounters::duplicate_request] == 1);
}

TEST_CASE("Requester PSNs wrap too: a transfer across 0xFFFFFF completes", "[sim][nic][rc]") {
  test::TwoNics f;
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  auto* q1 = f.h1->create_qp(QpType::kRc, cq1, cq1, ibv_qp_cap{16, 16, 1, 1, 0});
  auto* q2 = f.h2->create_qp(QpType::kRc, cq2, cq2, ibv_qp_cap{16, 16, 1, 1, 0});
  SimHost::ConnectOpts o;
  o.psn_a = 0xfffff0;
  REQUIRE(SimHost::connect(*f.h1, q1, *f.h2, q2, o) == 0);
  FaultConfig fc;
  fc.loss = 0.05;
  f.link->set_faults(0, fc);
  std::vector<uint8_t> src(64 * 1024), dst(64 * 1024, 0);
  for (size_t i = 0; i < src.size(); i++) src[i] = uint8_t(i ^ (i >> 8));
  const uint32_t lk = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rk = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge s = sge(src.data(), uint32_t(src.size()), lk);
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = uint64_t(dst.data());
  wr.wr.rdma.rkey = rk;
  REQUIRE(f.h1->post_send(q1, &wr) == 0);
  auto wc = test::wait_cqes(f, *f.h1, cq1, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(dst == src);
  CHECK(q1->nic_qp->req.next_new_psn == 0x30);  // 0xfffff0 + 64 packets, wrapped
}

TEST_CASE("Bad input is dropped and counted, never applied", "[protocol][nic]") {
  Bench b;
  auto good = b.packet(b.write(wire::op::kWriteOnly, 0, true, b.addr(0), 8), std::vector<uint8_t>(8, 1));
  SECTION("bad ICRC") {
    auto bad = good;
    bad[bad.size() - 5] ^= 1;  // last payload byte
    b.deliver({bad});
    CHECK(b.nic->counters()[NicCounters::rx_icrc_error] == 1);
  }
  SECTION("bad IPv4 checksum") {
    // From outside (no kMetaIcrcValid): summed, and dropped.
    auto bad = good;
    bad[14 + 10] ^= 1;
    b.deliver({bad});
    CHECK(b.nic->counters()[NicCounters::rx_malformed] == 1);
    CHECK(b.nic->counters()[NicCounters::rx_roce_packets] == 0);
  }
  SECTION("truncated") {
    auto bad = good;
    bad.resize(50);
    b.deliver({bad});
    CHECK(b.nic->counters()[NicCounters::rx_malformed] == 1);
  }
  SECTION("unknown QP") {
    wire::RoceFields f = b.write(wire::op::kWriteOnly, 0, true, b.addr(0), 8);
    std::vector<uint8_t> out(200);
    f.dest_qp = 0x777;
    out.resize(wire::encode_roce(out, b.to_nic, f, std::vector<uint8_t>(8, 1)));
    b.deliver({out});
    CHECK(b.nic->counters()[NicCounters::rx_not_for_us] == 1);
  }
  SECTION("QP not ready to receive") {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    REQUIRE(b.host->modify(b.qp, a, IBV_QP_STATE) == 0);
    b.deliver({good});
    CHECK(b.nic->counters()[NicCounters::rx_wrong_state] == 1);
  }
  CHECK(b.replies().empty());
  CHECK(b.mem[0] == 0);
}

TEST_CASE("Opcode out of sequence: NAK invalid request", "[protocol][nic]") {
  Bench b;
  b.deliver({b.packet(b.write(wire::op::kWriteMiddle, 0, true), kPayload1k)});
  auto r = b.replies();
  REQUIRE(r.size() == 1);
  CHECK(r[0].aeth().syndrome() == 0x61);
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
}

TEST_CASE("A trimmed packet is NAKed at once", "[protocol][nic]") {
  for (auto mode : {LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat}) {
    Bench b(0, QpType::kRc, 12, mode);
    // As a switch trims: payload cut, DSCP remarked to 11, ICRC resealed.
    b.to_nic.dscp = 11;
    auto trimmed = b.packet(b.write(wire::op::kWriteFirst, 0, false, b.addr(0), 4096), std::vector<uint8_t>(64, 1));
    b.to_nic.dscp = 26;
    b.deliver({trimmed});
    auto r = b.replies();
    REQUIRE(r.size() == 1);
    CHECK(r[0].aeth().syndrome() == 0x60);
    CHECK(r[0].bth().psn() == 0);
    CHECK(b.nic->counters()[NicCounters::rx_trimmed] == 1);
    CHECK(b.mem[0] == 0);
  }
}
