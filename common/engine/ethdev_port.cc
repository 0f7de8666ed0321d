#include "common/engine/ethdev_port.h"

#include <fcntl.h>
#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_interrupts.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "common/engine/dpdk.h"
#include "common/engine/node.h"
#include "common/log.h"

namespace rocemu {
namespace {

// Ethernet header + one VLAN tag on top of the MTU; frames carry no FCS.
constexpr uint32_t kL2Overhead = 18;

// A frame's bytes on the wire: padded to the minimum, plus preamble, FCS
// and inter-frame gap.
uint64_t wire_len(uint32_t frame_len) { return std::max(frame_len, kEthMinFrame) + kEthWireOverhead; }

std::string err(const std::string& dev, const std::string& what, int rc) {
  return "port " + dev + ": " + what + ": " + rte_strerror(rc < 0 ? -rc : rc);
}

// Runs the calling thread in another network namespace for its lifetime.
class NetnsScope {
 public:
  NetnsScope() = default;
  NetnsScope(const NetnsScope&) = delete;
  NetnsScope& operator=(const NetnsScope&) = delete;
  ~NetnsScope() {
    if (saved_ >= 0) {
      if (setns(saved_, CLONE_NEWNET) != 0)
        logger("engine")->error("cannot return to the original network namespace: {}", std::strerror(errno));
      close(saved_);
    }
  }
  Status enter(const std::string& ns) {
    if (ns.empty()) return {};
    const std::string path = ns.find('/') == std::string::npos ? "/var/run/netns/" + ns : ns;
    const int target = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (target < 0) return Status::error("network namespace " + path + ": " + std::strerror(errno));
    saved_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved_ < 0 || setns(target, CLONE_NEWNET) != 0) {
      const int e = errno;
      close(target);
      if (saved_ >= 0) close(saved_);
      saved_ = -1;
      return Status::error("cannot enter network namespace " + path + ": " + std::strerror(e) +
                           (e == EPERM ? " (needs CAP_SYS_ADMIN)" : ""));
    }
    close(target);
    return {};
  }

 private:
  int saved_ = -1;
};

// The arguments a vdev is created with: those given, plus the defaults an
// external port wants where the PMD's own differ. net_af_packet bypasses
// the kernel's qdisc layer by default, so what the engine sends never
// passes the interface's packet taps: tcpdump on the interface would see
// one direction only. An external port is there to talk to the world, and
// seeing its traffic with host tools matters more than the few percent the
// bypass saves; `qdisc_bypass=1` asks for it.
std::string vdev_args(const std::string& name, std::string args) {
  if (name.starts_with("net_af_packet") && args.find("qdisc_bypass=") == std::string::npos)
    args += std::string(args.empty() ? "" : ",") + "qdisc_bypass=0";
  return args;
}

int on_lsc(uint16_t /*port_id*/, rte_eth_event_type /*event*/, void* ctx, void* /*ret_param*/) {
  static_cast<EthdevPort*>(ctx)->note_link_event();
  return 0;
}

}  // namespace

// DPDK 22.11's net_af_xdp
// PMD makes each mempool object a UMEM chunk (its whole size, header and
// trailer included) with a frame headroom of the mempool header, the mbuf,
// its private area and RTE_PKTMBUF_HEADROOM (the data starts where the
// mbuf's would); the kernel keeps XDP_PACKET_HEADROOM (256) more in front
// of every frame it writes. With 3584 bytes of data room: 3904 - (64 + 128
// + 0 + 128) - 256 = 3328. A longer frame the kernel drops (the socket's
// rx_dropped, which the PMD reports as imissed).
uint32_t af_xdp_rx_room(const rte_mempool& mp) {
  constexpr uint32_t kXdpPacketHeadroom = 256;
  const uint32_t chunk = rte_mempool_calc_obj_size(mp.elt_size, mp.flags, nullptr);
  const uint32_t headroom = mp.header_size + uint32_t(sizeof(rte_mbuf)) +
                            rte_pktmbuf_priv_size(const_cast<rte_mempool*>(&mp)) + RTE_PKTMBUF_HEADROOM;
  return chunk > headroom + kXdpPacketHeadroom ? chunk - headroom - kXdpPacketHeadroom : 0;
}

