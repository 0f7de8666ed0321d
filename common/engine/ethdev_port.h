// External port over a DPDK ethdev (net_memif, net_af_packet, net_ring,
// net_null, a PCI NIC): the same Port interface as an internal link end.
#pragma once

#include <rte_mbuf.h>

#include <string>

#include "common/engine/capture.h"
#include "common/engine/port.h"
#include "common/status.h"

namespace rocemu {

namespace dpdk {
class PacketPool;
}

struct EthdevParams {
  std::string device;           // a vdev spec ("net_memif0,role=server,...") or an existing port name
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  uint32_t mtu = 4200;          // bounded by the packet pool's frame size
  uint64_t rate_bps = 100'000'000'000ull;  // reported; the device sets the real pace
};

class EthdevPort final : public Port {
 public:
  static Result<std::unique_ptr<EthdevPort>> open(Node* owner, uint16_t index, const EthdevParams& params,
                                                  dpdk::PacketPool& pool);
  ~EthdevPort() override;

  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n, Time now) override;
  bool tx_ready(Time now) override;
  uint64_t rate_bps() const override { return params_.rate_bps; }
  uint32_t mtu() const override { return params_.mtu; }
  bool link_up() const override;

  // Polled by the engine: receives a burst and hands it to the owner.
  uint16_t poll_rx(Time now);
  // Polled by the engine while a transmit was refused.
  bool tx_blocked() const { return tx_blocked_; }
  void retry_tx(Time now);

  uint16_t port_id() const { return port_id_; }
  void set_rx_tap(Tap t) { rx_tap_ = t; }
  void set_tx_tap(Tap t) { tx_tap_ = t; }

 private:
  EthdevPort(Node* owner, uint16_t index, std::string name, uint16_t port_id, const EthdevParams& p, bool vdev)
      : Port(owner, index, std::move(name)), port_id_(port_id), params_(p), created_vdev_(vdev) {}
  uint16_t port_id_;
  EthdevParams params_;
  bool created_vdev_;
  bool tx_blocked_ = false;
  Tap rx_tap_, tx_tap_;
};

}  // namespace rocemu
