// VXLAN: the outer headers, the outer source port from the inner flow,
// RFC 6040 on decapsulation (pure logic); then VTEP switches in virtual
// time: encapsulation (DSCP copied or set, ECN, inner ICRC, ECMP in the
// underlay on the outer source port), the underlay MTU, decapsulation of
// crafted frames (CE copied, not-ECT with CE dropped, unknown VNI, bad
// header), and two leaves over a spine where the outer DSCP decides the
// spine's traffic class. And the configuration: topology YAML (errors with
// lines), nv set nve vxlan, config show round trip, nv show nve vxlan.
// Then what review found: trimming inside VXLAN (in the underlay and on
// crafted frames, CNPs exempt), inner 802.1Q tags, an unresolved underlay
// next hop, inner TTL expiry, IPv6 inner packets, non-IP inner frames, nv
// words after a complete command, nve vxlan state, validation.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>

#include "common/config/topology.h"
#include "common/wire/build.h"
#include "common/wire/packet.h"
#include "switch/nvue.h"
#include "switch/nvue_yaml.h"
#include "switch/switch_kind.h"
#include "switch/vxlan.h"
#include "tests/switch/fixture.h"

using namespace rocemu;
using namespace rocemu::test;
using wire::Ecn;

namespace {

wire::IpAddr ip(const char* s) { return *wire::IpAddr::parse(s); }

// `nv LINE` on a configuration (the words split at spaces).
Status vxlan_nv(sw::SwitchConfig& cfg, const std::string& line) {
  std::vector<std::string> w;
  for (size_t b = 0, e; b < line.size(); b = e + 1) {
    e = std::min(line.find(' ', b), line.size());
    w.push_back(line.substr(b, e - b));
  }
  return sw::nv_edit(cfg, w);
}

// An inner RoCEv2 RDMA WRITE frame from h0 to h1 (star addresses).
std::vector<uint8_t> roce_frame(uint16_t sport, uint8_t dscp, Ecn ecn, uint32_t payload = 256) {
  std::vector<uint8_t> frame(payload + 128);
  wire::PathHeaders path;
  path.src_mac = host_mac(0);
  path.dst_mac = wire::MacAddr{{0x02, 0x00, 0x0a, 0x0a, 0x0a, 0x01}};
  path.src_ip = host_ip(0);
  path.dst_ip = host_ip(1);
  path.dscp = dscp;
  path.ecn = ecn;
  path.udp_sport = sport;
  wire::RoceFields bth;
  bth.opcode = wire::op::kWriteOnly;
  bth.dest_qp = 0x42;
  bth.psn = 7;
  bth.reth_va = 0x1000;
  bth.reth_rkey = 0x55;
  bth.reth_len = payload;
  std::vector<uint8_t> data(payload, 0xab);
  const uint32_t len = wire::encode_roce(frame, path, bth, data);
  REQUIRE(len > 0);
  frame.resize(len);
  return frame;
}

// `inner` inside outer headers to `dst_ip` (host order) with VNI `vni`.
std::vector<uint8_t> vxlan_frame(const std::vector<uint8_t>& inner, uint32_t vni, Ecn outer_ecn, uint32_t dst_ip,
                                 wire::MacAddr dst_mac) {
  std::vector<uint8_t> f(sw::kVxlanOverhead + inner.size());
  sw::VxlanEncap e;
  e.src_mac = wire::MacAddr{{0x02, 0x00, 0x00, 0x00, 0x00, 0xee}};
  e.dst_mac = dst_mac;
  e.src_ip = 0x0a0a0a02;  // 10.10.10.2
  e.dst_ip = dst_ip;
  e.vni = vni;
  e.src_port = 0xd001;
  e.dscp = 26;
  e.ecn = outer_ecn;
  sw::vxlan_write_outer({f.data(), sw::kVxlanOverhead}, e, uint32_t(inner.size()));
  std::copy(inner.begin(), inner.end(), f.begin() + sw::kVxlanOverhead);
  return f;
}

// Decodes the inner frame of an encapsulated `frame` (whose outer view is `o`).
wire::PacketView inner_of(const std::vector<uint8_t>& frame, const wire::PacketView& o) {
  const uint32_t at = uint32_t(o.l4_off) + 16;
  wire::PacketView v;
  REQUIRE(wire::decode({frame.data() + at, frame.size() - at}, v) == wire::DecodeError::kOk);
  return v;
}

uint32_t vni_of(const std::vector<uint8_t>& frame, const wire::PacketView& o) {
  return reinterpret_cast<const sw::VxlanHdr*>(frame.data() + o.l4_off + 8)->vni();
}

}  // namespace

TEST_CASE("VXLAN outer headers: IPv4 with DF and a valid checksum, UDP 4789 checksum 0, I flag and VNI", "[unit][switch]") {
  const std::vector<uint8_t> inner = roce_frame(0xc123, 26, Ecn::kEct0);
  sw::VxlanEncap e;
  e.src_mac = host_mac(7);
  e.dst_mac = host_mac(8);
  e.src_ip = 0x0a0a0a01;
  e.dst_ip = 0x0a0a0a02;
  e.vni = 0xabcdef;
  e.src_port = 0xe123;
  e.dscp = 26;
  e.ecn = Ecn::kCe;
  e.ttl = 64;
  std::vector<uint8_t> f = vxlan_frame(inner, 10, Ecn::kNotEct, 0, {});
  sw::vxlan_write_outer({f.data(), sw::kVxlanOverhead}, e, uint32_t(inner.size()));
  wire::PacketView o;
  REQUIRE(wire::decode(f, o) == wire::DecodeError::kOk);  // lengths and the IPv4 checksum included
  CHECK(o.is_ipv4());
  CHECK(o.eth().src == host_mac(7));
  CHECK(o.eth().dst == host_mac(8));
  CHECK(o.ipv4().src.get() == 0x0a0a0a01);
  CHECK(o.ipv4().dst.get() == 0x0a0a0a02);
  CHECK(o.ipv4().frag.get() == 0x4000);
  CHECK(o.ipv4().ttl == 64);
  CHECK(o.dscp == 26);
  CHECK(o.ecn == Ecn::kCe);
  CHECK(o.is_udp);
  CHECK(!o.is_roce);
  CHECK(o.sport == 0xe123);
  CHECK(o.dport == 4789);
  CHECK(o.udp().checksum.get() == 0);
  CHECK(uint32_t(o.ip_end - o.l3_off) == inner.size() - 14 + sw::kVxlanIpOverhead);
  CHECK(f[o.l4_off + 8] == 0x08);
  CHECK(vni_of(f, o) == 0xabcdef);
  const wire::PacketView in = inner_of(f, o);
  CHECK(in.is_roce);
  CHECK(in.icrc_ok());
}

TEST_CASE("VXLAN source port: from the inner flow, in 49152..65535, one per inner UDP source port", "[unit][switch]") {
  std::set<uint16_t> outer;
  for (uint16_t p = 0; p < 256; p++) {
    const std::vector<uint8_t> f = roce_frame(uint16_t(0xc000 + p), 26, Ecn::kEct0);
    wire::PacketView v;
    REQUIRE(wire::decode(f, v) == wire::DecodeError::kOk);
    const uint16_t s = sw::vxlan_source_port(v);
    CHECK(s >= 49152);
    CHECK(sw::vxlan_source_port(v) == s);  // the same flow, the same port
    outer.insert(s);
  }
  // 256 inner ports over 16384 outer ones: a collision or two at most.
  CHECK(outer.size() >= 250);
  // The DSCP and ECN are not part of the flow.
  wire::PacketView a, b;
  const auto fa = roce_frame(0xc001, 26, Ecn::kEct0), fb = roce_frame(0xc001, 0, Ecn::kCe);
  REQUIRE(wire::decode(fa, a) == wire::DecodeError::kOk);
  REQUIRE(wire::decode(fb, b) == wire::DecodeError::kOk);
  CHECK(sw::vxlan_source_port(a) == sw::vxlan_source_port(b));
}

