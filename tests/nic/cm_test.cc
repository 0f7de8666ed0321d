// The connection manager (nic/cm): MAD fields against the IBA layout, and
// two managers wired back to back through a fake fabric driving the
// rdma_cm state machine with a manual clock.
#include <catch2/catch.hpp>
#include <infiniband/verbs.h>

#include <algorithm>
#include <bit>
#include <deque>

#include "nic/cm/cm.h"
#include "nic/cm/mad.h"
#include "tests/nic/fabric.h"

using namespace rocemu;
using namespace rocemu::nic::cm;

namespace cm_test {

int bits_set(const Mad& m) {
  int n = 0;
  for (size_t i = kMadHeaderSize; i < kMadSize; i++) n += std::popcount(m.wire()[i]);
  return n;
}

}  // namespace cm_test
using namespace cm_test;

TEST_CASE("CM MAD fields hold exactly their width, and nothing else moves", "[unit][cm]") {
  const Field fields[] = {req::kLocalCommId,  req::kServiceId,      req::kCaGuid,         req::kQkey,
                          req::kQpn,          req::kResponderResources, req::kInitiatorDepth, req::kRemoteCmResponseTimeout,
                          req::kTransportType, req::kEndToEndFlowControl, req::kStartingPsn, req::kLocalCmResponseTimeout,
                          req::kRetryCount,   req::kPkey,           req::kPathMtu,        req::kRnrRetryCount,
                          req::kMaxCmRetries, req::kSrq,            req::kExtendedTransportType,            req::kLocalLid,       req::kRemoteLid,
                          req::kFlowLabel,    req::kPacketRate,     req::kTrafficClass,   req::kHopLimit,
                          req::kSl,           req::kSubnetLocal,    req::kLocalAckTimeout, rep::kQpn,
                          rep::kStartingPsn,  rep::kTargetAckDelay, rep::kFailoverAccepted, rep::kEndToEndFlowControl,
                          rep::kRnrRetryCount, rep::kSrq,           rep::kCaGuid,         rej::kMessageRejected,
                          rej::kRejectInfoLength, rej::kReason,     dreq::kRemoteQpn,     mra::kServiceTimeout,
                          sidr_req::kPkey,    sidr_req::kServiceId, sidr_rep::kStatus,    sidr_rep::kQpn,
                          sidr_rep::kQkey};
  for (const Field& f : fields) {
    Mad m(Attr::kReq, 1);
    const uint64_t ones = f.width == 64 ? ~0ull : (1ull << f.width) - 1;
    m.set(f, ~0ull);
    INFO("field at byte " << f.offset << " bit " << int(f.bit) << " width " << int(f.width));
    CHECK(m.get(f) == ones);
    CHECK(bits_set(m) == f.width);
    CHECK(unsigned(f.offset) * 8 + f.bit + f.width <= kCmMessageSize * 8);
    m.set(f, 0);
    CHECK(bits_set(m) == 0);
  }
}

TEST_CASE("A REQ lays its fields where the IBA (and tshark) read them", "[unit][cm]") {
  Mad m(Attr::kReq, 0x1122334455667788ull);
  m.set(req::kLocalCommId, 0xdeadbeef);
  m.set(req::kServiceId, service_id(0x106, 7174));
  m.set(req::kQpn, 0xabcdef);
  m.set(req::kResponderResources, 0x12);
  m.set(req::kStartingPsn, 0x123456);
  m.set(req::kLocalCmResponseTimeout, 20);
  m.set(req::kRetryCount, 7);
  m.set(req::kPathMtu, 5);
  m.set(req::kRnrRetryCount, 7);
  m.set(req::kMaxCmRetries, 15);
  const auto w = m.wire();
  CHECK(w[0] == 1);
  CHECK(w[1] == 0x07);
  CHECK(w[2] == 2);
  CHECK(w[3] == 3);
  CHECK(w[16] == 0x00);
  CHECK(w[17] == 0x10);  // attribute ID REQ
  CHECK(w[8] == 0x11);   // TID
  const uint8_t* msg = w.data() + kMadHeaderSize;
  CHECK(msg[0] == 0xde);
  CHECK(msg[3] == 0xef);
  // Service ID 0x0000000001061c06
  CHECK(msg[12] == 0x01);
  CHECK(msg[13] == 0x06);
  CHECK(msg[14] == 0x1c);
  CHECK(msg[15] == 0x06);
  CHECK(msg[32] == 0xab);
  CHECK(msg[34] == 0xef);
  CHECK(msg[35] == 0x12);
  CHECK(msg[44] == 0x12);
  CHECK(msg[46] == 0x56);
  CHECK(msg[47] == (20 << 3 | 7));
  CHECK(msg[50] == (5 << 4 | 7));
  CHECK(msg[51] == (15 << 4));
  auto back = Mad::parse(w);
  REQUIRE(back);
  CHECK(back->attr() == Attr::kReq);
  CHECK(back->tid() == 0x1122334455667788ull);
  CHECK(back->get(req::kQpn) == 0xabcdef);
  // Not a CM MAD: another class, or too short.
  std::array<uint8_t, kMadSize> other{};
  std::copy(w.begin(), w.end(), other.begin());
  other[1] = 0x81;
  CHECK_FALSE(Mad::parse(other));
  CHECK_FALSE(Mad::parse(w.first(200)));
}

