// An rdma_cm connection between two emulated NICs (listen, resolve,
// connect, accept, RTU, disconnect), captured on the link and handed to
// tshark: the CM MADs on QP1 must decode as InfiniBand CM, without
// errors, with the fields the managers negotiated.
#include <catch2/catch.hpp>
#include <infiniband/verbs.h>

#include <optional>

#include "tests/nic/fabric.h"
#include "tests/oracle/oracle_run.h"
#include "tests/support/pcap_file.h"

using namespace rocemu;
using namespace rocemu::test;
using nic::cm::ConnectionManager;

namespace cm_capture_test {

// The next event of a channel, running virtual time until it comes.
std::optional<nic::cm::EventResp> cm_event(TwoNics& f, nic::Nic& n, uint32_t ch) {
  std::optional<nic::cm::EventResp> ev;
  f.run([&] {
    ev = n.with_cm(f.engine->now(), [&](ConnectionManager& cm) { return cm.get_event(ch); });
    return ev.has_value();
  });
  return ev;
}

}  // namespace cm_capture_test
using namespace cm_capture_test;

TEST_CASE("An rdma_cm connect and disconnect decodes in tshark as InfiniBand CM REQ, REP, RTU, DREQ, DREP",
          "[oracle][nic][cm]") {
  TwoNics f;
  const std::string path = std::string(ROCEMU_ORACLE_OUT) + "/cm-capture.pcapng";
  REQUIRE(f.engine->capture_link(*f.link, path).ok());
  nic::Nic& a = *f.n1;
  nic::Nic& b = *f.n2;
  const wire::IpAddr ip_b = *wire::IpAddr::parse("10.0.0.2");
  auto on = [&](nic::Nic& n, auto&& fn) { return n.with_cm(f.engine->now(), fn); };
  const uint32_t ch_a = on(a, [](ConnectionManager& cm) { return cm.open_channel(1, nullptr); });
  const uint32_t ch_b = on(b, [](ConnectionManager& cm) { return cm.open_channel(2, nullptr); });
  uint32_t listen_id = 0, id = 0;
  REQUIRE(on(b, [&](ConnectionManager& cm) {
            int e = cm.create_id(ch_b, 1, RDMA_PS_TCP, IBV_QPT_RC, listen_id);
            if (e == 0) e = cm.bind(ch_b, listen_id, &ip_b, 7174);
            return e == 0 ? cm.listen(ch_b, listen_id, 4) : e;
          }) == 0);
  REQUIRE(on(a, [&](ConnectionManager& cm) {
            const int e = cm.create_id(ch_a, 2, RDMA_PS_TCP, IBV_QPT_RC, id);
            return e == 0 ? cm.resolve_addr(ch_a, id, nullptr, ip_b, 7174, 2000, f.engine->now()) : e;
          }) == 0);
  auto ev = cm_event(f, a, ch_a);  // after ARP
  REQUIRE(ev);
  REQUIRE(ev->event == nic::cm::RDMA_CM_EVENT_ADDR_RESOLVED);
  REQUIRE(on(a, [&](ConnectionManager& cm) { return cm.resolve_route(ch_a, id, f.engine->now()); }) == 0);
  REQUIRE(cm_event(f, a, ch_a)->event == nic::cm::RDMA_CM_EVENT_ROUTE_RESOLVED);
  ConnectionManager::ConnParam cp;
  cp.qp_num = 0x1234;
  cp.responder_resources = 1;
  cp.initiator_depth = 1;
  REQUIRE(on(a, [&](ConnectionManager& cm) { return cm.connect(ch_a, id, cp, f.engine->now()); }) == 0);
  ev = cm_event(f, b, ch_b);
  REQUIRE(ev);
  REQUIRE(ev->event == nic::cm::RDMA_CM_EVENT_CONNECT_REQUEST);
  const uint32_t child = ev->id;
  ConnectionManager::ConnParam ap;
  ap.qp_num = 0x5678;
  ap.responder_resources = 1;
  ap.initiator_depth = 1;
  REQUIRE(on(b, [&](ConnectionManager& cm) { return cm.accept(ch_b, child, 3, &ap, f.engine->now()); }) == 0);
  REQUIRE(cm_event(f, a, ch_a)->event == nic::cm::RDMA_CM_EVENT_CONNECT_RESPONSE);
  REQUIRE(on(a, [&](ConnectionManager& cm) { return cm.accept(ch_a, id, 0, nullptr, f.engine->now()); }) == 0);
  REQUIRE(cm_event(f, b, ch_b)->event == nic::cm::RDMA_CM_EVENT_ESTABLISHED);
  REQUIRE(on(a, [&](ConnectionManager& cm) { return cm.disconnect(ch_a, id, f.engine->now()); }) == 0);
  REQUIRE(cm_event(f, b, ch_b)->event == nic::cm::RDMA_CM_EVENT_DISCONNECTED);
  REQUIRE(cm_event(f, a, ch_a)->event == nic::cm::RDMA_CM_EVENT_DISCONNECTED);
  f.engine->flush_captures();

  const auto run = run_tshark(path, {"infiniband.bth.destqp", "infiniband.mad.mgmtclass", "infiniband.mad.attributeid",
                                     "infiniband.cm.req.localqpn", "infiniband.cm.req.serviceid.dport",
                                     "infiniband.cm.req.ip_cm.dip4", "infiniband.cm.rep.localqpn",
                                     "infiniband.cm.rtu.remotecommid", "infiniband.cm.dreq.remotecommid"});
  INFO(run.stderr_text);
  REQUIRE(run.status == 0);
  std::vector<std::string> attrs;
  for (size_t i = 0; i < run.frames.size(); i++) {
    const TsharkFrame& fr = run.frames[i];
    INFO("frame " << i + 1);
    CHECK_FALSE(fr.malformed);
    for (const auto& e : fr.errors) INFO(e);
    CHECK(fr.errors.empty());
    if (fr.values[0].empty()) continue;  // ARP
    CHECK(fr.values[0][0] == "0x000001");  // to QP1
    REQUIRE(!fr.values[1].empty());
    CHECK(fr.values[1][0] == "0x07");    // the CM class
    REQUIRE(!fr.values[2].empty());
    attrs.push_back(fr.values[2][0]);
    if (fr.values[2][0] == "0x0010") {
      CHECK(fr.values[3] == std::vector<std::string>{"0x001234"});
      CHECK(fr.values[4] == std::vector<std::string>{"0x1c06"});
      CHECK(fr.values[5] == std::vector<std::string>{"10.0.0.2"});
    }
    if (fr.values[2][0] == "0x0013") CHECK(fr.values[6] == std::vector<std::string>{"0x005678"});
    if (fr.values[2][0] == "0x0014") CHECK(fr.values[7].size() == 1);
    if (fr.values[2][0] == "0x0015") CHECK(fr.values[8].size() == 1);
  }
  CHECK(attrs == std::vector<std::string>{"0x0010", "0x0013", "0x0014", "0x0015", "0x0016"});
}
