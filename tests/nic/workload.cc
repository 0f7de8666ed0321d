#include "tests/nic/workload.h"

#include <map>
#include <sstream>

namespace rocemu::test {
namespace {


std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = uint8_t(x);
  }
  return v;
}

}  // namespace

WorkloadResult run_rc_workload(TwoNics& f, const WorkloadSpec& spec) {
  using nic::QpType;
  WorkloadResult res;
  std::ostringstream err;
  auto* cq1 = f.h1->create_cq(8192);
  auto* cq2 = f.h2->create_cq(8192);
  const uint32_t depth = uint32_t(spec.writes + spec.sends + spec.reads + spec.atomics + 8);
  ibv_qp_cap cap{depth, uint32_t(spec.sends + 8), 2, 2, 0};
  auto* q1 = f.h1->create_qp(QpType::kRc, cq1, cq1, cap);
  auto* q2 = f.h2->create_qp(QpType::kRc, cq2, cq2, cap);
  if (q1 == nullptr || q2 == nullptr || nic::SimHost::connect(*f.h1, q1, *f.h2, q2, spec.connect) != 0) {
    res.failure = "setup failed";
    return res;
  }
  Rng rng(spec.seed);
  auto len_of = [&] { return uint32_t(1 + rng.below(spec.max_len)); };

  // WRITE: h1.src[region] -> h2.dst[region]; READ: h2.dst2 -> h1.back.
  const size_t region = spec.max_len;
  auto src = pattern(region * size_t(spec.writes + 1), spec.seed);
  std::vector<uint8_t> dst(src.size(), 0);
  auto remote = pattern(region * size_t(spec.reads + 1), spec.seed + 7);
  std::vector<uint8_t> back(remote.size(), 0);
  auto sendbuf = pattern(region * size_t(spec.sends + 1), spec.seed + 3);
  std::vector<uint8_t> recvbuf(sendbuf.size(), 0);
  alignas(8) static uint64_t counter;
  counter = 0;
  std::vector<uint64_t> fetched(size_t(spec.atomics) + 1, ~0ull);

  // Every buffer is registered at a fixed I/O address (ibv_reg_mr_iova2),
  // so the packets carry the same addresses in every run.
  uint64_t next_iova = 0x10000000000ull;
  std::map<const void*, uint64_t> iova_base;
  auto reg = [&](nic::SimHost& h, void* p, size_t len) {
    const uint64_t io = next_iova;
    next_iova += 0x100000000ull;
    iova_base[p] = io;
    return h.reg_mr(p, len, kAccessAll, nullptr, io);
  };
  // The I/O address of byte `off` of a registered buffer.
  auto io = [&](const void* base, size_t off) { return iova_base.at(base) + off; };
  const uint32_t k_src = reg(*f.h1, src.data(), src.size());
  const uint32_t k_dst = reg(*f.h2, dst.data(), dst.size());
  const uint32_t k_remote = reg(*f.h2, remote.data(), remote.size());
  const uint32_t k_back = reg(*f.h1, back.data(), back.size());
  const uint32_t k_send = reg(*f.h1, sendbuf.data(), sendbuf.size());
  const uint32_t k_recv = reg(*f.h2, recvbuf.data(), recvbuf.size());
  const uint32_t k_counter = reg(*f.h2, &counter, sizeof counter);
  const uint32_t k_fetched = reg(*f.h1, fetched.data(), fetched.size() * 8);
  auto sge_io = [&](const void* base, size_t off, uint32_t len, uint32_t key) {
    return ibv_sge{io(base, off), len, key};
  };

  // Receives first.
  for (int i = 0; i < spec.sends; i++) {
    ibv_sge s = sge_io(recvbuf.data(), size_t(i) * region, uint32_t(region), k_recv);
    ibv_recv_wr r{};
    r.wr_id = 1000 + uint64_t(i);
    r.sg_list = &s;
    r.num_sge = 1;
    f.h2->post_recv(q2, &r);
  }
  // A shuffled mix of operations, all signalled; remember lengths.
  struct Op {
    int kind, index;
    uint32_t len;
  };
  std::vector<Op> ops;
  for (int i = 0; i < spec.writes; i++) ops.push_back({0, i, len_of()});
  for (int i = 0; i < spec.sends; i++) ops.push_back({1, i, len_of()});
  for (int i = 0; i < spec.reads; i++) ops.push_back({2, i, len_of()});
  for (int i = 0; i < spec.atomics; i++) ops.push_back({3, i, 8});
  for (size_t i = ops.size(); i > 1; i--) std::swap(ops[i - 1], ops[rng.below(i)]);
  int atomic_seq = 0;
  std::vector<int> atomic_slot(ops.size(), -1);
  for (size_t i = 0; i < ops.size(); i++) {
    const Op& op = ops[i];
    ibv_sge s{};
    ibv_send_wr wr{};
    wr.wr_id = i;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &s;
    wr.num_sge = 1;
    const size_t off = size_t(op.index) * region;
    switch (op.kind) {
      case 0:
        s = sge_io(src.data(), off, op.len, k_src);
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = io(dst.data(), off);
        wr.wr.rdma.rkey = k_dst;
        break;
      case 1:
        s = sge_io(sendbuf.data(), off, op.len, k_send);
        wr.opcode = op.index % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
        wr.imm_data = htonl(0x1000u + uint32_t(op.index));
        break;
      case 2:
        s = sge_io(back.data(), off, op.len, k_back);
        wr.opcode = IBV_WR_RDMA_READ;
        wr.wr.rdma.remote_addr = io(remote.data(), off);
        wr.wr.rdma.rkey = k_remote;
        break;
      default:
        atomic_slot[i] = atomic_seq;
        s = sge_io(fetched.data(), size_t(atomic_seq++) * 8, 8, k_fetched);
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.remote_addr = io(&counter, 0);
        wr.wr.atomic.rkey = k_counter;
        wr.wr.atomic.compare_add = 1;
        break;
    }
    if (f.h1->post_send(q1, &wr) != 0) {
      res.failure = "post_send failed";
      return res;
    }
  }
  auto send_wc = wait_cqes(f, *f.h1, cq1, ops.size(), spec.limit);
  auto recv_wc = wait_cqes(f, *f.h2, cq2, size_t(spec.sends), spec.limit);
  res.finished = send_wc.size() == ops.size() && recv_wc.size() == size_t(spec.sends);
  res.requester_retransmits = f.n1->counters()[nic::NicCounters::retransmitted_packets];
  for (const auto* list : {&send_wc, &recv_wc})
    for (const ibv_wc& w : *list)
      if (w.status != IBV_WC_SUCCESS) {
        err << (list == &send_wc ? "send" : "receive") << " completion wr_id " << w.wr_id << ": "
            << nic::wc_status_name(w.status);
        res.failure = err.str();
        return res;
      }
  if (!res.finished) {
    err << "only " << send_wc.size() << "/" << ops.size() << " send and " << recv_wc.size() << "/" << spec.sends
        << " receive completions";
    res.failure = err.str();
    return res;
  }
  // Send completions: in posting order, all successful.
  for (size_t i = 0; i < send_wc.size(); i++) {
    if (send_wc[i].wr_id != i || send_wc[i].status != IBV_WC_SUCCESS) {
      err << "send completion " << i << ": wr_id " << send_wc[i].wr_id << " status "
          << nic::wc_status_name(send_wc[i].status);
      res.failure = err.str();
      return res;
    }
  }
  // Receive completions: in order, right length, right immediate, right bytes.
  std::map<int, uint32_t> send_len;
  for (const Op& op : ops)
    if (op.kind == 1) send_len[op.index] = op.len;
  int expect_index = -1;
  std::vector<int> send_order;
  for (const Op& op : ops)
    if (op.kind == 1) send_order.push_back(op.index);
  for (size_t i = 0; i < recv_wc.size(); i++) {
    const ibv_wc& w = recv_wc[i];
    expect_index = send_order[i];
    if (w.status != IBV_WC_SUCCESS || w.wr_id != 1000 + i || w.byte_len != send_len[expect_index]) {
      err << "receive completion " << i << " status " << nic::wc_status_name(w.status) << " wr_id " << w.wr_id
          << " len " << w.byte_len << " want " << send_len[expect_index];
      res.failure = err.str();
      return res;
    }
    const bool imm = expect_index % 2;
    if (imm != bool(w.wc_flags & IBV_WC_WITH_IMM) || (imm && ntohl(w.imm_data) != 0x1000u + uint32_t(expect_index))) {
      err << "receive completion " << i << ": immediate data wrong";
      res.failure = err.str();
      return res;
    }
    const uint8_t* got = recvbuf.data() + i * region;
    const uint8_t* want = sendbuf.data() + size_t(expect_index) * region;
    if (!std::equal(got, got + w.byte_len, want)) {
      err << "received message " << i << " differs";
      res.failure = err.str();
      return res;
    }
    // Nothing written past the message.
    for (size_t b = w.byte_len; b < region; b++)
      if (got[b] != 0) {
        err << "received message " << i << " wrote past its end";
        res.failure = err.str();
        return res;
      }
  }
  // WRITE and READ regions.
  for (const Op& op : ops) {
    const size_t off = size_t(op.index) * region;
    if (op.kind == 0) {
      if (!std::equal(dst.begin() + long(off), dst.begin() + long(off + op.len), src.begin() + long(off)) ||
          std::any_of(dst.begin() + long(off + op.len), dst.begin() + long(off + region), [](uint8_t b) { return b; })) {
        err << "WRITE " << op.index << " (" << op.len << " bytes) differs";
        res.failure = err.str();
        return res;
      }
    } else if (op.kind == 2) {
      if (!std::equal(back.begin() + long(off), back.begin() + long(off + op.len), remote.begin() + long(off))) {
        err << "READ " << op.index << " (" << op.len << " bytes) differs";
        res.failure = err.str();
        return res;
      }
    }
  }
  // Atomics: executed exactly once each, in order.
  if (counter != uint64_t(spec.atomics)) {
    err << "counter is " << counter << ", want " << spec.atomics << " (an atomic ran twice or never)";
    res.failure = err.str();
    return res;
  }
  for (int i = 0; i < spec.atomics; i++)
    if (fetched[size_t(i)] != uint64_t(i)) {
      err << "atomic " << i << " fetched " << fetched[size_t(i)];
      res.failure = err.str();
      return res;
    }
  return res;
}

}  // namespace rocemu::test