TEST_CASE("RFC 6040 decapsulation, normal mode: the whole of Figure 4", "[unit][switch]") {
  // rows: inner Not-ECT, ECT(0), ECT(1), CE; columns: outer the same order.
  const Ecn N = Ecn::kNotEct, E0 = Ecn::kEct0, E1 = Ecn::kEct1, CE = Ecn::kCe;
  const std::optional<Ecn> kDrop;
  const std::optional<Ecn> want[4][4] = {{N, N, N, kDrop}, {E0, E0, E1, CE}, {E1, E1, E1, CE}, {CE, CE, CE, CE}};
  const Ecn order[4] = {N, E0, E1, CE};
  for (int i = 0; i < 4; i++)
    for (int o = 0; o < 4; o++) {
      INFO("inner " << i << " outer " << o);
      CHECK(sw::rfc6040_decap(order[o], order[i]) == want[i][o]);
    }
}

namespace {

const wire::MacAddr kUnderlayMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0xb0}};

// h0 on swp1 of a VTEP (10.10.10.1); swp2 (10.255.1.1/30) leads to the
// underlay, a FrameNode at 10.255.1.2 (static neighbour); 10.0.1.0/24 is
// in the overlay, VNI 10, behind VTEP 10.10.10.2.
sw::SwitchConfig vtep_config() {
  sw::SwitchConfig cfg = star_config(2, sw::qos_roce_profile(sw::RoceMode::kLossless));
  cfg.interfaces[1].address = sw::IpPrefix::parse("10.255.1.1/30");
  cfg.vxlan.source = ip("10.10.10.1");
  cfg.vxlan.flood = {ip("10.10.10.2")};
  cfg.vxlan.vnis.push_back(sw::VxlanVni{10, "default", {}});
  sw::Route overlay;
  overlay.prefix = *sw::IpPrefix::parse("10.0.1.0/24");
  overlay.vtep = ip("10.10.10.2");
  overlay.vni = 10;
  cfg.routes.push_back(overlay);
  cfg.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.10.10.2/32"), 1, ip("10.255.1.2"), {}});
  cfg.neighbors.push_back(sw::Neighbor{ip("10.255.1.2"), kUnderlayMac, 1});
  return cfg;
}

struct VtepBench {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  TestHost* h0 = nullptr;
  FrameNode* underlay = nullptr;
};

VtepBench make_vtep(const sw::SwitchConfig& cfg, std::vector<std::vector<uint8_t>> underlay_frames = {}) {
  VtepBench b;
  b.engine = make_engine(5);
  b.sw = &b.engine->add<sw::Switch>("leaf1", cfg);
  b.h0 = &b.engine->add<TestHost>("h0", host_ip(0), host_mac(0), gateway_ip(0));
  b.underlay = &b.engine->add<FrameNode>("underlay", std::move(underlay_frames));
  REQUIRE(b.engine->connect(*b.h0, 0, *b.sw, 0, LinkParams{}).ok());
  REQUIRE(b.engine->connect(*b.underlay, 0, *b.sw, 1, LinkParams{}).ok());
  b.engine->run_until(us(20));
  REQUIRE(b.h0->gateway_resolved());
  return b;
}

FlowSpec flow_to_h1(uint32_t qpn, uint64_t count, uint32_t payload = 256) {
  FlowSpec f;
  f.dst = host_ip(1);
  f.qpn = qpn;
  f.count = count;
  f.payload = payload;
  f.rate_bps = 10'000'000'000ull;
  return f;
}

std::vector<std::pair<wire::PacketView, std::vector<uint8_t>>> vxlan_frames(const FrameNode& n) {
  std::vector<std::pair<wire::PacketView, std::vector<uint8_t>>> out;
  for (const auto& f : n.received()) {
    wire::PacketView o;
    if (wire::decode(f, o) != wire::DecodeError::kOk || !o.is_udp || o.dport != 4789) continue;
    out.emplace_back(o, f);
  }
  // The views point into the vectors: decode again from their final place.
  for (auto& [o, f] : out) REQUIRE(wire::decode(f, o) == wire::DecodeError::kOk);
  return out;
}

}  // namespace

TEST_CASE("VTEP encapsulation: outer DSCP copied (or set), inner ECN to the outer, inner TTL and ICRC, counters",
          "[sim][switch]") {
  const bool copy = GENERATE(true, false);
  INFO((copy ? "dscp copy" : "dscp set 0"));
  sw::SwitchConfig cfg = vtep_config();
  if (!copy) cfg.vxlan.encap_dscp = sw::VxlanDscpAction::kSet;
  VtepBench b = make_vtep(cfg);
  FlowSpec ect = flow_to_h1(0x10, 10);
  FlowSpec ce = flow_to_h1(0x11, 5);
  ce.ecn = Ecn::kCe;
  FlowSpec not_ect = flow_to_h1(0x12, 5);
  not_ect.ecn = Ecn::kNotEct;
  b.h0->add_flow(ect);
  b.h0->add_flow(ce);
  b.h0->add_flow(not_ect);
  b.engine->run_to_idle(ms(1));

  const auto frames = vxlan_frames(*b.underlay);
  REQUIRE(frames.size() == 20);
  std::map<uint32_t, int> per_qp;
  uint64_t inner_bytes = 0;
  for (const auto& [o, f] : frames) {
    CHECK(o.eth().dst == kUnderlayMac);
    CHECK(o.eth().src == b.sw->port_mac(1));
    CHECK(o.ipv4().src.get() == 0x0a0a0a01u);
    CHECK(o.ipv4().dst.get() == 0x0a0a0a02u);
    CHECK(o.dscp == (copy ? 26 : 0));
    CHECK(vni_of(f, o) == 10);
    const wire::PacketView in = inner_of(f, o);
    REQUIRE(in.is_roce);
    CHECK(in.icrc_ok());
    CHECK(in.ipv4().ttl == 63);  // routed into the overlay
    CHECK(in.dscp == 26);        // the inner DSCP is never changed
    CHECK(o.ecn == in.ecn);      // RFC 6040 normal mode: inner ECN copied, CE included
    CHECK(o.sport == sw::vxlan_source_port(in));
    per_qp[in.bth().dest_qp()]++;
    inner_bytes += in.ip_end;
    if (in.bth().dest_qp() == 0x11) CHECK(o.ecn == Ecn::kCe);
    if (in.bth().dest_qp() == 0x12) CHECK(o.ecn == Ecn::kNotEct);
  }
  CHECK(per_qp[0x10] == 10);
  CHECK(per_qp[0x11] == 5);
  CHECK(per_qp[0x12] == 5);
  const sw::VtepCounters& c = b.sw->vtep_counters();
  CHECK(c[sw::VtepCounters::encap_packets] == 20);
  CHECK(c[sw::VtepCounters::encap_bytes] == inner_bytes);
  CHECK(c[sw::VtepCounters::decap_packets] == 0);
  // The same counters in nv show nve vxlan and for the engine's sinks.
  const sw::ojson shown = b.sw->view_vxlan().plain();
  CHECK(shown["counters"]["vxlan.encap-packets"] == 20);
  CHECK(shown["encapsulation"]["dscp"]["action"] == (copy ? "copy" : "set"));
}

