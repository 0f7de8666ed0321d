// Real-time throughput of the switch's full QoS pipeline on one engine
// thread, fed in-process. Two switch ports are DPDK ethdevs over rte_rings
// (the net_ring PMD, rte_eth_from_rings); a feeder node in the same engine
// takes what each port transmits, restores the TTL the switch decremented
// and hands it back to that port's receive ring, so a fixed set of
// RoCEv2 packets circulates with no allocation and no copy. Every pass is
// the whole pipeline: parse, trust, switch priority, PG accounting, LPM
// route with MAC rewrite and TTL, shared-buffer admission, ECN, TC queue,
// DWRR/strict scheduler with PFC state, transmit.
//
//   rocemu_switch_bench switch|forward [--frame BYTES] [--seconds S] [--warmup S] [--inflight N]
//
// `forward` runs the engine's plain Forwarder node on the same harness
// (the engine's own cost). Prints one line:
//   RESULT mode=... frame=... pps=... ns_per_pkt=... cpu=... pps_per_cpu=... cpu_ns_per_pkt=...
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/engine/basic_nodes.h"
#include "common/engine/engine.h"
#include "common/log.h"
#include "common/wire/build.h"
#include "switch/switch.h"
#include "switch/trim.h"

using namespace rocemu;

namespace {

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// Moves frames from each port's transmit ring back to its receive ring,
// restoring the TTL, and takes the measurements at given engine times.
class Feeder final : public Node {
 public:
  Feeder(std::vector<rte_ring*> tx, std::vector<rte_ring*> rx) : Node("feeder", 0), tx_(std::move(tx)), rx_(std::move(rx)) {}
  std::string_view kind() const override { return "feeder"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) override { dpdk::free_burst(pkts, n); }
  bool poll(Time now) override {
    bool busy = false;
    for (size_t i = 0; i < tx_.size(); i++) {
      rte_mbuf* burst[64];
      const unsigned n = rte_ring_dequeue_burst(tx_[i], reinterpret_cast<void**>(burst), 64, nullptr);
      if (n == 0) continue;
      busy = true;
      moved_ += n;
      for (unsigned k = 0; k < n; k++) {
        uint8_t* d = rte_pktmbuf_mtod(burst[k], uint8_t*);
        if (d[12] != 0x08 || d[13] != 0x00) continue;
        auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(d + 14);
        const uint16_t old_word = uint16_t(ip.ttl << 8 | ip.protocol);
        ip.ttl = 64;
        sw::ipv4_checksum_update(ip, old_word, uint16_t(ip.ttl << 8 | ip.protocol));
      }
      const unsigned put = rte_ring_enqueue_burst(rx_[i], reinterpret_cast<void**>(burst), n, nullptr);
      for (unsigned k = put; k < n; k++) rte_pktmbuf_free(burst[k]);
    }
    if (on_tick) on_tick(now);
    return busy;
  }
  uint64_t moved() const { return moved_; }
  std::function<void(Time)> on_tick;