Result<std::unique_ptr<EthdevPort>> EthdevPort::open(Node* owner, uint16_t index, const EthdevParams& p,
                                                     dpdk::PacketPool& pool) {
  const std::string& spec = p.device;
  const size_t comma = spec.find(',');
  const std::string name = spec.substr(0, comma);
  const std::string given = comma == std::string::npos ? "" : spec.substr(comma + 1);
  const std::string args = vdev_args(name, given);
  if (name.empty()) return Status::error("port: empty device name");
  if (p.rate_bps == 0) return Status::error("port " + spec + ": the line rate must be above 0");
  // The whole life of a namespaced device happens inside its namespace:
  // af_packet also issues interface ioctls when started and configured.
  NetnsScope ns;
  if (Status s = ns.enter(p.netns); !s.ok()) return Status::error("port " + spec + ": " + s.message());

  uint16_t port_id = 0;
  bool created = false;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    if (const int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()); rc != 0)
      return Status::error(err(spec, "cannot create the device", rc));
    created = true;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
      rte_eal_hotplug_remove("vdev", name.c_str());
      return Status::error("port " + spec + ": created, but no ethdev appeared");
    }
  } else if (!given.empty()) {
    // Made earlier (e.g. by an EAL --vdev argument): its own arguments hold.
    logger("engine")->warn("port {}: {} exists already; the arguments given here are ignored", spec, name);
  }
  // From here on the port's destructor undoes whatever was done.
  std::unique_ptr<EthdevPort> port(new EthdevPort(
      owner, index, owner->name() + ":" + std::to_string(index) + "(" + name + ")", port_id, p, created, pool));
  auto fail = [&](const std::string& what, int rc) { return Status::error(err(spec, what, rc)); };

  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port_id, &info); rc != 0) return fail("device info", rc);
  // net_af_xdp (DPDK 22.11) registers the receive queue's mempool with the
  // kernel as the socket's UMEM, one chunk per mbuf; the kernel refuses a
  // chunk larger than a page unless the UMEM is in hugepages (Linux 6.6+),
  // and the engine's buffers (4352-byte frames) are larger: "Failed to
  // create umem". Such a port receives into a pool of its own whose
  // buffers fit a 4 KiB page (frames up to af_xdp_rx_room() bytes), copied into
  // the engine's pool as they arrive (adopt); frames it sends are copied
  // into its UMEM by the PMD.
  rte_mempool* rx_pool = pool.mempool();
  uint32_t room = rte_pktmbuf_data_room_size(rx_pool) - RTE_PKTMBUF_HEADROOM;
  if (name.starts_with("net_af_xdp")) {
    // 3584 bytes of data room: 3904-byte objects (with the mempool header
    // and the mbuf), under a page.
    constexpr uint16_t kAfXdpDataRoom = 3584;
    const std::string pool_name = "xdp-rx-" + std::to_string(port_id);
    port->rx_pool_ = rte_pktmbuf_pool_create(pool_name.c_str(), 8192, 256, 0,
                                             RTE_PKTMBUF_HEADROOM + kAfXdpDataRoom, SOCKET_ID_ANY);
    if (port->rx_pool_ == nullptr) return fail("its receive pool (net_af_xdp)", -rte_errno);
    rx_pool = port->rx_pool_;
    room = af_xdp_rx_room(*rx_pool);
  } else if (Status s = pool.populate_all(); !s.ok()) {
    // The PMD takes receive buffers from the engine's pool itself, where a
    // pool that makes its buffers as needed cannot grow: all made now.
    return Status::error("port " + spec + ": " + s.message());
  }
  // The port carries frames up to its MTU whatever the device reports
  // (memif and af_packet claim 1518-byte frames and carry more); the
  // device is configured with the largest MTU it accepts.
  port->params_.mtu = std::min<uint32_t>(p.mtu, room - kL2Overhead);
  if (port->params_.mtu < p.mtu)
    logger("engine")->warn("port {}: MTU {} is more than a{} packet buffer holds; using {}", spec, p.mtu,
                           port->rx_pool_ != nullptr ? " net_af_xdp" : "", port->params_.mtu);
  port->max_frame_ = port->params_.mtu + kL2Overhead;
  const uint32_t overhead = info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
                                ? info.max_rx_pktlen - info.max_mtu
                                : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  uint32_t dev_mtu = std::min<uint32_t>(port->params_.mtu, info.max_mtu);
  if (info.max_rx_pktlen > overhead) dev_mtu = std::min(dev_mtu, info.max_rx_pktlen - overhead);
  dev_mtu = std::max<uint32_t>(dev_mtu, info.min_mtu);

  rte_eth_conf conf{};
  conf.rxmode.mtu = dev_mtu;
  // A device that would split a frame over buffers must be allowed to;
  // poll_rx joins the pieces again.
  if (dev_mtu + overhead > room && (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER))
    conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
  if (*info.dev_flags & RTE_ETH_DEV_INTR_LSC) conf.intr_conf.lsc = 1;
  if (int rc = rte_eth_dev_configure(port_id, 1, 1, &conf); rc != 0) return fail("configure", rc);
  uint16_t nb_rx = p.rx_descriptors, nb_tx = p.tx_descriptors;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nb_rx, &nb_tx); rc != 0) return fail("descriptors", rc);
  if (int rc = rte_eth_rx_queue_setup(port_id, 0, nb_rx, SOCKET_ID_ANY, nullptr, rx_pool); rc != 0)
    return fail("rx queue", rc);
  if (int rc = rte_eth_tx_queue_setup(port_id, 0, nb_tx, SOCKET_ID_ANY, nullptr); rc != 0)
    return fail("tx queue", rc);
  if (conf.intr_conf.lsc &&
      rte_eth_dev_callback_register(port_id, RTE_ETH_EVENT_INTR_LSC, on_lsc, port.get()) == 0)
    port->lsc_callback_ = true;
  if (int rc = rte_eth_dev_start(port_id); rc != 0) return fail("start", rc);
  port->started_ = true;
  rte_eth_promiscuous_enable(port_id);  // not every PMD has it
  port->read_link();
  return port;
}

