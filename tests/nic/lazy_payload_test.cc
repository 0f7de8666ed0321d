// Frames whose payload stays in the sender's memory until it is needed
// (common/engine/lazy_payload.h): the receiver gets the bytes, and a frame
// still in flight when the memory goes keeps them.
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "common/engine/lazy_payload.h"
#include "nic/verbs/process_memory.h"
#include "tests/nic/fabric.h"
#include "tests/support/eal.h"

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::connect_rc;
using rocemu::test::rdma_wr;
using rocemu::test::sge;
using rocemu::test::TwoNics;
using rocemu::test::wait_cqes;

namespace {

// This process's memory, lent to frames as the engine's MR windows are.
class LendingMemory final : public HostMemory {
 public:
  bool read(uint64_t addr, void* dst, size_t len) override {
    std::memcpy(dst, reinterpret_cast<const void*>(addr), len);
    return true;
  }
  bool write(uint64_t addr, const void* src, size_t len) override {
    std::memcpy(reinterpret_cast<void*>(addr), src, len);
    return true;
  }
  const uint8_t* lend(uint64_t addr, size_t) override { return reinterpret_cast<const uint8_t*>(addr); }
};

void lend_on_h1(TwoNics& f) {
  f.h1.reset();
  f.h1 = std::make_unique<SimHost>(*f.engine, *f.n1, std::make_unique<LendingMemory>());
}

}  // namespace

TEST_CASE("A WRITE from lent memory: frames point at the sender's bytes, the receiver gets them",
          "[sim][nic][lazy]") {
  // The lent memory outlives the fabric: frames left in the pools still
  // point at it until the NICs go (the engine unmaps only after a walk).
  std::vector<uint8_t> src(65536), dst(65536, 0);
  TwoNics f;
  lend_on_h1(f);
  auto p = connect_rc(f);
  for (size_t i = 0; i < src.size(); i++) src[i] = uint8_t(i * 7 + 3);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  const uint64_t made = dpdk::lazy_frames_made();
  ibv_sge s = sge(src.data(), 65536, lkey);
  ibv_send_wr w = rdma_wr(&s, uint64_t(dst.data()), rkey, 1);
  REQUIRE(f.h1->post_send(p.q1, &w) == 0);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 1);
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(dpdk::lazy_frames_made() - made >= 16);  // one per 4096-byte packet
  CHECK(dst == src);
}

TEST_CASE("A frame still in flight when its memory goes keeps the bytes it was sent with", "[sim][nic][lazy]") {
  LinkParams lp;
  lp.delay = ms(1);
  std::vector<uint8_t> src(16384, 0x5c), dst(16384, 0);  // outlives the fabric
  TwoNics f(1, LossRecovery::kGoBackN, lp);
  lend_on_h1(f);
  auto p = connect_rc(f);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  // The neighbour resolved first (its ARP takes a round trip).
  ibv_sge s0 = sge(src.data(), 64, lkey);
  ibv_send_wr w0 = rdma_wr(&s0, uint64_t(dst.data()), rkey, 0);
  REQUIRE(f.h1->post_send(p.q1, &w0) == 0);
  REQUIRE(wait_cqes(f, *f.h1, p.cq1, 1, ms(50)).size() == 1);
  std::fill(dst.begin(), dst.end(), 0);
  ibv_sge s = sge(src.data(), 16384, lkey);
  ibv_send_wr w = rdma_wr(&s, uint64_t(dst.data()), rkey, 1);
  REQUIRE(f.h1->post_send(p.q1, &w) == 0);
  // All four frames are on the link (1 ms), none has arrived.
  f.run([] { return false; }, us(100));
  REQUIRE(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; }));
  // What the engine does before it unmaps memory it lent; then the pages
  // hold something else (unmapped, the read would fault).
  const uint64_t filled = dpdk::lazy_frames_materialized();
  dpdk::materialize_from(src.data(), src.data() + src.size());
  CHECK(dpdk::lazy_frames_materialized() - filled >= 4);
  std::fill(src.begin(), src.end(), 0xee);
  auto wc = wait_cqes(f, *f.h1, p.cq1, 1, ms(50));
  REQUIRE(wc.size() == 1);
  CHECK(wc[0].status == IBV_WC_SUCCESS);
  CHECK(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0x5c; }));
}

