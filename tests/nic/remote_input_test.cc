// Remote input: what a packet from the wire may and may not make the NIC
// do. Every packet of a message is held to the rights its first packet was
// checked against; duplicates and crafted requests buy bounded work; a
// trimmed packet is told from data by its size, not its DSCP; the tables
// packets can grow are bounded. The probe plays a hostile or broken peer.
#include <arpa/inet.h>

#include <set>
#include <string>

#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "tests/nic/fabric.h"
#include "tests/nic/probe.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::kProbeAccessAll;
using rocemu::test::sge;

namespace {

using Bench = test::ProbeBench;

constexpr uint8_t kNakInvalid = 0x61;  // AETH NAK: invalid request
constexpr uint8_t kNakAccess = 0x62;   // AETH NAK: remote access error
constexpr uint32_t kOtherProbeQpn = 0x9a;

const std::vector<uint8_t> kPayload1k(1024, 0x5a);

// A second RC QP of the bench's host, in RTR towards the probe's QP
// kOtherProbeQpn, with a receive posted (for a SEND with invalidate).
struct SecondQp {
  SimHost::Qp* qp = nullptr;
  std::vector<uint8_t> rbuf = std::vector<uint8_t>(256);

  explicit SecondQp(Bench& b) {
    qp = b.host->create_qp(QpType::kRc, b.cq, b.cq, ibv_qp_cap{16, 16, 1, 1, 0});
    test::probe_qp_to_rtr(*b.host, qp, QpType::kRc, kOtherProbeQpn, kProbeAccessAll);
    const uint32_t lk = b.host->reg_mr(rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
    ibv_sge s = sge(rbuf.data(), uint32_t(rbuf.size()), lk);
    ibv_recv_wr rw{};
    rw.sg_list = &s;
    rw.num_sge = 1;
    REQUIRE(b.host->post_recv(qp, &rw) == 0);
  }
  // SEND with invalidate of `rkey`, the QP's first request.
  std::vector<uint8_t> send_inv(Bench& b, uint32_t rkey) const {
    wire::RoceFields f;
    f.opcode = wire::op::kSendOnlyInv;
    f.psn = 0;
    f.ack_req = true;
    f.ieth_rkey = rkey;
    return b.packet(f, std::vector<uint8_t>(16, 7), qp);
  }
};

// RTR -> RTS with the given remote access rights (a QP may change them in
// RTS; the responder holds every later packet to them).
void to_rts(Bench& b, SimHost::Qp* qp, int access) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  a.qp_access_flags = access;
  REQUIRE(b.host->modify(qp, a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ACCESS_FLAGS) == 0);
}

wire::RoceFields read_request(uint32_t psn, uint64_t va, uint32_t rkey, uint32_t len) {
  wire::RoceFields f;
  f.opcode = wire::op::kReadRequest;
  f.psn = psn;
  f.reth_va = va;
  f.reth_rkey = rkey;
  f.reth_len = len;
  return f;
}

// Replies of the bench's QP only (the probe's QP kProbeQpn), with the
// number of payload bytes they carry.
struct Answers {
  std::vector<wire::PacketView> acks, responses;
  uint64_t payload = 0;
};
Answers answers_to(Bench& b, uint32_t probe_qpn = test::kProbeQpn) {
  Answers a;
  for (const auto& v : b.replies()) {
    if (v.bth().dest_qp() != probe_qpn) continue;
    (v.opcode == wire::op::kAck ? a.acks : a.responses).push_back(v);
    a.payload += v.payload_len;
  }
  return a;
}

}  // namespace

TEST_CASE("Every packet of a WRITE is held to the rkey's rights: invalidated or revoked halfway, nothing more lands",
          "[protocol][nic][remote]") {
  Bench b;
  SecondQp other(b);
  const auto first = b.packet(b.write(wire::op::kWriteFirst, 0, false, b.addr(0), 3072), kPayload1k);
  const auto middle = b.packet(b.write(wire::op::kWriteMiddle, 1, false), kPayload1k);
  const auto last = b.packet(b.write(wire::op::kWriteLast, 2, true), kPayload1k);
  SECTION("a SEND with invalidate on another QP of the PD") {
    b.deliver({first, other.send_inv(b, b.rkey), middle, last});
  }
  SECTION("the QP's remote write right taken away") {
    b.deliver({first});
    to_rts(b, b.qp, IBV_ACCESS_REMOTE_READ);
    b.deliver({middle, last});
  }
  const Answers a = answers_to(b);
  REQUIRE(a.acks.size() == 1);
  CHECK(a.acks[0].aeth().syndrome() == kNakAccess);
  CHECK(a.acks[0].bth().psn() == 1);
  CHECK(b.mem[1023] == 0x5a);  // the first packet was in its rights
  CHECK(std::all_of(b.mem.begin() + 1024, b.mem.end(), [](uint8_t x) { return x == 0; }));
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
  CHECK(b.nic->counters()[NicCounters::resp_remote_access_errors] == 1);
}

