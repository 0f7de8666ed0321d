// Memory windows, type 1 and type 2, in virtual time: binds and local
// invalidates are send WQEs that complete with IBV_WC_BIND_MW /
// IBV_WC_LOCAL_INV or fail with IBV_WC_MW_BIND_ERR; a peer's RDMA through
// a window is held to its bounds, rights, key and QP, and refused with
// IBV_WC_REM_ACCESS_ERR, nothing written, otherwise; SEND with invalidate
// frees a type 2 window (IBV_WC_WITH_INV, invalidated_rkey). ibv_rereg_mr
// with each flag, on its own and under a bound window.
#include <algorithm>
#include <exception>

#include "tests/nic/fabric.h"
#include "tests/nic/nic_test_peer.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::connect_rc;
using rocemu::test::rdma_wr;
using rocemu::test::sge;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace {

constexpr int kMwRights = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
constexpr size_t kBuf = 8192;

// h2 owns the memory and the windows; h1 is the peer that reaches them.
struct MwBench {
  TwoNics f;
  test::RcPair p = connect_rc(f);
  std::vector<uint8_t> src = std::vector<uint8_t>(kBuf, 0x11);  // h1: what the peer writes
  std::vector<uint8_t> got = std::vector<uint8_t>(kBuf, 0);     // h1: what the peer reads
  std::vector<uint8_t> mem = std::vector<uint8_t>(kBuf, 0xee);  // h2: behind the windows
  uint32_t src_key = f.h1->reg_mr(src.data(), kBuf, test::kAccessAll);
  uint32_t got_key = f.h1->reg_mr(got.data(), kBuf, test::kAccessAll);
  ibv_mr mr{};  // h2's MR as a bind names it (only lkey is read)

  explicit MwBench(int mr_access = test::kAccessAll | IBV_ACCESS_MW_BIND, const TwoNics::Tune& tune = {}) : f(tune) {
    mr.lkey = mr.rkey = f.h2->reg_mr(mem.data(), kBuf, mr_access);
    REQUIRE(mr.lkey != 0);
    for (size_t i = 0; i < kBuf; i++) src[i] = uint8_t(i * 7 + 1);
    f.run([] { return false; }, ms(5));  // ARP settles
  }
  // At the end of each test: every MR's and QP's count of bound windows is
  // what the windows say (not while a failed REQUIRE unwinds).
  ~MwBench() {
    if (std::uncaught_exceptions() > 0) return;
    CHECK(NicTestPeer::window_count_errors(*f.n2) == "");
    CHECK(NicTestPeer::window_count_errors(*f.n1) == "");
  }
  MwBench(const MwBench&) = delete;
  MwBench& operator=(const MwBench&) = delete;
  uint64_t at(size_t off) const { return reinterpret_cast<uint64_t>(mem.data()) + off; }

  ibv_mw alloc(ibv_mw_type type) {
    ibv_mw mw{};
    mw.type = type;
    REQUIRE(f.n2->alloc_mw(f.h2->context(), f.h2->pd(), type, mw.handle, mw.rkey) == 0);
    CHECK((mw.rkey & kMwKeyBit) != 0);
    return mw;
  }
  // Posts a send WR on h2's QP and returns its completion.
  ibv_wc post2(ibv_send_wr wr, SimHost::Qp* qp = nullptr, SimHost::Cq* cq = nullptr) {
    qp = qp != nullptr ? qp : p.q2;
    cq = cq != nullptr ? cq : p.cq2;
    wr.send_flags |= IBV_SEND_SIGNALED;
    REQUIRE(f.h2->post_send(qp, &wr) == 0);
    auto wc = wait_cqes(f, *f.h2, cq, 1);
    REQUIRE(wc.size() == 1);
    return wc[0];
  }
  // Binds `mw` (a new key byte, as ibv_inc_rkey) and on success keeps the new key.
  ibv_wc bind(ibv_mw& mw, ibv_mr* m, uint64_t addr, uint64_t len, int access, SimHost::Qp* qp = nullptr,
              SimHost::Cq* cq = nullptr) {
    ibv_send_wr wr{};
    wr.wr_id = 0xb1d;
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = &mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw.rkey);
    wr.bind_mw.bind_info = {m, addr, len, unsigned(access)};
    const ibv_wc wc = post2(wr, qp, cq);
    if (wc.status == IBV_WC_SUCCESS) mw.rkey = wr.bind_mw.rkey;
    return wc;
  }
  ibv_wc local_inv(uint32_t rkey) {
    ibv_send_wr wr{};
    wr.wr_id = 0x1f;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.invalidate_rkey = rkey;
    return post2(wr);
  }
  // The peer's RDMA WRITE of src[off..off+len) to `addr` under `rkey`
  // (or READ into got), through `qp` (h1's QP of the pair by default).
  ibv_wc peer(ibv_wr_opcode op, uint32_t rkey, uint64_t addr, uint32_t len, size_t off = 0,
              test::RcPair* pair = nullptr) {
    test::RcPair& q = pair != nullptr ? *pair : p;
    ibv_sge s = op == IBV_WR_RDMA_READ ? sge(got.data() + off, len, got_key) : sge(src.data() + off, len, src_key);
    ibv_send_wr wr = rdma_wr(&s, addr, rkey, 42, op);
    REQUIRE(f.h1->post_send(q.q1, &wr) == 0);
    auto wc = wait_cqes(f, *f.h1, q.cq1, 1);
    REQUIRE(wc.size() == 1);
    return wc[0];
  }
  // A refused access takes both QPs of the pair to the error state: a new one.
  void new_pair() {
    p = connect_rc(f);
    f.run([] { return false; }, ms(1));
  }
  bool mem_untouched(size_t from, size_t to) const {
    return std::all_of(mem.begin() + long(from), mem.begin() + long(to), [](uint8_t b) { return b == 0xee; });
  }
};

}  // namespace

