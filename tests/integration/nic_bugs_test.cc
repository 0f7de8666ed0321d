// Minimal reproductions of transport bugs the switch scenarios exposed,
// with two real NICs and a two-port Trimmer (or a lossy wire) between
// them; kept as regression tests now that nic/ is fixed. The comment on
// each says what went wrong.
#include <catch2/catch.hpp>

#include <cstring>

#include "tests/integration/trimmer.h"
#include "nic/nic.h"
#include "nic/sim_host.h"
#include "tests/support/eal.h"

using namespace rocemu;
using namespace rocemu::test;
using NC = nic::NicCounters;

namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

// h1 -- trimmer -- h2, 100G, 1 us per hop.
struct Pair {
  std::unique_ptr<Engine> engine;
  nic::Nic* n1 = nullptr;
  nic::Nic* n2 = nullptr;
  Trimmer* trimmer = nullptr;
  InternalLink* wire1 = nullptr;  // h1 -- trimmer
  std::unique_ptr<nic::SimHost> h1, h2;
  nic::SimHost::Cq* cq = nullptr;
  nic::SimHost::Qp* q1 = nullptr;
  std::vector<uint8_t> src, dst;
  uint32_t lkey = 0, rkey = 0;

  Pair(nic::LossRecovery mode, std::set<Trimmer::Rule> trim, Duration queue_delay, size_t bytes) {
    engine = make_engine(5);
    nic::NicConfig c1, c2;
    c1.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
    c2.mac = *wire::MacAddr::parse("02:00:00:00:00:02");
    c1.ips = {*wire::IpAddr::parse("10.0.0.1")};
    c2.ips = {*wire::IpAddr::parse("10.0.0.2")};
    c1.neighbors[c2.ips[0]] = c2.mac;
    c2.neighbors[c1.ips[0]] = c1.mac;
    c1.recovery = c2.recovery = mode;
    n1 = &engine->add<nic::Nic>("h1", c1);
    n2 = &engine->add<nic::Nic>("h2", c2);
    trimmer = &engine->add<Trimmer>("trimmer", std::move(trim), queue_delay);
    auto l1 = engine->connect(*n1, 0, *trimmer, 0, LinkParams{});
    REQUIRE(l1.ok());
    wire1 = l1.value();
    REQUIRE(engine->connect(*trimmer, 1, *n2, 0, LinkParams{}).ok());
    engine->start();
    h1 = std::make_unique<nic::SimHost>(*engine, *n1);
    h2 = std::make_unique<nic::SimHost>(*engine, *n2);
    cq = h1->create_cq(64);
    auto* cq2 = h2->create_cq(64);
    q1 = h1->create_qp(nic::QpType::kRc, cq, cq, ibv_qp_cap{64, 4, 1, 1, 0});
    auto* q2 = h2->create_qp(nic::QpType::kRc, cq2, cq2, ibv_qp_cap{64, 4, 1, 1, 0});
    REQUIRE((q1 != nullptr && q2 != nullptr));
    nic::SimHost::ConnectOpts o;  // MTU 1024, timeout 14 (67 ms), as perftest
    REQUIRE(nic::SimHost::connect(*h1, q1, *h2, q2, o) == 0);
    src.resize(bytes);
    for (size_t i = 0; i < bytes; i++) src[i] = uint8_t(i * 7 + 1);
    dst.assign(bytes, 0);
    lkey = h1->reg_mr(src.data(), bytes, kAccess);
    rkey = h2->reg_mr(dst.data(), bytes, kAccess);
    REQUIRE((lkey != 0 && rkey != 0));
  }
  ~Pair() {
    h1.reset();
    h2.reset();
  }

  void post_write(uint64_t wr_id, size_t off, uint32_t len) {
    ibv_sge sg{reinterpret_cast<uint64_t>(src.data() + off), len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(dst.data() + off);
    wr.wr.rdma.rkey = rkey;
    REQUIRE(h1->post_send(q1, &wr) == 0);
  }

  // Runs until `n` completions (each checked against memory the moment it
  // is seen) or `limit`; returns the completions.
  struct Seen {
    ibv_wc wc;
    Time at;
    bool data_there;
  };
  std::vector<Seen> run(size_t n, uint32_t len_each, Duration limit) {
    std::vector<Seen> out;
    engine->run_until(
        [&] {
          ibv_wc wc[8];
          int got;
          while ((got = h1->poll(cq, 8, wc)) > 0)
            for (int i = 0; i < got; i++) {
              const size_t off = size_t(wc[i].wr_id) * len_each;
              const bool there = std::memcmp(dst.data() + off, src.data() + off, len_each) == 0;
              out.push_back({wc[i], engine->now(), there});
            }
          return out.size() >= n;
        },
        engine->now() + limit);
    return out;
  }
};

}  // namespace

