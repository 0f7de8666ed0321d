// Bridged ("L2") VNIs: a leaf with access ports in VLAN 10 (mapped to VNI
// 10) and VLAN 20 (local only), an underlay port toward VTEPs 10.10.10.2
// (the global flood list) and 10.10.10.3 (VNI 10's own). Frames are crafted
// and captured at every port (FrameNode): flooding of broadcast and unknown
// unicast to the VLAN's other ports and to every flood-list VTEP, never to
// the ingress port; learning on local ports and from decapsulated frames;
// split horizon; MAC moves; ageing; the unknown VNI; QoS of a bridged RoCE
// frame (DSCP copy, RFC 6040, MTU). Then the configuration: NVUE `bridge
// domain br_default`, `interface swpN bridge domain br_default access V`,
// `nve vxlan mac-learning`, the topology YAML, config show, validation, and
// `nv show bridge domain br_default mac-table`.
#include <catch2/catch.hpp>

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

wire::IpAddr addr4(const char* s) { return *wire::IpAddr::parse(s); }

const wire::MacAddr kBrUnderlayMac{{0x02, 0x55, 0x00, 0x00, 0x00, 0x01}};
wire::MacAddr br_mac(uint8_t i) { return wire::MacAddr{{0x02, 0x10, 0x00, 0x00, 0x00, i}}; }

// `nv LINE` on a configuration (REQUIREs success).
void br_nv(sw::SwitchConfig& cfg, const std::string& line) {
  std::vector<std::string> w;
  for (size_t b = 0, e; b < line.size(); b = e + 1) {
    e = std::min(line.find(' ', b), line.size());
    w.push_back(line.substr(b, e - b));
  }
  const Status s = sw::nv_edit(cfg, w);
  INFO(line << ": " << s.message());
  REQUIRE(s.ok());
}

// The leaf: swp1-3 access VLAN 10, swp4 access VLAN 20, swp5 the underlay
// (10.255.1.1/30, next hop 10.255.1.2 to both remote VTEPs).
sw::SwitchConfig bridge_leaf_config(bool mac_learning = true) {
  sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(5);
  cfg.qos = sw::qos_roce_profile(sw::RoceMode::kLossless);
  br_nv(cfg, "set interface swp5 ip address 10.255.1.1/30");
  br_nv(cfg, "set nve vxlan source address 10.10.10.1");
  br_nv(cfg, "set nve vxlan flooding head-end-replication 10.10.10.2");
  br_nv(cfg, "set bridge domain br_default vlan 10 vni 10");
  br_nv(cfg, "set bridge domain br_default vlan 10 vni 10 flooding head-end-replication 10.10.10.3");
  br_nv(cfg, "set bridge domain br_default vlan 20");
  br_nv(cfg, "set interface swp1-3 bridge domain br_default access 10");
  br_nv(cfg, "set interface swp4 bridge domain br_default access 20");
  if (mac_learning) br_nv(cfg, "set nve vxlan mac-learning on");
  cfg.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.10.10.0/24"), 4, addr4("10.255.1.2"), {}});
  cfg.neighbors.push_back(sw::Neighbor{addr4("10.255.1.2"), kBrUnderlayMac, 4});
  const Status s = cfg.validate();
  INFO(s.message());
  REQUIRE(s.ok());
  return cfg;
}

struct BridgeBench {
  std::unique_ptr<Engine> engine;
  sw::Switch* sw = nullptr;
  std::vector<FrameNode*> ports;  // ports[i] on swp(i+1); ports[4] is the underlay

  FrameNode& at(int i) { return *ports[size_t(i)]; }
  // Sends `frame` from port `i` and runs until it has gone everywhere.
  void inject(int i, const std::vector<uint8_t>& frame) {
    at(i).send(frame, engine->now());
    engine->run_for(us(100));
  }
  void clear() {
    for (FrameNode* p : ports) p->clear_received();
  }
};

BridgeBench make_bridge_bench(const sw::SwitchConfig& cfg, LinkParams underlay = {}) {
  BridgeBench b;
  b.engine = make_engine(13);
  b.sw = &b.engine->add<sw::Switch>("leaf1", cfg);
  for (int i = 0; i < 5; i++) {
    b.ports.push_back(&b.engine->add<FrameNode>("p" + std::to_string(i), std::vector<std::vector<uint8_t>>{}));
    REQUIRE(b.engine->connect(*b.ports.back(), 0, *b.sw, uint16_t(i), i == 4 ? underlay : LinkParams{}).ok());
  }
  b.engine->run_for(us(10));
  return b;
}

// A broadcast ARP request from `src` (10.0.10.x asking for 10.0.10.y).
std::vector<uint8_t> br_arp(const wire::MacAddr& src, uint8_t from, uint8_t to) {
  std::vector<uint8_t> f(60);
  const uint32_t n = wire::encode_arp(f, wire::kArpRequest, src, 0x0a000a00u | from, wire::MacAddr{},
                                      0x0a000a00u | to, wire::kBroadcastMac);
  REQUIRE(n == 60);
  return f;
}

// A non-IP frame (EtherType 0x88b5, local experimental), `tag` an 802.1Q VID if nonzero.
std::vector<uint8_t> br_eth(const wire::MacAddr& dst, const wire::MacAddr& src, uint16_t tag = 0) {
  std::vector<uint8_t> f;
  f.insert(f.end(), dst.b.begin(), dst.b.end());
  f.insert(f.end(), src.b.begin(), src.b.end());
  if (tag != 0) {
    f.push_back(0x81);
    f.push_back(0x00);
    f.push_back(uint8_t(tag >> 8));
    f.push_back(uint8_t(tag));
  }
  f.push_back(0x88);
  f.push_back(0xb5);
  for (int i = 0; i < 64; i++) f.push_back(uint8_t(i));
  return f;
}

