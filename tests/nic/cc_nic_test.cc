// Congestion control on the NIC, packet by packet: a probe plays the far
// end of an RC QP. As notification point the NIC answers CE-marked packets
// with CNPs (format, DSCP, pacing per QP, per-priority enable); as reaction
// point it paces its packets at the rate DCQCN sets after a CNP.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "nic/cc/cc_config.h"
#include "nic/cc/dcqcn.h"
#include "nic/nic_kind.h"
#include "tests/nic/fabric.h"
#include "tests/nic/probe.h"

using namespace rocemu;
using namespace rocemu::nic;
using NC = NicCounters;
using rocemu::test::Probe;

namespace {

constexpr uint64_t kRate = 100'000'000'000ull;

// NIC h1 (10.0.0.1) -- 100 Gbit/s -- probe (10.0.0.9), one RC QP in RTS.
struct CcBench {
  std::unique_ptr<Engine> engine;
  Nic* nic = nullptr;
  Probe* probe = nullptr;
  std::unique_ptr<SimHost> host;
  SimHost::Cq* cq = nullptr;
  SimHost::Qp* qp = nullptr;
  wire::PathHeaders to_nic;
  std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 20, 0x11);
  uint32_t key = 0;

  explicit CcBench(cc::CcConfig ccfg) {
    engine = test::make_engine(7);
    NicConfig c = test::probe_peer_config();
    c.cc = ccfg;
    nic = &engine->add<Nic>("h1", c);
    probe = &engine->add<Probe>();
    REQUIRE(engine->connect(*nic, 0, *probe, 0, LinkParams{.rate_bps = kRate, .delay = ns(100)}).ok());
    engine->start();
    host = std::make_unique<SimHost>(*engine, *nic);
    cq = host->create_cq(64);
    qp = host->create_qp(QpType::kRc, cq, cq, ibv_qp_cap{16, 16, 1, 1, 0});
    key = host->reg_mr(mem.data(), mem.size(), test::kAccessRw);
    test::probe_qp_to_rtr(*host, qp, QpType::kRc, test::kRawProbeQpn, test::kAccessRw);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 20;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    REQUIRE(host->modify(qp, a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC) == 0);
    to_nic = test::probe_to_nic(c);
    engine->run_for(us(5));
    probe->got.clear();
  }

  void inject(std::vector<uint8_t> frame) {
    rte_mbuf* m = engine->pool().alloc_copy(frame);
    REQUIRE(m != nullptr);
    nic->on_rx(0, &m, 1, engine->now());
  }
  // A WRITE request to the NIC's memory, CE-marked or not.
  void write_to_nic(uint32_t psn, bool ce) {
    wire::PathHeaders p = to_nic;
    p.ecn = ce ? wire::Ecn::kCe : wire::Ecn::kEct0;
    wire::RoceFields f;
    f.opcode = wire::op::kWriteOnly;
    f.dest_qp = qp->qpn;
    f.psn = psn;
    f.ack_req = true;
    f.reth_va = reinterpret_cast<uint64_t>(mem.data());
    f.reth_rkey = key;
    f.reth_len = 64;
    std::vector<uint8_t> out(256);
    out.resize(wire::encode_roce(out, p, f, std::vector<uint8_t>(64, 0x22)));
    inject(out);
  }
  void cnp_to_nic() {
    std::vector<uint8_t> out(256);
    wire::PathHeaders p = to_nic;
    p.dscp = 48;
    out.resize(wire::encode_cnp(out, p, qp->qpn));
    inject(out);
  }
  // Decoded CNPs the probe received.
  std::vector<wire::PacketView> cnps() const {
    std::vector<wire::PacketView> out;
    for (const auto& f : probe->got) {
      wire::PacketView v;
      REQUIRE(wire::decode(f.bytes, v) == wire::DecodeError::kOk);
      if (v.is_roce && v.opcode == wire::op::kCnp) out.push_back(v);
    }
    return out;
  }
  void post_write(uint32_t len) {
    ibv_sge sg{reinterpret_cast<uint64_t>(mem.data()), len, key};
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.wr.rdma.remote_addr = 0x1000;
    wr.wr.rdma.rkey = 0x1234;
    REQUIRE(host->post_send(qp, &wr) == 0);
  }
  // Gaps between the arrivals of the WRITE packets the probe got from `from` on.
  std::vector<Duration> write_gaps(size_t from) const {
    std::vector<Duration> g;
    for (size_t i = from + 1; i < probe->got.size(); i++) g.push_back(probe->got[i].at - probe->got[i - 1].at);
    return g;
  }
};