TEST_CASE("A type 1 window: bound, the peer writes and reads inside it, nothing outside", "[sim][nic][mw]") {
  MwBench b;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
  const uint32_t unbound_key = mw.rkey;
  const ibv_wc wc = b.bind(mw, &b.mr, b.at(1024), 2048, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  REQUIRE(wc.status == IBV_WC_SUCCESS);
  CHECK(wc.opcode == IBV_WC_BIND_MW);
  CHECK(wc.wr_id == 0xb1d);
  CHECK(mw.rkey != unbound_key);
  CHECK((mw.rkey >> 8) == (unbound_key >> 8));

  SECTION("inside: bytes land and come back") {
    REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 2048).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.src.begin(), b.src.begin() + 2048, b.mem.begin() + 1024));
    CHECK(b.mem_untouched(0, 1024));
    CHECK(b.mem_untouched(3072, kBuf));
    REQUIRE(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(1536), 512, 100).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.got.begin() + 100, b.got.begin() + 612, b.mem.begin() + 1536));
  }
  SECTION("one byte past its end: remote access error, nothing written") {
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1025), 2048).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("one byte before its start: refused") {
    CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(1023), 16).status == IBV_WC_REM_ACCESS_ERR);
  }
  SECTION("the key it had before the bind: refused") {
    CHECK(b.peer(IBV_WR_RDMA_WRITE, unbound_key, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("rebound elsewhere: the new key reaches the new range, the old key nothing") {
    const uint32_t old = mw.rkey;
    REQUIRE(b.bind(mw, &b.mr, b.at(4096), 1024, IBV_ACCESS_REMOTE_WRITE).status == IBV_WC_SUCCESS);
    CHECK(mw.rkey != old);
    REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(4096), 1024).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.src.begin(), b.src.begin() + 1024, b.mem.begin() + 4096));
    CHECK(b.peer(IBV_WR_RDMA_WRITE, old, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, 4096));
  }
  SECTION("a zero-length bind: the window grants nothing") {
    REQUIRE(b.bind(mw, nullptr, 0, 0, 0).status == IBV_WC_SUCCESS);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 8).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("deallocated while bound: its key is refused") {
    REQUIRE(b.f.n2->dealloc_mw(b.f.h2->context(), mw.handle) == 0);
    CHECK(b.f.n2->dealloc_mw(b.f.h2->context(), mw.handle) == EINVAL);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 8).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("its MR may not be deregistered under it: EINVAL, the window still reaches it") {
    CHECK(b.f.h2->dereg_mr(b.mr.lkey) == EINVAL);
    CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(1024), 8).status == IBV_WC_SUCCESS);
  }
  SECTION("a local invalidate of a type 1 window fails the WQE") {
    const ibv_wc inv = b.local_inv(mw.rkey);
    CHECK(inv.status == IBV_WC_MW_BIND_ERR);
    CHECK(inv.opcode == IBV_WC_LOCAL_INV);
  }
}

TEST_CASE("A window grants only its own rights", "[sim][nic][mw]") {
  MwBench b;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
  SECTION("read only: a WRITE and an atomic are refused") {
    REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
    CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(0), 64).status == IBV_WC_SUCCESS);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("atomic: a FETCH_ADD inside adds, a READ is refused") {
    REQUIRE(b.bind(mw, &b.mr, b.at(64), 64, IBV_ACCESS_REMOTE_ATOMIC).status == IBV_WC_SUCCESS);
    ibv_sge s = sge(b.got.data(), 8, b.got_key);
    ibv_send_wr wr{};
    wr.wr_id = 9;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = b.at(64);
    wr.wr.atomic.rkey = mw.rkey;
    wr.wr.atomic.compare_add = 1;
    REQUIRE(b.f.h1->post_send(b.p.q1, &wr) == 0);
    auto wc = wait_cqes(b.f, *b.f.h1, b.p.cq1, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    uint64_t v;
    std::memcpy(&v, b.mem.data() + 64, 8);
    CHECK(v == 0xeeeeeeeeeeeeeeefull);
    CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(64), 8).status == IBV_WC_REM_ACCESS_ERR);
  }
}

