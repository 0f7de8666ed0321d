// The application side of the send queue (nic/host_queue.cc) against
// misuse: SGE lengths that wrap a 32-bit sum and more SGEs than the QP was
// created with get EINVAL before anything is copied, as rdma-core's
// providers give (mlx5_post_send: num_sge > max_gs; inline longer than
// max_inline_data).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "nic/host_queue.h"

using namespace rocemu::nic;

namespace host_queue_test {

constexpr uint32_t kEntries = 16;
constexpr uint32_t kMaxSge = 4;
constexpr uint32_t kMaxInline = 64;

// A send queue in ordinary memory, as the provider keeps one in the shared
// mapping.
struct SendQueueInMemory {
  std::vector<uint8_t> mem;
  SendQueueShadow sq;
  SendQueueInMemory() {
    const uint32_t stride = send_wqe_stride(kMaxSge, kMaxInline);
    mem.assign(ring_bytes(kEntries, stride), 0);
    sq.ring = Ring(mem.data(), kEntries, stride, true);
    sq.max_sge = kMaxSge;
    sq.max_inline = kMaxInline;
  }
  const SendWqe& last() const {
    return *reinterpret_cast<const SendWqe*>(sq.ring.entry(sq.tail - 1));
  }
};

ibv_send_wr send_wr(ibv_wr_opcode op, ibv_sge* s, int n) {
  ibv_send_wr wr{};
  wr.opcode = op;
  wr.sg_list = s;
  wr.num_sge = n;
  wr.wr.rdma.remote_addr = 0x1000;
  wr.wr.rdma.rkey = 7;
  return wr;
}

}  // namespace host_queue_test

TEST_CASE("ATOMIC WRITE takes its 8 bytes from several SGEs", "[unit][host_queue]") {
  host_queue_test::SendQueueInMemory q;
  const uint64_t v = 0x0123456789abcdefull;
  ibv_sge s[2] = {{uint64_t(uintptr_t(&v)), 3, 0}, {uint64_t(uintptr_t(&v)) + 3, 5, 0}};
  auto wr = host_queue_test::send_wr(IBV_WR_ATOMIC_WRITE, s, 2);
  REQUIRE(write_send_wqe(q.sq, wr, 0, 0, 0) == 0);
  CHECK(q.sq.tail == 1);
  CHECK(q.last().compare_add == v);
}

TEST_CASE("ATOMIC WRITE whose SGE lengths wrap a 32-bit sum to 8 is refused", "[unit][host_queue]") {
  host_queue_test::SendQueueInMemory q;
  std::vector<uint8_t> buf(64, 0x41);
  const uint64_t a = uint64_t(uintptr_t(buf.data()));
  // 0xFFFFFFF8 + 0x10 == 8 in 32 bits.
  ibv_sge s[2] = {{a, 0xFFFFFFF8u, 0}, {a, 0x10u, 0}};
  auto wr = host_queue_test::send_wr(IBV_WR_ATOMIC_WRITE, s, 2);
  CHECK(write_send_wqe(q.sq, wr, 0, 0, 0) == EINVAL);
  CHECK(q.sq.tail == 0);
}

TEST_CASE("inline send whose SGE lengths wrap a 32-bit sum is refused", "[unit][host_queue]") {
  host_queue_test::SendQueueInMemory q;
  std::vector<uint8_t> buf(64, 0x41);
  const uint64_t a = uint64_t(uintptr_t(buf.data()));
  ibv_sge s[2] = {{a, 0xFFFFFFF8u, 0}, {a, 0x10u, 0}};
  for (auto op : {IBV_WR_SEND, IBV_WR_RDMA_WRITE}) {
    auto wr = host_queue_test::send_wr(op, s, 2);
    wr.send_flags = IBV_SEND_INLINE;
    CHECK(write_send_wqe(q.sq, wr, 0, 0, 0) == EINVAL);
    CHECK(q.sq.tail == 0);
  }
}

TEST_CASE("more SGEs than the QP's max_send_sge get EINVAL on every path", "[unit][host_queue]") {
  host_queue_test::SendQueueInMemory q;
  uint8_t byte[host_queue_test::kMaxSge + 1] = {};
  ibv_sge s[host_queue_test::kMaxSge + 1];
  for (uint32_t i = 0; i <= host_queue_test::kMaxSge; i++) s[i] = {uint64_t(uintptr_t(&byte[i])), 1, 0};
  const int too_many = int(host_queue_test::kMaxSge) + 1;
  SECTION("ATOMIC WRITE") {
    // 8 SGEs of one byte would add up to 8; max_sge is 4.
    std::vector<ibv_sge> eight(8, ibv_sge{uint64_t(uintptr_t(byte)), 1, 0});
    auto wr = host_queue_test::send_wr(IBV_WR_ATOMIC_WRITE, eight.data(), 8);
    CHECK(write_send_wqe(q.sq, wr, 0, 0, 0) == EINVAL);
  }
  SECTION("inline") {
    auto wr = host_queue_test::send_wr(IBV_WR_SEND, s, too_many);
    wr.send_flags = IBV_SEND_INLINE;
    CHECK(write_send_wqe(q.sq, wr, 0, 0, 0) == EINVAL);
  }
  SECTION("gather list") {
    auto wr = host_queue_test::send_wr(IBV_WR_SEND, s, too_many);
    CHECK(write_send_wqe(q.sq, wr, 0, 0, 0) == EINVAL);
  }
  SECTION("negative") {
    auto wr = host_queue_test::send_wr(IBV_WR_SEND, s, -1);
    wr.send_flags = IBV_SEND_INLINE;
    CHECK(write_send_wqe(q.sq, wr, 0, 0, 0) == EINVAL);
  }
  CHECK(q.sq.tail == 0);
}