// A RoCEv2 WRITE between two hosts of VLAN 10 (10.0.10.1 -> 10.0.10.2).
std::vector<uint8_t> br_roce(const wire::MacAddr& src, const wire::MacAddr& dst, uint8_t dscp, Ecn ecn,
                             uint32_t payload = 256) {
  std::vector<uint8_t> frame(payload + 128);
  wire::PathHeaders path;
  path.src_mac = src;
  path.dst_mac = dst;
  path.src_ip = addr4("10.0.10.1");
  path.dst_ip = addr4("10.0.10.2");
  path.dscp = dscp;
  path.ecn = ecn;
  path.udp_sport = 0xc123;
  wire::RoceFields bth;
  bth.opcode = wire::op::kWriteOnly;
  bth.dest_qp = 0x42;
  bth.psn = 9;
  bth.reth_va = 0x1000;
  bth.reth_rkey = 0x55;
  bth.reth_len = payload;
  std::vector<uint8_t> data(payload, 0x5a);
  const uint32_t len = wire::encode_roce(frame, path, bth, data);
  REQUIRE(len > 0);
  frame.resize(len);
  return frame;
}

// `inner` encapsulated by the VTEP `src_vtep` (host order) to the leaf.
std::vector<uint8_t> br_vxlan(const std::vector<uint8_t>& inner, uint32_t vni, uint32_t src_vtep, Ecn outer_ecn,
                              const wire::MacAddr& leaf_mac) {
  std::vector<uint8_t> f(sw::kVxlanOverhead + inner.size());
  sw::VxlanEncap e;
  e.src_mac = kBrUnderlayMac;
  e.dst_mac = leaf_mac;
  e.src_ip = src_vtep;
  e.dst_ip = 0x0a0a0a01;
  e.vni = vni;
  e.src_port = 0xd00d;
  e.dscp = 26;
  e.ecn = outer_ecn;
  sw::vxlan_write_outer({f.data(), sw::kVxlanOverhead}, e, uint32_t(inner.size()));
  std::copy(inner.begin(), inner.end(), f.begin() + sw::kVxlanOverhead);
  return f;
}

// A VXLAN frame as the underlay received it: outer view, VNI, inner bytes.
struct Tunnelled {
  wire::PacketView outer;
  uint32_t vni = 0;
  uint32_t dst_vtep = 0;
  std::vector<uint8_t> inner;
};
std::vector<Tunnelled> tunnelled(const FrameNode& n) {
  std::vector<Tunnelled> out;
  for (const auto& f : n.received()) {
    Tunnelled t;
    if (wire::decode(f, t.outer) != wire::DecodeError::kOk || !t.outer.is_udp || t.outer.dport != 4789) continue;
    t.vni = reinterpret_cast<const sw::VxlanHdr*>(f.data() + t.outer.l4_off + 8)->vni();
    t.dst_vtep = t.outer.ipv4().dst.get();
    t.inner.assign(f.begin() + t.outer.l4_off + 16, f.begin() + t.outer.ip_end);
    t.outer = {};  // the view would point into `f`; callers decode again if they need it
    out.push_back(std::move(t));
  }
  return out;
}

uint64_t bridge_count(const BridgeBench& b, sw::BridgeCounters::Id id) { return b.sw->bridge_counters()[id]; }

}  // namespace

TEST_CASE("Bridge: a broadcast from an access port floods to the VLAN's other ports and is head-end replicated to "
          "every flood-list VTEP, never back to the ingress port; its source is learned there",
          "[sim][switch]") {
  BridgeBench b = make_bridge_bench(bridge_leaf_config());
  const std::vector<uint8_t> arp = br_arp(br_mac(1), 1, 2);
  b.inject(0, arp);
  CHECK(b.at(0).received().empty());  // not back to the ingress port
  REQUIRE(b.at(1).received().size() == 1);
  REQUIRE(b.at(2).received().size() == 1);
  CHECK(b.at(1).received()[0] == arp);
  CHECK(b.at(2).received()[0] == arp);
  CHECK(b.at(3).received().empty());  // VLAN 20
  const std::vector<Tunnelled> t = tunnelled(b.at(4));
  REQUIRE(t.size() == 2);
  CHECK(b.at(4).received().size() == 2);
  std::set<uint32_t> vteps;
  for (const Tunnelled& x : t) {
    vteps.insert(x.dst_vtep);
    CHECK(x.vni == 10);
    CHECK(x.inner == arp);  // the inner frame as received, Ethernet header and all
  }
  CHECK(vteps == std::set<uint32_t>{0x0a0a0a02, 0x0a0a0a03});
  // The outer Ethernet goes to the underlay next hop.
  wire::PacketView o;
  REQUIRE(wire::decode(b.at(4).received()[0], o) == wire::DecodeError::kOk);
  CHECK(o.eth().dst == kBrUnderlayMac);
  CHECK(o.ipv4().src.get() == 0x0a0a0a01);

  CHECK(bridge_count(b, sw::BridgeCounters::flood_packets) == 1);
  CHECK(bridge_count(b, sw::BridgeCounters::flood_local_copies) == 2);
  CHECK(bridge_count(b, sw::BridgeCounters::mac_learned) == 1);
  const sw::VniCounters* vc = b.sw->vni_counters(10);
  REQUIRE(vc != nullptr);
  CHECK((*vc)[sw::VniCounters::flood_copies] == 2);
  CHECK((*vc)[sw::VniCounters::encap_packets] == 2);
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::encap_packets] == 2);
  const std::vector<sw::MacEntry> table = b.sw->mac_table();
  REQUIRE(table.size() == 1);
  CHECK(table[0].vlan == 10);
  CHECK(table[0].mac == br_mac(1));
  CHECK(!table[0].place.remote);
  CHECK(table[0].place.port == 0);

  // VLAN 20 is local: its broadcast stays on its one port's VLAN (nowhere here).
  b.clear();
  b.inject(3, br_eth(wire::kBroadcastMac, br_mac(4)));
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
}