TEST_CASE("The window's rights, not the MR's, open it to the peer", "[sim][nic][mw]") {
  // An MR with no remote rights of its own: only through a window.
  MwBench b(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
  REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ).status ==
          IBV_WC_SUCCESS);
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(512), 1024).status == IBV_WC_SUCCESS);
  CHECK(std::equal(b.src.begin(), b.src.begin() + 1024, b.mem.begin() + 512));
  CHECK(b.peer(IBV_WR_RDMA_WRITE, b.mr.rkey, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);  // the MR's own key
  CHECK(b.mem_untouched(0, 512));
}

TEST_CASE("Binds on a UC QP; not on a UD QP", "[sim][nic][mw]") {
  TwoNics f;
  auto* cq = f.h2->create_cq(16);
  const ibv_qp_cap cap{16, 16, 1, 1, 0};
  std::vector<uint8_t> mem(4096);
  ibv_mr mr{};
  mr.lkey = f.h2->reg_mr(mem.data(), mem.size(), test::kAccessAll | IBV_ACCESS_MW_BIND);
  ibv_mw mw{};
  REQUIRE(f.n2->alloc_mw(f.h2->context(), f.h2->pd(), IBV_MW_TYPE_2, mw.handle, mw.rkey) == 0);
  ibv_send_wr wr{};
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = &mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw.rkey);
  wr.bind_mw.bind_info = {&mr, reinterpret_cast<uint64_t>(mem.data()), 64, IBV_ACCESS_REMOTE_WRITE};
  SECTION("UC") {
    auto* uc2 = f.h2->create_qp(QpType::kUc, cq, cq, cap);
    auto* cq1 = f.h1->create_cq(16);
    auto* uc1 = f.h1->create_qp(QpType::kUc, cq1, cq1, cap);
    REQUIRE(SimHost::connect(*f.h1, uc1, *f.h2, uc2) == 0);
    REQUIRE(f.h2->post_send(uc2, &wr) == 0);
    const auto wc = wait_cqes(f, *f.h2, cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_SUCCESS);
    CHECK(wc[0].opcode == IBV_WC_BIND_MW);
  }
  SECTION("UD: a local QP operation error") {
    auto* ud = f.h2->create_qp(QpType::kUd, cq, cq, cap);
    REQUIRE(f.h2->activate_ud(ud, 0x11111111) == 0);
    REQUIRE(f.h2->post_send(ud, &wr) == 0);
    const auto wc = wait_cqes(f, *f.h2, cq, 1);
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_LOC_QP_OP_ERR);
  }
}

TEST_CASE("Binds that may not be: IBV_WC_MW_BIND_ERR, the window unchanged", "[sim][nic][mw]") {
  SECTION("an MR without IBV_ACCESS_MW_BIND") {
    MwBench b(test::kAccessAll);
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    const uint32_t key = mw.rkey;
    const ibv_wc wc = b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ);
    CHECK(wc.status == IBV_WC_MW_BIND_ERR);
    CHECK(wc.opcode == IBV_WC_BIND_MW);
    CHECK(mw.rkey == key);
  }
  SECTION("remote write rights over an MR without local write") {
    MwBench b(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_WRITE).status == IBV_WC_MW_BIND_ERR);
  }
  MwBench b;
  SECTION("a range past the MR's end") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    CHECK(b.bind(mw, &b.mr, b.at(kBuf - 64), 65, IBV_ACCESS_REMOTE_READ).status == IBV_WC_MW_BIND_ERR);
  }
  SECTION("zero-based rights") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED).status ==
          IBV_WC_MW_BIND_ERR);
  }
  SECTION("a type 2 window of length 0") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
    CHECK(b.bind(mw, &b.mr, b.at(0), 0, IBV_ACCESS_REMOTE_READ).status == IBV_WC_MW_BIND_ERR);
  }
  SECTION("a type 2 window bound already") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
    REQUIRE(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
    CHECK(b.bind(mw, &b.mr, b.at(64), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_MW_BIND_ERR);
  }
  SECTION("a key of another window") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    ibv_mw other = b.alloc(IBV_MW_TYPE_1);
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = &mw;
    wr.bind_mw.rkey = other.rkey;
    wr.bind_mw.bind_info = {&b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ};
    CHECK(b.post2(wr).status == IBV_WC_MW_BIND_ERR);
  }
  for (const ibv_mw_type type : {IBV_MW_TYPE_1, IBV_MW_TYPE_2}) {
    DYNAMIC_SECTION("a window of type " << int(type) << " of another PD than the QP's") {
      uint32_t pd;
      REQUIRE(b.f.n2->alloc_pd(b.f.h2->context(), pd) == 0);
      ibv_mw mw{};
      REQUIRE(b.f.n2->alloc_mw(b.f.h2->context(), pd, type, mw.handle, mw.rkey) == 0);
      CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_MW_BIND_ERR);
    }
  }
  SECTION("a failed bind takes the QP to the error state: what follows is flushed") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    REQUIRE(b.bind(mw, &b.mr, b.at(kBuf), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_MW_BIND_ERR);
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_WR_FLUSH_ERR);
  }
  SECTION("alloc: an unknown type or PD is EINVAL; a PD with windows is busy") {
    uint32_t h, k;
    CHECK(b.f.n2->alloc_mw(b.f.h2->context(), b.f.h2->pd(), 3, h, k) == EINVAL);
    CHECK(b.f.n2->alloc_mw(b.f.h2->context(), 0, IBV_MW_TYPE_1, h, k) == EINVAL);
    CHECK(b.f.n2->alloc_mw(b.f.h1->context(), b.f.h2->pd(), IBV_MW_TYPE_1, h, k) == EINVAL);
    uint32_t pd;
    REQUIRE(b.f.n2->alloc_pd(b.f.h2->context(), pd) == 0);
    REQUIRE(b.f.n2->alloc_mw(b.f.h2->context(), pd, IBV_MW_TYPE_2, h, k) == 0);
    CHECK(b.f.n2->dealloc_pd(b.f.h2->context(), pd) == EBUSY);
    REQUIRE(b.f.n2->dealloc_mw(b.f.h2->context(), h) == 0);
    CHECK(b.f.n2->dealloc_pd(b.f.h2->context(), pd) == 0);
  }
}