cc::CcConfig dcqcn(const cc::DcqcnParams& p = cc::DcqcnParams::mlx5()) { return {"dcqcn", "mlx5", p}; }

}  // namespace

TEST_CASE("NP: a CE-marked request gets a CNP to the sender's QP, at most one per min_time_between_cnps",
          "[protocol][nic][dcqcn]") {
  CcBench b(dcqcn());
  b.write_to_nic(0, true);
  b.engine->run_for(us(1));
  auto c = b.cnps();
  REQUIRE(c.size() == 1);
  const wire::PacketView& v = c[0];
  CHECK(v.bth().dest_qp() == test::kRawProbeQpn);  // the sender's QP
  CHECK(v.bth().becn());
  CHECK(v.bth().psn() == 0);
  CHECK(v.dscp == 48);                    // cnp_dscp
  CHECK(v.ecn == wire::Ecn::kNotEct);
  CHECK(v.dst_ip() == *wire::IpAddr::parse("10.0.0.9"));
  CHECK(v.icrc_ok());
  CHECK(b.nic->counters()[NC::np_cnp_sent] == 1);
  CHECK(b.nic->counters()[NC::np_ecn_marked_roce_packets] == 1);

  // 1 us later (< 2 us, mlx5's min_time_between_cnps): marked, but no CNP.
  b.probe->got.clear();
  b.write_to_nic(1, true);
  b.engine->run_for(us(1));
  CHECK(b.cnps().empty());
  CHECK(b.nic->counters()[NC::np_cnp_suppressed] == 1);
  // An unmarked packet asks for nothing.
  b.write_to_nic(2, false);
  b.engine->run_for(us(1));
  CHECK(b.cnps().empty());
  CHECK(b.nic->counters()[NC::np_ecn_marked_roce_packets] == 2);
  // The interval has passed: the next mark gets its CNP.
  b.write_to_nic(3, true);
  b.engine->run_for(us(1));
  CHECK(b.cnps().size() == 1);
  CHECK(b.nic->counters()[NC::np_cnp_sent] == 2);
}

TEST_CASE("NP: CNPs only on the priorities enabled, none without congestion control", "[protocol][nic][dcqcn]") {
  SECTION("roce_np_enable without the QP's priority (DSCP 26 -> 3)") {
    cc::DcqcnParams p = cc::DcqcnParams::mlx5();
    p.np_enable = 0xff & ~(1u << 3);
    CcBench b(dcqcn(p));
    b.write_to_nic(0, true);
    b.engine->run_for(us(1));
    CHECK(b.cnps().empty());
    CHECK(b.nic->counters()[NC::np_cnp_sent] == 0);
    CHECK(b.nic->counters()[NC::np_ecn_marked_roce_packets] == 1);
  }
  SECTION("cc: none") {
    CcBench b({"none", "", {}});
    b.write_to_nic(0, true);
    b.engine->run_for(us(1));
    CHECK(b.cnps().empty());
    CHECK(b.nic->counters()[NC::np_cnp_sent] == 0);
  }
}

TEST_CASE("RP: after a CNP the QP's packets leave at the cut rate", "[protocol][nic][dcqcn]") {
  // WRITE MIDDLE packets of a 1 KB MTU: Ethernet 14, IPv4 20, UDP 8, BTH
  // 12, payload 1024, ICRC 4, and 24 bytes of preamble, FCS and gap.
  const double wire_bits = (14 + 20 + 8 + 12 + 1024.0 + 4 + 24) * 8;
  const double line_gap_ps = wire_bits / double(kRate) * 1e12;
  SECTION("dcqcn: the first CNP cuts to R (1 - alpha/2), alpha = 1023/1024") {
    CcBench b(dcqcn());
    b.post_write(256 * 1024);
    b.engine->run_for(us(2));  // about 20 packets at line rate
    const size_t before = b.probe->got.size();
    REQUIRE(before > 4);
    for (Duration g : b.write_gaps(1)) CHECK(double(g.count()) == Approx(line_gap_ps).epsilon(0.001));
    b.cnp_to_nic();
    CHECK(b.nic->counters()[NC::rp_cnp_handled] == 1);
    b.engine->run_for(us(10));
    const double rate = double(kRate) * (1 - (1023.0 / 1024) / 2);
    const double cut_gap_ps = wire_bits / rate * 1e12;
    // Past the packets already on the wire, every gap is the cut rate's.
    const auto gaps = b.write_gaps(before + 2);
    REQUIRE(gaps.size() > 20);
    for (Duration g : gaps) CHECK(double(g.count()) == Approx(cut_gap_ps).epsilon(0.001));
  }
  SECTION("none: a CNP changes nothing") {
    CcBench b({"none", "", {}});
    b.post_write(256 * 1024);
    b.engine->run_for(us(2));
    b.cnp_to_nic();
    CHECK(b.nic->counters()[NC::rp_cnp_ignored] == 1);
    b.engine->run_for(us(10));
    for (Duration g : b.write_gaps(1)) CHECK(double(g.count()) == Approx(line_gap_ps).epsilon(0.001));
  }
}