TEST_CASE("Bridge: unicast to a learned local address goes to its port alone; unknown unicast floods; an address "
          "learned on the ingress port is filtered; a tag of another VLAN is dropped, the access VLAN's tag removed",
          "[sim][switch]") {
  BridgeBench b = make_bridge_bench(bridge_leaf_config());
  b.inject(0, br_arp(br_mac(1), 1, 2));  // learns br_mac(1) on swp1
  b.clear();
  const std::vector<uint8_t> to1 = br_eth(br_mac(1), br_mac(2));
  b.inject(1, to1);
  REQUIRE(b.at(0).received().size() == 1);
  CHECK(b.at(0).received()[0] == to1);
  CHECK(b.at(2).received().empty());
  CHECK(b.at(4).received().empty());
  CHECK(bridge_count(b, sw::BridgeCounters::flood_packets) == 1);  // the ARP only

  // Unknown unicast: flooded like a broadcast.
  b.clear();
  b.inject(1, br_eth(br_mac(9), br_mac(2)));
  CHECK(b.at(0).received().size() == 1);
  CHECK(b.at(1).received().empty());
  CHECK(b.at(2).received().size() == 1);
  CHECK(tunnelled(b.at(4)).size() == 2);

  // To an address behind the ingress port: filtered.
  b.clear();
  b.inject(0, br_eth(br_mac(1), br_mac(7)));
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
  CHECK(bridge_count(b, sw::BridgeCounters::drop_same_port) == 1);

  // Tagged with another VLAN on an access port: dropped; with the access VLAN: untagged on.
  b.clear();
  b.inject(1, br_eth(br_mac(1), br_mac(2), 20));
  CHECK(b.at(0).received().empty());
  CHECK(bridge_count(b, sw::BridgeCounters::drop_vlan_filter) == 1);
  b.inject(1, br_eth(br_mac(1), br_mac(2), 10));
  REQUIRE(b.at(0).received().size() == 1);
  CHECK(b.at(0).received()[0] == to1);
}

TEST_CASE("Bridge: BUM from the overlay goes to local ports only (split horizon); the remote MAC is learned and "
          "unicast to it goes to that one VTEP; a decapsulated frame to another remote MAC is dropped",
          "[sim][switch]") {
  const sw::SwitchConfig cfg = bridge_leaf_config();
  BridgeBench b = make_bridge_bench(cfg);
  const std::vector<uint8_t> arp = br_arp(br_mac(0x21), 0x21, 1);
  b.inject(4, br_vxlan(arp, 10, 0x0a0a0a02, Ecn::kNotEct, cfg.port_mac(4)));
  for (int i = 0; i < 3; i++) {
    INFO("swp" << i + 1);
    REQUIRE(b.at(i).received().size() == 1);
    CHECK(b.at(i).received()[0] == arp);
  }
  CHECK(b.at(3).received().empty());
  CHECK(b.at(4).received().empty());  // never back into the overlay
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::decap_packets] == 1);
  CHECK((*b.sw->vni_counters(10))[sw::VniCounters::decap_packets] == 1);
  CHECK((*b.sw->vni_counters(10))[sw::VniCounters::flood_copies] == 0);
  const std::vector<sw::MacEntry> table = b.sw->mac_table();
  REQUIRE(table.size() == 1);
  CHECK(table[0].place.remote);
  CHECK(table[0].place.vtep == 0x0a0a0a02);

  // The reply from swp1 to the remote host: one copy, to 10.10.10.2 only.
  b.clear();
  const std::vector<uint8_t> reply = br_eth(br_mac(0x21), br_mac(1));
  b.inject(0, reply);
  for (int i = 1; i < 4; i++) CHECK(b.at(i).received().empty());
  const std::vector<Tunnelled> t = tunnelled(b.at(4));
  REQUIRE(t.size() == 1);
  CHECK(t[0].dst_vtep == 0x0a0a0a02);
  CHECK(t[0].vni == 10);
  CHECK(t[0].inner == reply);

  // From the overlay to a MAC behind another VTEP: not sent back into it.
  b.clear();
  b.inject(4, br_vxlan(br_eth(br_mac(0x21), br_mac(0x31)), 10, 0x0a0a0a03, Ecn::kNotEct, cfg.port_mac(4)));
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
  CHECK(bridge_count(b, sw::BridgeCounters::drop_split_horizon) == 1);

  // Unknown VNI: dropped and counted.
  b.inject(4, br_vxlan(arp, 99, 0x0a0a0a02, Ecn::kNotEct, cfg.port_mac(4)));
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::drop_unknown_vni] == 1);
}