TEST_CASE("A type 2 window: bound to one QP, freed by a local invalidate", "[sim][nic][mw]") {
  MwBench b;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
  REQUIRE(b.bind(mw, &b.mr, b.at(2048), 1024, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(2048), 1024).status == IBV_WC_SUCCESS);
  CHECK(std::equal(b.src.begin(), b.src.begin() + 1024, b.mem.begin() + 2048));

  SECTION("through another QP of the same PD: refused") {
    test::RcPair other = connect_rc(b.f);
    b.f.run([] { return false; }, ms(1));
    const std::vector<uint8_t> before = b.mem;
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(2048), 64, 4096, &other).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem == before);
  }
  SECTION("invalidated locally: refused; bound again, with a new key") {
    const ibv_wc inv = b.local_inv(mw.rkey);
    REQUIRE(inv.status == IBV_WC_SUCCESS);
    CHECK(inv.opcode == IBV_WC_LOCAL_INV);
    const uint32_t old = mw.rkey;
    SECTION("the old key is refused") {
      const std::vector<uint8_t> before = b.mem;
      CHECK(b.peer(IBV_WR_RDMA_WRITE, old, b.at(2048), 64, 4096).status == IBV_WC_REM_ACCESS_ERR);
      CHECK(b.mem == before);
    }
    SECTION("invalidated again (free already): completes, changes nothing; bound again after") {
      const ibv_wc again = b.local_inv(old);
      CHECK(again.status == IBV_WC_SUCCESS);
      CHECK(again.opcode == IBV_WC_LOCAL_INV);
      CHECK(b.peer(IBV_WR_RDMA_READ, old, b.at(2048), 64).status == IBV_WC_REM_ACCESS_ERR);
      b.new_pair();
      CHECK(b.bind(mw, &b.mr, b.at(64), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
    }
    SECTION("bound again: the new key works, the old one not") {
      REQUIRE(b.bind(mw, &b.mr, b.at(64), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
      CHECK(mw.rkey != old);
      CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(64), 64).status == IBV_WC_SUCCESS);
      CHECK(std::equal(b.got.begin(), b.got.begin() + 64, b.mem.begin() + 64));
      CHECK(b.peer(IBV_WR_RDMA_READ, old, b.at(2048), 64).status == IBV_WC_REM_ACCESS_ERR);
    }
  }
  SECTION("a local invalidate with a stale key fails") {
    CHECK(b.local_inv(ibv_inc_rkey(mw.rkey)).status == IBV_WC_MW_BIND_ERR);
  }
}

TEST_CASE("SEND with invalidate frees the peer's type 2 window", "[sim][nic][mw]") {
  MwBench b;
  std::vector<uint8_t> rbuf(256, 0);
  const uint32_t rkey_buf = b.f.h2->reg_mr(rbuf.data(), rbuf.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_sge rs = sge(rbuf.data(), 256, rkey_buf);
  ibv_recv_wr rw{};
  rw.wr_id = 0x5ec;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  REQUIRE(b.f.h2->post_recv(b.p.q2, &rw) == 0);
  auto send_inv = [&](uint32_t key) {
    ibv_sge s = sge(b.src.data(), 32, b.src_key);
    ibv_send_wr wr{};
    wr.wr_id = 0x51;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = key;
    REQUIRE(b.f.h1->post_send(b.p.q1, &wr) == 0);
    auto s1 = wait_cqes(b.f, *b.f.h1, b.p.cq1, 1);
    REQUIRE(s1.size() == 1);
    auto s2 = wait_cqes(b.f, *b.f.h2, b.p.cq2, 1);
    REQUIRE(s2.size() == 1);
    return std::pair{s1[0], s2[0]};
  };
  SECTION("a bound type 2 window: the receive says which key went; the key is refused after") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
    REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
    const auto [sent, recv] = send_inv(mw.rkey);
    CHECK(sent.status == IBV_WC_SUCCESS);
    REQUIRE(recv.status == IBV_WC_SUCCESS);
    CHECK(recv.wr_id == 0x5ec);
    CHECK(recv.opcode == IBV_WC_RECV);
    CHECK((recv.wc_flags & IBV_WC_WITH_INV) != 0);
    CHECK(recv.invalidated_rkey == mw.rkey);
    CHECK(recv.byte_len == 32);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("a free type 2 window (invalidated already): the receive completes, the window stays free") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
    REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
    REQUIRE(b.local_inv(mw.rkey).status == IBV_WC_SUCCESS);
    const auto [sent, recv] = send_inv(mw.rkey);
    CHECK(sent.status == IBV_WC_SUCCESS);
    REQUIRE(recv.status == IBV_WC_SUCCESS);
    CHECK((recv.wc_flags & IBV_WC_WITH_INV) != 0);
    CHECK(recv.invalidated_rkey == mw.rkey);
    CHECK(b.p.q2->nic_qp->state == IBV_QPS_RTS);
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
  }
  SECTION("a key the window no longer has: the receive fails, the window stays bound") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
    REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
    const auto [sent, recv] = send_inv(ibv_inc_rkey(mw.rkey));
    CHECK(sent.status == IBV_WC_SUCCESS);
    CHECK(recv.status == IBV_WC_REM_INV_REQ_ERR);
    b.new_pair();
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_MW_BIND_ERR);  // still bound
  }
  SECTION("a type 1 window may not be invalidated: the receive fails, the window stays") {
    ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
    REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
    const auto [sent, recv] = send_inv(mw.rkey);
    CHECK(sent.status == IBV_WC_SUCCESS);  // acknowledged (IBA class J, as rxe)
    CHECK(recv.status == IBV_WC_REM_INV_REQ_ERR);
    CHECK(b.p.q2->nic_qp->state == IBV_QPS_ERR);
  }
}

