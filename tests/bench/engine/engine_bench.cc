// Engine benchmark, run by scripts/bench-engine.sh (not a timed test).
//
//   engine_bench virtual --frame 64 --packets 2000000
//       generator -> forwarder -> forwarder -> sink over 100G internal links
//       in virtual time: packets per wall-second, ns per packet, and how
//       much faster than real time the simulation runs.
//   engine_bench forward --seconds 3 [--device net_null]
//       real time: one engine thread forwards between two external ports
//       (a Forwarder node between two net_null vdevs) as testpmd's io mode
//       does.
//   engine_bench idle --seconds 2 [--ports]
//       real time, no traffic: the CPU the engine process uses, with only
//       internal links, or with two idle external ports (net_ring).
//
// Every mode prints one line "RESULT mode=... key=value ...".
#include <rte_bus_vdev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "common/engine/basic_nodes.h"
#include "common/engine/engine.h"

using namespace rocemu;

namespace {

std::vector<uint8_t> frame(uint32_t len) {
  std::vector<uint8_t> f(std::max<uint32_t>(len, 14), 0xab);
  const uint8_t hdr[14] = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5};
  std::memcpy(f.data(), hdr, sizeof hdr);
  return f;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU seconds of the whole process (all threads): exact, and from
// /proc/self/stat (utime + stime, in clock ticks).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
double stat_cpu_seconds() {
  char buf[1024] = {};
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (f == nullptr) return 0;
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // Fields after "(comm)": state is field 3, utime 14, stime 15.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  unsigned long utime = 0, stime = 0;
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2) return 0;
  return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
}

std::unique_ptr<Engine> make_engine(TimeMode mode, uint32_t mbufs) {
  EngineOptions opts;
  opts.mode = mode;
  opts.mbufs = mbufs;
  auto e = Engine::create(opts);
  if (!e.ok()) {
    std::fprintf(stderr, "engine: %s\n", e.status().message().c_str());
    std::exit(1);
  }
  return std::move(e.value());
}

// Calls `tick` every iteration of the real-time loop with the loop's `now`.
class Ticker final : public Node {
 public:
  explicit Ticker(std::function<void(Time)> tick) : Node("ticker", 0), tick_(std::move(tick)) {}
  std::string_view kind() const override { return "ticker"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) override { dpdk::free_burst(pkts, n); }
  bool poll(Time now) override {
    tick_(now);
    return false;
  }

 private:
  std::function<void(Time)> tick_;
};