TEST_CASE("Bridge: a MAC address that moves (port to port, VTEP to port) is relearned and counted", "[sim][switch]") {
  const sw::SwitchConfig cfg = bridge_leaf_config();
  BridgeBench b = make_bridge_bench(cfg);
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));  // br_mac(1) on swp1
  b.inject(1, br_eth(wire::kBroadcastMac, br_mac(1)));  // ... now on swp2
  CHECK(bridge_count(b, sw::BridgeCounters::mac_learned) == 1);
  CHECK(bridge_count(b, sw::BridgeCounters::mac_moved) == 1);
  b.clear();
  b.inject(2, br_eth(br_mac(1), br_mac(3)));
  CHECK(b.at(0).received().empty());
  CHECK(b.at(1).received().size() == 1);
  // Remote, then local.
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, br_mac(0x21)), 10, 0x0a0a0a02, Ecn::kNotEct, cfg.port_mac(4)));
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(0x21)));
  CHECK(bridge_count(b, sw::BridgeCounters::mac_moved) == 2);
  b.clear();
  b.inject(2, br_eth(br_mac(0x21), br_mac(3)));
  CHECK(b.at(0).received().size() == 1);
  CHECK(b.at(4).received().empty());
}

TEST_CASE("Bridge: learned addresses age out after bridge domain br_default ageing; with mac-learning off, unicast "
          "to a remote host is flooded to the flood list",
          "[sim][switch]") {
  sw::SwitchConfig cfg = bridge_leaf_config(false);
  br_nv(cfg, "set bridge domain br_default ageing 1");
  BridgeBench b = make_bridge_bench(cfg);
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, br_mac(0x21)), 10, 0x0a0a0a02, Ecn::kNotEct, cfg.port_mac(4)));
  CHECK(b.sw->mac_table().size() == 1);  // the remote one is not learned
  b.clear();
  b.inject(1, br_eth(br_mac(0x21), br_mac(2)));
  CHECK(tunnelled(b.at(4)).size() == 2);  // flooded: unknown
  CHECK(b.at(0).received().size() == 1);
  b.clear();
  b.engine->run_until(b.engine->now() + ms(1100));
  b.inject(1, br_eth(br_mac(1), br_mac(2)));
  CHECK(bridge_count(b, sw::BridgeCounters::mac_aged) == 2);  // br_mac(2) (learned again) and br_mac(1)
  CHECK(b.at(2).received().size() == 1);  // flooded again: br_mac(1) aged out
}

TEST_CASE("Bridge QoS: a bridged RoCE frame keeps its inner TTL and ICRC; the outer DSCP is copied (or set), the "
          "inner ECN copied out and outer CE in (RFC 6040); the underlay MTU is checked",
          "[sim][switch]") {
  sw::SwitchConfig cfg = bridge_leaf_config();
  BridgeBench b = make_bridge_bench(cfg);
  // Learn the remote host, then send RoCE to it.
  const wire::MacAddr remote = br_mac(0x21);
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, remote), 10, 0x0a0a0a03, Ecn::kNotEct, cfg.port_mac(4)));
  b.clear();
  const std::vector<uint8_t> roce = br_roce(br_mac(1), remote, 26, Ecn::kEct0);
  b.inject(0, roce);
  REQUIRE(b.at(4).received().size() == 1);
  wire::PacketView o;
  const std::vector<uint8_t> frame = b.at(4).received()[0];
  REQUIRE(wire::decode(frame, o) == wire::DecodeError::kOk);
  CHECK(o.dscp == 26);
  CHECK(o.ecn == Ecn::kEct0);
  CHECK(o.ipv4().dst.get() == 0x0a0a0a03);
  CHECK(o.sport >= 0xc000);
  const std::vector<uint8_t> inner(frame.begin() + o.l4_off + 16, frame.begin() + o.ip_end);
  CHECK(inner == roce);  // TTL, MACs and the ICRC as the host sent them
  wire::PacketView iv;
  REQUIRE(wire::decode(inner, iv) == wire::DecodeError::kOk);
  CHECK(iv.icrc_ok());
  // The outer switch priority is the RoCE one: TC3 on the underlay port.
  CHECK(b.sw->queue_counters(4, 3)[sw::QueueCounters::packets] >= 1);

  // Outer CE onto an ECT inner frame from the overlay: CE reaches the host.
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));  // learn br_mac(1) on swp1
  b.clear();
  b.inject(4, br_vxlan(br_roce(remote, br_mac(1), 26, Ecn::kEct0), 10, 0x0a0a0a03, Ecn::kCe, cfg.port_mac(4)));
  REQUIRE(b.at(0).received().size() == 1);
  wire::PacketView got;
  REQUIRE(wire::decode(b.at(0).received()[0], got) == wire::DecodeError::kOk);
  CHECK(got.ecn == Ecn::kCe);
  CHECK(got.icrc_ok());
  CHECK(b.at(1).received().empty());
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::decap_ce_copied] == 1);

  // DSCP set: the outer DSCP is the configured value.
  cfg.vxlan.encap_dscp = sw::VxlanDscpAction::kSet;
  cfg.vxlan.dscp_value = 0;
  REQUIRE(b.sw->apply(cfg).ok());
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, remote), 10, 0x0a0a0a03, Ecn::kNotEct, cfg.port_mac(4)));
  b.clear();
  b.inject(0, roce);
  REQUIRE(b.at(4).received().size() == 1);
  REQUIRE(wire::decode(b.at(4).received()[0], o) == wire::DecodeError::kOk);
  CHECK(o.dscp == 0);

  // An underlay port of MTU 1500: a 1480-byte inner IP packet (+50 = 1530) is dropped and counted.
  cfg.interfaces[4].mtu = 1500;
  REQUIRE(b.sw->apply(cfg).ok());
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, remote), 10, 0x0a0a0a03, Ecn::kNotEct, cfg.port_mac(4)));
  b.clear();
  const uint64_t mtu_drops = b.sw->vtep_counters()[sw::VtepCounters::drop_underlay_mtu];
  b.inject(0, br_roce(br_mac(1), remote, 26, Ecn::kEct0, 1400));
  CHECK(b.at(4).received().empty());
  CHECK(b.sw->vtep_counters()[sw::VtepCounters::drop_underlay_mtu] == mtu_drops + 1);
  b.inject(0, br_roce(br_mac(1), remote, 26, Ecn::kEct0, 1000));
  CHECK(b.at(4).received().size() == 1);
}