TEST_CASE("The cma_hdr round-trips with the IPv4 address in its last 4 bytes", "[unit][cm]") {
  CmaHeader h;
  h.src_port = 0x1234;
  h.src[12] = 10;
  h.src[15] = 1;
  h.dst[12] = 10;
  h.dst[15] = 2;
  std::array<uint8_t, CmaHeader::kSize> out{};
  h.encode(out);
  CHECK(out[0] == 0);
  CHECK(out[1] == 0x40);
  CHECK(out[2] == 0x12);
  CHECK(out[3] == 0x34);
  CHECK(out[4 + 12] == 10);
  CHECK(out[20 + 15] == 2);
  auto d = CmaHeader::decode(out);
  REQUIRE(d);
  CHECK(d->src_port == 0x1234);
  CHECK(d->dst == h.dst);
  out[1] = 0x50;
  CHECK_FALSE(CmaHeader::decode(out));
}

namespace cm_test {

// Two CMs on one fake wire; MADs wait in `wire` until delivered.
struct CmPair {
  struct InFlight {
    wire::IpAddr src, dst;
    Mad mad;
  };
  wire::IpAddr ip_a = wire::IpAddr::v4(0x0a000101), ip_b = wire::IpAddr::v4(0x0a000201);
  std::deque<InFlight> wire_;
  Host::Reach reach_answer = Host::Reach::kReachable;
  wire::IpAddr sending_from;
  std::unique_ptr<ConnectionManager> a, b;
  uint32_t ch_a = 0, ch_b = 0;
  int signals_a = 0, signals_b = 0;
  Time now{0};

  struct Side : Host {
    CmPair* pair;
    wire::IpAddr self;
    Reach reach(const wire::IpAddr& ip, Time) override {
      return ip == pair->ip_a || ip == pair->ip_b ? pair->reach_answer : Reach::kPending;
    }
    void send_mad(const wire::IpAddr& dst, const Mad& mad, Time) override { pair->wire_.push_back({self, dst, mad}); }
    uint8_t path_mtu() override { return self == pair->ip_b ? pair->side_b_mtu : uint8_t(IBV_MTU_4096); }
  } side_a, side_b;
  uint8_t side_b_mtu = uint8_t(IBV_MTU_4096);

  CmPair() {
    side_a.pair = side_b.pair = this;
    side_a.self = ip_a;
    side_b.self = ip_b;
    CmConfig ca;
    ca.node_guid = 0x0200aafffe000101;
    ca.ip = ip_a;
    ca.sgid_index = 3;
    ca.seed = 1;
    CmConfig cb = ca;
    cb.node_guid = 0x0200bbfffe000201;
    cb.ip = ip_b;
    cb.seed = 2;
    a = std::make_unique<ConnectionManager>(ca, side_a);
    b = std::make_unique<ConnectionManager>(cb, side_b);
    ch_a = a->open_channel(1, [this](int n) { signals_a += n; });
    ch_b = b->open_channel(2, [this](int n) { signals_b += n; });
  }
  // Delivers what is on the wire (and what that causes); returns the
  // attributes delivered, in order.
  std::vector<Attr> deliver(int drop_first = 0) {
    std::vector<Attr> seen;
    while (!wire_.empty()) {
      InFlight f = wire_.front();
      wire_.pop_front();
      seen.push_back(f.mad.attr());
      if (drop_first > 0) {
        drop_first--;
        continue;
      }
      (f.dst == ip_a ? *a : *b).on_mad(f.src, f.mad, now);
    }
    return seen;
  }
  // The same, losing the first MAD of each attribute in `lose`.
  std::vector<Attr> deliver_losing(std::vector<Attr> lose) {
    std::vector<Attr> seen;
    while (!wire_.empty()) {
      InFlight f = wire_.front();
      wire_.pop_front();
      seen.push_back(f.mad.attr());
      if (auto it = std::find(lose.begin(), lose.end(), f.mad.attr()); it != lose.end()) {
        lose.erase(it);
        continue;
      }
      (f.dst == ip_a ? *a : *b).on_mad(f.src, f.mad, now);
    }
    return seen;
  }
  static EventResp next(ConnectionManager& cm, uint32_t ch) {
    auto ev = cm.get_event(ch);
    REQUIRE(ev);
    return *ev;
  }
};

}  // namespace cm_test

