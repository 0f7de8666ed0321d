// External port over a DPDK ethdev (net_memif, net_af_packet, net_af_xdp,
// net_ring, net_null, a PCI NIC): the same Port interface as an internal
// link end. The engine polls it: a burst received goes to the owning node
// in one on_rx() call, a refused transmit is retried once the device takes
// packets again, and the link status is cached (refreshed on the device's
// link-change event where it has one, and on a timer where it has not).
// What leaves the port is paced at its configured line rate (the far end
// may be a slow interface or a slow peer: the device would take frames as
// fast as the engine makes them and drop them further on). PFC frames from
// the peer reach the owning node, which pauses its priorities as on an
// internal link. The device's own counters (rte_eth_stats, xstats) are
// reported beside the port's.
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <string>

#include "common/engine/capture.h"
#include "common/engine/port.h"
#include "common/status.h"

namespace rocemu {

namespace dpdk {
class PacketPool;
}

// The largest frame a net_af_xdp receive queue whose buffers come from
// `mp` takes (ethdev_port.cc says how it is reckoned).
uint32_t af_xdp_rx_room(const rte_mempool& mp);

struct EthdevParams {
  // A vdev spec ("net_memif0,role=server,socket=/run/x.sock") or the name of
  // an existing ethdev (e.g. one made with rte_eth_from_rings, or a PCI
  // address the EAL probed).
  std::string device;
  uint16_t rx_descriptors = 1024;
  uint16_t tx_descriptors = 1024;
  uint32_t mtu = 4200;          // largest IP packet; bounded by the device and the pool's frame size
  uint64_t rate_bps = 100'000'000'000ull;  // line rate: frames leave no faster (with the Ethernet overhead)
  // Network namespace (a name under /var/run/netns, or a path such as
  // /proc/PID/ns/net) to create the device in: net_af_packet and net_af_xdp
  // look their interface up in the namespace of the thread that probes them.
  std::string netns;
  // How often the link status is read from a device that raises no
  // link-change event.
  Duration link_poll_interval = ms(10);
};

class EthdevPort final : public Port {
 public:
  static constexpr uint16_t kRxBurst = 32;
  // How far ahead of the line rate a port may hand frames to its device: the
  // engine polls in bursts, and a little credit keeps the line busy between
  // polls without letting a burst outrun the link.
  static constexpr Duration kPaceSlack = us(10);

  static Result<std::unique_ptr<EthdevPort>> open(Node* owner, uint16_t index, const EthdevParams& params,
                                                  dpdk::PacketPool& pool);
  ~EthdevPort() override;

  // Takes frames for the device. While the link is down the port takes
  // them and drops them (counted in tx_drop_link_down), as a NIC does.
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n, Time now) override;
  bool tx_ready(Time now) override;
  uint64_t rate_bps() const override { return params_.rate_bps; }
  uint32_t mtu() const override { return params_.mtu; }
  bool link_up() const override { return link_up_; }
  // rte_eth_stats (imissed, ierrors, oerrors, rx_nombuf) and the PMD's
  // nonzero xstats, as device.NAME and device.xstats.NAME.
  void report_device(CounterSink& sink, std::string_view scope) const override;

  // Polled by the engine once per iteration: receives one burst and hands
  // it to the owner, retries a refused transmit, refreshes the link status.
  // Returns the number of frames received.
  uint16_t poll(Time now) {
    const uint16_t n = poll_rx(now);
    if (tx_blocked_ && now >= tx_resume_at_) retry_tx(now);
    if (link_event_.load(std::memory_order_relaxed) || now >= next_link_poll_) refresh_link(now);
    return n;
  }
  uint16_t poll_rx(Time now);
  bool tx_blocked() const { return tx_blocked_; }
  // When a port waiting for its line rate takes frames again (kTimeNever
  // if it is not waiting for time: it is free, or the device is full).
  Time tx_resume_time() const { return tx_blocked_ && tx_resume_at_ != Time{0} ? tx_resume_at_ : kTimeNever; }
  void retry_tx(Time now);
  // Reads the link status from the device now; returns true if it changed.
  bool refresh_link(Time now);
  // Called from the EAL interrupt thread on a link-change event.
  void note_link_event() { link_event_.store(true, std::memory_order_relaxed); }

  uint16_t port_id() const { return port_id_; }
  const EthdevParams& params() const { return params_; }
  void set_rx_tap(Tap t) { rx_tap_ = t; }
  void set_tx_tap(Tap t) { tx_tap_ = t; }

 private:
  EthdevPort(Node* owner, uint16_t index, std::string name, uint16_t port_id, const EthdevParams& p, bool vdev,
             dpdk::PacketPool& pool)
      : Port(owner, index, std::move(name)), port_id_(port_id), params_(p), created_vdev_(vdev), pool_(pool) {}
  void read_link();
  uint16_t adopt(rte_mbuf** burst, uint16_t n);
  uint16_t tx_slow(rte_mbuf** pkts, uint16_t n, Time now);
  // How many of `pkts` the line rate lets go at `now`; blocks the port
  // until the next slot if none.
  uint16_t paced(rte_mbuf** pkts, uint16_t n, Time now);

  uint16_t port_id_;
  EthdevParams params_;
  bool created_vdev_;
  dpdk::PacketPool& pool_;
  // The receive pool of a device that cannot take the engine's (net_af_xdp:
  // see EthdevPort::open); its frames are copied into the engine's pool.
  rte_mempool* rx_pool_ = nullptr;
  bool started_ = false;
  bool tx_blocked_ = false;
  Time tx_resume_at_{0};  // while tx_blocked_: when to retry (0: at once, the device was full)
  Time wire_free_at_{0};  // when the frames sent so far have left at the line rate
  bool link_up_ = false;
  bool lsc_callback_ = false;
  uint32_t max_frame_ = 0;  // longest frame (no FCS) the port sends
  Time next_link_poll_{0};
  std::atomic<bool> link_event_{false};  // set by the EAL interrupt thread
  Tap rx_tap_, tx_tap_;
};

}  // namespace rocemu