TEST_CASE("Every READ response is held to the rkey's rights: an rkey invalidated while it is owed sends nothing",
          "[protocol][nic][remote]") {
  Bench b;
  SecondQp other(b);
  std::memset(b.mem.data(), 0x33, 8192);
  // One burst: the READ is taken, then the key goes (a SEND with invalidate
  // on another QP of the PD), then the responses are due.
  b.deliver({b.packet(read_request(0, b.addr(0), b.rkey, 8192)), other.send_inv(b, b.rkey)});
  const Answers a = answers_to(b);
  CHECK(a.payload == 0);
  REQUIRE(!a.acks.empty());
  CHECK(a.acks.back().aeth().syndrome() == kNakAccess);
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
}

TEST_CASE("Every READ response is held to the local key: invalidated or gone halfway, nothing more lands",
          "[protocol][nic][remote]") {
  Bench b;
  SecondQp other(b);
  to_rts(b, b.qp, kProbeAccessAll);
  std::vector<uint8_t> dst(4096, 0);
  const uint32_t lk = b.host->reg_mr(dst.data(), dst.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge s = sge(dst.data(), uint32_t(dst.size()), lk);
  ibv_send_wr wr{};
  wr.wr_id = 0x77;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = 0x10000;
  wr.wr.rdma.rkey = 0x1234;
  REQUIRE(b.host->post_send(b.qp, &wr) == 0);
  b.engine->run_for(us(20));
  auto response = [&](uint8_t opcode, uint32_t psn) {
    wire::RoceFields f;
    f.opcode = opcode;
    f.psn = psn;
    return b.packet(f, kPayload1k);
  };
  b.deliver({response(wire::op::kReadRespFirst, 0), response(wire::op::kReadRespMiddle, 1)});
  REQUIRE(dst[2047] == 0x5a);  // two responses in
  SECTION("a SEND with invalidate from the peer naming the READ's destination") {
    b.deliver({other.send_inv(b, lk)});
  }
  SECTION("the MR deregistered") { REQUIRE(b.host->dereg_mr(lk) == 0); }
  b.deliver({response(wire::op::kReadRespMiddle, 2), response(wire::op::kReadRespLast, 3)});
  CHECK(std::all_of(dst.begin() + 2048, dst.end(), [](uint8_t x) { return x == 0; }));
  ibv_wc wc[8];
  const int n = b.host->poll(b.cq, 8, wc);
  const ibv_wc* read = std::find_if(wc, wc + n, [&](const ibv_wc& w) { return w.qp_num == b.qp->qpn; });
  REQUIRE(read != wc + n);
  CHECK(read->wr_id == 0x77);
  CHECK(read->status == IBV_WC_LOC_PROT_ERR);
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
}

TEST_CASE("A SEND into an invalidated receive MR writes nothing and fails the receive", "[protocol][nic][remote]") {
  Bench b;
  SecondQp other(b);
  std::vector<uint8_t> rbuf(256, 0);
  const uint32_t lk = b.host->reg_mr(rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge s = sge(rbuf.data(), uint32_t(rbuf.size()), lk);
  ibv_recv_wr rw{};
  rw.wr_id = 0x55;
  rw.sg_list = &s;
  rw.num_sge = 1;
  REQUIRE(b.host->post_recv(b.qp, &rw) == 0);
  b.deliver({other.send_inv(b, lk)});
  wire::RoceFields f;
  f.opcode = wire::op::kSendOnly;
  f.psn = 0;
  f.ack_req = true;
  b.deliver({b.packet(f, std::vector<uint8_t>(64, 9))});
  CHECK(std::all_of(rbuf.begin(), rbuf.end(), [](uint8_t x) { return x == 0; }));
  ibv_wc wc[8];
  const int n = b.host->poll(b.cq, 8, wc);
  const ibv_wc* recv = std::find_if(wc, wc + n, [&](const ibv_wc& w) { return w.qp_num == b.qp->qpn; });
  REQUIRE(recv != wc + n);
  CHECK(recv->wr_id == 0x55);
  CHECK(recv->status == IBV_WC_LOC_PROT_ERR);
}

// IBA 9.7.5.1.3: a duplicate atomic is answered from the saved result, not
// executed again, so the rkey is not looked at again either (the atomic
// did modify memory: a NAK would tell the requester otherwise).
TEST_CASE("A duplicate atomic is answered from its saved result, even once its rkey is gone",
          "[protocol][nic][remote]") {
  Bench b;
  SecondQp other(b);
  auto& counter = *reinterpret_cast<uint64_t*>(b.mem.data() + 4096);
  counter = 100;
  wire::RoceFields fa;
  fa.opcode = wire::op::kFetchAdd;
  fa.psn = 0;
  fa.atomic_va = b.addr(4096);
  fa.atomic_rkey = b.rkey;
  fa.atomic_swap_add = 7;
  b.deliver({b.packet(fa)});
  REQUIRE(answers_to(b).responses.size() == 1);
  b.deliver({other.send_inv(b, b.rkey), b.packet(fa)});
  const Answers a = answers_to(b);
  CHECK(a.acks.empty());
  REQUIRE(a.responses.size() == 1);
  CHECK(a.responses[0].opcode == wire::op::kAtomicAck);
  CHECK(a.responses[0].atomic_ack().orig.get() == 100);
  CHECK(counter == 107);  // not executed again
  CHECK(b.qp->nic_qp->state == IBV_QPS_RTR);
  // A new atomic with that rkey is refused.
  fa.psn = 1;
  b.deliver({b.packet(fa)});
  const Answers after = answers_to(b);
  REQUIRE(after.acks.size() == 1);
  CHECK(after.acks[0].aeth().syndrome() == kNakAccess);
  CHECK(counter == 107);
}

TEST_CASE("Keys come back only after many registrations: FIFO slots and wide generations", "[unit][nic][remote]") {
  Bench b;
  std::vector<uint8_t> buf(4096);
  std::set<uint32_t> seen{b.rkey};
  // 2^17 registrations, one MR live at a time (the worst case for reuse):
  // every key is new.
  for (int i = 0; i < (1 << 17); i++) {
    const uint32_t k = b.host->reg_mr(buf.data(), buf.size(), kProbeAccessAll);
    REQUIRE(k != 0);
    if (!seen.insert(k).second) FAIL("key " << k << " came back after " << i << " registrations");
    REQUIRE(b.host->dereg_mr(k) == 0);
  }
  // The key of a deregistered MR finds nothing, even once its slot holds a
  // new MR of the same memory (the generation tells them apart).
  const uint32_t old = b.rkey;
  REQUIRE(b.host->dereg_mr(old) == 0);
  uint32_t reused = 0;
  for (int i = 0; i < 4096 && reused == 0; i++) {
    const uint32_t k = b.host->reg_mr(b.mem.data(), b.mem.size(), kProbeAccessAll);
    REQUIRE(k != 0);
    if ((k >> KeyedTable<Mr>::kGenBits) == (old >> KeyedTable<Mr>::kGenBits))
      reused = k;
    else
      REQUIRE(b.host->dereg_mr(k) == 0);
  }
  REQUIRE(reused != 0);
  REQUIRE(reused != old);
  b.deliver({b.packet(b.write(wire::op::kWriteOnly, 0, true, b.addr(0), 8), std::vector<uint8_t>(8, 1))});
  const Answers a = answers_to(b);
  REQUIRE(a.acks.size() == 1);
  CHECK(a.acks[0].aeth().syndrome() == kNakAccess);
  CHECK(b.mem[0] == 0);
}

TEST_CASE("A full keyed table refuses, and a freed slot takes one more", "[unit][nic][remote]") {
  KeyedTable<int, 2> t;  // 3 slots
  std::vector<uint32_t> keys;
  for (int i = 0; i < 3; i++) {
    const auto in = t.insert(std::make_unique<int>(i));
    REQUIRE(in.has_value());
    CHECK(*in->obj == i);
    CHECK(t.find(in->key) == in->obj);
    keys.push_back(in->key);
  }
  CHECK_FALSE(t.insert(std::make_unique<int>(3)).has_value());
  CHECK(t.size() == 3);
  REQUIRE(t.erase(keys[1]));
  const auto again = t.insert(std::make_unique<int>(4));
  REQUIRE(again.has_value());
  CHECK(again->key != keys[1]);  // same slot, next generation
  CHECK(t.find(keys[1]) == nullptr);
  CHECK(*t.find(again->key) == 4);
  CHECK_FALSE(t.insert(std::make_unique<int>(5)).has_value());
}

TEST_CASE("A full object table is ENOMEM to the application, and no handle comes back", "[unit][nic][remote]") {
  Bench b;
  HostContext* ctx = b.nic->open_context(nullptr);
  // Every slot of the PD table taken (the bench's own PD holds one).
  std::set<uint32_t> handles;
  uint32_t h = 0;
  int rc = 0;
  while ((rc = b.nic->alloc_pd(ctx, h)) == 0) {
    REQUIRE(h != 0);
    REQUIRE(handles.insert(h).second);
    REQUIRE(handles.size() < (size_t(1) << 21));
  }
  CHECK(rc == ENOMEM);
  CHECK(handles.size() + 1 == (size_t(1) << KeyedTable<Pd>::kSlotBits) - 1);
  // One freed is one more allocation, then full again.
  REQUIRE(b.nic->dealloc_pd(ctx, *handles.begin()) == 0);
  CHECK(b.nic->alloc_pd(ctx, h) == 0);
  CHECK(h != 0);
  CHECK(b.nic->alloc_pd(ctx, h) == ENOMEM);
  b.nic->close_context(ctx);
}

TEST_CASE("Duplicate READs: bounded by max_dest_rd_atomic, re-read only what was accepted", "[protocol][nic][remote]") {
  const LossRecovery mode = GENERATE(LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat);
  Bench b(0, QpType::kRc, 12, mode);  // max_dest_rd_atomic = 4
  for (size_t i = 0; i < b.mem.size(); i++) b.mem[i] = uint8_t(i * 7);
  const auto original = b.packet(read_request(0, b.addr(0), b.rkey, 16384));
  b.deliver({original});
  REQUIRE(answers_to(b).payload == 16384);
  Qp& qp = *b.qp->nic_qp;

  SECTION("10^5 copies of one duplicate: one re-read per burst, queues and buffers bounded") {
    const uint32_t in_use_before = b.engine->pool().in_use();
    uint64_t sent = 0;
    size_t bursts = 0, max_tasks = 0;
    for (int copies = 0; copies < 100000; copies += 250, bursts++) {
      b.probe->got.clear();
      std::vector<rte_mbuf*> burst;
      for (int i = 0; i < 250; i++) burst.push_back(b.engine->pool().alloc_copy(original));
      b.nic->on_rx(0, burst.data(), uint16_t(burst.size()), b.engine->now());
      max_tasks = std::max(max_tasks, qp.resp.tasks.size());
      REQUIRE(qp.resp.tasks.size() <= 4);
      b.engine->run_for(us(20));
      sent += answers_to(b).payload;
    }
    CHECK(max_tasks == 1);  // each copy takes the place of the one before
    CHECK(sent == bursts * 16384);
    CHECK(b.engine->pool().in_use() <= in_use_before + 4);
    CHECK(qp.state == IBV_QPS_RTR);
  }
  SECTION("a duplicate asking for more than the READ it repeats is not answered") {
    b.deliver({b.packet(read_request(0, b.addr(0), b.rkey, 65536))});
    CHECK(answers_to(b).payload == 0);
    // (from its middle, for the rest: answered)
    b.deliver({b.packet(read_request(8, b.addr(8192), b.rkey, 8192))});
    const Answers a = answers_to(b);
    CHECK(a.payload == 8192);
    REQUIRE(!a.responses.empty());
    CHECK(a.responses[0].bth().psn() == 8);
    CHECK(a.responses[0].payload()[0] == uint8_t(8192 * 7));
  }
  SECTION("a PSN no accepted READ used is not answered") {
    // PSN 16 is the next expected; 15 belongs to the READ, 0xfffff0 to none.
    b.deliver({b.packet(read_request(0xfffff0, b.addr(0), b.rkey, 1024))});
    CHECK(answers_to(b).payload == 0);
  }
  SECTION("duplicates count against max_dest_rd_atomic like new READs") {
    // Four new READs fill the responder's resources; a duplicate on top is
    // one READ more than the requester may have outstanding.
    std::vector<std::vector<uint8_t>> burst;
    for (uint32_t i = 0; i < 4; i++) burst.push_back(b.packet(read_request(16 + i, b.addr(0), b.rkey, 8)));
    burst.push_back(original);
    b.deliver(burst);
    const Answers a = answers_to(b);
    if (mode == LossRecovery::kGoBackN) {
      // Go-back-N: the duplicate says everything after it comes again, so
      // the answers owed for the later READs go and the duplicate fits.
      CHECK(a.payload == 16384);
      CHECK(qp.state == IBV_QPS_RTR);
    } else {
      REQUIRE(!a.acks.empty());
      CHECK(a.acks.back().aeth().syndrome() == kNakInvalid);
      CHECK(qp.state == IBV_QPS_ERR);
    }
  }
}

TEST_CASE("Crafted requests write nothing, get the right NAK and cost bounded work", "[protocol][nic][remote]") {
  Bench b;
  // Another application on the same NIC: its MR's key is valid, its PD not ours.
  std::vector<uint8_t> theirs(4096, 0xee);
  SimHost other(*b.engine, *b.nic);
  const uint32_t their_rkey = other.reg_mr(theirs.data(), theirs.size(), kProbeAccessAll);
  REQUIRE(their_rkey != 0);
  const uint64_t their_va = reinterpret_cast<uint64_t>(theirs.data());
  for (size_t i = 0; i < b.mem.size(); i++) b.mem[i] = uint8_t(i);
  const std::vector<uint8_t> mem_before = b.mem, theirs_before = theirs;
  const uint32_t in_use_before = b.engine->pool().in_use();

  uint8_t nak = 0;
  std::vector<uint8_t> pkt;
  SECTION("WRITE with a valid rkey of another PD") {
    auto f = b.write(wire::op::kWriteOnly, 0, true, their_va, 64);
    f.reth_rkey = their_rkey;
    pkt = b.packet(f, std::vector<uint8_t>(64, 1));
    nak = kNakAccess;
  }
  SECTION("READ with a valid rkey of another PD") {
    pkt = b.packet(read_request(0, their_va, their_rkey, 64));
    nak = kNakAccess;
  }
  SECTION("atomic with a valid rkey of another PD") {
    wire::RoceFields f;
    f.opcode = wire::op::kCmpSwap;
    f.atomic_va = their_va;
    f.atomic_rkey = their_rkey;
    f.atomic_compare = 0xeeeeeeeeeeeeeeeeull;
    f.atomic_swap_add = 1;
    pkt = b.packet(f);
    nak = kNakAccess;
  }
  SECTION("WRITE whose va + len wraps past 2^64") {
    pkt = b.packet(b.write(wire::op::kWriteOnly, 0, true, ~uint64_t(0) - 15, 64), std::vector<uint8_t>(64, 1));
    nak = kNakAccess;
  }
  SECTION("multi-packet WRITE whose va + len wraps past 2^64") {
    auto f = b.write(wire::op::kWriteFirst, 0, false, ~uint64_t(0) - 1023, 4096);
    pkt = b.packet(f, kPayload1k);
    nak = kNakAccess;
  }
  SECTION("READ whose va + len wraps past 2^64") {
    pkt = b.packet(read_request(0, ~uint64_t(0) - 15, b.rkey, 64));
    nak = kNakAccess;
  }
  SECTION("unaligned atomic") {
    wire::RoceFields f;
    f.opcode = wire::op::kFetchAdd;
    f.atomic_va = b.addr(4);
    f.atomic_rkey = b.rkey;
    f.atomic_swap_add = 1;
    pkt = b.packet(f);
    nak = kNakInvalid;
  }
  SECTION("READ longer than 2^31") {
    pkt = b.packet(read_request(0, b.addr(0), b.rkey, 0x80000001u));
    nak = kNakInvalid;
  }
  SECTION("READ of 4 GiB - 1") {
    pkt = b.packet(read_request(0, b.addr(0), b.rkey, 0xffffffffu));
    nak = kNakInvalid;
  }
  b.deliver({pkt});
  b.engine->run_for(us(100));
  const Answers a = answers_to(b);
  CHECK(a.responses.empty());
  CHECK(a.payload == 0);
  REQUIRE(a.acks.size() == 1);
  CHECK(a.acks[0].aeth().syndrome() == nak);
  CHECK(a.acks[0].bth().psn() == 0);
  CHECK(b.replies().size() == 1);  // the NAK, nothing else
  CHECK(b.mem == mem_before);
  CHECK(theirs == theirs_before);
  CHECK(b.qp->nic_qp->state == IBV_QPS_ERR);
  CHECK(b.qp->nic_qp->resp.tasks.empty());
  CHECK(b.engine->pool().in_use() <= in_use_before);
}

TEST_CASE("The trim DSCP alone does not make a packet trimmed: full-size packets are data", "[protocol][nic][remote]") {
  for (auto mode : {LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat}) {
    Bench b(0, QpType::kRc, 12, mode);
    b.to_nic.dscp = 11;  // the application chose the traffic class of trimmed packets
    b.deliver({b.packet(b.write(wire::op::kWriteFirst, 0, false, b.addr(0), 2048 + 8), kPayload1k),
               b.packet(b.write(wire::op::kWriteMiddle, 1, false), kPayload1k),
               b.packet(b.write(wire::op::kWriteLast, 2, true), std::vector<uint8_t>(8, 0x5a)),
               b.packet(b.write(wire::op::kWriteOnly, 3, true, b.addr(4096), 64), std::vector<uint8_t>(64, 0x5b))});
    Answers a = answers_to(b);
    REQUIRE(a.acks.size() == 1);
    CHECK(a.acks[0].aeth().syndrome() == 0x1f);
    CHECK(a.acks[0].bth().psn() == 3);
    CHECK(b.mem[2055] == 0x5a);
    CHECK(b.mem[4096 + 63] == 0x5b);
    CHECK(b.nic->counters()[NicCounters::rx_trimmed] == 0);
    // Shorter than its headers say it must be: trimmed after all.
    b.deliver({b.packet(b.write(wire::op::kWriteOnly, 4, true, b.addr(8192), 1024), std::vector<uint8_t>(64, 1))});
    a = answers_to(b);
    REQUIRE(a.acks.size() == 1);
    CHECK(a.acks[0].aeth().syndrome() == 0x60);
    CHECK(a.acks[0].bth().psn() == 4);
    CHECK(b.nic->counters()[NicCounters::rx_trimmed] == 1);
    CHECK(b.mem[8192] == 0);
  }
}

TEST_CASE("The trim DSCP alone does not make a READ response trimmed", "[protocol][nic][remote]") {
  Bench b;
  to_rts(b, b.qp, kProbeAccessAll);
  ibv_sge s = sge(b.mem.data(), 2048, b.rkey);
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = 0x1000;
  wr.wr.rdma.rkey = 0x1234;
  REQUIRE(b.host->post_send(b.qp, &wr) == 0);
  b.engine->run_for(us(20));
  REQUIRE(b.replies().size() == 1);  // the READ request
  b.to_nic.dscp = 11;
  wire::RoceFields f;
  f.opcode = wire::op::kReadRespFirst;
  f.psn = 0;
  f.aeth_syndrome = 0x1f;
  const auto first = b.packet(f, std::vector<uint8_t>(1024, 0x71));
  f.opcode = wire::op::kReadRespLast;
  f.psn = 1;
  b.deliver({first, b.packet(f, std::vector<uint8_t>(1024, 0x72))});
  ibv_wc wc{};
  REQUIRE(b.host->poll(b.cq, 1, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(b.mem[1023] == 0x71);
  CHECK(b.mem[2047] == 0x72);
  CHECK(b.nic->counters()[NicCounters::rx_trimmed] == 0);
}

TEST_CASE("ARP from many sources: the neighbour cache stays bounded and still learns what the NIC asked for",
          "[protocol][nic][remote]") {
  Bench b;
  const wire::IpAddr me = *wire::IpAddr::parse("10.0.0.1");
  const uint32_t in_use_before = b.engine->pool().in_use();
  for (uint32_t base = 0; base < 100000; base += 200) {
    std::vector<std::vector<uint8_t>> burst;
    for (uint32_t i = base; i < base + 200; i++) {
      std::vector<uint8_t> f(64);
      wire::MacAddr mac = test::kProbeMac;
      mac.b[4] = uint8_t(i >> 8);
      mac.b[5] = uint8_t(i);
      const uint32_t spa = 0x0b000000u + i;  // 11.x.x.x: none of them ours
      // Every other one asks for us, the rest announce themselves.
      const uint32_t tpa = (i & 1) ? me.v4_host_order() : spa;
      f.resize(wire::encode_arp(f, wire::kArpRequest, mac, spa, wire::MacAddr{}, tpa, wire::kBroadcastMac));
      burst.push_back(f);
    }
    b.deliver(burst);
    REQUIRE(b.nic->neighbor_cache_size() <= Nic::kMaxNeighbors);
  }
  CHECK(b.engine->pool().in_use() <= in_use_before + 200);
  // A QP to an address the NIC has to ask for still gets it.
  auto* qp2 = b.host->create_qp(QpType::kRc, b.cq, b.cq, ibv_qp_cap{16, 16, 1, 1, 0});
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = kProbeAccessAll;
  REQUIRE(b.host->modify(qp2, at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = IBV_MTU_1024;
  at.dest_qp_num = 0x55;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 12;
  at.ah_attr.is_global = 1;
  at.ah_attr.grh.sgid_index = 3;
  at.ah_attr.port_num = 1;
  const wire::IpAddr peer = *wire::IpAddr::parse("10.0.0.77");
  std::memcpy(at.ah_attr.grh.dgid.raw, peer.b.data(), 16);
  b.probe->got.clear();
  REQUIRE(b.host->modify(qp2, at,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0);
  b.engine->run_for(us(20));
  std::vector<uint8_t> reply(64);
  const wire::MacAddr peer_mac = *wire::MacAddr::parse("02:00:00:00:00:77");
  reply.resize(wire::encode_arp(reply, wire::kArpReply, peer_mac, peer.v4_host_order(), test::kProbeMac,
                                me.v4_host_order(), test::kProbeMac));
  b.deliver({reply});
  CHECK(qp2->nic_qp->neighbor_ok);
  CHECK(qp2->nic_qp->path.dst_mac == peer_mac);
}

TEST_CASE("Every responder and completer state has its own name", "[unit][nic]") {
  std::set<std::string> names;
  for (int s = 0; s <= int(RespState::kErrLocalAccess); s++) {
    const std::string n = resp_state_name(RespState(s));
    CHECK(n != "?");
    CHECK(names.insert("resp:" + n).second);
  }
  CHECK(is_error(RespState::kErrOpSeq));
  CHECK(!is_error(RespState::kDone));
  for (int s = 0; s <= int(CompState::kErrBadResponse); s++) {
    const std::string n = comp_state_name(CompState(s));
    CHECK(n != "?");
    CHECK(names.insert("comp:" + n).second);
  }
  CHECK(std::string(resp_state_name(RespState(200))) == "?");
}

TEST_CASE("A send from an invalidated MR goes nowhere, invalidated before its WQE was fetched or after",
          "[protocol][nic][remote]") {
  Bench b;
  SecondQp other(b);
  to_rts(b, b.qp, kProbeAccessAll);
  std::vector<uint8_t> src(2048, 0x3c);
  const uint32_t lk = b.host->reg_mr(src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  const bool posted_first = GENERATE(false, true);
  INFO((posted_first ? "posted, then the key invalidated before it is sent" : "posted after the invalidation"));
  if (!posted_first) b.deliver({other.send_inv(b, lk)});  // the peer invalidates the key
  ibv_sge s = sge(src.data(), uint32_t(src.size()), lk);
  ibv_send_wr wr{};
  wr.wr_id = 0x66;
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = 0x10000;
  wr.wr.rdma.rkey = 0x1234;
  REQUIRE(b.host->post_send(b.qp, &wr) == 0);  // fetched at once, checked then
  if (posted_first) b.deliver({other.send_inv(b, lk)});  // in the same burst, ahead of the sending
  b.engine->run_for(us(20));
  CHECK(answers_to(b).responses.empty());  // no WRITE packet to the probe
  ibv_wc wc[8];
  const int n = b.host->poll(b.cq, 8, wc);
  const ibv_wc* w = std::find_if(wc, wc + n, [&](const ibv_wc& c) { return c.wr_id == 0x66; });
  REQUIRE(w != wc + n);
  CHECK(w->status == IBV_WC_LOC_PROT_ERR);
}