TEST_CASE("rdma_cm connects, negotiates PSNs, QPNs and resources, and disconnects over CM MADs", "[unit][cm]") {
  CmPair p;
  // Passive: listen on ip_b:7174.
  uint32_t listen_id = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, &p.ip_b, 7174) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
  // Active: resolve, route, connect.
  uint32_t id = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
  CHECK(CmPair::next(*p.a, p.ch_a).event == RDMA_CM_EVENT_ADDR_RESOLVED);
  REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
  CHECK(CmPair::next(*p.a, p.ch_a).event == RDMA_CM_EVENT_ROUTE_RESOLVED);
  rdma_ucm_query_route_resp route{};
  REQUIRE(p.a->query_route(p.ch_a, id, route) == 0);
  CHECK(route.node_guid == htobe64(0x0200aafffe000101));
  CHECK(route.num_paths == 1);
  ConnectionManager::ConnParam cp;
  cp.qp_num = 0x111;
  cp.responder_resources = 4;
  cp.initiator_depth = 2;
  cp.private_data = {1, 2, 3};
  REQUIRE(p.a->connect(p.ch_a, id, cp, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq});
  EventResp req = CmPair::next(*p.b, p.ch_b);
  CHECK(req.event == RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(req.uid == 0xb0);
  CHECK(req.param.conn.qp_num == 0x111);
  CHECK(req.param.conn.responder_resources == 2);  // the peer's initiator depth
  CHECK(req.param.conn.initiator_depth == 4);
  CHECK(req.param.conn.private_data_len == 56);
  CHECK(req.param.conn.private_data[2] == 3);
  const uint32_t child = req.id;
  // The passive QP's RTR and RTS come before accept (librdmacm's order).
  ib_uverbs_qp_attr rtr_b{}, rts_b{};
  REQUIRE(p.b->init_qp_attr(p.ch_b, child, IBV_QPS_RTR, rtr_b) == 0);
  REQUIRE(p.b->init_qp_attr(p.ch_b, child, IBV_QPS_RTS, rts_b) == 0);
  CHECK(rtr_b.dest_qp_num == 0x111);
  CHECK(rtr_b.ah_attr.grh.sgid_index == 3);
  CHECK(std::equal(rtr_b.ah_attr.grh.dgid, rtr_b.ah_attr.grh.dgid + 16, p.ip_a.b.begin()));
  ConnectionManager::ConnParam ap;
  ap.qp_num = 0x222;
  ap.responder_resources = 2;
  ap.initiator_depth = 4;
  REQUIRE(p.b->accept(p.ch_b, child, 0xb1, &ap, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kRep});
  EventResp resp = CmPair::next(*p.a, p.ch_a);
  CHECK(resp.event == RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK(resp.param.conn.qp_num == 0x222);
  ib_uverbs_qp_attr init_a{}, rtr_a{}, rts_a{};
  REQUIRE(p.a->init_qp_attr(p.ch_a, id, IBV_QPS_INIT, init_a) == 0);
  CHECK(init_a.qp_access_flags == (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC));
  REQUIRE(p.a->init_qp_attr(p.ch_a, id, IBV_QPS_RTR, rtr_a) == 0);
  REQUIRE(p.a->init_qp_attr(p.ch_a, id, IBV_QPS_RTS, rts_a) == 0);
  CHECK(rtr_a.dest_qp_num == 0x222);
  // Each side's receive PSN is its own; its send PSN the peer's.
  CHECK(rtr_a.rq_psn == rts_b.sq_psn);
  CHECK(rtr_b.rq_psn == rts_a.sq_psn);
  CHECK(rtr_a.rq_psn != rtr_b.rq_psn);
  CHECK(rtr_a.max_dest_rd_atomic == 4);
  CHECK(rts_a.max_rd_atomic == 2);
  CHECK(rtr_b.max_dest_rd_atomic == 2);
  CHECK(rts_b.max_rd_atomic == 4);
  REQUIRE(p.a->accept(p.ch_a, id, 0, nullptr, p.now) == 0);  // RTU
  CHECK(p.deliver() == std::vector<Attr>{Attr::kRtu});
  EventResp est = CmPair::next(*p.b, p.ch_b);
  CHECK(est.event == RDMA_CM_EVENT_ESTABLISHED);
  CHECK(est.uid == 0xb1);
  // Disconnect from the active side: DREQ, DREP, both see DISCONNECTED.
  REQUIRE(p.a->disconnect(p.ch_a, id, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kDreq, Attr::kDrep});
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_DISCONNECTED);
  CHECK(CmPair::next(*p.a, p.ch_a).event == RDMA_CM_EVENT_DISCONNECTED);
  CHECK_FALSE(p.a->get_event(p.ch_a));
  CHECK(p.signals_a == 4);  // one per event queued
  CHECK(p.signals_b == 3);
  uint32_t reported = 0;
  REQUIRE(p.a->destroy_id(p.ch_a, id, reported, p.now) == 0);
  CHECK(reported == 4);  // addr, route, connect response, disconnected
  REQUIRE(p.b->destroy_id(p.ch_b, listen_id, reported, p.now) == 0);
  CHECK(reported == 1);  // the connect request
  CHECK(p.wire_.empty());
}

TEST_CASE("rdma_cm: nobody listening gives REJECTED (reason 8), a consumer reject REJECTED (28)", "[unit][cm]") {
  CmPair p;
  uint32_t id = 0;
  auto connect_to = [&](uint16_t port) {
    REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
    REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, port, 2000, p.now) == 0);
    REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
    REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
    CmPair::next(*p.a, p.ch_a);
    CmPair::next(*p.a, p.ch_a);
  };
  connect_to(9999);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq, Attr::kRej});
  EventResp rej = CmPair::next(*p.a, p.ch_a);
  CHECK(rej.event == RDMA_CM_EVENT_REJECTED);
  CHECK(rej.status == kRejInvalidServiceId);
  CHECK(p.b->ids() == 0);

  uint32_t listen_id = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, nullptr, 7000) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
  connect_to(7000);
  p.deliver();
  EventResp req = CmPair::next(*p.b, p.ch_b);
  const uint8_t why[] = {42};
  REQUIRE(p.b->reject(p.ch_b, req.id, why, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kRej});
  rej = CmPair::next(*p.a, p.ch_a);
  CHECK(rej.event == RDMA_CM_EVENT_REJECTED);
  CHECK(rej.status == kRejConsumerDefined);
  CHECK(rej.param.conn.private_data[0] == 42);
}