TEST_CASE("Bridge configuration: NVUE bridge domain, interface access VLAN, nve vxlan mac-learning; the topology YAML "
          "reads the same; config show loads back; validation names the field",
          "[unit][switch]") {
  const sw::SwitchConfig cfg = bridge_leaf_config();
  CHECK(cfg.bridge.vlans == std::vector<uint16_t>{10, 20});
  CHECK(cfg.interfaces[0].access == uint16_t(10));
  CHECK(cfg.interfaces[3].access == uint16_t(20));
  CHECK(cfg.vxlan.mac_learning);
  REQUIRE(cfg.vxlan.find(10) != nullptr);
  CHECK(cfg.vxlan.find(10)->vlan == 10);
  CHECK(cfg.vxlan.find(10)->flood == std::vector<wire::IpAddr>{addr4("10.10.10.3")});

  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto parse = [&](const std::string& sw) { return parse_topology("nodes:\n  leaf1:\n" + sw, "t.yaml", reg); };
  const std::string good = R"(    kind: switch
    ports: 5
    interfaces:
      swp1: {bridge: {domain: {br_default: {access: 10}}}}
      swp2: {bridge: {domain: {br_default: {access: 10}}}}
      swp3: {bridge: {domain: {br_default: {access: 10}}}}
      swp4: {bridge: {domain: {br_default: {access: 20}}}}
      swp5: {address: 10.255.1.1/30}
    bridge:
      domain:
        br_default:
          ageing: 1800
          vlan:
            10: {vni: {10: {flooding: {head-end-replication: [10.10.10.3]}}}}
            20:
    nve:
      vxlan:
        source: {address: 10.10.10.1}
        mac-learning: on
        flooding: {head-end-replication: [10.10.10.2]}
)";
  auto t = parse(good);
  INFO(t.status().message());
  REQUIRE(t.ok());
  const auto& y = std::any_cast<const sw::SwitchConfig&>(t->nodes[0].config);
  CHECK(y.bridge == cfg.bridge);
  CHECK(y.vxlan.vnis == cfg.vxlan.vnis);
  CHECK(y.vxlan.mac_learning);
  for (int i = 0; i < 5; i++) CHECK(y.interfaces[size_t(i)].access == cfg.interfaces[size_t(i)].access);

  const std::string text = sw::switch_config_text(y);
  const std::string indented = indent_switch_section(text);
  auto back = parse(indented);
  INFO(indented);
  REQUIRE(back.ok());
  CHECK(sw::switch_config_text(std::any_cast<const sw::SwitchConfig&>(back->nodes[0].config)) == text);

  auto error_of = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    REQUIRE(at != std::string::npos);
    s.replace(at, from.size(), to);
    auto r = parse(s);
    REQUIRE(!r.ok());
    return r.status().message();
  };
  CHECK_THAT(error_of("{access: 20}", "{access: 30}"),
             Catch::Contains("interfaces.swp4.bridge.domain.br_default.access: VLAN 30 is not a VLAN of bridge domain"));
  CHECK_THAT(error_of("{access: 20}", "{access: 4095}"),
             Catch::Contains("t.yaml:9: nodes.leaf1.interfaces.swp4.bridge.domain.br_default.access: '4095' is out of range"));
  CHECK_THAT(error_of("swp3: {bridge", "swp3: {address: 10.0.0.1/24, bridge"),
             Catch::Contains("interfaces.swp3.bridge.domain.br_default.access: a bridge port is switched, not routed"));
  CHECK_THAT(error_of("ageing: 1800", "ageing: -1"), Catch::Contains("nodes.leaf1.bridge.domain.br_default.ageing"));

  // A bridged port takes no address; a route into a bridged VNI is refused.
  sw::SwitchConfig c = cfg;
  c.interfaces[0].address = sw::IpPrefix::parse("10.0.10.254/24");
  CHECK_THAT(c.validate().message(), Catch::Contains("interfaces.swp1.bridge.domain.br_default.access: a bridge port"));
  c = cfg;
  sw::Route r;
  r.prefix = *sw::IpPrefix::parse("10.9.0.0/16");
  r.vtep = addr4("10.10.10.2");
  r.vni = 10;
  c.routes.push_back(r);
  CHECK_THAT(c.validate().message(), Catch::Contains("VNI 10 is bridged (VLAN 10)"));

  // unset: the VLAN goes with its VNI; the port's access VLAN goes.
  c = cfg;
  br_nv(c, "unset interface swp4 bridge domain br_default access");
  br_nv(c, "unset bridge domain br_default vlan 20");
  CHECK(c.bridge.vlans == std::vector<uint16_t>{10});
  CHECK(!c.interfaces[3].access);
  br_nv(c, "unset bridge domain br_default vlan 10 vni 10 flooding head-end-replication 10.10.10.3");
  CHECK(c.vxlan.find(10)->flood.empty());
  br_nv(c, "unset nve vxlan mac-learning");
  CHECK(!c.vxlan.mac_learning);
  CHECK(!sw::nv_edit(c, {"set", "bridge", "domain", "br_other", "vlan", "10"}).ok());
  CHECK(!sw::nv_edit(c, {"set", "bridge", "domain", "br_default", "vlan", "4095"}).ok());
}