namespace {

// A 16 KiB WRITE of 0x5c from lent memory is on a 1 ms link when `fail`
// ends it at the sender; once the application has heard (an error
// completion, or the QP gone), it overwrites its buffer with 0xee. The
// receiver, its QP still ready, must get 0x5c or nothing, never 0xee.
void overwrite_after_failure(const std::function<void(TwoNics&, test::RcPair&)>& fail) {
  LinkParams lp;
  lp.delay = ms(1);
  std::vector<uint8_t> src(16384, 0x5c), dst(16384, 0);  // outlives the fabric
  TwoNics f(1, LossRecovery::kGoBackN, lp);
  lend_on_h1(f);
  auto p = connect_rc(f);
  const uint32_t lkey = f.h1->reg_mr(src.data(), src.size(), test::kAccessAll);
  const uint32_t rkey = f.h2->reg_mr(dst.data(), dst.size(), test::kAccessAll);
  ibv_sge s0 = sge(src.data(), 64, lkey);
  ibv_send_wr w0 = rdma_wr(&s0, uint64_t(dst.data()), rkey, 0);
  REQUIRE(f.h1->post_send(p.q1, &w0) == 0);
  REQUIRE(wait_cqes(f, *f.h1, p.cq1, 1, ms(50)).size() == 1);
  std::fill(dst.begin(), dst.end(), 0);
  const uint64_t made = dpdk::lazy_frames_made();
  ibv_sge s = sge(src.data(), 16384, lkey);
  ibv_send_wr w = rdma_wr(&s, uint64_t(dst.data()), rkey, 1);
  REQUIRE(f.h1->post_send(p.q1, &w) == 0);
  f.run([] { return false; }, us(100));
  REQUIRE(dpdk::lazy_frames_made() - made >= 4);
  REQUIRE(std::all_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0; }));
  fail(f, p);
  std::fill(src.begin(), src.end(), 0xee);
  f.run([] { return false; }, ms(5));
  CHECK(std::none_of(dst.begin(), dst.end(), [](uint8_t b) { return b == 0xee; }));
}

}  // namespace

TEST_CASE("A sender QP moved to ERR with frames in flight: the receiver never sees bytes written after the flush error",
          "[sim][nic][lazy]") {
  overwrite_after_failure([](TwoNics& f, test::RcPair& p) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    REQUIRE(f.h1->modify(p.q1, a, IBV_QP_STATE) == 0);
    auto wc = wait_cqes(f, *f.h1, p.cq1, 1, us(10));
    REQUIRE(wc.size() == 1);
    CHECK(wc[0].status == IBV_WC_WR_FLUSH_ERR);
  });
}

TEST_CASE("A sender QP destroyed with frames in flight: the receiver never sees bytes written after", "[sim][nic][lazy]") {
  overwrite_after_failure([](TwoNics& f, test::RcPair& p) { REQUIRE(f.h1->destroy_qp(p.q1) == 0); });
}

TEST_CASE("A sender QP moved to RESET with frames in flight: the receiver never sees bytes written after",
          "[sim][nic][lazy]") {
  overwrite_after_failure([](TwoNics& f, test::RcPair& p) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    REQUIRE(f.h1->modify(p.q1, a, IBV_QP_STATE) == 0);
  });
}

TEST_CASE("Unmapping windows walks the packet pools only for frames made lazy since the last walk, once for all",
          "[sim][nic][lazy]") {
  test::require_eal();
  auto made = dpdk::PacketPool::create("lazy-walk-test", 1024);
  INFO(made.status().message());
  REQUIRE(made.ok());
  std::unique_ptr<dpdk::PacketPool> pool(made.value());
  const int pidfd = int(syscall(SYS_pidfd_open, getpid(), 0));
  REQUIRE(pidfd >= 0);
  auto opened = verbs::ProcessMemory::open(pidfd, getpid());
  close(pidfd);
  REQUIRE(opened.ok());
  verbs::ProcessMemory& mem = *opened.value();
  constexpr size_t kPage = 4096;
  // Windows 1..5, each a page of its own mapping (the window unmaps it).
  std::vector<uint8_t*> pages;
  for (uint32_t k = 1; k <= 5; k++) {
    auto* p = static_cast<uint8_t*>(mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(p != MAP_FAILED);
    std::memset(p, int(k), kPage);
    pages.push_back(p);
    mem.add_window(k, uint64_t(p), kPage, p);
  }
  // A frame made lazy from window `k` (as the requester makes one).
  std::vector<rte_mbuf*> frames;
  auto lend = [&](uint32_t k) {
    const uint8_t* src = mem.lend(uint64_t(pages[k - 1]), 512);
    REQUIRE(src != nullptr);
    rte_mbuf* m = pool->alloc();
    REQUIRE(m != nullptr);
    auto* at = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 512));
    REQUIRE(dpdk::make_lazy(m, at, src, 512));
    frames.push_back(m);
  };
  auto payload_is = [](rte_mbuf* m, uint8_t v) {
    const auto* b = rte_pktmbuf_mtod(m, const uint8_t*);
    return !dpdk::lazy(m) && std::all_of(b, b + 512, [v](uint8_t x) { return x == v; });
  };
  uint64_t walks = dpdk::lazy_walks();
  // A window that never lent: no walk.
  mem.remove_window(5);
  CHECK(dpdk::lazy_walks() == walks);
  // One that lent: one walk, and its frame has its bytes.
  lend(1);
  mem.remove_window(1);
  CHECK(dpdk::lazy_walks() == walks + 1);
  CHECK(payload_is(frames[0], 1));
  // One that lent before a walk (a QP's error): none more.
  lend(2);
  dpdk::materialize_all();
  walks = dpdk::lazy_walks();
  mem.remove_window(2);
  CHECK(dpdk::lazy_walks() == walks);
  CHECK(payload_is(frames[1], 2));
  // The application gone with two windows that lent: one walk for both.
  lend(3);
  lend(4);
  mem.unmap_all();
  CHECK(dpdk::lazy_walks() == walks + 1);
  CHECK(payload_is(frames[2], 3));
  CHECK(payload_is(frames[3], 4));
  CHECK(mem.windows() == 0);
  for (rte_mbuf* m : frames) rte_pktmbuf_free(m);
}