 private:
  std::vector<rte_ring*> tx_, rx_;
  uint64_t moved_ = 0;
};

// A RoCEv2 frame of about `frame` bytes to `dst` (10.0.p.1), DSCP 26, ECT(0).
std::vector<uint8_t> make_frame(uint32_t frame, int port) {
  wire::PathHeaders path;
  path.src_mac = wire::MacAddr{{0x02, 0, 0, 0, 0x10, uint8_t(port)}};
  path.dst_mac = wire::MacAddr{{0x02, 0x53, 0x57, 0, 0, uint8_t(port)}};
  path.src_ip = wire::IpAddr::v4(0x0a000a01u);
  path.dst_ip = wire::IpAddr::v4(0x0a000001u | uint32_t(port) << 8);
  path.dscp = 26;
  path.ecn = wire::Ecn::kEct0;
  wire::RoceFields rf;
  rf.dest_qp = 0x11;
  // Headers are 58 bytes with SEND_ONLY; small frames are padded to 60.
  const uint32_t headers = wire::roce_frame_len(path, wire::op::kSendOnly, 0);
  const uint32_t payload = frame > headers ? ((frame - headers) & ~3u) : 0;
  rf.opcode = payload == 0 ? wire::op::kSendOnly : wire::op::kWriteMiddle;
  std::vector<uint8_t> f(wire::roce_frame_len(path, rf.opcode, payload) + 8, 0);
  std::vector<uint8_t> data(payload, 0x5a);
  const uint32_t len = wire::encode_roce(f, path, rf, data);
  f.resize(std::max<uint32_t>(len, 60));
  return f;
}

struct Args {
  std::string mode = "switch";
  uint32_t frame = 64;
  double seconds = 3, warmup = 0.5;
  uint32_t inflight = 1024;  // per port
};

int run(const Args& a) {
  EngineOptions opts;
  opts.mode = TimeMode::kReal;
  opts.mbufs = 16384;
  auto created = Engine::create(opts);
  if (!created.ok()) {
    std::fprintf(stderr, "%s\n", created.status().message().c_str());
    return 1;
  }
  auto engine = std::move(created.value());
  constexpr int kPorts = 2;
  std::vector<rte_ring*> rx(kPorts), tx(kPorts);
  std::vector<std::string> devs;
  for (int p = 0; p < kPorts; p++) {
    const std::string n = "swb" + std::to_string(p);
    rx[p] = rte_ring_create((n + "rx").c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    tx[p] = rte_ring_create((n + "tx").c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    const int id = rte_eth_from_rings(n.c_str(), &rx[p], 1, &tx[p], 1, SOCKET_ID_ANY);
    char dev[RTE_ETH_NAME_MAX_LEN];
    if (rx[p] == nullptr || tx[p] == nullptr || id < 0 || rte_eth_dev_get_name_by_port(uint16_t(id), dev) != 0) {
      std::fprintf(stderr, "cannot create ring port %s\n", n.c_str());
      return 1;
    }
    devs.push_back(dev);
  }

  Node* dut = nullptr;
  sw::Switch* sw = nullptr;
  Forwarder* fw = nullptr;
  if (a.mode == "switch") {
    sw::SwitchConfig cfg = sw::SwitchConfig::with_ports(kPorts);
    cfg.qos = sw::qos_roce_profile(sw::RoceMode::kLossless);
    for (int p = 0; p < kPorts; p++) {
      cfg.interfaces[size_t(p)].address = sw::IpPrefix::parse("10.0." + std::to_string(p) + ".254/24");
      cfg.neighbors.push_back(sw::Neighbor{wire::IpAddr::v4(0x0a000001u | uint32_t(p) << 8),
                                           wire::MacAddr{{0x02, 0, 0, 0, 0, uint8_t(p)}}, uint16_t(p)});
    }
    sw = &engine->add<sw::Switch>("sw", cfg);
    dut = sw;
  } else {
    fw = &engine->add<Forwarder>("fw");
    dut = fw;
  }
  auto& feeder = engine->add<Feeder>(tx, rx);
  for (int p = 0; p < kPorts; p++) {
    EthdevParams params;
    params.device = devs[size_t(p)];
    params.mtu = 4200;
    auto r = engine->attach_ethdev(*dut, uint16_t(p), params);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().message().c_str());
      return 1;
    }
  }
  // The packets that circulate.
  uint32_t frame_len = 0;
  for (int p = 0; p < kPorts; p++) {
    const auto f = make_frame(a.frame, p);
    frame_len = uint32_t(f.size());
    for (uint32_t i = 0; i < a.inflight; i++) {
      rte_mbuf* m = engine->pool().alloc_copy(f);
      if (m == nullptr || rte_ring_enqueue(rx[size_t(p)], m) != 0) {
        std::fprintf(stderr, "cannot fill the rings\n");
        return 1;
      }
    }
  }

  std::atomic<bool> stop{false};
  const Time t_warm = engine->now() + Duration(int64_t(a.warmup * 1e12));
  const Time t_end = t_warm + Duration(int64_t(a.seconds * 1e12));
  Time at_warm{0}, at_end{0};
  uint64_t n_warm = 0, n_end = 0;
  double cpu_warm = 0, cpu_end = 0;
  feeder.on_tick = [&](Time now) {
    if (at_warm == Time{0} && now >= t_warm) {
      at_warm = now;
      n_warm = feeder.moved();
      cpu_warm = thread_cpu_seconds();
    } else if (at_end == Time{0} && now >= t_end) {
      at_end = now;
      n_end = feeder.moved();
      cpu_end = thread_cpu_seconds();
      stop = true;
    }
  };
  engine->run(stop);

  const double secs = to_seconds(at_end - at_warm);
  const double pkts = double(n_end - n_warm);
  const double cpu = cpu_end - cpu_warm;
  uint64_t drops = 0;
  if (sw != nullptr) {
    for (uint16_t p = 0; p < kPorts; p++) {
      const auto& c = sw->counters(p);
      for (size_t i = 0; i < sw::PortCounters::kCount; i++)
        if (sw::PortCounters::kNames[i].starts_with("discards.") || sw::PortCounters::kNames[i].ends_with("discard"))
          drops += c.v[i];
    }
  }
  std::printf(
      "RESULT mode=%s frame=%u seconds=%.3f pps=%.0f ns_per_pkt=%.2f cpu=%.3f pps_per_cpu=%.0f cpu_ns_per_pkt=%.2f "
      "gbps=%.1f drops=%lu\n",
      a.mode.c_str(), frame_len, secs, pkts / secs, secs * 1e9 / pkts, cpu / secs, pkts / cpu, cpu * 1e9 / pkts,
      pkts / secs * frame_len * 8 / 1e9, static_cast<unsigned long>(drops));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; i++) {
    const std::string s = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
    if (s == "switch" || s == "forward") a.mode = s;
    else if (s == "--frame") a.frame = uint32_t(std::atoi(next()));
    else if (s == "--seconds") a.seconds = std::atof(next());
    else if (s == "--warmup") a.warmup = std::atof(next());
    else if (s == "--inflight") a.inflight = uint32_t(std::atoi(next()));
    else {
      std::fprintf(stderr, "usage: %s switch|forward [--frame B] [--seconds S] [--warmup S] [--inflight N]\n", argv[0]);
      return 2;
    }
  }
  set_log_level(spdlog::level::warn);
  if (Status s = dpdk::init_eal({.hugepages = false, .memory_mb = 1024, .extra_args = {}}); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  return run(a);
}