TEST_CASE("nv show bridge domain br_default mac-table: local and remote entries", "[sim][switch]") {
  const sw::SwitchConfig cfg = bridge_leaf_config();
  BridgeBench b = make_bridge_bench(cfg);
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, br_mac(0x21)), 10, 0x0a0a0a02, Ecn::kNotEct, cfg.port_mac(4)));
  const std::string table = nv_text(*b.sw, {"show", "bridge", "domain", "br_default", "mac-table"});
  INFO(table);
  CHECK_THAT(table, Catch::Contains("02:10:00:00:00:01"));
  CHECK_THAT(table, Catch::Contains("swp1"));
  CHECK_THAT(table, Catch::Contains("02:10:00:00:00:21"));
  CHECK_THAT(table, Catch::Contains("10.10.10.2"));
  const std::string json = nv_text(*b.sw, {"show", "bridge", "domain", "br_default", "mac-table", "-o", "json"});
  INFO(json);
  CHECK_THAT(json, Catch::Contains("\"remote-dst\""));
  CHECK_THAT(json, Catch::Contains("\"vxlan48\""));
  // The access VLAN in the interface's view, as NVUE nests it.
  const std::string swp1 = nv_text(*b.sw, {"show", "interface", "swp1", "-o", "json"});
  INFO(swp1);
  const nlohmann::json j = nlohmann::json::parse(swp1);
  CHECK(j["bridge"]["domain"]["br_default"]["access"] == 10);
  // nv show nve vxlan lists the bridged VNI with its VLAN.
  const std::string nve = nv_text(*b.sw, {"show", "nve", "vxlan", "-o", "json"});
  INFO(nve);
  CHECK_THAT(nve, Catch::Contains("\"vlan\": 10"));
  CHECK_THAT(nve, Catch::Contains("\"mac-learning\": \"on\""));

  // On a running switch: swp4 moved to VLAN 10 by nv set + config apply
  // (the diff names it); a broadcast from swp1 now reaches it, and the MAC
  // table starts afresh.
  nv_text(*b.sw, {"set", "interface", "swp4", "bridge", "domain", "br_default", "access", "10"});
  const std::string diff = nv_text(*b.sw, {"config", "diff"});
  INFO(diff);
  CHECK_THAT(diff, Catch::Contains("access"));
  nv_text(*b.sw, {"config", "apply"});
  CHECK(b.sw->config().interfaces[3].access == uint16_t(10));
  CHECK(b.sw->mac_table().empty());
  b.clear();
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));
  CHECK(b.at(3).received().size() == 1);
  CHECK(b.at(1).received().size() == 1);
}

// ---- review fixes (vlanfix2) ----

TEST_CASE("Bridge trimming: a long non-IP frame bridged into the overlay through a congested trimming port is "
          "dropped and counted, never cut",
          "[sim][switch]") {
  sw::SwitchConfig cfg = bridge_leaf_config();
  cfg.qos = sw::qos_roce_profile(sw::RoceMode::kLossy);
  cfg.qos.buffer.size = 100'000;
  cfg.qos.buffer.egress_lossy_alpha = 1;
  cfg.qos.trim.enable = true;
  cfg.qos.trim.eligible_tc = 0x0f;  // TC0 too: where a non-IP frame goes
  REQUIRE(cfg.validate().ok());
  BridgeBench b = make_bridge_bench(cfg, LinkParams{.rate_bps = 1'000'000'000ull});
  const wire::MacAddr remote = br_mac(0x21);
  b.inject(4, br_vxlan(br_eth(wire::kBroadcastMac, remote), 10, 0x0a0a0a02, Ecn::kNotEct, cfg.port_mac(4)));
  b.clear();
  std::vector<uint8_t> frame = br_eth(remote, br_mac(1));
  frame.resize(1400, 0xab);
  constexpr int kFrames = 200;
  for (int i = 0; i < kFrames; i++) b.at(0).send(frame, b.engine->now());
  b.engine->run_for(ms(5));
  const std::vector<Tunnelled> t = tunnelled(b.at(4));
  INFO("tunnelled " << t.size());
  CHECK(t.size() < size_t(kFrames));  // the port was congested
  CHECK(b.at(4).received().size() == t.size());  // every frame out is whole VXLAN
  for (const Tunnelled& x : t) CHECK(x.inner == frame);  // whole, never trimmed
  CHECK(b.sw->counters(4)[sw::PortCounters::trim_packets] == 0);
  CHECK(b.sw->counters(4)[sw::PortCounters::tx_non_roce_no_buffer_discard] == kFrames - t.size());
}

TEST_CASE("Bridge flooding: access ports with no link or with the link down are not flood targets and count no "
          "link-down drops",
          "[sim][switch]") {
  sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(4);
  br_nv(cfg, "set bridge domain br_default vlan 10");
  br_nv(cfg, "set interface swp1-4 bridge domain br_default access 10");
  REQUIRE(cfg.validate().ok());
  auto engine = make_engine(13);
  sw::Switch& s = engine->add<sw::Switch>("leaf1", cfg);
  FrameNode& h1 = engine->add<FrameNode>("h1", std::vector<std::vector<uint8_t>>{});
  FrameNode& h2 = engine->add<FrameNode>("h2", std::vector<std::vector<uint8_t>>{});
  REQUIRE(engine->connect(h1, 0, s, 0, LinkParams{}).ok());
  REQUIRE(engine->connect(h2, 0, s, 1, LinkParams{}).ok());
  engine->run_for(us(10));
  auto link_down_drops = [&] {
    uint64_t n = 0;
    for (uint16_t p = 0; p < 4; p++) n += s.counters(p)[sw::PortCounters::drop_link_down];
    return n;
  };
  h1.send(br_arp(br_mac(1), 1, 2), engine->now());
  engine->run_for(us(100));
  CHECK(h2.received().size() == 1);
  CHECK(link_down_drops() == 0);
  CHECK(s.bridge_counters()[sw::BridgeCounters::flood_local_copies] == 1);
  // h2's link down: no copy for it either, and nothing counted.
  cfg.interfaces[1].faults.link_down = true;
  REQUIRE(s.apply(cfg).ok());
  h1.send(br_arp(br_mac(1), 1, 2), engine->now());
  engine->run_for(us(100));
  CHECK(h2.received().size() == 1);
  CHECK(link_down_drops() == 0);
}

TEST_CASE("Bridge MAC table: a configuration change that leaves the bridge alone (QoS, a fault) keeps it; a port "
          "whose link goes down has its entries flushed",
          "[sim][switch]") {
  sw::SwitchConfig cfg = bridge_leaf_config();
  BridgeBench b = make_bridge_bench(cfg);
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));
  b.inject(1, br_eth(wire::kBroadcastMac, br_mac(2)));
  REQUIRE(b.sw->mac_table().size() == 2);
  cfg.qos.buffer.size = 10'000'000;
  REQUIRE(b.sw->apply(cfg).ok());
  CHECK(b.sw->mac_table().size() == 2);
  cfg.interfaces[2].faults.loss = 0.5;
  REQUIRE(b.sw->apply(cfg).ok());
  CHECK(b.sw->mac_table().size() == 2);
  // swp1 down: br_mac(1) goes, br_mac(2) stays.
  cfg.interfaces[0].faults.link_down = true;
  REQUIRE(b.sw->apply(cfg).ok());
  const std::vector<sw::MacEntry> t = b.sw->mac_table();
  REQUIRE(t.size() == 1);
  CHECK(t[0].mac == br_mac(2));
  // The bridge itself changes (mac-learning off): the table starts afresh.
  cfg.vxlan.mac_learning = false;
  REQUIRE(b.sw->apply(cfg).ok());
  CHECK(b.sw->mac_table().empty());
}