int run_virtual(uint32_t frame_len, uint64_t packets) {
  auto engine = make_engine(TimeMode::kVirtual, 16384);
  auto& gen = engine->add<Generator>("gen", frame(frame_len), packets);
  auto& fw1 = engine->add<Forwarder>("fw1");
  auto& fw2 = engine->add<Forwarder>("fw2");
  auto& sink = engine->add<Sink>("sink");
  const LinkParams lp{.rate_bps = 100'000'000'000ull, .delay = us(1), .mtu = 9000, .tx_slack = {}};
  if (!engine->connect(gen, 0, fw1, 0, lp).ok() || !engine->connect(fw1, 1, fw2, 0, lp).ok() ||
      !engine->connect(fw2, 1, sink, 0, lp).ok())
    return 1;
  const double t0 = wall_seconds();
  engine->run_to_idle();
  const double wall = wall_seconds() - t0;
  const double sim = to_seconds(engine->now());
  if (sink.packets() != packets) {
    std::fprintf(stderr, "virtual: %lu of %lu packets arrived\n", sink.packets(), packets);
    return 1;
  }
  std::printf(
      "RESULT mode=virtual frame=%u packets=%lu hops=3 wall_s=%.3f sim_s=%.6f pps=%.0f ns_per_pkt=%.1f "
      "hop_pps=%.0f ns_per_hop=%.1f sim_over_wall=%.4f sim_gbps=%.1f events=%lu\n",
      frame_len, packets, wall, sim, double(packets) / wall, wall * 1e9 / double(packets), 3.0 * double(packets) / wall,
      wall * 1e9 / (3.0 * double(packets)), sim / wall, double(sink.bytes()) * 8 / sim / 1e9, engine->iterations());
  return 0;
}

int run_forward(double seconds, double warmup, const std::string& device, uint32_t frame_len) {
  auto engine = make_engine(TimeMode::kReal, 16384);
  auto& fw = engine->add<Forwarder>("fw");
  std::atomic<bool> stop{false};
  const Time t_warm = engine->now() + Duration(int64_t(warmup * 1e12));
  const Time t_end = t_warm + Duration(int64_t(seconds * 1e12));
  uint64_t fw_at_warm = 0;
  Time at_warm{0}, at_end{0};
  uint64_t fw_at_end = 0, it_at_warm = 0, it_at_end = 0;
  double cpu_at_warm = 0, cpu_at_end = 0;
  engine->add<Ticker>([&](Time now) {
    if (at_warm == Time{0} && now >= t_warm) {
      at_warm = now;
      fw_at_warm = fw.forwarded();
      it_at_warm = engine->iterations();
      cpu_at_warm = thread_cpu_seconds();
    } else if (now >= t_end && at_end == Time{0}) {
      at_end = now;
      fw_at_end = fw.forwarded();
      it_at_end = engine->iterations();
      cpu_at_end = thread_cpu_seconds();
      stop = true;
    }
  });
  for (uint16_t p = 0; p < 2; p++) {
    EthdevParams params;
    params.device = device + std::to_string(p);
    if (device == "net_null") params.device += ",size=" + std::to_string(frame_len);
    auto r = engine->attach_ethdev(fw, p, params);
    if (!r.ok()) {
      std::fprintf(stderr, "forward: %s\n", r.status().message().c_str());
      return 1;
    }
  }
  engine->run(stop);
  // pps: per wall-second; cpu: the thread's share of the CPU meanwhile
  // (below 1 when other processes took it); pps_per_cpu: per second of CPU.
  const double secs = to_seconds(at_end - at_warm);
  const double pkts = double(fw_at_end - fw_at_warm);
  const double cpu = cpu_at_end - cpu_at_warm;
  std::printf(
      "RESULT mode=forward device=%s frame=%u seconds=%.3f pps=%.0f ns_per_pkt=%.2f cpu=%.3f pps_per_cpu=%.0f "
      "cpu_ns_per_pkt=%.2f pkts_per_iteration=%.1f dropped=%lu\n",
      device.c_str(), frame_len, secs, pkts / secs, secs * 1e9 / pkts, cpu / secs, pkts / cpu, cpu * 1e9 / pkts,
      pkts / double(it_at_end - it_at_warm), fw.dropped());
  return 0;
}

int run_idle(double seconds, bool ports, int64_t max_sleep_us) {
  EngineOptions opts;
  opts.mode = TimeMode::kReal;
  opts.mbufs = 4096;
  if (max_sleep_us > 0) opts.max_port_sleep = us(max_sleep_us);
  auto created = Engine::create(opts);
  if (!created.ok()) return 1;
  auto engine = std::move(created.value());
  rte_ring* rings[2] = {nullptr, nullptr};
  std::vector<std::string> ring_ports;
  if (ports) {
    auto& fw = engine->add<Forwarder>("fw");
    for (int i = 0; i < 2; i++) rings[i] = rte_ring_create(("idle" + std::to_string(i)).c_str(), 1024, SOCKET_ID_ANY, 0);
    for (int p = 0; p < 2; p++) {
      const std::string name = "idle" + std::to_string(p);
      const int id = rte_eth_from_rings(name.c_str(), &rings[p], 1, &rings[1 - p], 1, SOCKET_ID_ANY);
      char dev[RTE_ETH_NAME_MAX_LEN];
      if (id < 0 || rte_eth_dev_get_name_by_port(uint16_t(id), dev) != 0) return 1;
      ring_ports.push_back(dev);
      EthdevParams params;
      params.device = dev;
      if (!engine->attach_ethdev(fw, uint16_t(p), params).ok()) return 1;
    }
  } else {
    // A small fabric with nothing to do: no traffic, no timers.
    auto& gen = engine->add<Generator>("gen", frame(64), 0);
    auto& fw = engine->add<Forwarder>("fw");
    auto& sink = engine->add<Sink>("sink");
    if (!engine->connect(gen, 0, fw, 0, LinkParams{}).ok() || !engine->connect(fw, 1, sink, 0, LinkParams{}).ok())
      return 1;
  }
  std::atomic<bool> stop{false};
  std::atomic<bool> measuring{false};
  double cpu0 = 0, stat0 = 0, wall0 = 0;
  // The engine runs on this thread; a helper thread times the window.
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past start-up
    cpu0 = process_cpu_seconds();
    stat0 = stat_cpu_seconds();
    wall0 = wall_seconds();
    measuring = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    engine->wake();
  });
  engine->run(stop);
  const double cpu = process_cpu_seconds() - cpu0, stat = stat_cpu_seconds() - stat0, wall = wall_seconds() - wall0;
  timer.join();
  std::printf("RESULT mode=idle ports=%d max_port_sleep_us=%.0f seconds=%.3f cpu_pct=%.2f stat_cpu_pct=%.1f sleeps=%lu iterations=%lu\n",
              ports ? 2 : 0, to_us(engine->options().max_port_sleep), wall, 100 * cpu / wall, 100 * stat / wall, engine->sleeps(), engine->iterations());
  engine.reset();
  for (const auto& n : ring_ports) rte_vdev_uninit(n.c_str());
  for (rte_ring* r : rings) rte_ring_free(r);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rocemu engine benchmark"};
  app.require_subcommand(1);
  int cpu = -1;
  app.add_option("--cpu", cpu, "pin the engine thread to this CPU (as testpmd's -l)");
  uint32_t frame_len = 64;
  uint64_t packets = 2'000'000;
  double seconds = 3, warmup = 0.5;
  std::string device = "net_null";
  bool ports = false;
  auto* virt = app.add_subcommand("virtual", "internal links in virtual time");
  virt->add_option("--frame", frame_len, "frame length in bytes");
  virt->add_option("--packets", packets, "packets to send");
  auto* fwd = app.add_subcommand("forward", "real-time forwarding between two external ports");
  fwd->add_option("--seconds", seconds, "measured time");
  fwd->add_option("--warmup", warmup, "time before measuring");
  fwd->add_option("--device", device, "vdev driver: net_null (two ports, <driver>0 and <driver>1)");
  fwd->add_option("--frame", frame_len, "net_null frame length");
  auto* idle = app.add_subcommand("idle", "CPU used by an idle real-time engine");
  idle->add_option("--seconds", seconds, "measured time");
  idle->add_flag("--ports", ports, "with two idle external ports (net_ring)");
  int64_t max_sleep_us = 0;
  idle->add_option("--max-port-sleep-us", max_sleep_us, "EngineOptions::max_port_sleep (default: the engine's)");
  CLI11_PARSE(app, argc, argv);

  dpdk::EalOptions eal;
  eal.main_cpu = cpu;
  eal.memory_mb = 1024;
  if (Status s = dpdk::init_eal(eal); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  if (*virt) return run_virtual(frame_len, packets);
  if (*fwd) return run_forward(seconds, warmup, device, frame_len);
  return run_idle(seconds, ports, max_sleep_us);
}