TEST_CASE("rdma_cm: an address nobody answers gives ADDR_ERROR at the timeout; loopback ADDR_ERROR at once",
          "[unit][cm]") {
  CmPair p;
  uint32_t id = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, wire::IpAddr::v4(0x0a000263), 1, 500, p.now) == 0);
  CHECK_FALSE(p.a->get_event(p.ch_a));
  while (p.a->next_deadline() != Time::max() && p.now < ms(400)) {
    p.now = p.a->next_deadline();
    p.a->on_timer(p.now);
  }
  CHECK_FALSE(p.a->get_event(p.ch_a));  // still asking before the timeout
  while (p.a->next_deadline() != Time::max()) {
    p.now = p.a->next_deadline();
    p.a->on_timer(p.now);
  }
  CHECK(p.now == ms(500));
  EventResp e = CmPair::next(*p.a, p.ch_a);
  CHECK(e.event == RDMA_CM_EVENT_ADDR_ERROR);
  CHECK(int32_t(e.status) == -ETIMEDOUT);

  uint32_t lo = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa1, RDMA_PS_TCP, IBV_QPT_RC, lo) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, lo, nullptr, wire::IpAddr::v4(0x7f000001), 1, 500, p.now) == 0);
  e = CmPair::next(*p.a, p.ch_a);
  CHECK(e.event == RDMA_CM_EVENT_ADDR_ERROR);
  CHECK(int32_t(e.status) == -ENODEV);
  // A bind to an address that is not this device's.
  uint32_t other = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa2, RDMA_PS_TCP, IBV_QPT_RC, other) == 0);
  const wire::IpAddr foreign = wire::IpAddr::v4(0x0a000909);
  CHECK(p.a->bind(p.ch_a, other, &foreign, 0) == ENODEV);
}

TEST_CASE("rdma_cm: a bind to 127.0.0.1 is a wildcard bind (no device), and a listener there hears the NIC's address",
          "[unit][cm]") {
  // The kernel's cma_any_addr takes a loopback address for the wildcard;
  // libfabric's verbs provider binds 127.0.0.1 and looks for no device.
  CmPair p;
  uint32_t lo = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, lo) == 0);
  const wire::IpAddr loopback = wire::IpAddr::v4(0x7f000001);
  REQUIRE(p.b->bind(p.ch_b, lo, &loopback, 7174) == 0);
  rdma_ucm_query_route_resp route{};
  REQUIRE(p.b->query_route(p.ch_b, lo, route) == 0);
  CHECK(route.node_guid == 0);  // librdmacm's id->verbs stays NULL
  const auto* src = reinterpret_cast<const sockaddr_in*>(&route.src_addr);
  CHECK(src->sin_family == AF_INET);
  CHECK(ntohl(src->sin_addr.s_addr) == 0x7f000001);
  CHECK(ntohs(src->sin_port) == 7174);
  REQUIRE(p.b->listen(p.ch_b, lo, 8) == 0);
  uint32_t id = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
  REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq});
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);
}

TEST_CASE("rdma_cm: loopback as the kernel's cma_loopback_addr: ::1 binds as the wildcard, an AF_INET6 "
          "::ffff:127.0.0.1 is no loopback address",
          "[unit][cm]") {
  CmPair p;
  uint32_t v6 = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, v6) == 0);
  const wire::IpAddr v6_loopback = *wire::IpAddr::parse("::1");
  REQUIRE(p.b->bind(p.ch_b, v6, &v6_loopback, 7174) == 0);  // ipv6_addr_loopback
  rdma_ucm_query_route_resp route{};
  REQUIRE(p.b->query_route(p.ch_b, v6, route) == 0);
  CHECK(route.node_guid == 0);  // no device, as a wildcard bind
  REQUIRE(p.b->listen(p.ch_b, v6, 8) == 0);
  uint32_t id = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
  REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq});
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);
  // 127.0.0.1 as an IPv4-mapped IPv6 address (AF_INET6): an address of
  // no RDMA device; as AF_INET the wildcard.
  const wire::IpAddr mapped = wire::IpAddr::v4(0x7f000001);
  uint32_t m6 = 0, m4 = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb1, RDMA_PS_TCP, IBV_QPT_RC, m6) == 0);
  CHECK(p.b->bind(p.ch_b, m6, &mapped, 7175, ConnectionManager::Family::kInet6) == ENODEV);
  REQUIRE(p.b->create_id(p.ch_b, 0xb2, RDMA_PS_TCP, IBV_QPT_RC, m4) == 0);
  CHECK(p.b->bind(p.ch_b, m4, &mapped, 7175, ConnectionManager::Family::kInet) == 0);
}

TEST_CASE("rdma_cm: a lost REQ is sent again on its timeout; 15 losses later UNREACHABLE", "[unit][cm]") {
  CmPair p;
  uint32_t listen_id = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, &p.ip_b, 7174) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
  uint32_t id = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
  CmPair::next(*p.a, p.ch_a);
  CmPair::next(*p.a, p.ch_a);
  REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
  p.deliver(1);  // the REQ is lost
  CHECK_FALSE(p.b->get_event(p.ch_b));
  CHECK(p.a->next_deadline() == ms(4608));
  p.now = p.a->next_deadline();
  p.a->on_timer(p.now);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq});  // resent and answered
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(p.a->counters().mads_resent == 1);

  // Now, on a fresh pair, one that is never answered.
}