TEST_CASE("MAC table ageing without lookups: an aged entry is absent from entries() and the capacity check, and "
          "learning it again counts aged + learned, not a refresh or a move",
          "[unit][switch]") {
  sw::MacTable t(2);
  t.set_ageing(ms(10000));
  size_t aged = 0;
  CHECK(t.learn(10, br_mac(1), sw::MacPlace{false, 0, 0}, Time(0), aged) == sw::MacTable::Learn::kLearned);
  CHECK(t.learn(10, br_mac(2), sw::MacPlace{false, 1, 0}, Time(0), aged) == sw::MacTable::Learn::kLearned);
  CHECK(t.learn(10, br_mac(3), sw::MacPlace{false, 1, 0}, Time(0) + ms(5000), aged) == sw::MacTable::Learn::kFull);
  CHECK(aged == 0);
  CHECK(t.entries(Time(0) + ms(5000)).size() == 2);
  // Past the age nobody looked them up: gone from the view, and room again.
  const Time later = Time(0) + ms(11000);
  CHECK(t.entries(later).empty());
  CHECK(t.learn(10, br_mac(3), sw::MacPlace{false, 1, 0}, later, aged) == sw::MacTable::Learn::kLearned);
  CHECK(aged == 2);
  // br_mac(1) aged then seen on another port: a new entry, not a move.
  aged = 0;
  sw::MacTable u;
  u.set_ageing(ms(10000));
  u.learn(10, br_mac(1), sw::MacPlace{false, 0, 0}, Time(0), aged);
  CHECK(u.learn(10, br_mac(1), sw::MacPlace{false, 2, 0}, later, aged) == sw::MacTable::Learn::kLearned);
  CHECK(aged == 1);
  CHECK(u.entries(later).size() == 1);
}

TEST_CASE("Bridge ageing: an address nobody sends to ages out of the mac-table view and the counters",
          "[sim][switch]") {
  sw::SwitchConfig cfg = bridge_leaf_config();
  br_nv(cfg, "set bridge domain br_default ageing 1");
  BridgeBench b = make_bridge_bench(cfg);
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));
  CHECK(b.sw->mac_table().size() == 1);
  b.engine->run_until(b.engine->now() + ms(1100));
  CHECK(b.sw->mac_table().empty());
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));  // seen again: aged and learned
  CHECK(bridge_count(b, sw::BridgeCounters::mac_aged) == 1);
  CHECK(bridge_count(b, sw::BridgeCounters::mac_learned) == 2);
  CHECK(bridge_count(b, sw::BridgeCounters::mac_moved) == 0);
}