TEST_CASE("VTEP underlay MTU: inner IP + 50 over the uplink's MTU is dropped and counted, at the boundary it passes",
          "[sim][switch]") {
  // payload 1024: inner IP = 20 + 8 + 12 (BTH) + 1024 + 4 (ICRC) = 1068 (the test host's WRITE
  // middles carry no RETH), outer 1118.
  const uint32_t mtu = GENERATE(1117u, 1118u);
  INFO("underlay MTU " << mtu);
  sw::SwitchConfig cfg = vtep_config();
  cfg.interfaces[1].mtu = mtu;
  VtepBench b = make_vtep(cfg);
  b.h0->add_flow(flow_to_h1(0x20, 8, 1024));
  b.engine->run_to_idle(ms(1));
  const auto frames = vxlan_frames(*b.underlay);
  const sw::VtepCounters& c = b.sw->vtep_counters();
  if (mtu == 1117) {
    CHECK(frames.empty());
    CHECK(c[sw::VtepCounters::drop_underlay_mtu] == 8);
    CHECK(c[sw::VtepCounters::encap_packets] == 0);
    CHECK(b.sw->view_vxlan().plain()["counters"]["vxlan.discards.underlay-mtu-exceeded"] == 8);
  } else {
    REQUIRE(frames.size() == 8);
    CHECK(uint32_t(frames[0].first.ip_end - frames[0].first.l3_off) == 1118);
    CHECK(c[sw::VtepCounters::drop_underlay_mtu] == 0);
  }
  // The host link (MTU 9000) never saw a problem: this is the overlay's.
  CHECK(b.sw->counters(0)[sw::PortCounters::drop_mtu_exceeded] == 0);
}

TEST_CASE("VTEP decapsulation: outer CE reaches an ECT inner packet, a not-ECT one is dropped (RFC 6040); "
          "unknown VNI, bad header",
          "[sim][switch]") {
  sw::SwitchConfig cfg = vtep_config();
  cfg.neighbors.push_back(sw::Neighbor{host_ip(0), host_mac(0), 0});  // no race with h0's first ARP
  // Frames arriving from the underlay for h0 (10.0.0.1) behind this VTEP.
  auto to_h0 = [](uint16_t qp_sport, Ecn inner_ecn) {
    std::vector<uint8_t> f = roce_frame(qp_sport, 26, inner_ecn);
    // from "h1" to h0: swap the addresses (ICRC masks neither; recompute anyway)
    wire::PathHeaders path;
    path.src_mac = host_mac(1);
    path.dst_mac = wire::MacAddr{{0x02, 0x00, 0x0a, 0x0a, 0x0a, 0x01}};
    path.src_ip = host_ip(1);
    path.dst_ip = host_ip(0);
    path.dscp = 26;
    path.ecn = inner_ecn;
    path.udp_sport = qp_sport;
    wire::RoceFields bth;
    bth.opcode = wire::op::kWriteOnly;
    bth.dest_qp = qp_sport & 0xff;
    bth.reth_len = 256;
    std::vector<uint8_t> data(256, 0xcd);
    f.resize(512);
    f.resize(wire::encode_roce(f, path, bth, data));
    return f;
  };
  const wire::MacAddr sw_mac = cfg.port_mac(1);
  std::vector<std::vector<uint8_t>> in;
  in.push_back(vxlan_frame(to_h0(0xc001, Ecn::kEct0), 10, Ecn::kCe, 0x0a0a0a01, sw_mac));     // CE copied
  in.push_back(vxlan_frame(to_h0(0xc002, Ecn::kNotEct), 10, Ecn::kCe, 0x0a0a0a01, sw_mac));   // dropped
  in.push_back(vxlan_frame(to_h0(0xc003, Ecn::kEct0), 10, Ecn::kEct0, 0x0a0a0a01, sw_mac));  // as is
  in.push_back(vxlan_frame(to_h0(0xc004, Ecn::kNotEct), 10, Ecn::kEct0, 0x0a0a0a01, sw_mac)); // not-ECT kept
  in.push_back(vxlan_frame(to_h0(0xc005, Ecn::kEct0), 99, Ecn::kEct0, 0x0a0a0a01, sw_mac));  // unknown VNI
  std::vector<uint8_t> bad = vxlan_frame(to_h0(0xc006, Ecn::kEct0), 10, Ecn::kEct0, 0x0a0a0a01, sw_mac);
  bad[14 + 20 + 8] = 0x00;  // no I flag
  in.push_back(bad);
  // To another address than the VTEP's: routed as any UDP packet (no route here).
  in.push_back(vxlan_frame(to_h0(0xc007, Ecn::kEct0), 10, Ecn::kEct0, 0x0a0a0a09, sw_mac));
  VtepBench b = make_vtep(cfg, in);
  b.engine->run_to_idle(ms(1));
  TestHost& h0 = *b.h0;
  REQUIRE(h0.has_received(0x01));
  CHECK(h0.received(0x01).packets == 1);
  CHECK(h0.received(0x01).ce == 1);
  CHECK(h0.received(0x01).icrc_errors == 0);
  CHECK(!h0.has_received(0x02));
  REQUIRE(h0.has_received(0x03));
  CHECK(h0.received(0x03).ce == 0);
  CHECK(h0.received(0x03).icrc_errors == 0);
  REQUIRE(h0.has_received(0x04));
  CHECK(h0.received(0x04).ce == 0);
  CHECK(!h0.has_received(0x05));
  CHECK(!h0.has_received(0x06));
  CHECK(!h0.has_received(0x07));
  const sw::VtepCounters& c = b.sw->vtep_counters();
  CHECK(c[sw::VtepCounters::decap_packets] == 3);
  CHECK(c[sw::VtepCounters::decap_ce_copied] == 1);
  CHECK(c[sw::VtepCounters::drop_ecn_not_ect_ce] == 1);
  CHECK(c[sw::VtepCounters::drop_unknown_vni] == 1);
  CHECK(c[sw::VtepCounters::drop_bad_header] == 1);
  CHECK(b.sw->counters(1)[sw::PortCounters::drop_no_route] == 1);
}