// Bug: go-back-N forgets a trimmed packet that arrives while a NAK is
// outstanding. nic/responder.cc, Nic::handle_request, trimmed branch:
// `else if (!qp.lr.nak_sent || d == 0)` -- a trimmed packet beyond epsn with
// nak_sent set is dropped and nothing remembers that its PSN is lost. When
// the trimmed packet belongs to the very resend that NAK asked for (its
// header overtook the full packets queued ahead of it, as trimmed headers
// do on a switch), no later copy of it is coming: the responder reaches
// that PSN, goes quiet, and the requester waits for its retransmit timer.
// Here: pass 1 PSN 0 is trimmed -> NAK(0); the requester resends 0..7;
// pass 2 PSN 7 is trimmed and overtakes 0..6 -> ignored; 0..6 arrive;
// PSN 7 is recovered only by the 67 ms timeout.
TEST_CASE("Go-back-N: a trimmed packet of a resend is NAKed, not left to the timer", "[sim][nic-bug]") {
  Pair p(nic::LossRecovery::kGoBackN, {{0, 1}, {7, 2}}, us(10), 8192);
  p.post_write(0, 0, 8192);  // 8 packets, PSN 0..7
  auto got = p.run(1, 8192, ms(200));
  REQUIRE(got.size() == 1);
  CHECK(got[0].wc.status == IBV_WC_SUCCESS);
  CHECK(got[0].data_there);
  CHECK(p.trimmer->trimmed() == 2);
  CHECK(p.n2->counters()[NC::rx_trimmed] == 2);
  INFO("completed after " << to_seconds(got[0].at - Time{0}) * 1e6 << " us");
  CHECK(p.n1->counters()[NC::local_ack_timeout_err] == 0);
  CHECK(got[0].at < ms(1));
}

// Bug: with selective repeat, a trimmed packet beyond epsn is NAKed with
// its own PSN (nic/responder.cc, Nic::handle_request, trimmed branch:
// `d == 0 ? qp.resp.epsn : psn`), and the requester takes every PSN-sequence
// NAK as a cumulative acknowledgement of all PSNs before it
// (nic/completer.cc, Nic::handle_response, kNak: `ack_up_to(qp, psn - 1)`).
// PSNs between epsn and the trimmed one that are still queued in the switch
// are taken as delivered: their WRITEs complete successfully before the
// data is there, and if one of them is lost afterwards its NAK is ignored
// as older than una_psn, so the QP ends in IBV_WC_RETRY_EXC_ERR. Here:
// eight 1 KiB WRITEs (PSN 0..7); the header of PSN 7 is trimmed and
// overtakes 0..6, which wait 10 us in the queue.
TEST_CASE("Selective repeat: a NAK for a trimmed PSN does not acknowledge PSNs still in flight",
          "[sim][nic-bug]") {
  Pair p(nic::LossRecovery::kSelectiveRepeat, {{7, 1}}, us(10), 8192);
  for (uint32_t i = 0; i < 8; i++) p.post_write(i, i * 1024, 1024);
  auto got = p.run(8, 1024, ms(200));
  REQUIRE(got.size() == 8);
  for (const auto& s : got) {
    INFO("WRITE " << s.wc.wr_id << " completed at " << to_seconds(s.at - Time{0}) * 1e6 << " us");
    CHECK(s.wc.status == IBV_WC_SUCCESS);
    CHECK(s.data_there);  // RC: a successful WRITE completion means the data was placed
  }
  CHECK(p.n2->counters()[NC::rx_trimmed] == 1);
}

// Bug: selective repeat recovers a tail loss one packet per retransmit
// timeout. nic/requester.cc, Nic::on_retry_timer: on expiry it queues only
// una_psn; the ACK for it advances una_psn by one and re-arms the full
// timer (sr_rto_low only applies with <= 3 packets in flight), so a tail of
// N lost packets costs about N timeouts (67 ms each at timeout 14). The
// 4:1 lossy incast without trimming does not finish in 500 ms for this
// reason (go-back-N needs one timeout). Here: a 64-packet WRITE whose
// last 32 packets are lost once.
TEST_CASE("Selective repeat: a tail loss costs one retransmit timeout, not one per packet", "[sim][nic-bug]") {
  Pair p(nic::LossRecovery::kSelectiveRepeat, {}, us(0), 65536);
  FaultConfig fc;
  for (uint32_t psn = 32; psn < 64; psn++) fc.drop.push_back(DropRule{.psn = psn, .times = 1});
  p.wire1->set_faults(0, fc);
  p.post_write(0, 0, 65536);
  auto got = p.run(1, 65536, ms(1000));
  INFO(p.n1->counters()[NC::local_ack_timeout_err] << " timeouts in " << to_seconds(p.engine->now() - Time{0}) * 1e3
                                                    << " ms");
  REQUIRE(got.size() == 1);
  CHECK(got[0].wc.status == IBV_WC_SUCCESS);
  CHECK(got[0].data_there);
  CHECK(p.n1->counters()[NC::local_ack_timeout_err] <= 2);
  CHECK(got[0].at < ms(140));
}

// The same tail loss with go-back-N: one timeout, then everything is resent.
// (Passes today; the reference for the test above.)
TEST_CASE("Go-back-N: a tail loss costs one retransmit timeout", "[sim][nic]") {
  Pair p(nic::LossRecovery::kGoBackN, {}, us(0), 65536);
  FaultConfig fc;
  for (uint32_t psn = 32; psn < 64; psn++) fc.drop.push_back(DropRule{.psn = psn, .times = 1});
  p.wire1->set_faults(0, fc);
  p.post_write(0, 0, 65536);
  auto got = p.run(1, 65536, ms(1000));
  REQUIRE(got.size() == 1);
  CHECK(got[0].wc.status == IBV_WC_SUCCESS);
  CHECK(got[0].data_there);
  CHECK(p.n1->counters()[NC::local_ack_timeout_err] == 1);
  CHECK(got[0].at < ms(70));
  CHECK(got[0].at > ms(67));
}