TEST_CASE("Bridge configuration: a route, an ECMP next hop or a neighbour out of an access port is refused, naming "
          "the field",
          "[unit][switch]") {
  const sw::SwitchConfig cfg = bridge_leaf_config();
  sw::SwitchConfig c = cfg;
  c.routes.push_back(sw::Route{*sw::IpPrefix::parse("10.9.0.0/16"), 0, addr4("10.0.10.7"), {}});
  CHECK_THAT(c.validate().message(), Catch::Contains("routes[1].interface: swp1 is an access port"));
  c = cfg;
  c.neighbors.push_back(sw::Neighbor{addr4("10.0.10.7"), br_mac(7), 1});
  CHECK_THAT(c.validate().message(), Catch::Contains("neighbors[1].interface: swp2 is an access port"));

  NodeKindRegistry reg;
  register_switch_kinds(reg);
  auto error_of = [&](const std::string& extra) {
    const std::string y = "nodes:\n  leaf1:\n    kind: switch\n    ports: 5\n    interfaces:\n"
                          "      swp1: {bridge: {domain: {br_default: {access: 10}}}}\n"
                          "      swp2: {bridge: {domain: {br_default: {access: 10}}}}\n"
                          "      swp5: {address: 10.255.1.1/30}\n"
                          "    bridge: {domain: {br_default: {vlan: {10: }}}}\n" + extra;
    auto r = parse_topology(y, "t.yaml", reg);
    REQUIRE(!r.ok());
    return r.status().message();
  };
  CHECK_THAT(error_of("    routes:\n      - {prefix: 10.9.0.0/16, interface: swp1, via: 10.0.10.7}\n"),
             Catch::Contains("nodes.leaf1.routes[0].interface: swp1 is an access port"));
  CHECK_THAT(error_of("    routes:\n      - prefix: 10.9.0.0/16\n        next-hops:\n"
                      "          - {interface: swp5, via: 10.255.1.2}\n          - {interface: swp2, via: 10.0.10.7}\n"),
             Catch::Contains("nodes.leaf1.routes[0].next-hops[1].interface: swp2 is an access port"));
  CHECK_THAT(error_of("    neighbors:\n      - {ip: 10.0.10.7, mac: 02:00:00:00:00:07, interface: swp1}\n"),
             Catch::Contains("nodes.leaf1.neighbors[0].interface: swp1 is an access port"));
}

TEST_CASE("Bridge: a Switch built from an invalid configuration (access VLAN 5000, which the constructor only "
          "logs) bridges nothing on that port and writes nothing out of bounds",
          "[sim][switch]") {
  sw::SwitchConfig cfg = bridge_leaf_config();
  cfg.interfaces[0].access = 5000;
  cfg.bridge.vlans.push_back(5000);
  REQUIRE(!cfg.validate().ok());
  BridgeBench b = make_bridge_bench(cfg);
  b.inject(0, br_eth(wire::kBroadcastMac, br_mac(1)));
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
  b.inject(1, br_eth(wire::kBroadcastMac, br_mac(2)));  // VLAN 10 still works without swp1
  CHECK(b.at(0).received().empty());
  CHECK(b.at(2).received().size() == 1);
}

TEST_CASE("Bridge: a frame with a multicast or zero source MAC is dropped and not learned; link-local frames "
          "(01:80:c2:00:00:0x: STP, LACP, LLDP) and MAC control other than PFC/PAUSE are dropped at an access "
          "port, never flooded into the overlay",
          "[sim][switch]") {
  const sw::SwitchConfig cfg = bridge_leaf_config();
  BridgeBench b = make_bridge_bench(cfg);
  const wire::MacAddr mcast{{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}};
  const wire::MacAddr zero{};
  b.inject(0, br_eth(wire::kBroadcastMac, mcast));
  b.inject(0, br_eth(wire::kBroadcastMac, zero));
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
  CHECK(b.sw->mac_table().empty());
  CHECK(bridge_count(b, sw::BridgeCounters::drop_bad_source_mac) == 2);
  // LLDP (01:80:c2:00:00:0e), STP (..:00), LACP (..:02, slow protocols 0x8809)
  for (const uint8_t last : {uint8_t(0x0e), uint8_t(0x00), uint8_t(0x02)})
    b.inject(0, br_eth(wire::MacAddr{{0x01, 0x80, 0xc2, 0x00, 0x00, last}}, br_mac(1)));
  // MAC control (0x8808) that is neither PFC nor PAUSE, to an ordinary multicast address
  std::vector<uint8_t> ctl = br_eth(wire::MacAddr{{0x01, 0x80, 0xc2, 0x00, 0x00, 0x21}}, br_mac(1));
  ctl[12] = 0x88;
  ctl[13] = 0x08;
  ctl[14] = 0x00;
  ctl[15] = 0x02;  // not 0x0001 (PAUSE) nor 0x0101 (PFC)
  b.inject(0, ctl);
  for (int i = 0; i < 5; i++) CHECK(b.at(i).received().empty());
  CHECK(bridge_count(b, sw::BridgeCounters::drop_link_local) == 4);
  CHECK(bridge_count(b, sw::BridgeCounters::flood_packets) == 0);
}

TEST_CASE("VXLAN source port of a non-IP inner frame: hashed from its MACs and EtherType (never from bytes past "
          "its Ethernet header)",
          "[unit][switch]") {
  std::set<uint16_t> ports;
  for (uint8_t i = 1; i <= 32; i++) {
    const std::vector<uint8_t> f = br_eth(wire::kBroadcastMac, br_mac(i));  // the same payload each time
    wire::PacketView v;
    REQUIRE(wire::decode(f, v) == wire::DecodeError::kOk);
    REQUIRE(!v.is_ip());
    ports.insert(sw::vxlan_source_port(v, 7));
  }
  CHECK(ports.size() > 16);  // by source MAC
  std::vector<uint8_t> a = br_eth(br_mac(9), br_mac(1)), b = a;
  b[13] = 0xb6;  // another EtherType
  wire::PacketView va, vb;
  REQUIRE(wire::decode(a, va) == wire::DecodeError::kOk);
  REQUIRE(wire::decode(b, vb) == wire::DecodeError::kOk);
  CHECK(sw::vxlan_source_port(va, 7) != sw::vxlan_source_port(vb, 7));
}
