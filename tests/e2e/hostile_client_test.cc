// A hostile application next to well-behaved ones: raw control messages
// with oversized counts, bad handles and ring indices out of range, a
// doorbell page full of garbage, and replies never read. The engine must
// refuse each with an errno or drop that client, and an ib_write_bw pair
// and a rocemu-verify pair (every byte checked) running meanwhile must
// finish with correct data.
#include <sys/mman.h>

#include <atomic>
#include <thread>

#include "tests/e2e/fabric.h"
#include "tests/support/control_client.h"

using namespace rocemu;
using namespace rocemu::test;
using verbs::Op;
using verbs::Request;

namespace {

struct HostileStats {
  std::atomic<uint64_t> rounds{0}, refused{0}, unexpected{0}, dropped{0};
};

// One round: attach, send everything a buggy or hostile provider could,
// then leave without reading what is still owed.
void hostile_round(const std::string& sock, uint64_t seed, HostileStats& st) {
  ControlClient c(sock);
  std::vector<int> fds;
  auto hello = c.hello("h1", &fds);
  if (!hello || hello->err != 0) {
    st.unexpected++;
    return;
  }
  // The doorbell page: producer far ahead, entries naming any QP.
  if (fds.size() >= 2) {  // doorbell, wake-up (and the command file)
    void* db = mmap(nullptr, hello->u.hello.doorbell_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (db != MAP_FAILED) {
      auto* page = static_cast<verbs::DoorbellPage*>(db);
      for (uint32_t i = 0; i < verbs::DoorbellPage::kEntries; i++) page->entries[i] = uint32_t(seed * 2654435761u + i);
      page->producer.v.store(uint32_t(seed * 0x9e3779b9u));
      page->rescan.store(1);
      const uint64_t one = 1;
      [[maybe_unused]] ssize_t w = write(fds[1], &one, sizeof one);  // wake the engine
      munmap(db, hello->u.hello.doorbell_bytes);
    }
  }
  for (int f : fds) close(f);
  fds.clear();
  auto expect_error = [&](const Request& r) {
    auto rep = c.call(r);
    if (!rep) st.dropped++;
    else if (rep->err != 0) st.refused++;
    else st.unexpected++;
  };
  Request cq = ControlClient::request(Op::kCreateCq);
  for (uint32_t n : {0x80000001u, 0xffffffffu, 0x10000000u}) {
    cq.u.create_cq.entries = n;
    expect_error(cq);
  }
  Request h = ControlClient::request(Op::kDestroyQp);
  for (uint32_t bad : {0u, 0xffffffu, 0xdeadbeefu, uint32_t(seed)}) {
    h.u.handle.handle = bad;
    expect_error(h);
    h.op = Op::kDeregMr;
    expect_error(h);
    h.op = Op::kDestroySrq;
    expect_error(h);
    h.op = Op::kDestroyQp;
  }
  // A real QP whose rings it then fills with nonsense, then takes to ERR
  // (the receive queue flush must stop at the ring's size).
  auto pd = c.call(ControlClient::request(Op::kAllocPd));
  cq.u.create_cq.entries = 64;
  auto cqr = c.call(cq);
  if (pd && pd->err == 0 && cqr && cqr->err == 0) {
    Request q = ControlClient::request(Op::kCreateQp);
    q.u.create_qp.type = IBV_QPT_RC;
    q.u.create_qp.pd = pd->u.handle.handle;
    q.u.create_qp.send_cq = q.u.create_qp.recv_cq = cqr->u.ring.handle;
    q.u.create_qp.cap = {16, 16, 1, 1, 0};
    auto qr = c.call(q, -1, &fds);
    if (qr && qr->err == 0 && fds.size() == 1) {
      void* mem = mmap(nullptr, qr->u.qp.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
      if (mem != MAP_FAILED) {
        auto* sq = static_cast<nic::RingHeader*>(mem);
        auto* rq = reinterpret_cast<nic::RingHeader*>(static_cast<uint8_t*>(mem) + qr->u.qp.rq_offset);
        sq->producer.v.store(uint32_t(seed * 7919u));
        rq->producer.v.store(0x80000000u + uint32_t(seed));
        std::memset(reinterpret_cast<uint8_t*>(sq + 1), 0xff, 16 * qr->u.qp.sq_stride);
        munmap(mem, qr->u.qp.map_bytes);
      }
      Request m = ControlClient::request(Op::kModifyQp);
      m.u.modify_qp.qpn = qr->u.qp.qpn;
      m.u.modify_qp.mask = IBV_QP_STATE;
      m.u.modify_qp.attr.qp_state = IBV_QPS_ERR;
      if (auto mr = c.call(m); !mr) st.dropped++;
    }
    for (int f : fds) close(f);
  }
  // Short and unknown messages.
  const char junk[7] = {1, 2, 3, 4, 5, 6, 7};
  c.send_raw(junk, sizeof junk);
  if (!c.reply()) st.dropped++;
  // Requests, replies never read: the engine drops this client.
  for (int i = 0; i < 5000; i++)
    if (!c.send(ControlClient::request(Op::kGetAsyncEvent), -1, MSG_DONTWAIT)) break;
  st.rounds++;
}

}  // namespace

TEST_CASE("A hostile client cannot disturb an ib_write_bw pair and a byte-checked pair beside it",
          "[e2e][robustness][security]") {
  Fabric f;
  const std::string sock = f.dir() + "/rocemu.sock";
  HostileStats st;
  std::atomic<bool> stop{false};
  std::thread hostile([&] {
    for (uint64_t seed = 1; !stop.load(); seed++) hostile_round(sock, seed, st);
  });
  const int port = pick_port();
  std::vector<std::string> bw = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-n", "2000"};
  std::vector<std::string> bw_cli = bw;
  bw_cli.push_back("127.0.0.1");
  const PairResult w = run_pair(f, "h2", "h1", bw, bw_cli, port);
  const int vport = pick_port();
  const PairResult v =
      run_pair(f, "h2", "h1", {bin("rocemu-verify"), "--server", "--port", std::to_string(vport), "--iters", "5"},
               {bin("rocemu-verify"), "--connect", "127.0.0.1", "--port", std::to_string(vport), "--iters", "5"},
               vport);
  stop = true;
  hostile.join();
  INFO("ib_write_bw client:\n" << w.client_out << "\nserver:\n" << w.server_out);
  CHECK(w.client == 0);
  CHECK(w.server == 0);
  INFO("rocemu-verify client:\n" << v.client_out << "\nserver:\n" << v.server_out);
  CHECK(v.client == 0);
  CHECK(v.server == 0);
  CHECK_THAT(v.server_out, Catch::Contains("all good"));
  INFO("hostile rounds " << st.rounds << ", refused " << st.refused << ", unexpected successes " << st.unexpected
                         << ", answers missing " << st.dropped);
  CHECK(st.rounds > 0);
  CHECK(st.unexpected == 0);
  CHECK(st.dropped == 0);
  // The engine is still there and serving.
  const auto [code, out] = f.rocemu({"status"});
  INFO(out);
  CHECK(code == 0);
}