TEST_CASE("ibv_rereg_mr: each flag takes effect for the peer, an error changes nothing", "[sim][nic][rereg]") {
  MwBench b;
  HostContext* ctx = b.f.h2->context();
  Nic& nic = *b.f.n2;
  const uint32_t key = b.mr.lkey;
  uint32_t now = 0;  // the MR's key after the rereg
  std::vector<uint8_t> moved(6 * 4096, 0x77);
  // A page-aligned page of `moved`: no more pages than the MR was made for.
  const uint64_t page = (reinterpret_cast<uint64_t>(moved.data()) + 4095) & ~uint64_t(4095);
  SECTION("CHANGE_TRANSLATION to no more pages: the same key reaches the new range, the old one nothing") {
    REQUIRE(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, page, 4096, 0, &now) == 0);
    CHECK(now == key);
    REQUIRE(b.peer(IBV_WR_RDMA_WRITE, key, page + 100, 1000).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.src.begin(), b.src.begin() + 1000, moved.begin() + long(page + 100 - uint64_t(moved.data()))));
    CHECK(b.peer(IBV_WR_RDMA_WRITE, key, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("CHANGE_TRANSLATION to more pages: a new key (mlx5 makes a new mkey); the old key is refused") {
    REQUIRE(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, page, 5 * 4096, 0, &now) == 0);
    CHECK(now != key);
    CHECK(nic.mr_access(ctx, key) == -1);
    SECTION("the new key") {
      REQUIRE(b.peer(IBV_WR_RDMA_WRITE, now, page + 4 * 4096, 1000).status == IBV_WC_SUCCESS);
      CHECK(std::equal(b.src.begin(), b.src.begin() + 1000,
                       moved.begin() + long(page + 4 * 4096 - uint64_t(moved.data()))));
    }
    SECTION("the old key") {
      CHECK(b.peer(IBV_WR_RDMA_WRITE, key, page, 64).status == IBV_WC_REM_ACCESS_ERR);
      CHECK(std::all_of(moved.begin(), moved.end(), [](uint8_t v) { return v == 0x77; }));
    }
  }
  SECTION("CHANGE_PD: the key stays; in another PD the peer's QP cannot use it; back, it can") {
    uint32_t other;
    REQUIRE(nic.alloc_pd(ctx, other) == 0);
    REQUIRE(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0, &now) == 0);
    CHECK(now == key);
    CHECK(nic.dealloc_pd(ctx, other) == EBUSY);
    SECTION("away") {
      CHECK(b.peer(IBV_WR_RDMA_WRITE, key, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
      CHECK(b.mem_untouched(0, kBuf));
    }
    SECTION("back") {
      REQUIRE(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_PD, b.f.h2->pd(), 0, 0, 0) == 0);
      CHECK(nic.dealloc_pd(ctx, other) == 0);
      CHECK(b.peer(IBV_WR_RDMA_WRITE, key, b.at(0), 64).status == IBV_WC_SUCCESS);
    }
  }
  SECTION("CHANGE_ACCESS of remote rights: the key stays; a WRITE is refused, a READ answered") {
    REQUIRE(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND, &now) == 0);
    CHECK(now == key);
    CHECK(nic.mr_access(ctx, key) == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND));
    CHECK(b.peer(IBV_WR_RDMA_READ, key, b.at(0), 64).status == IBV_WC_SUCCESS);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, key, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("CHANGE_ACCESS of IBV_ACCESS_MW_BIND: a new key, the old one refused") {
    REQUIRE(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, test::kAccessAll, &now) == 0);
    CHECK(now != key);
    CHECK(nic.mr_access(ctx, now) == test::kAccessAll);
    SECTION("the new key") { CHECK(b.peer(IBV_WR_RDMA_WRITE, now, b.at(0), 64).status == IBV_WC_SUCCESS); }
    SECTION("the old key") {
      CHECK(b.peer(IBV_WR_RDMA_WRITE, key, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
      CHECK(b.mem_untouched(0, kBuf));
    }
  }
  SECTION("all three at once") {
    uint32_t other;
    REQUIRE(nic.alloc_pd(ctx, other) == 0);
    REQUIRE(nic.rereg_mr(ctx, key,
                         IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS, other,
                         page, 4096, IBV_ACCESS_LOCAL_WRITE, &now) == 0);
    CHECK(nic.mr_access(ctx, now) == IBV_ACCESS_LOCAL_WRITE);
    CHECK(nic.dealloc_pd(ctx, other) == EBUSY);
    CHECK(b.peer(IBV_WR_RDMA_READ, now, page, 64).status == IBV_WC_REM_ACCESS_ERR);
  }
  SECTION("errors: EINVAL, and the MR works as before under its key") {
    CHECK(nic.rereg_mr(ctx, key, 0, 0, 0, 0, 0) == EINVAL);
    CHECK(nic.rereg_mr(ctx, key, 1 << 5, 0, 0, 0, 0) == EINVAL);
    CHECK(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, IBV_ACCESS_REMOTE_WRITE) == EINVAL);
    CHECK(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_TRANSLATION, 0, page, 0, 0) == EINVAL);
    CHECK(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_PD, 0, 0, 0, 0) == EINVAL);
    CHECK(nic.rereg_mr(ctx, key, IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_TRANSLATION, 0, page, 5 * 4096, 0) ==
          EINVAL);  // one bad part: nothing changes, the key neither
    CHECK(nic.rereg_mr(b.f.h1->context(), key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, 0) == EINVAL);
    CHECK(nic.rereg_mr(ctx, key + 1, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, 0) == EINVAL);
    REQUIRE(b.peer(IBV_WR_RDMA_WRITE, key, b.at(64), 128).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.src.begin(), b.src.begin() + 128, b.mem.begin() + 64));
    CHECK(std::all_of(moved.begin(), moved.end(), [](uint8_t v) { return v == 0x77; }));
  }
}