namespace {

// h0 - leaf1 (VTEP 10.10.10.1) - spine - leaf2 (VTEP 10.10.10.2) - h1.
// The spine knows only the VTEPs' addresses; leaf1 reaches the spine over
// two links (an ECMP group) when `ecmp`.
struct Overlay {
  std::unique_ptr<Engine> engine;
  sw::Switch *leaf1 = nullptr, *leaf2 = nullptr, *spine = nullptr;
  TestHost *h0 = nullptr, *h1 = nullptr;
};

// `tweak` edits each switch's configuration (leaves and spine) before it
// starts; `spine_down` is the link of the spine to leaf2 (swp3).
Overlay make_overlay(sw::VxlanDscpAction dscp, bool ecmp = false,
                     const std::function<void(sw::SwitchConfig&)>& tweak = {}, LinkParams spine_down = {}) {
  const auto qos = sw::qos_roce_profile(sw::RoceMode::kLossless);
  auto mac = [](uint8_t sw_id) { return wire::MacAddr{{0x02, 0x53, 0x00, 0x00, sw_id, 0x00}}; };
  auto port_mac = [&](uint8_t sw_id, uint8_t port) { return wire::MacAddr{{0x02, 0x53, 0x00, 0x00, sw_id, port}}; };
  auto leaf = [&](int n) {
    // swp1: host n-1 (10.0.(n-1).254/24); swp2, swp3: to the spine 10.255.n.(1|5)/30.
    sw::SwitchConfig c = sw::SwitchConfig::with_ports(3);
    c.mac = mac(uint8_t(n));
    c.qos = qos;
    c.interfaces[0].address = sw::IpPrefix{gateway_ip(n - 1), 24};
    c.interfaces[1].address = sw::IpPrefix::parse("10.255." + std::to_string(n) + ".1/30");
    c.interfaces[2].address = sw::IpPrefix::parse("10.255." + std::to_string(n) + ".5/30");
    const std::string self = "10.10.10." + std::to_string(n), other = "10.10.10." + std::to_string(3 - n);
    c.vxlan.source = ip(self.c_str());
    c.vxlan.encap_dscp = dscp;
    c.vxlan.vnis.push_back(sw::VxlanVni{10, "default", {ip(other.c_str())}});
    sw::Route o;
    o.prefix = sw::IpPrefix{host_ip(2 - n), 24};
    o.vtep = ip(other.c_str());
    o.vni = 10;
    c.routes.push_back(o);
    // IPv6 too: fd00:<host>::/64 behind each leaf, the other leaf's into the overlay.
    sw::Route o6 = o;
    o6.prefix = *sw::IpPrefix::parse("fd00:" + std::to_string(2 - n) + "::/64");
    c.routes.push_back(o6);
    const std::string own6 = "fd00:" + std::to_string(n - 1) + "::";
    c.routes.push_back(
        sw::Route{*sw::IpPrefix::parse(own6 + "/64"), 0, ip((own6 + "1").c_str()), host_mac(n - 1), {}, 0});
    for (int k = 0; k < (ecmp ? 2 : 1); k++) {
      const std::string via = "10.255." + std::to_string(n) + "." + std::to_string(k == 0 ? 2 : 6);
      c.routes.push_back(sw::Route{*sw::IpPrefix::parse(other + "/32"), uint16_t(1 + k), ip(via.c_str()), {}});
      c.neighbors.push_back(sw::Neighbor{ip(via.c_str()), port_mac(9, uint8_t(2 * (n - 1) + k)), uint16_t(1 + k)});
    }
    return c;
  };
  // spine: swp1, swp2 to leaf1; swp3, swp4 to leaf2.
  sw::SwitchConfig s = sw::SwitchConfig::with_ports(4);
  s.mac = mac(9);
  s.qos = qos;
  for (int n = 1; n <= 2; n++)
    for (int k = 0; k < 2; k++) {
      const uint16_t p = uint16_t(2 * (n - 1) + k);
      const std::string base = "10.255." + std::to_string(n) + ".";
      s.interfaces[p].address = sw::IpPrefix::parse(base + (k == 0 ? "2" : "6") + "/30");
      const std::string leaf_ip = base + (k == 0 ? "1" : "5");
      s.neighbors.push_back(sw::Neighbor{ip(leaf_ip.c_str()), port_mac(uint8_t(n), uint8_t(1 + k)), p});
      if (k == 0 || ecmp)
        s.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.10.10." + std::to_string(n) + "/32"), p,
                                     ip(leaf_ip.c_str()), {}});
    }
  sw::SwitchConfig l1 = leaf(1), l2 = leaf(2);
  if (tweak) {
    tweak(l1);
    tweak(l2);
    tweak(s);
  }
  Overlay o;
  o.engine = make_engine(9, 16384);
  o.leaf1 = &o.engine->add<sw::Switch>("leaf1", l1);
  o.leaf2 = &o.engine->add<sw::Switch>("leaf2", l2);
  o.spine = &o.engine->add<sw::Switch>("spine", s);
  o.h0 = &o.engine->add<TestHost>("h0", host_ip(0), host_mac(0), gateway_ip(0));
  o.h1 = &o.engine->add<TestHost>("h1", host_ip(1), host_mac(1), gateway_ip(1));
  REQUIRE(o.engine->connect(*o.h0, 0, *o.leaf1, 0, LinkParams{}).ok());
  REQUIRE(o.engine->connect(*o.h1, 0, *o.leaf2, 0, LinkParams{}).ok());
  for (uint16_t k = 0; k < 2; k++) {
    REQUIRE(o.engine->connect(*o.leaf1, uint16_t(1 + k), *o.spine, k, LinkParams{}).ok());
    REQUIRE(o.engine->connect(*o.leaf2, uint16_t(1 + k), *o.spine, uint16_t(2 + k), spine_down).ok());
  }
  o.engine->run_until(us(20));
  REQUIRE(o.h0->gateway_resolved());
  REQUIRE(o.h1->gateway_resolved());
  return o;
}

}  // namespace

TEST_CASE("Two VTEPs over a spine: every packet arrives with a valid ICRC; the outer DSCP picks the spine's TC",
          "[sim][switch]") {
  const bool copy = GENERATE(true, false);
  INFO((copy ? "dscp copy" : "dscp set 0"));
  Overlay o = make_overlay(copy ? sw::VxlanDscpAction::kCopy : sw::VxlanDscpAction::kSet);
  o.h0->add_flow(flow_to_h1(0x30, 50, 1024));
  FlowSpec back;
  back.dst = host_ip(0);
  back.qpn = 0x31;
  back.count = 20;
  back.rate_bps = 10'000'000'000ull;
  o.h1->add_flow(back);
  o.engine->run_to_idle(ms(1));
  REQUIRE(o.h1->has_received(0x30));
  CHECK(o.h1->received(0x30).packets == 50);
  CHECK(o.h1->received(0x30).icrc_errors == 0);
  REQUIRE(o.h0->has_received(0x31));
  CHECK(o.h0->received(0x31).packets == 20);
  CHECK(o.leaf1->vtep_counters()[sw::VtepCounters::encap_packets] == 50);
  CHECK(o.leaf2->vtep_counters()[sw::VtepCounters::decap_packets] == 50);
  CHECK(o.leaf2->vtep_counters()[sw::VtepCounters::encap_packets] == 20);
  CHECK(o.leaf1->vtep_counters()[sw::VtepCounters::decap_packets] == 20);
  // The spine's port to leaf2 (swp3): RoCE in TC3 with the DSCP copied,
  // in TC0 (no PFC) with the outer DSCP 0.
  CHECK(o.spine->queue_counters(2, 3)[sw::QueueCounters::packets] == (copy ? 50u : 0u));
  CHECK(o.spine->queue_counters(2, 0)[sw::QueueCounters::packets] == (copy ? 0u : 50u));
  // And the decapsulating VTEP classifies on the outer header too.
  CHECK(o.leaf2->queue_counters(0, 3)[sw::QueueCounters::packets] == (copy ? 50u : 0u));
  CHECK(o.leaf2->queue_counters(0, 0)[sw::QueueCounters::packets] == (copy ? 0u : 50u));
  // The spine has no route to the hosts: the overlay carried it all.
  CHECK(o.spine->routes()->lookup(host_ip(1)) == nullptr);
}

TEST_CASE("VXLAN keeps RoCE's entropy: QPs spread over the underlay's ECMP group, each QP on one path",
          "[sim][switch]") {
  Overlay o = make_overlay(sw::VxlanDscpAction::kCopy, true);
  constexpr uint32_t kQps = 32;
  for (uint32_t q = 0; q < kQps; q++) o.h0->add_flow(flow_to_h1(0x100 + q, 10, 256));
  o.engine->run_to_idle(ms(2));
  for (uint32_t q = 0; q < kQps; q++) {
    REQUIRE(o.h1->has_received(0x100 + q));
    CHECK(o.h1->received(0x100 + q).packets == 10);
  }
  // leaf1's uplinks: both carry QPs.
  const uint64_t a = o.leaf1->counters(1)[sw::PortCounters::tx_roce_packets];
  const uint64_t b = o.leaf1->counters(2)[sw::PortCounters::tx_roce_packets];
  INFO("uplink packets " << a << " / " << b);
  CHECK(a + b == kQps * 10);
  CHECK(a >= 60);
  CHECK(b >= 60);
  CHECK(a % 10 == 0);  // whole QPs: a QP's packets take one uplink
}