TEST_CASE("rdma_cm: a REQ never answered is sent 15 more times, then UNREACHABLE (-ETIMEDOUT)", "[unit][cm]") {
  CmPair p;
  uint32_t id2 = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa1, RDMA_PS_TCP, IBV_QPT_RC, id2) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id2, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, id2, p.now) == 0);
  CmPair::next(*p.a, p.ch_a);
  CmPair::next(*p.a, p.ch_a);
  REQUIRE(p.a->connect(p.ch_a, id2, {}, p.now) == 0);
  const Time start = p.now;
  int sent = 0;
  for (;;) {
    sent += int(p.deliver(int(p.wire_.size())).size());
    if (auto e = p.a->get_event(p.ch_a)) {
      CHECK(e->event == RDMA_CM_EVENT_UNREACHABLE);
      CHECK(int32_t(e->status) == -ETIMEDOUT);
      break;
    }
    REQUIRE(p.a->next_deadline() != Time::max());
    p.now = p.a->next_deadline();
    p.a->on_timer(p.now);
  }
  CHECK(sent == 16 + 1);  // REQ, 15 resends, then the REJ (timeout) that tells the peer
  CHECK(p.now - start == 16 * ms(4608));
}

TEST_CASE("rdma_cm UD: SIDR_REQ answered by SIDR_REP with QPN and Q_Key; no listener UNREACHABLE", "[unit][cm]") {
  CmPair p;
  uint32_t id = 0;
  auto resolve = [&](uint16_t port) {
    REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_UDP, IBV_QPT_UD, id) == 0);
    REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, port, 2000, p.now) == 0);
    REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
    CmPair::next(*p.a, p.ch_a);
    CmPair::next(*p.a, p.ch_a);
    REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
  };
  resolve(7174);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kSidrReq, Attr::kSidrRep});
  EventResp e = CmPair::next(*p.a, p.ch_a);
  CHECK(e.event == RDMA_CM_EVENT_UNREACHABLE);
  CHECK(e.status == kSidrUnsupported);

  uint32_t listen_id = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_UDP, IBV_QPT_UD, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, nullptr, 7174) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
  resolve(7174);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kSidrReq});
  EventResp req = CmPair::next(*p.b, p.ch_b);
  CHECK(req.event == RDMA_CM_EVENT_CONNECT_REQUEST);
  ConnectionManager::ConnParam ap;
  ap.qp_num = 0x333;
  REQUIRE(p.b->accept(p.ch_b, req.id, 0xb1, &ap, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kSidrRep});
  e = CmPair::next(*p.a, p.ch_a);
  CHECK(e.event == RDMA_CM_EVENT_ESTABLISHED);
  CHECK(e.param.ud.qp_num == 0x333);
  CHECK(e.param.ud.qkey == 0x01234567);
  CHECK(e.param.ud.ah_attr.is_global == 1);
  ib_uverbs_qp_attr init{};
  REQUIRE(p.a->init_qp_attr(p.ch_a, id, IBV_QPS_INIT, init) == 0);
  CHECK((init.qp_attr_mask & IBV_QP_QKEY) != 0);
  CHECK(init.qkey == 0x01234567);
}

TEST_CASE("rdma_cm: a REQ to a UD listener is rejected (28), a SIDR_REQ to an RC listener gets SIDR_REP reject (2)",
          "[unit][cm]") {
  // The kernel's cma_ib_check_req_qp_type: a request whose QP type is not
  // the listener's fails the listener's handler, and the CM turns it down
  // as it destroys the new id (REJ consumer defined; SIDR_REP IB_SIDR_REJECT).
  // RDMA_PS_IB ids carry the QP type the program chose.
  CmPair p;
  uint32_t ud_listener = 0, rc_listener = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_IB, IBV_QPT_UD, ud_listener) == 0);
  REQUIRE(p.b->bind(p.ch_b, ud_listener, nullptr, 7000) == 0);
  REQUIRE(p.b->listen(p.ch_b, ud_listener, 8) == 0);
  REQUIRE(p.b->create_id(p.ch_b, 0xb1, RDMA_PS_IB, IBV_QPT_RC, rc_listener) == 0);
  REQUIRE(p.b->bind(p.ch_b, rc_listener, nullptr, 7001) == 0);
  REQUIRE(p.b->listen(p.ch_b, rc_listener, 8) == 0);
  auto connect_to = [&](uint8_t qp_type, uint16_t port) {
    uint32_t id = 0;
    REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_IB, qp_type, id) == 0);
    REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, port, 2000, p.now) == 0);
    REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
    CmPair::next(*p.a, p.ch_a);
    CmPair::next(*p.a, p.ch_a);
    REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
  };
  connect_to(IBV_QPT_RC, 7000);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq, Attr::kRej});
  EventResp e = CmPair::next(*p.a, p.ch_a);
  CHECK(e.event == RDMA_CM_EVENT_REJECTED);
  CHECK(e.status == kRejConsumerDefined);
  connect_to(IBV_QPT_UD, 7001);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kSidrReq, Attr::kSidrRep});
  e = CmPair::next(*p.a, p.ch_a);
  CHECK(e.event == RDMA_CM_EVENT_UNREACHABLE);
  CHECK(e.status == kSidrReject);
  // The listeners saw nothing and hold no new id.
  CHECK_FALSE(p.b->get_event(p.ch_b));
  CHECK(p.b->ids() == 2);
  CHECK(p.b->counters().no_listener == 0);
  // RDMA_PS_TCP ids are RC and RDMA_PS_UDP ids UD, whatever the command
  // says (ucma_get_qp_type): a UDP listener asked for as RC still hears
  // SIDR only.
  uint32_t udp = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb2, RDMA_PS_UDP, IBV_QPT_RC, udp) == 0);
  REQUIRE(p.b->bind(p.ch_b, udp, nullptr, 7002) == 0);
  REQUIRE(p.b->listen(p.ch_b, udp, 8) == 0);
  uint32_t active = 0;
  REQUIRE(p.a->create_id(p.ch_a, 0xa1, RDMA_PS_UDP, IBV_QPT_RC, active) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, active, nullptr, p.ip_b, 7002, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, active, p.now) == 0);
  CmPair::next(*p.a, p.ch_a);
  CmPair::next(*p.a, p.ch_a);
  REQUIRE(p.a->connect(p.ch_a, active, {}, p.now) == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kSidrReq});
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);
}