namespace {

// What closing a port takes; runs on the EAL interrupt thread.
struct Teardown {
  uint16_t port_id;
  bool lsc_callback, started, created;
  EthdevPort* port;
  std::string vdev;
  rte_mempool* rx_pool;
  std::atomic<bool> done{false};

  void run() {
    if (lsc_callback) rte_eth_dev_callback_unregister(port_id, RTE_ETH_EVENT_INTR_LSC, on_lsc, port);
    if (started) rte_eth_dev_stop(port_id);
    // Removing the vdev closes the port.
    if (created && rte_eal_hotplug_remove("vdev", vdev.c_str()) != 0) rte_eth_dev_close(port_id);
    rte_mempool_free(rx_pool);  // the device's own (nullptr: none), after the device
    done.store(true, std::memory_order_release);
  }
  static void on_alarm(void* arg) { static_cast<Teardown*>(arg)->run(); }
};

}  // namespace

EthdevPort::~EthdevPort() {
  Teardown t{.port_id = port_id_,
             .lsc_callback = lsc_callback_,
             .started = started_,
             .created = created_vdev_,
             .port = this,
             .vdev = params_.device.substr(0, params_.device.find(',')),
             .rx_pool = rx_pool_};
  // Some PMDs (memif) run their control channel on the EAL interrupt
  // thread: a peer's disconnect is handled there, and would race with a
  // close from this thread (memif_disconnect frees what the other is
  // using). Closing on the interrupt thread serialises the two. A port in
  // another network namespace closes here, inside it.
  if (params_.netns.empty() && !rte_thread_is_intr() && rte_eal_alarm_set(1, &Teardown::on_alarm, &t) == 0) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!t.done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    // Not run yet (interrupt thread stuck): cancel and close here. If it
    // is running, cancel waits for it to finish.
    if (!t.done.load(std::memory_order_acquire) && rte_eal_alarm_cancel(&Teardown::on_alarm, &t) > 0) t.run();
    return;
  }
  NetnsScope ns;
  if (Status s = ns.enter(params_.netns); !s.ok()) logger("engine")->error("port {}: {}", name_, s.message());
  t.run();
}