TEST_CASE("VXLAN in topology files: nve vxlan and overlay routes, errors with lines; config show loads back",
          "[unit][switch]") {
  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto parse = [&](const std::string& sw) { return parse_topology("nodes:\n  leaf1:\n" + sw, "t.yaml", reg); };
  const std::string good = R"(    kind: switch
    ports: 2
    interfaces:
      swp2: {address: 10.255.1.1/30}
    nve:
      vxlan:
        source: {address: 10.10.10.1}
        port: 4790
        encapsulation: {dscp: {action: set, value: 0}}
        flooding: {head-end-replication: [10.10.10.2]}
        vni:
          10: {vrf: default, flooding: {head-end-replication: [10.10.10.3]}}
    routes:
      - {prefix: 10.2.0.0/16, vtep: 10.10.10.2, vni: 10}
      - {prefix: 10.3.0.0/16, next-hops: [{vtep: 10.10.10.2, vni: 10}, {vtep: 10.10.10.3, vni: 10}]}
      - {prefix: 10.10.10.0/24, interface: swp2, via: 10.255.1.2}
)";
  auto t = parse(good);
  INFO(t.status().message());
  REQUIRE(t.ok());
  const auto& cfg = std::any_cast<const sw::SwitchConfig&>(t->nodes[0].config);
  CHECK(cfg.vxlan.source == ip("10.10.10.1"));
  CHECK(cfg.vxlan.port == 4790);
  CHECK(cfg.vxlan.encap_dscp == sw::VxlanDscpAction::kSet);
  REQUIRE(cfg.vxlan.vnis.size() == 1);
  CHECK(cfg.vxlan.vnis[0].flood == std::vector<wire::IpAddr>{ip("10.10.10.3")});
  REQUIRE(cfg.routes.size() == 4);
  CHECK(cfg.routes[0].vtep == ip("10.10.10.2"));
  CHECK(cfg.routes[2].vtep == ip("10.10.10.3"));
  // config show writes it back as a switch section that reads as the same.
  const std::string text = sw::switch_config_text(cfg);
  const std::string indented = indent_switch_section(text);
  auto back = parse(indented);
  INFO(indented);
  REQUIRE(back.ok());
  CHECK(sw::switch_config_text(std::any_cast<const sw::SwitchConfig&>(back->nodes[0].config)) == text);

  // Errors name the file, line and field.
  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    s.replace(at, from.size(), to);
    auto r = parse(s);
    REQUIRE(!r.ok());
    return r.status().message();
  };
  CHECK_THAT(error_of("{prefix: 10.2.0.0/16, vtep: 10.10.10.2", "{prefix: 10.2.0.0/16, vtep: 10.10.10.7"),
             Catch::Contains("t.yaml:16: nodes.leaf1.routes[0].vtep: '10.10.10.7' is not a remote VTEP of VNI 10"));
  CHECK_THAT(error_of("vtep: 10.10.10.2, vni: 10}\n      - {prefix: 10.3", "vtep: 10.10.10.2, vni: 11}\n      - {prefix: 10.3"),
             Catch::Contains("t.yaml:16: nodes.leaf1.routes[0].vni: VNI 11 is not mapped"));
  CHECK_THAT(error_of("port: 4790", "port: 0"), Catch::Contains("t.yaml:10: nodes.leaf1.nve.vxlan.port: '0' is out of range"));
  CHECK_THAT(error_of("action: set, value: 0", "action: set, value: 64"),
             Catch::Contains("t.yaml:11: nodes.leaf1.nve.vxlan.encapsulation.dscp.value: '64' is out of range (0..63)"));
  CHECK_THAT(error_of("action: set", "action: derive"),
             Catch::Contains("t.yaml:11: nodes.leaf1.nve.vxlan.encapsulation.dscp.action"));
  CHECK_THAT(error_of("vrf: default", "vrf: RED"), Catch::Contains("nve.vxlan.vni.10.vrf: 'RED': the switch has one VRF"));
  CHECK_THAT(error_of("          10: {", "          16777216: {"), Catch::Contains("t.yaml:14: nodes.leaf1.nve.vxlan.vni"));
  CHECK_THAT(error_of("source: {address: 10.10.10.1}", "source: {address: \"fd00::1\"}"),
             Catch::Contains("nve.vxlan.source.address: must be an IPv4 address"));
}

TEST_CASE("nv set nve vxlan: source, VNI to VRF, flood lists, encapsulation DSCP; overlay static routes",
          "[unit][switch]") {
  sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(2);
  auto nv = [&](const std::string& line) { return vxlan_nv(cfg, line); };
  REQUIRE(nv("set nve vxlan source address 10.10.10.1").ok());
  REQUIRE(nv("set nve vxlan vni 10 vrf default").ok());
  REQUIRE(nv("set nve vxlan vni 10 flooding head-end-replication 10.10.10.2").ok());
  REQUIRE(nv("set nve vxlan flooding head-end-replication 10.10.10.3").ok());
  REQUIRE(nv("set nve vxlan encapsulation dscp action set").ok());
  REQUIRE(nv("set nve vxlan encapsulation dscp value 10").ok());
  REQUIRE(nv("set vrf default router static 10.2.0.0/16 vtep 10.10.10.2 vni 10").ok());
  CHECK(cfg.validate().ok());
  CHECK(cfg.vxlan.source == ip("10.10.10.1"));
  REQUIRE(cfg.vxlan.vnis.size() == 1);
  CHECK(cfg.vxlan.vnis[0].flood == std::vector<wire::IpAddr>{ip("10.10.10.2")});
  CHECK(cfg.vxlan.flood == std::vector<wire::IpAddr>{ip("10.10.10.3")});
  CHECK(cfg.vxlan.encap_dscp == sw::VxlanDscpAction::kSet);
  CHECK(cfg.vxlan.dscp_value == 10);
  REQUIRE(cfg.routes.size() == 1);
  CHECK(cfg.routes[0].vtep == ip("10.10.10.2"));
  // Refused in the table's words, and by validate() where only the whole says.
  CHECK(nv("set nve vxlan encapsulation dscp value 64").message() ==
        "nv set nve vxlan encapsulation dscp value: '64' is out of range (0..63)");
  CHECK(nv("set nve vxlan encapsulation dscp action derive").message() ==
        "nv set nve vxlan encapsulation dscp action derive: 'derive' is not copy or set");
  CHECK(nv("set nve vxlan vni 0").message() == "nv set nve vxlan vni: '0' is out of range (1..16777215)");
  REQUIRE(nv("set vrf default router static 10.4.0.0/16 vtep 10.10.10.9 vni 10").ok());
  CHECK_THAT(cfg.validate().message(), Catch::Contains("routes[1].vtep: '10.10.10.9' is not a remote VTEP of VNI 10"));
  REQUIRE(nv("unset vrf default router static 10.4.0.0/16").ok());
  REQUIRE(nv("unset nve vxlan vni 10 flooding head-end-replication 10.10.10.2").ok());
  CHECK_THAT(cfg.validate().message(), Catch::Contains("routes[0].vtep"));
  REQUIRE(nv("set nve vxlan vni 10 flooding head-end-replication 10.10.10.2").ok());
  CHECK(cfg.validate().ok());
  REQUIRE(nv("unset nve vxlan encapsulation dscp action").ok());
  CHECK(cfg.vxlan.encap_dscp == sw::VxlanDscpAction::kCopy);
  REQUIRE(nv("unset vrf default router static 10.2.0.0/16").ok());
  REQUIRE(nv("unset nve vxlan").ok());
  CHECK(!cfg.vxlan.enabled());
  CHECK(cfg.validate().ok());
}

