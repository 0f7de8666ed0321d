// Loss recovery is a strategy each NIC picks once, from its configuration:
// the loss_recovery value of a topology file names the strategy the NIC
// runs, and the selective repeat knobs reach it.
#include <catch2/catch.hpp>

#include "common/config/topology.h"
#include "nic/nic.h"
#include "nic/nic_kind.h"

namespace rocemu::nic {

// Nic's friend for tests: the strategy a NIC was built with.
class NicTestPeer {
 public:
  static const LossRecoveryStrategy& recovery(const Nic& n) { return *n.recovery_; }
};

}  // namespace rocemu::nic

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

  // With at most 3 packets in flight selective repeat times out after
  // sr_rto_low (100 us unless set) when that is shorter; go-back-N keeps
  // the QP's own timeout.
  nic::Qp qp;
  qp.una_psn = 0xfffffe;
  qp.sent_high = 1;  // 3 in flight, across the PSN wrap
  CHECK(recovery("h2").retransmit_timeout(qp, ms(1)) == ms(1));
  CHECK(recovery("h3").retransmit_timeout(qp, ms(1)) == us(100));
  CHECK(recovery("h4").retransmit_timeout(qp, ms(1)) == us(20));
  CHECK(recovery("h4").retransmit_timeout(qp, us(10)) == us(10));
  qp.sent_high = 2;  // 4 in flight
  CHECK(recovery("h4").retransmit_timeout(qp, ms(1)) == ms(1));
}