uint16_t EthdevPort::tx_burst(rte_mbuf** pkts, uint16_t n, Time now) {
  if (!link_up_ || tx_tap_.capture != nullptr) return tx_slow(pkts, n, now);
  uint64_t bytes = 0;
  uint32_t longest = 0;
  for (uint16_t i = 0; i < n; i++) {
    const uint32_t len = rte_pktmbuf_pkt_len(pkts[i]);
    bytes += len;
    longest = std::max(longest, len);
  }
  if (longest > max_frame_) return tx_slow(pkts, n, now);
  const uint16_t go = paced(pkts, n, now);
  if (go == 0) return 0;
  uint64_t wire = 0;  // bytes on the wire, with preamble, FCS and gap
  for (uint16_t i = 0; i < go; i++) {
    wire += wire_len(rte_pktmbuf_pkt_len(pkts[i]));
    dpdk::seal(pkts[i]);  // the bytes leave the engine
  }
  for (uint16_t i = go; i < n; i++) bytes -= rte_pktmbuf_pkt_len(pkts[i]);
  // After a successful burst the mbufs belong to the driver: what was not
  // taken is still ours to count.
  const uint16_t sent = rte_eth_tx_burst(port_id_, 0, pkts, go);
  for (uint16_t i = sent; i < go; i++) {
    bytes -= rte_pktmbuf_pkt_len(pkts[i]);
    wire -= wire_len(rte_pktmbuf_pkt_len(pkts[i]));
  }
  wire_free_at_ = std::max(wire_free_at_, now) + serialization_time(wire, params_.rate_bps);
  counters_[PortCounters::tx_packets] += sent;
  counters_[PortCounters::tx_bytes] += bytes;
  if (sent < go) {
    tx_blocked_ = true;
    tx_resume_at_ = Time{0};
  }
  return sent;
}

uint16_t EthdevPort::paced(rte_mbuf** pkts, uint16_t n, Time now) {
  // Frames go while the line, at its rate, is free within kPaceSlack of
  // now; wire_free_at_ moves on by each frame's time on the wire.
  Time free_at = std::max(wire_free_at_, now);
  uint16_t go = 0;
  while (go < n && free_at <= now + kPaceSlack) {
    free_at += serialization_time(wire_len(rte_pktmbuf_pkt_len(pkts[go])), params_.rate_bps);
    go++;
  }
  // What is not taken waits for the engine's retry_tx() at its slot.
  if (go < n) {
    tx_blocked_ = true;
    tx_resume_at_ = free_at - kPaceSlack;
  }
  return go;
}

// Link down, an oversize frame or a capture: one frame at a time.
uint16_t EthdevPort::tx_slow(rte_mbuf** pkts, uint16_t n, Time now) {
  if (!link_up_) {
    counters_[PortCounters::tx_drop_link_down] += n;
    dpdk::free_burst(pkts, n);
    return n;
  }
  alignas(64) uint8_t copy[dpdk::PacketPool::kMaxFrame];
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = pkts[i];
    const uint32_t len = rte_pktmbuf_pkt_len(m);
    if (len > max_frame_) {
      counters_[PortCounters::tx_drop_oversize]++;
      rte_pktmbuf_free(m);
      continue;
    }
    if (paced(&pkts[i], 1, now) == 0) return i;
    // Only what the device takes is recorded, and it may free the mbuf
    // at once: keep a copy of the frame until then.
    dpdk::seal(m);  // the bytes leave the engine
    const bool tap = tx_tap_.capture != nullptr;
    if (tap) {
      const void* src = rte_pktmbuf_read(m, 0, len, copy);
      if (src != copy) std::memcpy(copy, src, len);
    }
    if (rte_eth_tx_burst(port_id_, 0, &pkts[i], 1) == 0) {
      tx_blocked_ = true;
      tx_resume_at_ = Time{0};
      return i;
    }
    const Time departs = std::max(wire_free_at_, now);  // when its first bit leaves, at the line rate
    wire_free_at_ = departs + serialization_time(wire_len(len), params_.rate_bps);
    if (tap) tx_tap_.record(departs, {copy, len});
    counters_[PortCounters::tx_packets]++;
    counters_[PortCounters::tx_bytes] += len;
  }
  return n;
}

bool EthdevPort::tx_ready(Time now) {
  // The line rate and the device ring decide; a refusal sets tx_blocked_
  // and the engine polls retry_tx() (at once for a full ring, at the next
  // slot for the line rate).
  if (tx_blocked_) return false;
  if (std::max(wire_free_at_, now) > now + kPaceSlack) {
    tx_blocked_ = true;
    tx_resume_at_ = wire_free_at_ - kPaceSlack;
    return false;
  }
  return true;
}

void EthdevPort::retry_tx(Time now) {
  tx_blocked_ = false;
  tx_resume_at_ = Time{0};
  owner_->on_tx_ready(index_, now);
}