// ---- review fixes: trimming, inner VLAN tags, neighbour misses, IPv6, TTL, inner-not-IP ----

TEST_CASE("A trimming spine in the underlay cuts the inner RoCE packet: the far VTEP decapsulates it and the host "
          "gets the header with a good ICRC",
          "[sim][switch]") {
  auto lossy_trim = [](sw::SwitchConfig& c) {
    c.qos = sw::qos_roce_profile(sw::RoceMode::kLossy);
    c.qos.buffer.size = 200'000;
    c.qos.buffer.egress_lossy_alpha = 1;  // one sender: the egress queue's limit comes before the ingress PG's
    c.qos.trim.enable = true;
  };
  // The spine's links to leaf2 run at 10G: its egress queue fills and trims.
  Overlay o = make_overlay(sw::VxlanDscpAction::kCopy, false, lossy_trim,
                           LinkParams{.rate_bps = 10'000'000'000ull});
  FlowSpec f = flow_to_h1(0x40, 400, 1024);
  f.rate_bps = 0;  // line rate
  o.h0->add_flow(f);
  o.engine->run_to_idle(ms(5));
  const auto& qc = o.spine->queue_counters(2, 3);
  const uint64_t trimmed = qc[sw::QueueCounters::trim_packets];
  INFO("trimmed " << trimmed << " spine rx drops " << o.spine->counters(0)[sw::PortCounters::rx_roce_no_buffer_discard]
                  << " tx drops " << o.spine->counters(2)[sw::PortCounters::tx_roce_no_buffer_discard] << " tc3 "
                  << qc[sw::QueueCounters::packets] << " tc0 " << o.spine->queue_counters(2, 0)[sw::QueueCounters::packets]
                  << " h1 " << o.h1->received(0x40).packets);
  REQUIRE(trimmed > 0);
  const uint64_t trim_dropped = qc[sw::QueueCounters::trim_drop_packets];  // no room even on the trim queue
  CHECK(trim_dropped < trimmed / 10);
  CHECK(o.leaf2->vtep_counters()[sw::VtepCounters::drop_inner_not_ip] == 0);
  REQUIRE(o.h1->has_received(0x40));
  const FlowStats& r = o.h1->received(0x40);
  CHECK(r.icrc_errors == 0);
  CHECK(r.trimmed == trimmed - trim_dropped);  // the inner DSCP remarked: the NIC sees a trimmed packet
  CHECK(r.trimmed > 0);
  uint64_t spine_drops = o.spine->counters(0)[sw::PortCounters::rx_roce_no_buffer_discard] +
                         o.spine->counters(2)[sw::PortCounters::tx_roce_no_buffer_discard] + trim_dropped;
  CHECK(r.packets + spine_drops == 400);
  CHECK(o.leaf2->vtep_counters()[sw::VtepCounters::decap_packets] == r.packets);
}

namespace {

// A switch with no VTEP of its own between two frame nodes: swp1 from
// `src`, swp2 (at `rate`) to `sink`, routing 10.10.10.2/32 to the sink.
struct Transit {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  FrameNode *src = nullptr, *sink = nullptr;
};

Transit make_transit(const sw::SwitchConfig& cfg, std::vector<std::vector<uint8_t>> frames, uint64_t rate) {
  Transit t;
  t.engine = make_engine(11, 16384);
  t.sw = &t.engine->add<sw::Switch>("spine", cfg);
  t.src = &t.engine->add<FrameNode>("src", std::move(frames));
  t.sink = &t.engine->add<FrameNode>("sink", std::vector<std::vector<uint8_t>>{});
  REQUIRE(t.engine->connect(*t.src, 0, *t.sw, 0, LinkParams{}).ok());
  REQUIRE(t.engine->connect(*t.sink, 0, *t.sw, 1, LinkParams{.rate_bps = rate}).ok());
  return t;
}

std::vector<uint8_t> cnp_frame(uint32_t qpn) {
  wire::PathHeaders path;
  path.src_mac = host_mac(1);
  path.dst_mac = host_mac(9);
  path.src_ip = host_ip(1);
  path.dst_ip = host_ip(0);
  path.dscp = 26;  // as if the sender's CNP DSCP were the data's
  path.udp_sport = 0xc000;
  std::vector<uint8_t> f(wire::roce_frame_len(path, wire::op::kCnp, wire::kCnpPadLen));
  REQUIRE(wire::encode_cnp(f, path, qpn) == f.size());
  return f;
}

}  // namespace

TEST_CASE("Trimming a VXLAN frame: inner headers kept, inner and outer lengths, inner ICRC, both DSCPs remarked; "
          "a CNP inside is never trimmed",
          "[sim][switch]") {
  sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(2);
  cfg.qos = sw::qos_roce_profile(sw::RoceMode::kLossy);
  cfg.qos.buffer.size = 100'000;
  cfg.qos.buffer.egress_lossy_alpha = 1;  // one sender: the egress queue's limit comes before the ingress PG's
  cfg.qos.trim.enable = true;
  cfg.interfaces[1].address = sw::IpPrefix::parse("10.255.2.1/30");
  cfg.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.10.10.2/32"), 1, ip("10.255.2.2"), {}});
  cfg.neighbors.push_back(sw::Neighbor{ip("10.255.2.2"), kUnderlayMac, 1});
  std::vector<std::vector<uint8_t>> frames;
  constexpr int kPairs = 200;
  for (int i = 0; i < kPairs; i++) {  // a data frame and a CNP, each in VXLAN with outer DSCP 26
    frames.push_back(vxlan_frame(roce_frame(uint16_t(0xc000 + i), 26, Ecn::kEct0, 1024), 10, Ecn::kEct0, 0x0a0a0a02,
                                 cfg.port_mac(0)));
    frames.push_back(vxlan_frame(cnp_frame(uint32_t(0x100 + i)), 10, Ecn::kNotEct, 0x0a0a0a02, cfg.port_mac(0)));
  }
  const size_t whole_len = frames[0].size();
  Transit t = make_transit(cfg, std::move(frames), 10'000'000'000ull);
  t.engine->run_to_idle(ms(5));
  const uint64_t trimmed = t.sw->counters(1)[sw::PortCounters::trim_packets];
  INFO("trimmed " << trimmed << " rx drops " << t.sw->counters(0)[sw::PortCounters::rx_roce_no_buffer_discard]
                  << " tx drops " << t.sw->counters(1)[sw::PortCounters::tx_roce_no_buffer_discard] << " sink "
                  << t.sink->received().size() << " tc3 " << t.sw->queue_counters(1, 3)[sw::QueueCounters::packets]);
  REQUIRE(trimmed > 0);
  uint64_t data = 0, data_trimmed = 0, cnps = 0;
  for (const auto& [o, f] : vxlan_frames(*t.sink)) {
    const wire::PacketView in = inner_of(f, o);  // decodes: the inner IP and UDP lengths are right
    REQUIRE(in.is_roce);
    CHECK(in.icrc_ok());
    CHECK(uint32_t(o.ip_end) == f.size());  // the outer IP and UDP lengths end where the frame does
    CHECK(uint32_t(o.l4_off) + 16 + in.ip_end == o.ip_end);
    if (in.opcode == wire::op::kCnp) {
      cnps++;
      CHECK(o.dscp == 26);
      CHECK(in.dscp == 26);
      continue;
    }
    data++;
    if (f.size() == whole_len) {
      CHECK(o.dscp == 26);
      continue;
    }
    data_trimmed++;
    CHECK(f.size() <= cfg.qos.trim.size);
    CHECK(o.dscp == cfg.qos.trim.remark_dscp);
    CHECK(in.dscp == cfg.qos.trim.remark_dscp);
    CHECK(in.payload_len % 4 == 0);
  }
  CHECK(data_trimmed == trimmed);  // no CNP counted (or queued) as trimmed
  CHECK(data == kPairs);           // every data frame got through, whole or trimmed
  CHECK(cnps + t.sw->counters(1)[sw::PortCounters::tx_roce_no_buffer_discard] +
            t.sw->counters(0)[sw::PortCounters::rx_roce_no_buffer_discard] ==
        kPairs);
  CHECK(cnps < kPairs);  // the buffer was full for some of them: dropped, not trimmed
}

TEST_CASE("VTEP: an unresolved underlay next hop is a neighbour miss (ARP sent), as on the routed path",
          "[sim][switch]") {
  sw::SwitchConfig cfg = vtep_config();
  cfg.neighbors.clear();  // the underlay node never answers ARP
  VtepBench b = make_vtep(cfg);
  b.h0->add_flow(flow_to_h1(0x50, 5));
  b.engine->run_to_idle(ms(1));
  CHECK(vxlan_frames(*b.underlay).empty());
  CHECK(b.sw->counters(0)[sw::PortCounters::drop_neighbor_miss] == 5);
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::drop_underlay_no_route] == 0);
  bool asked = false;
  for (const auto& f : b.underlay->received()) {
    wire::PacketView v;
    if (wire::decode(f, v) == wire::DecodeError::kOk && v.kind == wire::PacketKind::kArp)
      asked |= v.arp().oper.get() == wire::kArpRequest && v.arp().tpa.get() == 0x0aff0102u;  // 10.255.1.2
  }
  CHECK(asked);
}

TEST_CASE("VTEP: no underlay route to the remote VTEP is counted as vxlan underlay-no-route", "[sim][switch]") {
  sw::SwitchConfig cfg = vtep_config();
  cfg.routes.pop_back();  // the /32 to 10.10.10.2
  VtepBench b = make_vtep(cfg);
  b.h0->add_flow(flow_to_h1(0x51, 4));
  b.engine->run_to_idle(ms(1));
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::drop_underlay_no_route] == 4);
  CHECK(b.sw->counters(0)[sw::PortCounters::drop_neighbor_miss] == 0);
}