TEST_CASE("rdma_cm: a REQ's QP type read as the kernel's cm_req_get_qp_type; a listener of QP type 0 hears any "
          "request; requests turned down are counted",
          "[unit][cm]") {
  CmPair p;
  uint32_t rc_listener = 0, any_listener = 0, ud_listener = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_IB, IBV_QPT_RC, rc_listener) == 0);
  REQUIRE(p.b->bind(p.ch_b, rc_listener, nullptr, 7000) == 0);
  REQUIRE(p.b->listen(p.ch_b, rc_listener, 8) == 0);
  REQUIRE(p.b->create_id(p.ch_b, 0xb1, RDMA_PS_IB, 0, any_listener) == 0);
  REQUIRE(p.b->bind(p.ch_b, any_listener, nullptr, 7001) == 0);
  REQUIRE(p.b->listen(p.ch_b, any_listener, 8) == 0);
  REQUIRE(p.b->create_id(p.ch_b, 0xb2, RDMA_PS_IB, IBV_QPT_UD, ud_listener) == 0);
  REQUIRE(p.b->bind(p.ch_b, ud_listener, nullptr, 7002) == 0);
  REQUIRE(p.b->listen(p.ch_b, ud_listener, 1) == 0);
  // A request from side a; `transport` and `extended` (if set) rewrite
  // the REQ's transport service type fields on the wire.
  auto request = [&](uint8_t qp_type, uint16_t port, int transport = -1, int extended = -1) {
    uint32_t id = 0;
    REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_IB, qp_type, id) == 0);
    REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, port, 2000, p.now) == 0);
    REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
    CmPair::next(*p.a, p.ch_a);
    CmPair::next(*p.a, p.ch_a);
    REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
    REQUIRE(p.wire_.size() == 1);
    if (transport >= 0) p.wire_.front().mad.set(req::kTransportType, uint64_t(transport));
    if (extended >= 0) p.wire_.front().mad.set(req::kExtendedTransportType, uint64_t(extended));
    return p.deliver();
  };
  const std::vector<Attr> rejected{Attr::kReq, Attr::kRej};
  const std::vector<Attr> taken{Attr::kReq};
  // Transport 3 is XRC_TGT with extended type 1, no QP type otherwise:
  // neither is an RC listener's.
  CHECK(request(IBV_QPT_RC, 7000, 3, 1) == rejected);
  CHECK(request(IBV_QPT_RC, 7000, 3, 0) == rejected);
  CHECK(request(IBV_QPT_RC, 7000, 2) == rejected);
  CHECK(p.b->counters().qp_type_mismatch == 3);
  CHECK(request(IBV_QPT_RC, 7000) == taken);
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);
  // QP type 0 (cma_ib_check_req_qp_type's !id->qp_type): RC, UC, none, and SIDR.
  CHECK(request(IBV_QPT_RC, 7001) == taken);
  CHECK(request(IBV_QPT_RC, 7001, 1) == taken);
  CHECK(request(IBV_QPT_RC, 7001, 3, 0) == taken);
  CHECK(request(IBV_QPT_UD, 7001) == std::vector<Attr>{Attr::kSidrReq});
  for (int i = 0; i < 4; i++) CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);
  CHECK(p.b->counters().qp_type_mismatch == 3);
  // A SIDR_REQ to an RC listener, and one beyond a UD listener's backlog.
  CHECK(request(IBV_QPT_UD, 7000) == std::vector<Attr>{Attr::kSidrReq, Attr::kSidrRep});
  CHECK(p.b->counters().qp_type_mismatch == 4);
  CHECK(request(IBV_QPT_UD, 7002) == std::vector<Attr>{Attr::kSidrReq});
  CHECK(request(IBV_QPT_UD, 7002) == std::vector<Attr>{Attr::kSidrReq, Attr::kSidrRep});
  CHECK(p.b->counters().backlog_full == 1);
  CHECK(p.b->counters().qp_type_mismatch == 4);
}