void EthdevPort::report_device(CounterSink& sink, std::string_view scope) const {
  rte_eth_stats st{};
  if (rte_eth_stats_get(port_id_, &st) == 0) {
    sink.counter(scope, "device.imissed", st.imissed);
    sink.counter(scope, "device.ierrors", st.ierrors);
    sink.counter(scope, "device.oerrors", st.oerrors);
    sink.counter(scope, "device.rx_nombuf", st.rx_nombuf);
  }
  const int n = rte_eth_xstats_get_names(port_id_, nullptr, 0);
  if (n <= 0) return;
  std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
  std::vector<rte_eth_xstat> values(static_cast<size_t>(n));
  if (rte_eth_xstats_get_names(port_id_, names.data(), unsigned(n)) != n ||
      rte_eth_xstats_get(port_id_, values.data(), unsigned(n)) != n)
    return;
  for (const rte_eth_xstat& x : values)
    if (x.value != 0 && x.id < uint64_t(n))
      sink.counter(scope, std::string("device.xstats.") + names[size_t(x.id)].name, x.value);
}

void EthdevPort::read_link() {
  rte_eth_link link{};
  link_up_ = rte_eth_link_get_nowait(port_id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

bool EthdevPort::refresh_link(Time now) {
  link_event_.store(false, std::memory_order_relaxed);
  next_link_poll_ = now + params_.link_poll_interval;
  const bool was_up = link_up_;
  read_link();
  if (link_up_ == was_up) return false;
  logger("engine")->info("port {}: link {}", name_, link_up_ ? "up" : "down");
  return true;
}

uint16_t EthdevPort::poll_rx(Time now) {
  rte_mbuf* burst[kRxBurst];
  const uint16_t n = rte_eth_rx_burst(port_id_, 0, burst, kRxBurst);
  if (n == 0) return 0;
  rte_mempool* const own = pool_.mempool();
  uint64_t bytes = 0;
  bool odd = false;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = burst[i];
    bytes += rte_pktmbuf_pkt_len(m);
    if (m->nb_segs == 1 && m->pool == own) [[likely]] {
      dpdk::PktMeta& md = dpdk::meta(m);
      md = dpdk::PktMeta{};
      md.in_port = index_;
    } else {
      odd = true;
    }
  }
  uint16_t kept = n;
  if (odd) [[unlikely]] {
    kept = adopt(burst, n);
    bytes = 0;
    for (uint16_t i = 0; i < kept; i++) bytes += rte_pktmbuf_pkt_len(burst[i]);
  }
  if (rx_tap_.capture != nullptr)
    for (uint16_t i = 0; i < kept; i++) rx_tap_.record(now, dpdk::bytes(burst[i]));
  counters_[PortCounters::rx_packets] += kept;
  counters_[PortCounters::rx_bytes] += bytes;
  if (kept > 0) owner_->on_rx(index_, burst, kept, now);
  return n;
}

// Nodes work on single-segment frames from the engine's pool, whose
// private area holds the packet metadata. A chained frame is joined into
// one buffer (in place when its first buffer has room), a frame from
// another pool (a ring fed by another program, a PMD's own pool) is copied,
// and what no buffer holds is dropped. Returns how many frames are left,
// in order.
uint16_t EthdevPort::adopt(rte_mbuf** burst, uint16_t n) {
  rte_mempool* const own = pool_.mempool();
  uint16_t kept = 0;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = burst[i];
    if (m->pool == own && (m->nb_segs == 1 || rte_pktmbuf_linearize(m) == 0)) {
      dpdk::PktMeta& md = dpdk::meta(m);
      md = dpdk::PktMeta{};
      md.in_port = index_;
      burst[kept++] = m;
      continue;
    }
    const uint32_t len = rte_pktmbuf_pkt_len(m);
    if (len > dpdk::PacketPool::kMaxFrame) {
      counters_[PortCounters::rx_drop_multisegment]++;
      rte_pktmbuf_free(m);
      continue;
    }
    rte_mbuf* flat = pool_.alloc();
    if (flat == nullptr) {
      counters_[PortCounters::rx_no_mbuf]++;
      rte_pktmbuf_free(m);
      continue;
    }
    auto* dst = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(flat, uint16_t(len)));
    const void* src = rte_pktmbuf_read(m, 0, len, dst);
    if (src != dst) std::memcpy(dst, src, len);
    dpdk::meta(flat).in_port = index_;
    rte_pktmbuf_free(m);
    burst[kept++] = flat;
  }
  return kept;
}

}  // namespace rocemu