TEST_CASE("RP: a rate increase lets a QP paced at a low rate go at once", "[protocol][nic][dcqcn]") {
  // The first CNP sets 1 Mbit/s (rate and target), where a 1 KB packet's
  // slot is 8.8 ms. The timer's first event is fast recovery (no change),
  // its second (CNP + 600 us) additive increase by 50 Gbit/s, which takes
  // the rate to about 25 Gbit/s: the waiting QP must not sit out its slot.
  cc::DcqcnParams p = cc::DcqcnParams::mlx5();
  p.rate_to_set_on_first_cnp_bps = 1e6;
  p.rpg_ai_rate_bps = 50e9;
  p.rpg_byte_reset = 0;
  CcBench b(dcqcn(p));
  b.post_write(64 * 1024);
  b.engine->run_for(us(1));
  b.cnp_to_nic();
  b.engine->run_for(us(550));
  const size_t before = b.probe->got.size();
  b.engine->run_for(us(100));
  INFO(before << " packets by CNP + 550 us, " << b.probe->got.size() << " by CNP + 650 us");
  CHECK(b.probe->got.size() - before > 30);
}

TEST_CASE("NP: a CNP waits while PFC pauses its priority, then goes", "[protocol][nic][dcqcn]") {
  CcBench b(dcqcn());
  // The partner pauses priority 6 (cnp_802p_prio) for 2000 quanta: 10.24 us at 100 Gbit/s.
  uint16_t quanta[wire::kNumPriorities] = {};
  quanta[6] = 2000;
  std::vector<uint8_t> pfc(64);
  pfc.resize(wire::encode_pfc(pfc, b.to_nic.src_mac, 1u << 6, quanta));
  const Time paused_at = b.engine->now();
  b.inject(pfc);
  b.write_to_nic(0, true);
  b.engine->run_for(us(5));
  CHECK(b.cnps().empty());
  CHECK(b.nic->counters()[NC::np_cnp_sent] == 1);  // made, held
  // The data path (priority 3) is not paused: the ACK of the WRITE went.
  CHECK(!b.probe->got.empty());
  b.engine->run_for(us(10));
  REQUIRE(b.cnps().size() == 1);
  for (const auto& f : b.probe->got)
    if (f.bytes.size() > 42 && f.bytes[42] == wire::op::kCnp) CHECK(f.at >= paused_at + ns(10240));
}

TEST_CASE("RP: an ACK owed by a QP whose data waits for its pacing slot goes at once", "[protocol][nic][dcqcn]") {
  // The QP's own WRITE is paced at 1 Mbit/s (an 8.8 ms slot per packet);
  // a request from the peer on the same QP must still be ACKed within
  // microseconds, or the peer would time out.
  cc::DcqcnParams p = cc::DcqcnParams::mlx5();
  p.rate_to_set_on_first_cnp_bps = 1e6;
  CcBench b(dcqcn(p));
  b.post_write(64 * 1024);
  b.engine->run_for(us(1));
  b.cnp_to_nic();
  b.engine->run_for(us(50));
  REQUIRE(b.qp->nic_qp->tx_gate == TxGate::kPacing);
  b.probe->got.clear();
  const Time asked = b.engine->now();
  b.write_to_nic(0, false);
  b.engine->run_for(us(20));
  bool acked = false;
  for (const auto& f : b.probe->got) {
    wire::PacketView v;
    REQUIRE(wire::decode(f.bytes, v) == wire::DecodeError::kOk);
    if (v.is_roce && v.opcode == wire::op::kAck) {
      acked = true;
      CHECK(f.at - asked < us(5));
    }
  }
  CHECK(acked);
}

