// GID table, DSCP/ECN marking from the traffic class, UDP source port
// entropy and per-QP counters, checked on the packets themselves.
#include "common/wire/packet.h"
#include "tests/nic/fabric.h"
#include "tests/support/pcap_file.h"

#include <map>

using namespace rocemu;
using namespace rocemu::nic;
using rocemu::test::sge;
using rocemu::test::TwoNics;

namespace {

struct Collect final : CounterSink {
  std::map<std::string, uint64_t> v;
  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    v[std::string(scope) + "." + std::string(name)] = value;
  }
};

}  // namespace

TEST_CASE("GID table is laid out as mlx5 does for one IPv4 address", "[unit][nic]") {
  TwoNics f;
  const auto& g = f.n1->gid_table();
  REQUIRE(g.size() == 4);
  CHECK(g[0].type == IBV_GID_TYPE_ROCE_V1);
  CHECK(g[1].type == IBV_GID_TYPE_ROCE_V2);
  CHECK(g[0].gid.b[0] == 0xfe);
  CHECK(g[0].gid.b[1] == 0x80);
  CHECK(g[0].gid.b[8] == (0x02 ^ 0x02));  // EUI-64 from 02:00:00:00:00:01, U/L bit flipped
  CHECK(g[0].gid.b[11] == 0xff);
  CHECK(g[0].gid.b[12] == 0xfe);
  CHECK(g[0].gid.b[15] == 0x01);
  CHECK(g[2].type == IBV_GID_TYPE_ROCE_V1);
  CHECK(g[3].type == IBV_GID_TYPE_ROCE_V2);
  CHECK(g[3].gid.str() == "10.0.0.1");  // ::ffff:10.0.0.1, so -x 3 is RoCEv2 IPv4
  CHECK(g[3].gid.is_v4());
}

TEST_CASE("Traffic class sets DSCP/ECN; data goes ECT(0); UDP source port from the flow label or QPNs",
          "[sim][nic]") {
  TwoNics f;
  REQUIRE(f.engine->capture_link(*f.link, std::string(ROCEMU_BINARY_DIR) + "/addressing.pcapng").ok());
  auto* cq1 = f.h1->create_cq(64);
  auto* cq2 = f.h2->create_cq(64);
  auto* a1 = f.h1->create_qp(QpType::kRc, cq1, cq1, ibv_qp_cap{8, 8, 1, 1, 0});
  auto* b1 = f.h2->create_qp(QpType::kRc, cq2, cq2, ibv_qp_cap{8, 8, 1, 1, 0});
  auto* a2 = f.h1->create_qp(QpType::kRc, cq1, cq1, ibv_qp_cap{8, 8, 1, 1, 0});
  auto* b2 = f.h2->create_qp(QpType::kRc, cq2, cq2, ibv_qp_cap{8, 8, 1, 1, 0});
  REQUIRE(SimHost::connect(*f.h1, a1, *f.h2, b1) == 0);  // traffic class 0: NIC default 106
  SimHost::ConnectOpts o;
  o.traffic_class = 24 << 2 | 1;  // DSCP 24, ECT(1)
  REQUIRE(SimHost::connect(*f.h1, a2, *f.h2, b2, o) == 0);
  std::vector<uint8_t> src(64, 1), dst(64, 0);
  const uint32_t lk = f.h1->reg_mr(src.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  const uint32_t rk = f.h2->reg_mr(dst.data(), 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  for (auto* q : {a1, a2}) {
    ibv_sge s = sge(src.data(), 64, lk);
    ibv_send_wr wr{};
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = uint64_t(dst.data());
    wr.wr.rdma.rkey = rk;
    REQUIRE(f.h1->post_send(q, &wr) == 0);
  }
  REQUIRE(test::wait_cqes(f, *f.h1, cq1, 2).size() == 2);
  f.engine->flush_captures();
  const auto frames = test::read_capture(std::string(ROCEMU_BINARY_DIR) + "/addressing.pcapng");
  int seen = 0;
  for (const auto& fr : frames) {
    wire::PacketView v;
    REQUIRE(wire::decode(fr.bytes, v) == wire::DecodeError::kOk);
    if (!v.is_roce || v.opcode != wire::op::kWriteOnly) continue;
    seen++;
    const uint32_t dqp = v.bth().dest_qp();
    const uint32_t sqp = dqp == b1->qpn ? a1->qpn : a2->qpn;
    CHECK(v.sport == wire::flow_label_to_udp_sport(wire::calc_flow_label(sqp, dqp)));
    if (dqp == b1->qpn) {
      CHECK(v.dscp == 26);
      CHECK(v.ecn == wire::Ecn::kEct0);
    } else {
      CHECK(v.dscp == 24);
      CHECK(v.ecn == wire::Ecn::kEct1);
    }
    CHECK(v.ipv4().ttl == 64);
  }
  CHECK(seen == 2);
  Collect c;
  f.n1->report_counters(c);
  CHECK(c.v.count("h1/qp" + std::to_string(a1->qpn) + ".retransmitted_packets") == 1);
  CHECK(c.v["h1.tx_roce_packets"] == 2);
}
