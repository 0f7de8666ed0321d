// Loss recovery is a strategy each NIC picks once, from its configuration:
// the loss_recovery value of a topology file names the strategy the NIC
// runs, and the selective repeat knobs reach it.
#include <catch2/catch.hpp>

#include <cmath>

#include "common/config/topology.h"
#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "nic/nic.h"
#include "nic/nic_kind.h"
#include "tests/nic/fabric.h"
#include "tests/nic/nic_test_peer.h"
#include "tests/nic/probe.h"

using namespace rocemu;

TEST_CASE("A NIC runs the loss recovery its topology entry names, with the knobs it sets", "[unit][nic]") {
  NodeKindRegistry reg;
  nic::register_nic_kind(reg);
  auto t = parse_topology(R"(nodes:
  h1: {kind: nic, ip: 10.0.0.1}
  h2: {kind: nic, ip: 10.0.0.2, loss_recovery: go-back-n}
  h3: {kind: nic, ip: 10.0.0.3, loss_recovery: selective-repeat}
  h4: {kind: nic, ip: 10.0.0.4, loss_recovery: selective-repeat, sr_window: 64, sr_rto_low: 20us}
)",
                          "topo.yaml", reg);
  INFO(t.status().message());
  REQUIRE(t.ok());
  REQUIRE(t->nodes.size() == 4);
  std::map<std::string, std::unique_ptr<Node>> nodes;
  for (const NodeSpec& n : t->nodes) nodes[n.name] = n.kind->create(n.name, n.config);
  auto recovery = [&](const std::string& name) -> const nic::LossRecoveryStrategy& {
    auto* n = dynamic_cast<nic::Nic*>(nodes.at(name).get());
    REQUIRE(n != nullptr);
    return nic::NicTestPeer::recovery(*n);
  };

  // The default is go-back-N, as on a classic RoCE NIC.
  CHECK(recovery("h1").name() == "go-back-n");
  CHECK(recovery("h2").name() == "go-back-n");
  CHECK(recovery("h3").name() == "selective-repeat");
  CHECK(recovery("h4").name() == "selective-repeat");

  // Go-back-N bounds the window only by the PSN space; selective repeat by
  // what the receiver keeps out of order (sr_window, 512 unless set).
  CHECK(recovery("h2").send_window() == (1u << 22));
  CHECK(recovery("h3").send_window() == 512);
  CHECK(recovery("h4").send_window() == 64);

  // With at most 3 packets in flight selective repeat first times out
  // after sr_rto_low (100 us unless set) when that is shorter; go-back-N
  // keeps the QP's own timeout. Neither goes past the Local ACK Timeout.
  nic::Qp qp;
  qp.req.una_psn = 0xfffffe;
  qp.req.sent_high = 1;  // 3 in flight, across the PSN wrap
  const Time t0 = ms(5);
  CHECK(recovery("h2").retransmit_deadline(qp, ms(1), t0) == t0 + ms(1));
  CHECK(recovery("h3").retransmit_deadline(qp, ms(1), t0) == t0 + us(100));
  CHECK(recovery("h4").retransmit_deadline(qp, ms(1), t0) == t0 + us(20));
  CHECK(recovery("h4").retransmit_deadline(qp, us(10), t0) == t0 + us(10));
  CHECK(recovery("h4").retransmit_deadline(qp, kTimeNever, t0) == t0 + us(20));
  qp.req.sent_high = 2;  // 4 in flight
  CHECK(recovery("h4").retransmit_deadline(qp, ms(1), t0) == t0 + ms(1));
  CHECK(recovery("h4").retransmit_deadline(qp, kTimeNever, t0) == kTimeNever);
}

namespace {

using namespace rocemu::nic;
using rocemu::test::Probe;


// NIC h1 -- 100 Gbit/s, 1 us -- a probe that plays a slow peer: it answers
// only when the test says so. One RC QP in RTS towards it with the QP's
// `timeout` and `retry_cnt`.
struct SlowPeer {
  std::unique_ptr<Engine> engine;
  Nic* nic = nullptr;
  Probe* probe = nullptr;
  std::unique_ptr<SimHost> host;
  SimHost::Cq* cq = nullptr;
  SimHost::Qp* qp = nullptr;
  NicConfig cfg;
  std::vector<uint8_t> mem = std::vector<uint8_t>(4096, 0x11);
  uint32_t key = 0;

