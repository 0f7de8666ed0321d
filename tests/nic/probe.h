// Packet-level test pieces: a probe node that plays the far end of a NIC's
// link (10.0.0.9, 02:00:00:00:00:09) and keeps every frame it receives, the
// NIC's side of that set-up (h1, 10.0.0.1), the path of hand-made packets
// from the probe to the NIC, and a bench of all that with one RC (or UC)
// QP in RTR towards the probe.
#pragma once

#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "common/engine/node.h"
#include "common/wire/build.h"
#include "common/wire/packet.h"
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

inline constexpr int kProbeAccessAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                       IBV_ACCESS_REMOTE_ATOMIC;
inline constexpr uint32_t kProbeQpn = 0x99;
// The QPN of a probe that a test drives by hand (raw frames in and out),
// with a NIC QP connected to it by probe_qp_to_rtr.
inline constexpr uint32_t kRawProbeQpn = 0x77;

// A NIC, the probe on its port and a host with a QP in RTR towards the
// probe's QP kProbeQpn and 64 KiB of memory registered with every access.
struct ProbeBench {
  std::unique_ptr<Engine> engine;
  nic::Nic* nic = nullptr;
  Probe* probe = nullptr;
  std::unique_ptr<nic::SimHost> host;
  nic::SimHost::Cq* cq = nullptr;
  nic::SimHost::Qp* qp = nullptr;
  wire::PathHeaders to_nic;
  std::vector<uint8_t> mem = std::vector<uint8_t>(65536, 0);
  uint32_t rkey = 0;

  explicit ProbeBench(uint32_t rq_psn = 0, nic::QpType type = nic::QpType::kRc, uint8_t min_rnr_timer = 12,
                      nic::LossRecovery mode = nic::LossRecovery::kGoBackN, bool batched_dma = false) {
    engine = make_engine(3);
    nic::NicConfig c = probe_peer_config();
    c.recovery = mode;
    nic = &engine->add<nic::Nic>("h1", c);
    probe = &engine->add<Probe>();
    // No slack, a fast wire: injected packets arrive together.
    REQUIRE(engine->connect(*nic, 0, *probe, 0, LinkParams{.rate_bps = 400'000'000'000ull, .delay = ns(100)}).ok());
    engine->start();
    // batched_dma: the host is reached as another process is (writes
    // deferred until a flush: DeferringLocalMemory).
    host = std::make_unique<nic::SimHost>(*engine, *nic, batched_dma);
    cq = host->create_cq(64);
    qp = host->create_qp(type, cq, cq, ibv_qp_cap{16, 16, 1, 1, 0});
    rkey = host->reg_mr(mem.data(), mem.size(), kProbeAccessAll);
    probe_qp_to_rtr(*host, qp, type, kProbeQpn, kProbeAccessAll, rq_psn, min_rnr_timer);
    to_nic = probe_to_nic(c);
  }

  // A packet to `to` (the bench's QP unless named).
  std::vector<uint8_t> packet(wire::RoceFields f, std::span<const uint8_t> payload = {},
                              const nic::SimHost::Qp* to = nullptr) {
    f.dest_qp = (to != nullptr ? to : qp)->qpn;
    std::vector<uint8_t> out(4400);
    out.resize(wire::encode_roce(out, to_nic, f, payload));
    return out;
  }
  wire::RoceFields write(uint8_t opcode, uint32_t psn, bool ack_req, uint64_t va = 0, uint32_t len = 0) {
    wire::RoceFields f;
    f.opcode = opcode;
    f.psn = psn;
    f.ack_req = ack_req;
    f.reth_va = va;
    f.reth_rkey = rkey;
    f.reth_len = len;
    return f;
  }
  uint64_t addr(size_t off) const { return reinterpret_cast<uint64_t>(mem.data()) + off; }

  // Hands frames to the NIC's port as one received burst, then lets it
  // answer.
  void deliver(const std::vector<std::vector<uint8_t>>& frames) {
    probe->got.clear();
    std::vector<rte_mbuf*> burst;
    for (const auto& f : frames) {
      burst.push_back(engine->pool().alloc_copy(f));
      REQUIRE(burst.back() != nullptr);
    }
    nic->on_rx(0, burst.data(), uint16_t(burst.size()), engine->now());
    engine->run_for(us(20));
  }
  // What came back, decoded (views into probe->got).
  std::vector<wire::PacketView> replies() {
    std::vector<wire::PacketView> out;
    for (const auto& g : probe->got) {
      wire::PacketView v;
      REQUIRE(wire::decode(g.bytes, v) == wire::DecodeError::kOk);
      if (v.is_roce) {
        CHECK(v.icrc_ok());
        out.push_back(v);
      }
    }
    return out;
  }
};

}  // namespace rocemu::test