TEST_CASE("VTEP: the inner TTL expires at encapsulation (routed into the overlay)", "[sim][switch]") {
  VtepBench b = make_vtep(vtep_config());
  FlowSpec f = flow_to_h1(0x52, 3);
  f.ttl = 1;
  b.h0->add_flow(f);
  b.engine->run_to_idle(ms(1));
  CHECK(vxlan_frames(*b.underlay).empty());
  CHECK(b.sw->counters(0)[sw::PortCounters::drop_ttl_expired] == 3);
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::encap_packets] == 0);
}

TEST_CASE("Two VTEPs carry IPv6 RoCE: inner hop limit, ICRC and flow intact", "[sim][switch]") {
  {  // One VTEP: the encapsulated frames as the underlay sees them.
    sw::SwitchConfig cfg = vtep_config();
    sw::Route o6 = cfg.routes[0];
    o6.prefix = *sw::IpPrefix::parse("fd00:1::/64");
    cfg.routes.push_back(o6);
    VtepBench b = make_vtep(cfg);
    FlowSpec f = flow_to_h1(0x54, 6, 512);
    f.dst = ip("fd00:1::1");
    f.src = ip("fd00:0::1");
    f.ecn = Ecn::kCe;
    b.h0->add_flow(f);
    b.engine->run_to_idle(ms(1));
    const auto frames = vxlan_frames(*b.underlay);
    REQUIRE(frames.size() == 6);
    for (const auto& [o, fr] : frames) {
      CHECK(o.is_ipv4());  // IPv4 underlay
      const wire::PacketView in = inner_of(fr, o);
      REQUIRE(in.is_ipv6());
      REQUIRE(in.is_roce);
      CHECK(in.icrc_ok());
      CHECK(in.ipv6().hop_limit == 63);
      CHECK(in.dscp == 26);
      CHECK(o.dscp == 26);           // the IPv6 traffic class's DSCP copied out
      CHECK(o.ecn == Ecn::kCe);      // and its ECN
      CHECK(o.sport == sw::vxlan_source_port(in));
      CHECK(uint32_t(o.ip_end - o.l3_off) == in.ip_end - 14 + sw::kVxlanIpOverhead);
    }
  }
  Overlay o = make_overlay(sw::VxlanDscpAction::kCopy);
  FlowSpec f = flow_to_h1(0x53, 20, 512);
  f.dst = ip("fd00:1::1");
  f.src = ip("fd00:0::1");
  o.h0->add_flow(f);
  o.engine->run_to_idle(ms(1));
  REQUIRE(o.h1->has_received(0x53));
  CHECK(o.h1->received(0x53).packets == 20);
  CHECK(o.h1->received(0x53).icrc_errors == 0);
  CHECK(o.leaf1->vtep_counters()[sw::VtepCounters::encap_packets] == 20);
  CHECK(o.leaf2->vtep_counters()[sw::VtepCounters::decap_packets] == 20);
  // The spine carried it in the RoCE TC: the IPv6 traffic class's DSCP was copied out.
  CHECK(o.spine->queue_counters(2, 3)[sw::QueueCounters::packets] == 20);
  CHECK(o.spine->routes()->lookup(ip("fd00:1::1")) == nullptr);
}

namespace {

// Leaf1 of vtep_config() fed by frame nodes on both sides.
struct VtepFrames {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  FrameNode *host = nullptr, *underlay = nullptr;
};

VtepFrames make_vtep_frames(const sw::SwitchConfig& cfg, std::vector<std::vector<uint8_t>> host_frames,
                            std::vector<std::vector<uint8_t>> underlay_frames) {
  VtepFrames b;
  b.engine = make_engine(5);
  b.sw = &b.engine->add<sw::Switch>("leaf1", cfg);
  b.host = &b.engine->add<FrameNode>("h0", std::move(host_frames));
  b.underlay = &b.engine->add<FrameNode>("underlay", std::move(underlay_frames));
  REQUIRE(b.engine->connect(*b.host, 0, *b.sw, 0, LinkParams{}).ok());
  REQUIRE(b.engine->connect(*b.underlay, 0, *b.sw, 1, LinkParams{}).ok());
  return b;
}

// A RoCE WRITE from h0 to h1 (or the reverse), with an 802.1Q tag when `vid`.
std::vector<uint8_t> tagged_roce(bool to_h1, std::optional<uint16_t> vid, wire::MacAddr dst_mac) {
  wire::PathHeaders path;
  path.src_mac = host_mac(to_h1 ? 0 : 1);
  path.dst_mac = dst_mac;
  path.vlan = vid.has_value();
  path.vid = vid.value_or(0);
  path.pcp = 3;
  path.src_ip = host_ip(to_h1 ? 0 : 1);
  path.dst_ip = host_ip(to_h1 ? 1 : 0);
  path.dscp = 26;
  path.ecn = Ecn::kEct0;
  wire::RoceFields bth;
  bth.opcode = wire::op::kWriteOnly;
  bth.dest_qp = to_h1 ? 0x61 : 0x62;
  bth.reth_len = 128;
  std::vector<uint8_t> data(128, 0x5a);
  std::vector<uint8_t> f(512);
  f.resize(wire::encode_roce(f, path, bth, data));
  REQUIRE(!f.empty());
  return f;
}

}  // namespace

