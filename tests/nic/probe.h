// Packet-level test pieces: a probe node that plays the far end of a NIC's
// link (10.0.0.9, 02:00:00:00:00:09) and keeps every frame it receives, the
// NIC's side of that set-up (h1, 10.0.0.1), and the path of hand-made
// packets from the probe to the NIC.
#pragma once

#include <cstring>
#include <vector>

#include "common/engine/node.h"
#include "common/wire/build.h"
#include "tests/nic/fabric.h"

namespace rocemu::test {

class Probe final : public Node {
 public:
  Probe() : Node("probe", 1) {}
  std::string_view kind() const override { return "probe"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time now) override {
    for (uint16_t i = 0; i < n; i++) {
      dpdk::seal(pkts[i]);  // a wire would carry the ICRC
      auto b = dpdk::bytes(pkts[i]);
      got.push_back({now, std::vector<uint8_t>(b.begin(), b.end())});
      rte_pktmbuf_free(pkts[i]);
    }
  }
  struct Frame {
    Time at;
    std::vector<uint8_t> bytes;
  };
  std::vector<Frame> got;
};

inline const wire::IpAddr kProbeIp = *wire::IpAddr::parse("10.0.0.9");
inline const wire::MacAddr kProbeMac = *wire::MacAddr::parse("02:00:00:00:00:09");

// NIC h1 (10.0.0.1) knowing the probe as its neighbour.
inline nic::NicConfig probe_peer_config() {
  nic::NicConfig c;
  c.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  c.ips = {*wire::IpAddr::parse("10.0.0.1")};
  c.neighbors[kProbeIp] = kProbeMac;
  return c;
}

// INIT -> RTR towards the probe's QP `remote_qpn`.
inline void probe_qp_to_rtr(nic::SimHost& host, nic::SimHost::Qp* qp, nic::QpType type, uint32_t remote_qpn,
                            int access, uint32_t rq_psn = 0, uint8_t min_rnr_timer = 12) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = access;
  REQUIRE(host.modify(qp, a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = remote_qpn;
  a.rq_psn = rq_psn;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = min_rnr_timer;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.sgid_index = 3;
  a.ah_attr.port_num = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, kProbeIp.b.data(), 16);
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (type == nic::QpType::kRc) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  REQUIRE(host.modify(qp, a, mask) == 0);
}

// The headers of packets the probe sends to the NIC configured above.
inline wire::PathHeaders probe_to_nic(const nic::NicConfig& c) {
  wire::PathHeaders p;
  p.src_mac = kProbeMac;
  p.dst_mac = c.mac;
  p.src_ip = kProbeIp;
  p.dst_ip = c.ips[0];
  p.dscp = 26;
  return p;
}

}  // namespace rocemu::test