TEST_CASE("ibv_rereg_mr under a bound window: the window follows the MR as it is now", "[sim][nic][rereg][mw]") {
  MwBench b;
  HostContext* ctx = b.f.h2->context();
  Nic& nic = *b.f.n2;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
  REQUIRE(b.bind(mw, &b.mr, b.at(1024), 1024, kMwRights).status == IBV_WC_SUCCESS);
  SECTION("only the access changes (keeping MW_BIND): the window still works") {
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) == 0);
    REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 1024).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.src.begin(), b.src.begin() + 1024, b.mem.begin() + 1024));
  }
  SECTION("local write taken away (in place): the window's WRITE refused, READ answered (C10-74)") {
    uint32_t now = 0;
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0,
                         IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND, &now) == 0);
    CHECK(now == b.mr.lkey);
    CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(1024), 64).status == IBV_WC_SUCCESS);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("MW_BIND taken away: the window reaches nothing") {
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, test::kAccessAll) == 0);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("the MR moved elsewhere (in place: no more pages): the window's range is no longer in it") {
    std::vector<uint8_t> moved(kBuf, 0x77);
    uint32_t now = 0;
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_TRANSLATION, 0, reinterpret_cast<uint64_t>(moved.data()),
                         1024, 0, &now) == 0);
    CHECK(now == b.mr.lkey);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
    CHECK(std::all_of(moved.begin(), moved.end(), [](uint8_t v) { return v == 0x77; }));
  }
  SECTION("the MR in another PD than the window: refused") {
    uint32_t other;
    REQUIRE(nic.alloc_pd(ctx, other) == 0);
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0) == 0);
    CHECK(b.peer(IBV_WR_RDMA_READ, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
  }
  SECTION("the MR into another PD and back: the window stays unbound, free to bind again") {
    uint32_t other;
    REQUIRE(nic.alloc_pd(ctx, other) == 0);
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0) == 0);
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_PD, b.f.h2->pd(), 0, 0, 0) == 0);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
    b.new_pair();
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
  }
  SECTION("a translation changed in place to the same memory (munmap, mmap) unbinds it") {
    uint32_t now = 0;
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_TRANSLATION, 0, b.at(0), kBuf, 0, &now) == 0);
    CHECK(now == b.mr.lkey);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("new keys, MW_BIND taken away and given back: the window stays unbound") {
    uint32_t away = 0, back = 0;
    REQUIRE(nic.rereg_mr(ctx, b.mr.lkey, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, test::kAccessAll, &away) == 0);
    REQUIRE(nic.rereg_mr(ctx, away, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, test::kAccessAll | IBV_ACCESS_MW_BIND,
                         &back) == 0);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
    b.new_pair();
    b.mr.lkey = back;
    CHECK(b.bind(mw, &b.mr, b.at(0), 64, IBV_ACCESS_REMOTE_READ).status == IBV_WC_SUCCESS);
  }
}