TEST_CASE("rdma_cm: the REQ's path MTU is clamped to the port's; one that is no IBA MTU is kept, and the QP's RTR "
          "fails on it as a RoCE driver's",
          "[unit][cm]") {
  // The kernel's CM takes the REQ's MTU as is (cm_req_handler) and the
  // driver's modify_qp refuses one outside 256..4096 (mlx5: "invalid mtu").
  // Here a valid MTU above the port's is clamped to it (the NIC could not
  // send larger packets), an invalid one reaches rdma_init_qp_attr as is.
  for (const uint8_t asked : {uint8_t(IBV_MTU_1024), uint8_t(IBV_MTU_4096), uint8_t(0), uint8_t(7)}) {
    CmPair p;
    uint32_t listen_id = 0;
    REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
    REQUIRE(p.b->bind(p.ch_b, listen_id, nullptr, 7174) == 0);
    REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
    // A REQ as a peer would send it, with the MTU field set by hand.
    uint32_t id = 0;
    REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
    REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
    REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
    REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
    REQUIRE(p.wire_.size() == 1);
    p.wire_.front().mad.set(req::kPathMtu, asked);
    p.side_b_mtu = uint8_t(IBV_MTU_2048);
    CHECK(p.deliver() == std::vector<Attr>{Attr::kReq});
    EventResp req = CmPair::next(*p.b, p.ch_b);
    ib_uverbs_qp_attr rtr{};
    REQUIRE(p.b->init_qp_attr(p.ch_b, req.id, IBV_QPS_RTR, rtr) == 0);
    INFO("REQ path MTU " << int(asked));
    const bool iba_mtu = asked >= IBV_MTU_256 && asked <= IBV_MTU_4096;
    const uint8_t expect = iba_mtu ? std::min<uint8_t>(asked, IBV_MTU_2048) : asked;
    CHECK(rtr.path_mtu == expect);
    // librdmacm's next step: the QP to RTR with that MTU (the NICs' port
    // carries 4096-byte packets, nic/control.cc checks 256..active MTU).
    test::TwoNics nics;
    REQUIRE(nics.n2->active_mtu() == IBV_MTU_4096);
    auto* cq1 = nics.h1->create_cq(4);
    auto* cq2 = nics.h2->create_cq(4);
    ibv_qp_cap cap{4, 4, 1, 1, 0};
    auto* q1 = nics.h1->create_qp(nic::QpType::kRc, cq1, cq1, cap);
    auto* q2 = nics.h2->create_qp(nic::QpType::kRc, cq2, cq2, cap);
    nic::SimHost::ConnectOpts o;
    o.mtu = ibv_mtu(rtr.path_mtu);
    CHECK(nic::SimHost::connect(*nics.h1, q1, *nics.h2, q2, o) == (iba_mtu ? 0 : EINVAL));
    CHECK(q2->nic_qp->state == (iba_mtu ? IBV_QPS_RTS : IBV_QPS_INIT));
  }
}

TEST_CASE("rdma_cm: ids bind to free ports only; destroying an id with events queued takes them back",
          "[unit][cm]") {
  CmPair p;
  uint32_t x = 0, y = 0;
  REQUIRE(p.b->create_id(p.ch_b, 1, RDMA_PS_TCP, IBV_QPT_RC, x) == 0);
  REQUIRE(p.b->create_id(p.ch_b, 2, RDMA_PS_TCP, IBV_QPT_RC, y) == 0);
  REQUIRE(p.b->bind(p.ch_b, x, nullptr, 7471) == 0);
  CHECK(p.b->bind(p.ch_b, y, &p.ip_b, 7471) == EADDRINUSE);
  CHECK(p.b->bind(p.ch_b, y, &p.ip_b, 7472) == 0);
  // Another channel cannot touch the id.
  const uint32_t other = p.b->open_channel(2, nullptr);
  uint32_t reported = 0;
  CHECK(p.b->destroy_id(other, x, reported, p.now) == EINVAL);
  uint32_t z = 0;
  REQUIRE(p.a->create_id(p.ch_a, 3, RDMA_PS_TCP, IBV_QPT_RC, z) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, z, nullptr, p.ip_b, 7471, 2000, p.now) == 0);
  CHECK(p.signals_a == 1);
  REQUIRE(p.a->destroy_id(p.ch_a, z, reported, p.now) == 0);
  CHECK(reported == 0);
  CHECK(p.signals_a == 0);
  CHECK_FALSE(p.a->get_event(p.ch_a));
}

TEST_CASE("rdma_cm under loss: a lost REP, RTU, DREQ or DREP is made good by the side still waiting", "[unit][cm]") {
  CmPair p;
  uint32_t listen_id = 0, id = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, &p.ip_b, 7174) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
  CmPair::next(*p.a, p.ch_a);
  CmPair::next(*p.a, p.ch_a);
  auto tick = [&] {  // the earlier of the two timers
    p.now = std::min(p.a->next_deadline(), p.b->next_deadline());
    REQUIRE(p.now != Time::max());
    p.a->on_timer(p.now);
    p.b->on_timer(p.now);
  };
  ConnectionManager::ConnParam cp;
  cp.qp_num = 0x111;
  REQUIRE(p.a->connect(p.ch_a, id, cp, p.now) == 0);
  p.deliver();
  const uint32_t child = CmPair::next(*p.b, p.ch_b).id;
  ConnectionManager::ConnParam ap;
  ap.qp_num = 0x222;
  REQUIRE(p.b->accept(p.ch_b, child, 0xb1, &ap, p.now) == 0);
  CHECK(p.deliver(1) == std::vector<Attr>{Attr::kRep});  // lost
  tick();  // both resend: the REQ (a duplicate, answered with the REP) and the REP
  p.deliver();
  CHECK(CmPair::next(*p.a, p.ch_a).event == RDMA_CM_EVENT_CONNECT_RESPONSE);
  CHECK_FALSE(p.a->get_event(p.ch_a));  // once only
  REQUIRE(p.a->accept(p.ch_a, id, 0, nullptr, p.now) == 0);
  CHECK(p.deliver(1) == std::vector<Attr>{Attr::kRtu});  // lost
  tick();  // the REP again; the active side answers with its RTU again
  CHECK(p.deliver() == std::vector<Attr>{Attr::kRep, Attr::kRtu});
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_ESTABLISHED);
  REQUIRE(p.b->disconnect(p.ch_b, child, p.now) == 0);
  CHECK(p.deliver(1) == std::vector<Attr>{Attr::kDreq});  // lost
  tick();
  CHECK(p.deliver_losing({Attr::kDrep}) == std::vector<Attr>{Attr::kDreq, Attr::kDrep});  // the DREP lost
  CHECK(CmPair::next(*p.a, p.ch_a).event == RDMA_CM_EVENT_DISCONNECTED);
  tick();
  CHECK(p.deliver() == std::vector<Attr>{Attr::kDreq, Attr::kDrep});  // answered from the DREP kept
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_DISCONNECTED);
  CHECK_FALSE(p.a->get_event(p.ch_a));
  CHECK(p.a->next_deadline() == Time::max());
  CHECK(p.b->next_deadline() == Time::max());
}