TEST_CASE("RP: a QP taken back to RESET starts again at line rate", "[protocol][nic][dcqcn]") {
  CcBench b(dcqcn());
  b.post_write(64 * 1024);
  b.engine->run_for(us(1));
  b.cnp_to_nic();
  REQUIRE(b.qp->nic_qp->cc != nullptr);
  CHECK(b.qp->nic_qp->cc->rate_bps() < 0.6 * double(kRate));
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;
  REQUIRE(b.host->modify(b.qp, a, IBV_QP_STATE) == 0);
  CHECK(b.qp->nic_qp->cc == nullptr);  // opened anew, at line rate, when next used
  CHECK(b.qp->nic_qp->pace_bytes == 0);
}

TEST_CASE("cc knobs that would stall DCQCN are refused, naming the field", "[unit][nic][dcqcn]") {
  for (const char* knob : {"rpg_min_rate: 0", "rpg_time_reset: 0us", "dce_tcp_rtt: 0"}) {
    const std::string yaml = std::string("nodes:\n  h1: {kind: nic, ip: 10.0.0.1, cc: {algorithm: dcqcn, ") + knob +
                             "}}\n";
    NodeKindRegistry reg;
    register_nic_kind(reg);
    const auto t = parse_topology(yaml, "t.yaml", reg);
    INFO(knob);
    REQUIRE(!t.ok());
    const std::string field = std::string(knob).substr(0, std::string(knob).find(':'));
    CHECK(t.status().message().find("nodes.h1.cc." + field) != std::string::npos);
    CHECK(t.status().message().find("must be above 0") != std::string::npos);
  }
}

TEST_CASE("RP: DCQCN knobs set while running apply to the QP's next event", "[protocol][nic][dcqcn]") {
  CcBench b(dcqcn());
  b.post_write(64 * 1024);
  b.engine->run_for(us(1));
  // mlx5 units: Mbit/s. A bad value (or knob) changes nothing at all.
  CHECK_FALSE(b.nic->set_cc_knobs(YAML::Load("{rate_to_set_on_first_cnp: 10000, rpg_min_rate: 0}")).ok());
  CHECK_FALSE(b.nic->set_cc_knobs(YAML::Load("{bogus: 1}")).ok());
  CHECK(b.nic->config().cc.dcqcn.rate_to_set_on_first_cnp_bps == cc::DcqcnParams::mlx5().rate_to_set_on_first_cnp_bps);
  REQUIRE(b.nic->set_cc_knobs(YAML::Load("{rate_to_set_on_first_cnp: 10000}")).ok());
  b.cnp_to_nic();
  REQUIRE(b.qp->nic_qp->cc != nullptr);
  CHECK(b.qp->nic_qp->cc->rate_bps() == 10e9);
}

TEST_CASE("RP: no knobs on a NIC without DCQCN", "[protocol][nic][dcqcn]") {
  CcBench b({"none", "", {}});
  const Status s = b.nic->set_cc_knobs(YAML::Load("{rpg_ai_rate: 10}"));
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.message(), Catch::Contains("congestion control is none"));
}

TEST_CASE("Every knob shown in mlx5's units reads back to the same parameters", "[unit][nic][dcqcn]") {
  for (const char* profile : {"mlx5", "paper", "hpcc"}) {
    cc::DcqcnParams p;
    cc::DcqcnParams::profile(profile, p);
    YAML::Node shown(YAML::NodeType::Map);
    for (const auto& [knob, value] : cc::show_knobs(p)) shown[knob] = YAML::Load(value);
    REQUIRE(shown.size() == cc::knob_names().size());
    cc::DcqcnParams back = cc::DcqcnParams::mlx5();
    back.rpg_ai_rate_bps = 1;  // anything: every knob is set from `shown`
    config::Context ctx("");
    cc::set_knobs(shown, "cc", ctx, back);
    INFO(profile << ": " << ctx.status().message());
    REQUIRE(ctx.ok());
    CHECK(cc::show_knobs(back) == cc::show_knobs(p));
    CHECK(back.rpg_ai_rate_bps == p.rpg_ai_rate_bps);
    CHECK(back.rpg_time_reset == p.rpg_time_reset);
    CHECK(back.rpg_byte_reset == p.rpg_byte_reset);
    CHECK(back.dce_tcp_rtt == p.dce_tcp_rtt);
    CHECK(back.rp_enable == p.rp_enable);
  }
}