TEST_CASE("VTEP and 802.1Q (RFC 7348 6.1): a tagged frame is encapsulated without its tag; a tagged inner frame is "
          "discarded on decapsulation",
          "[sim][switch]") {
  sw::SwitchConfig cfg = vtep_config();
  cfg.neighbors.push_back(sw::Neighbor{host_ip(0), host_mac(0), 0});
  const std::vector<uint8_t> tagged = tagged_roce(true, 100, cfg.port_mac(0));
  const std::vector<uint8_t> untagged = tagged_roce(true, std::nullopt, cfg.port_mac(0));
  std::vector<std::vector<uint8_t>> from_underlay;
  from_underlay.push_back(vxlan_frame(tagged_roce(false, 200, wire::MacAddr{}), 10, Ecn::kEct0, 0x0a0a0a01,
                                      cfg.port_mac(1)));
  from_underlay.push_back(vxlan_frame(tagged_roce(false, std::nullopt, wire::MacAddr{}), 10, Ecn::kEct0, 0x0a0a0a01,
                                      cfg.port_mac(1)));
  VtepFrames b = make_vtep_frames(cfg, {tagged}, from_underlay);
  b.engine->run_to_idle(ms(1));
  // Encapsulation: the tag is gone, the rest of the inner frame as an untagged one would be.
  const auto frames = vxlan_frames(*b.underlay);
  REQUIRE(frames.size() == 1);
  const auto& [o, f] = frames[0];
  const wire::PacketView in = inner_of(f, o);
  CHECK(!in.has_vlan);
  CHECK(in.eth().ether_type.get() == uint16_t(wire::EtherType::kIpv4));
  CHECK(in.ip_end == untagged.size());
  CHECK(in.is_roce);
  CHECK(in.icrc_ok());
  CHECK(in.bth().dest_qp() == 0x61);
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::encap_packets] == 1);
  // Decapsulation: the tagged inner frame is discarded and counted, the untagged one passes.
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::drop_inner_vlan_tagged] == 1);
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::decap_packets] == 1);
  size_t to_host = 0;
  for (const auto& hf : b.host->received()) {
    wire::PacketView v;
    if (wire::decode(hf, v) == wire::DecodeError::kOk && v.is_roce) {
      to_host++;
      CHECK(!v.has_vlan);
      CHECK(v.bth().dest_qp() == 0x62);
    }
  }
  CHECK(to_host == 1);
}

TEST_CASE("VTEP decapsulation: an inner frame that is not IP is discarded as inner-not-ip", "[sim][switch]") {
  sw::SwitchConfig cfg = vtep_config();
  std::vector<uint8_t> arp(60);
  REQUIRE(wire::encode_arp(arp, wire::kArpRequest, host_mac(1), 0x0a000101, wire::MacAddr{}, 0x0a000001,
                           wire::kBroadcastMac) > 0);
  std::vector<uint8_t> truncated = tagged_roce(false, std::nullopt, wire::MacAddr{});
  truncated.resize(14 + 10);  // an IPv4 header cut short
  VtepFrames b = make_vtep_frames(
      cfg, {}, {vxlan_frame(arp, 10, Ecn::kNotEct, 0x0a0a0a01, cfg.port_mac(1)),
                vxlan_frame(truncated, 10, Ecn::kNotEct, 0x0a0a0a01, cfg.port_mac(1))});
  b.engine->run_to_idle(ms(1));
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::drop_inner_not_ip] == 2);
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::decap_packets] == 0);
  CHECK(b.host->received().empty());
}

TEST_CASE("nv set nve vxlan: trailing words refused, state enabled|disabled; validation refuses port 4791 and an "
          "overlay route over its own VTEP",
          "[unit][switch]") {
  sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(2);
  auto nv = [&](const std::string& line) { return vxlan_nv(cfg, line); };
  // Port 4791 is refused on any switch, VTEP or not: an underlay switch reads the port too (trimming).
  REQUIRE(nv("set nve vxlan port 4791").ok());
  CHECK_THAT(cfg.validate().message(), Catch::Contains("nve.vxlan.port: 4791 is RoCEv2's port"));
  REQUIRE(nv("unset nve vxlan port").ok());
  CHECK(cfg.validate().ok());
  CHECK(nv("set nve vxlan source address 10.10.10.1 junk").message() ==
        "nv set nve vxlan source address 10.10.10.1: expected the end of the command, got 'junk'");
  CHECK(nv("set nve vxlan vni 10 vrf default junk").message() ==
        "nv set nve vxlan vni 10 vrf default: expected the end of the command, got 'junk'");
  cfg = sw::SwitchConfig::with_ports(2);  // a refused command may leave its copy changed (nv_edit's callers drop it)
  REQUIRE(nv("set nve vxlan source address 10.10.10.1").ok());
  REQUIRE(nv("set nve vxlan vni 10 vrf default").ok());
  REQUIRE(nv("set nve vxlan flooding head-end-replication 10.10.10.2").ok());
  CHECK(cfg.vxlan.enabled());
  REQUIRE(nv("set nve vxlan state disabled").ok());
  CHECK(!cfg.vxlan.enabled());
  CHECK(cfg.validate().ok());  // the settings stay, the VTEP is off
  CHECK(sw::switch_config_text(cfg).find("state: disabled") != std::string::npos);
  REQUIRE(nv("set nve vxlan state enabled").ok());
  CHECK(cfg.vxlan.enabled());
  REQUIRE(nv("set nve vxlan state disabled").ok());
  REQUIRE(nv("unset nve vxlan state").ok());
  CHECK(cfg.vxlan.enabled());
  CHECK(nv("set nve vxlan state maybe").message() == "nv set nve vxlan state maybe: 'maybe' is not enable or disable");

  REQUIRE(nv("set nve vxlan port 4791").ok());
  CHECK_THAT(cfg.validate().message(), Catch::Contains("nve.vxlan.port: 4791 is RoCEv2's port"));
  REQUIRE(nv("set nve vxlan port 4789").ok());
  CHECK(cfg.validate().ok());
  // 10.10.10.0/24 holds the remote VTEP 10.10.10.2: the outer packet would be routed into the overlay again.
  REQUIRE(nv("set vrf default router static 10.10.10.0/24 vtep 10.10.10.2 vni 10").ok());
  CHECK_THAT(cfg.validate().message(), Catch::Contains("10.10.10.0/24 covers its own remote VTEP 10.10.10.2"));

  // state in a topology file.
  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto with_state = [&](const std::string& state) {
    return parse_topology("nodes:\n  leaf1:\n    kind: switch\n    ports: 2\n    nve:\n      vxlan:\n        state: " +
                              state + "\n        source: {address: 10.10.10.1}\n",
                          "t.yaml", reg);
  };
  auto t = with_state("disabled");
  INFO(t.status().message());
  REQUIRE(t.ok());
  const auto& off = std::any_cast<const sw::SwitchConfig&>(t->nodes[0].config);
  CHECK(!off.vxlan.state);
  CHECK(!off.vxlan.enabled());
  CHECK_THAT(with_state("maybe").status().message(), Catch::Contains("t.yaml:7: nodes.leaf1.nve.vxlan.state"));
}