TEST_CASE("ibv_dereg_mr of an MR with bound windows is EINVAL: the MR and its windows stay (ibv_reg_mr(3), rxe)",
          "[sim][nic][mw]") {
  MwBench b;
  ibv_mw one = b.alloc(IBV_MW_TYPE_1), two = b.alloc(IBV_MW_TYPE_2);
  REQUIRE(b.bind(one, &b.mr, b.at(0), 1024, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.bind(two, &b.mr, b.at(1024), 1024, kMwRights).status == IBV_WC_SUCCESS);
  CHECK(b.f.h2->dereg_mr(b.mr.lkey) == EINVAL);
  // Both windows and the MR itself still reach the memory.
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, one.rkey, b.at(0), 1024).status == IBV_WC_SUCCESS);
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, two.rkey, b.at(1024), 1024, 1024).status == IBV_WC_SUCCESS);
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, b.mr.rkey, b.at(2048), 1024, 2048).status == IBV_WC_SUCCESS);
  CHECK(std::equal(b.src.begin(), b.src.begin() + 3072, b.mem.begin()));
  SECTION("each window gone, the MR may go") {
    REQUIRE(b.local_inv(two.rkey).status == IBV_WC_SUCCESS);
    CHECK(b.f.h2->dereg_mr(b.mr.lkey) == EINVAL);  // the type 1 window is still bound
    REQUIRE(b.f.n2->dealloc_mw(b.f.h2->context(), one.handle) == 0);
    CHECK(b.f.h2->dereg_mr(b.mr.lkey) == 0);
  }
  SECTION("a type 1 window bound to another MR, or with no MR, holds the first MR no more") {
    std::vector<uint8_t> more(kBuf, 0);
    ibv_mr other{};
    other.lkey = other.rkey = b.f.h2->reg_mr(more.data(), kBuf, test::kAccessAll | IBV_ACCESS_MW_BIND);
    REQUIRE(other.lkey != 0);
    REQUIRE(b.bind(one, &other, reinterpret_cast<uint64_t>(more.data()), 64, kMwRights).status == IBV_WC_SUCCESS);
    REQUIRE(b.local_inv(two.rkey).status == IBV_WC_SUCCESS);
    CHECK(b.f.h2->dereg_mr(b.mr.lkey) == 0);
    CHECK(b.f.h2->dereg_mr(other.lkey) == EINVAL);
    REQUIRE(b.bind(one, nullptr, 0, 0, 0).status == IBV_WC_SUCCESS);
    CHECK(b.f.h2->dereg_mr(other.lkey) == 0);
  }
  SECTION("the type 2 window's QP destroyed: that window holds the MR no more") {
    REQUIRE(b.f.h2->destroy_qp(b.p.q2) == 0);
    REQUIRE(b.f.n2->dealloc_mw(b.f.h2->context(), one.handle) == 0);
    CHECK(b.f.h2->dereg_mr(b.mr.lkey) == 0);
  }
}