TEST_CASE("rdma_cm: connection requests beyond the listen backlog are turned down until the program takes one",
          "[unit][cm]") {
  CmPair p;
  uint32_t listen_id = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, &p.ip_b, 7174) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 2) == 0);
  auto connect_one = [&](uint64_t uid) {
    uint32_t id = 0;
    REQUIRE(p.a->create_id(p.ch_a, uid, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
    REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7174, 2000, p.now) == 0);
    REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
    CmPair::next(*p.a, p.ch_a);
    CmPair::next(*p.a, p.ch_a);
    REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
    return p.deliver();
  };
  CHECK(connect_one(1) == std::vector<Attr>{Attr::kReq});
  CHECK(connect_one(2) == std::vector<Attr>{Attr::kReq});
  CHECK(connect_one(3) == std::vector<Attr>{Attr::kReq, Attr::kRej});
  EventResp rej = CmPair::next(*p.a, p.ch_a);
  CHECK(rej.event == RDMA_CM_EVENT_REJECTED);
  CHECK(rej.uid == 3);
  CHECK(rej.status == kRejConsumerDefined);
  CHECK(p.b->counters().backlog_full == 1);
  CHECK(CmPair::next(*p.b, p.ch_b).event == RDMA_CM_EVENT_CONNECT_REQUEST);  // one taken: room again
  CHECK(connect_one(4) == std::vector<Attr>{Attr::kReq});
}

TEST_CASE("rdma_cm: MIGRATE_ID onto the channel the id is on changes nothing; onto another moves its events",
          "[unit][cm]") {
  CmPair p;
  uint32_t z = 0, reported = 7;
  REQUIRE(p.a->create_id(p.ch_a, 3, RDMA_PS_TCP, IBV_QPT_RC, z) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, z, nullptr, p.ip_b, 7471, 2000, p.now) == 0);
  REQUIRE(p.signals_a == 1);  // ADDR_RESOLVED queued, not fetched
  // As the kernel's ucma_migrate_id: the same file, nothing moves.
  CHECK(p.a->migrate_id(p.ch_a, z, p.ch_a, reported) == 0);
  CHECK(reported == 0);
  CHECK(p.signals_a == 1);
  int signals_c = 0;
  const uint32_t ch_c = p.a->open_channel(1, [&](int n) { signals_c += n; });
  CHECK(p.a->migrate_id(p.ch_a, z, ch_c, reported) == 0);
  CHECK(p.signals_a == 0);
  CHECK(signals_c == 1);
  CHECK_FALSE(p.a->get_event(p.ch_a));
  CHECK(p.a->get_event(ch_c));
}

TEST_CASE("rdma_cm: destroying a listener turns down the requests the program has not fetched, and frees their ids",
          "[unit][cm]") {
  CmPair p;
  uint32_t listen_id = 0, id = 0, reported = 0;
  REQUIRE(p.b->create_id(p.ch_b, 0xb0, RDMA_PS_TCP, IBV_QPT_RC, listen_id) == 0);
  REQUIRE(p.b->bind(p.ch_b, listen_id, nullptr, 7000) == 0);
  REQUIRE(p.b->listen(p.ch_b, listen_id, 8) == 0);
  REQUIRE(p.a->create_id(p.ch_a, 0xa0, RDMA_PS_TCP, IBV_QPT_RC, id) == 0);
  REQUIRE(p.a->resolve_addr(p.ch_a, id, nullptr, p.ip_b, 7000, 2000, p.now) == 0);
  REQUIRE(p.a->resolve_route(p.ch_a, id, p.now) == 0);
  REQUIRE(p.a->connect(p.ch_a, id, {}, p.now) == 0);
  CmPair::next(*p.a, p.ch_a);
  CmPair::next(*p.a, p.ch_a);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kReq});
  REQUIRE(p.b->ids() == 2);  // the listener and the request's id
  REQUIRE(p.b->destroy_id(p.ch_b, listen_id, reported, p.now) == 0);
  CHECK(p.b->ids() == 0);
  CHECK(p.signals_b == 0);
  CHECK(p.deliver() == std::vector<Attr>{Attr::kRej});
  EventResp rej = CmPair::next(*p.a, p.ch_a);
  CHECK(rej.event == RDMA_CM_EVENT_REJECTED);
  CHECK(rej.status == kRejConsumerDefined);
}
