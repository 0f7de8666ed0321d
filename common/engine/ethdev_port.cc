#include "common/engine/ethdev_port.h"

#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>

#include "common/engine/dpdk.h"
#include "common/engine/node.h"

namespace rocemu {
namespace {

std::string err(const std::string& dev, const std::string& what, int rc) {
  return "port " + dev + ": " + what + ": " + rte_strerror(rc < 0 ? -rc : rc);
}

}  // namespace

Result<std::unique_ptr<EthdevPort>> EthdevPort::open(Node* owner, uint16_t index, const EthdevParams& p,
                                                     dpdk::PacketPool& pool) {
  const std::string spec = p.device;
  const std::string name = spec.substr(0, spec.find(','));
  const std::string args = spec.find(',') == std::string::npos ? "" : spec.substr(spec.find(',') + 1);
  uint16_t port_id = 0;
  bool created = false;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    if (const int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()); rc != 0)
      return Status::error(err(spec, "cannot create the device", rc));
    created = true;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0)
      return Status::error("port " + spec + ": created, but no ethdev appeared");
  }
  auto fail = [&](const std::string& what, int rc) -> Status {
    if (created) rte_eal_hotplug_remove("vdev", name.c_str());
    return Status::error(err(spec, what, rc));
  };
  rte_eth_conf conf{};
  if (int rc = rte_eth_dev_configure(port_id, 1, 1, &conf); rc != 0) return fail("configure", rc);
  uint16_t nb_rx = p.rx_descriptors, nb_tx = p.tx_descriptors;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nb_rx, &nb_tx); rc != 0) return fail("descriptors", rc);
  if (int rc = rte_eth_rx_queue_setup(port_id, 0, nb_rx, SOCKET_ID_ANY, nullptr, pool.mempool()); rc != 0)
    return fail("rx queue", rc);
  if (int rc = rte_eth_tx_queue_setup(port_id, 0, nb_tx, SOCKET_ID_ANY, nullptr); rc != 0)
    return fail("tx queue", rc);
  rte_eth_dev_set_mtu(port_id, uint16_t(p.mtu));  // not every PMD supports it
  if (int rc = rte_eth_dev_start(port_id); rc != 0) return fail("start", rc);
  rte_eth_promiscuous_enable(port_id);
  return std::unique_ptr<EthdevPort>(
      new EthdevPort(owner, index, owner->name() + ":" + std::to_string(index) + "(" + name + ")", port_id, p,
                     created));
}

EthdevPort::~EthdevPort() {
  rte_eth_dev_stop(port_id_);
  rte_eth_dev_close(port_id_);
  if (created_vdev_) {
    const std::string name = params_.device.substr(0, params_.device.find(','));
    rte_eal_hotplug_remove("vdev", name.c_str());
  }
}

uint16_t EthdevPort::tx_burst(rte_mbuf** pkts, uint16_t n, Time now) {
  // Record and count before the device takes them: after a successful
  // burst the mbufs belong to the driver.
  uint16_t sent = 0;
  if (tx_tap_.capture == nullptr) {
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; i++) bytes += rte_pktmbuf_pkt_len(pkts[i]);
    sent = rte_eth_tx_burst(port_id_, 0, pkts, n);
    for (uint16_t i = sent; i < n; i++) bytes -= rte_pktmbuf_pkt_len(pkts[i]);
    counters_[PortCounters::tx_bytes] += bytes;
  } else {
    for (; sent < n; sent++) {
      tx_tap_.record(now, dpdk::bytes(pkts[sent]));
      const uint32_t len = rte_pktmbuf_pkt_len(pkts[sent]);
      if (rte_eth_tx_burst(port_id_, 0, &pkts[sent], 1) == 0) break;
      counters_[PortCounters::tx_bytes] += len;
    }
  }
  counters_[PortCounters::tx_packets] += sent;
  if (sent < n) tx_blocked_ = true;
  return sent;
}

bool EthdevPort::tx_ready(Time /*now*/) {
  // The device ring decides; a refused burst sets tx_blocked_ and the
  // engine polls retry_tx().
  return !tx_blocked_;
}

void EthdevPort::retry_tx(Time now) {
  tx_blocked_ = false;
  owner_->on_tx_ready(index_, now);
}

bool EthdevPort::link_up() const {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port_id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

uint16_t EthdevPort::poll_rx(Time now) {
  constexpr uint16_t kBurst = 32;
  rte_mbuf* burst[kBurst];
  const uint16_t n = rte_eth_rx_burst(port_id_, 0, burst, kBurst);
  if (n == 0) return 0;
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = burst[i];
    if (m->nb_segs != 1) {  // nodes work on single-segment frames
      counters_[PortCounters::rx_drop_multisegment]++;
      rte_pktmbuf_free(m);
      continue;
    }
    dpdk::meta(m) = dpdk::PktMeta{};
    counters_[PortCounters::rx_bytes] += rte_pktmbuf_pkt_len(m);
    rx_tap_.record(now, dpdk::bytes(m));
    burst[kept++] = m;
  }
  counters_[PortCounters::rx_packets] += kept;
  if (kept > 0) owner_->on_rx(index_, burst, kept, now);
  return n;
}

}  // namespace rocemu