TEST_CASE("An application's exit with windows bound to its MRs and through its QPs: every one of them goes",
          "[sim][nic][mw]") {
  MwBench b;
  ibv_mw one = b.alloc(IBV_MW_TYPE_1), two = b.alloc(IBV_MW_TYPE_2);
  REQUIRE(b.bind(one, &b.mr, b.at(0), 1024, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.bind(two, &b.mr, b.at(1024), 1024, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.f.h2->dereg_mr(b.mr.lkey) == EINVAL);
  REQUIRE(NicTestPeer::mrs(*b.f.n2) == 1);
  REQUIRE(NicTestPeer::mws(*b.f.n2) == 2);
  b.f.h2.reset();  // the process goes: close_context
  CHECK(NicTestPeer::mrs(*b.f.n2) == 0);
  CHECK(NicTestPeer::mws(*b.f.n2) == 0);
}

TEST_CASE("ibv_rereg_mr to a new key unbinds the MR's windows: a later MR under the old key gets nothing through them",
          "[sim][nic][mw]") {
  // The NIC holds as many MRs as its key space has slots, so the one slot
  // freed is taken again at once, and its key (slot and generation) comes
  // round after 2^kGenBits registrations.
  constexpr uint32_t kSlots = (1u << KeyedTable<Mr, 19>::kSlotBits) - 1;
  MwBench b(test::kAccessAll | IBV_ACCESS_MW_BIND, [](NicConfig& c) {
    c.max_mr = kSlots;
    c.app_quota.mrs = kSlots;
  });
  for (const ibv_mw_type type : {IBV_MW_TYPE_1, IBV_MW_TYPE_2}) {
    DYNAMIC_SECTION("type " << int(type)) {
      ibv_mw mw = b.alloc(type);
      REQUIRE(b.bind(mw, &b.mr, b.at(0), kBuf, kMwRights).status == IBV_WC_SUCCESS);
      REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_SUCCESS);  // it did reach the MR
      std::fill(b.mem.begin(), b.mem.end(), 0xee);
      const uint32_t key = b.mr.lkey;
      // MW_BIND taken away: a new mkey, the old key given back.
      uint32_t moved = 0;
      REQUIRE(b.f.n2->rereg_mr(b.f.h2->context(), key, IBV_REREG_MR_CHANGE_ACCESS, 0, 0, 0, test::kAccessAll,
                               &moved) == 0);
      REQUIRE(moved != key);
      constexpr uint32_t kGenBits = KeyedTable<Mr, 19>::kGenBits;
      uint32_t again = 0;
      for (uint64_t n = 0; again != key && n < 2 * uint64_t(kSlots); n++) {
        again = b.f.h2->reg_mr(b.mem.data(), kBuf, test::kAccessAll | IBV_ACCESS_MW_BIND);
        if (again == 0) break;
        // The freed slot under another generation: given back, to come round again.
        if (again != key && again >> kGenBits == key >> kGenBits && b.f.h2->dereg_mr(again) != 0) break;
      }
      REQUIRE(again == key);
      CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
      CHECK(b.mem_untouched(0, kBuf));
    }
  }
}

TEST_CASE("ibv_destroy_qp unbinds the type 2 windows bound through it", "[sim][nic][mw]") {
  MwBench b;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_2);
  REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_SUCCESS);  // it did reach the MR
  std::fill(b.mem.begin(), b.mem.end(), 0xee);
  const uint32_t qpn = b.p.q2->qpn;
  REQUIRE(b.f.h2->destroy_qp(b.p.q2) == 0);
  SECTION("a new QP under the same QPN reaches nothing through the old key") {
    NicTestPeer::set_next_qpn(*b.f.n2, qpn);
    b.new_pair();
    REQUIRE(b.p.q2->qpn == qpn);
    CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, kBuf));
  }
  SECTION("the window is free: invalidated (nothing to do), bound again through another QP, the new key works") {
    b.new_pair();
    const uint32_t old = mw.rkey;
    CHECK(b.local_inv(old).status == IBV_WC_SUCCESS);
    REQUIRE(b.bind(mw, &b.mr, b.at(1024), 1024, IBV_ACCESS_REMOTE_WRITE).status == IBV_WC_SUCCESS);
    REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(1024), 1024).status == IBV_WC_SUCCESS);
    CHECK(std::equal(b.src.begin(), b.src.begin() + 1024, b.mem.begin() + 1024));
    CHECK(b.peer(IBV_WR_RDMA_WRITE, old, b.at(0), 64).status == IBV_WC_REM_ACCESS_ERR);
    CHECK(b.mem_untouched(0, 1024));
  }
}

TEST_CASE("ibv_destroy_qp leaves a type 1 window bound through it (a type 1 window belongs to its PD)",
          "[sim][nic][mw]") {
  MwBench b;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
  REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.f.h2->destroy_qp(b.p.q2) == 0);
  b.new_pair();
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_SUCCESS);
  CHECK(std::equal(b.src.begin(), b.src.begin() + 64, b.mem.begin()));
}

TEST_CASE("A window is reached only through QPs of its PD: another application's QP on its NIC is refused",
          "[sim][nic][mw]") {
  MwBench b;
  ibv_mw mw = b.alloc(IBV_MW_TYPE_1);
  REQUIRE(b.bind(mw, &b.mr, b.at(0), 4096, kMwRights).status == IBV_WC_SUCCESS);
  REQUIRE(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64).status == IBV_WC_SUCCESS);  // through a QP of its PD
  std::fill(b.mem.begin(), b.mem.end(), 0xee);
  SimHost other(*b.f.engine, *b.f.n2);  // another context, another PD
  const ibv_qp_cap cap{16, 16, 1, 1, 0};
  test::RcPair pair{};
  pair.cq1 = b.f.h1->create_cq(16);
  pair.cq2 = other.create_cq(16);
  pair.q1 = b.f.h1->create_qp(QpType::kRc, pair.cq1, pair.cq1, cap);
  pair.q2 = other.create_qp(QpType::kRc, pair.cq2, pair.cq2, cap);
  REQUIRE(SimHost::connect(*b.f.h1, pair.q1, other, pair.q2) == 0);
  CHECK(b.peer(IBV_WR_RDMA_WRITE, mw.rkey, b.at(0), 64, 0, &pair).status == IBV_WC_REM_ACCESS_ERR);
  CHECK(b.mem_untouched(0, kBuf));
}