  SlowPeer(LossRecovery mode, uint8_t timeout, uint8_t retry_cnt) {
    engine = test::make_engine(3);
    cfg = test::probe_peer_config();
    cfg.recovery = mode;
    nic = &engine->add<Nic>("h1", cfg);
    probe = &engine->add<Probe>();
    REQUIRE(engine->connect(*nic, 0, *probe, 0, LinkParams{.rate_bps = 100'000'000'000ull, .delay = us(1)}).ok());
    engine->start();
    host = std::make_unique<SimHost>(*engine, *nic);
    cq = host->create_cq(16);
    qp = host->create_qp(QpType::kRc, cq, cq, ibv_qp_cap{8, 8, 1, 1, 0});
    key = host->reg_mr(mem.data(), mem.size(), test::kAccessRw);
    test::probe_qp_to_rtr(*host, qp, QpType::kRc, test::kRawProbeQpn, test::kAccessRw);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    REQUIRE(host->modify(qp, a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    engine->run_for(us(5));
    probe->got.clear();
  }
  // One single-packet WRITE at PSN 0.
  void post_write() {
    ibv_sge sg{reinterpret_cast<uint64_t>(mem.data()), 512, key};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = 0x1000;
    wr.wr.rdma.rkey = 0x1234;
    REQUIRE(host->post_send(qp, &wr) == 0);
  }
  // The peer's ACK of `psn`, at last.
  void ack(uint32_t psn) {
    wire::RoceFields f;
    f.opcode = wire::op::kAck;
    f.dest_qp = qp->qpn;
    f.psn = psn;
    f.aeth_syndrome = wire::aeth_ack();
    f.aeth_msn = 1;
    std::vector<uint8_t> out(128);
    out.resize(wire::encode_roce(out, test::probe_to_nic(cfg), f, {}));
    rte_mbuf* m = engine->pool().alloc_copy(out);
    REQUIRE(m != nullptr);
    nic->on_rx(0, &m, 1, engine->now());
  }
  // When each copy of the WRITE reached the probe.
  std::vector<Time> write_arrivals() const {
    std::vector<Time> at;
    for (const auto& fr : probe->got) {
      wire::PacketView v;
      REQUIRE(wire::decode(fr.bytes, v) == wire::DecodeError::kOk);
      if (v.is_roce && v.opcode == wire::op::kWriteOnly && v.bth().psn() == 0) at.push_back(fr.at);
    }
    return at;
  }
  uint64_t counter(NicCounters::Id id) const { return nic->counters()[id]; }
};

Duration local_ack_timeout(uint8_t timeout) { return ns(4096) * (int64_t(1) << timeout); }

}  // namespace

// SR-wbw-out1-rxe-srv.pcapng: against Soft-RoCE, whose first ACK came 3.7 ms
// after the WRITE, the 100 us IRN timer fired 8 times in 0.8 ms, spent the
// whole retry_cnt of 7 and killed the QP before the ACK arrived.
TEST_CASE("Selective repeat: a peer whose first ACK comes 3.7 ms late does not kill the QP; the fast timer backs off",
          "[protocol][nic][loss]") {
  const uint8_t timeout = 14;  // perftest's default: 4.096 us x 2^14 = 67 ms
  SlowPeer p(LossRecovery::kSelectiveRepeat, timeout, 7);
  const Time sent = p.engine->now();
  p.post_write();
  p.engine->run_for(us(3700));
  ibv_wc wc{};
  REQUIRE(p.host->poll(p.cq, 1, &wc) == 0);  // still waiting, not failed
  CHECK(p.counter(NicCounters::local_ack_timeout_err) == 0);
  CHECK(p.counter(NicCounters::req_cqe_error) == 0);

  // The fast timer fired at sr_rto_low, then 2x, 4x, ... after each resend:
  // copies at 0, 100, 300, 700, 1500 and 3100 us.
  const auto at = p.write_arrivals();
  const double rto_low_us = to_us(NicConfig{}.sr_rto_low);
  const size_t expected = 1 + size_t(std::floor(std::log2(3700.0 / rto_low_us + 1)));
  INFO(at.size() << " copies of PSN 0 in 3.7 ms");
  REQUIRE(at.size() == expected);
  for (size_t i = 1; i < at.size(); i++) {
    const double gap = to_us(at[i] - at[i - 1]);
    INFO("gap " << i << ": " << gap << " us");
    CHECK(std::abs(gap - rto_low_us * double(1u << (i - 1))) < 1.0);
  }
  CHECK(at.front() - sent < us(3));
  CHECK(p.counter(NicCounters::roce_adp_retrans_to) == expected - 1);

  // The late ACK completes the WRITE.
  p.ack(0);
  p.engine->run_for(us(10));
  REQUIRE(p.host->poll(p.cq, 1, &wc) == 1);
  CHECK(wc.status == IBV_WC_SUCCESS);
  CHECK(p.counter(NicCounters::local_ack_timeout_err) == 0);
  // ... and the next WRITE starts with the fast timer at sr_rto_low again.
  p.probe->got.clear();
  p.post_write();
  p.engine->run_for(us(150));
  CHECK(p.write_arrivals().empty());  // PSN 1 now
  size_t psn1 = 0;
  for (const auto& fr : p.probe->got) {
    wire::PacketView v;
    REQUIRE(wire::decode(fr.bytes, v) == wire::DecodeError::kOk);
    if (v.is_roce && v.bth().psn() == 1) psn1++;
  }
  CHECK(psn1 == 2);
}

TEST_CASE("Selective repeat: only the Local ACK Timeout spends retry_cnt; a silent peer fails the QP after "
          "retry_cnt + 1 of them",
          "[protocol][nic][loss]") {
  for (LossRecovery mode : {LossRecovery::kSelectiveRepeat, LossRecovery::kGoBackN}) {
    const uint8_t timeout = 10, retry_cnt = 2;  // 4.19 ms, 3 expiries
    SlowPeer p(mode, timeout, retry_cnt);
    INFO((mode == LossRecovery::kSelectiveRepeat ? "selective repeat" : "go-back-N"));
    const Time sent = p.engine->now();
    p.post_write();
    ibv_wc wc{};
    const Time fail = sent + local_ack_timeout(timeout) * (retry_cnt + 1);
    p.engine->run_until(fail - us(2));
    CHECK(p.host->poll(p.cq, 1, &wc) == 0);
    CHECK(p.counter(NicCounters::local_ack_timeout_err) == retry_cnt);
    p.engine->run_until(fail + us(2));
    REQUIRE(p.host->poll(p.cq, 1, &wc) == 1);
    CHECK(wc.status == IBV_WC_RETRY_EXC_ERR);
    CHECK(p.counter(NicCounters::local_ack_timeout_err) == retry_cnt + 1);
  }
}
