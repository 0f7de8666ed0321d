// Transport benchmark, in virtual time: one RC QP streaming RDMA WRITEs
// over a 100 Gbit/s link with random loss, go-back-N against selective
// repeat. Prints goodput, retransmitted packets per lost packet, and how
// fast the simulation runs (simulated Gbit/s per wall-clock second).
//
//   transport_bench [--mib N] [--msg BYTES] [--delay-us D] [--seed S]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/engine/engine.h"
#include "nic/nic.h"
#include "nic/sim_host.h"

using namespace rocemu;
using namespace rocemu::nic;

namespace {

struct RunResult {
  double goodput_gbps = 0;
  uint64_t lost = 0;          // data packets the link dropped
  uint64_t lost_acks = 0;     // ACKs the link dropped
  uint64_t retransmitted = 0;
  double sim_seconds = 0;
  double wall_seconds = 0;
  uint64_t timeouts = 0;
  bool ok = false;
};

RunResult run(LossRecovery mode, double loss, bool ack_loss, uint64_t total, uint32_t msg, Duration delay,
           uint64_t seed) {
  RunResult r;
  auto e = Engine::create({.mode = TimeMode::kVirtual, .seed = seed, .mbufs = 32768});
  if (!e.ok()) {
    std::fprintf(stderr, "%s\n", e.status().message().c_str());
    std::exit(1);
  }
  Engine& engine = *e.value();
  NicConfig c1, c2;
  c1.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  c2.mac = *wire::MacAddr::parse("02:00:00:00:00:02");
  c1.ips = {*wire::IpAddr::parse("10.0.0.1")};
  c2.ips = {*wire::IpAddr::parse("10.0.0.2")};
  c1.recovery = c2.recovery = mode;
  Nic& n1 = engine.add<Nic>("h1", c1);
  Nic& n2 = engine.add<Nic>("h2", c2);
  auto link = engine.connect(n1, 0, n2, 0, LinkParams{.rate_bps = 100'000'000'000ull, .delay = delay, .mtu = 9000});
  engine.start();
  SimHost h1(engine, n1), h2(engine, n2);
  auto* cq1 = h1.create_cq(4096);
  auto* cq2 = h2.create_cq(64);
  const uint32_t depth = 64;
  auto* q1 = h1.create_qp(QpType::kRc, cq1, cq1, ibv_qp_cap{depth, 1, 1, 1, 0});
  auto* q2 = h2.create_qp(QpType::kRc, cq2, cq2, ibv_qp_cap{depth, 1, 1, 1, 0});
  SimHost::ConnectOpts o;
  o.mtu = IBV_MTU_4096;
  o.timeout = 14;  // perftest's default
  SimHost::connect(h1, q1, h2, q2, o);
  std::vector<uint8_t> src(msg, 0x5a), dst(msg, 0);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  const uint32_t lkey = h1.reg_mr(src.data(), src.size(), access);
  const uint32_t rkey = h2.reg_mr(dst.data(), dst.size(), access);
  // Let ARP settle before the clock starts and the loss is on.
  engine.run_for(ms(1));
  FaultConfig fc;
  fc.loss = loss;
  link.value()->set_faults(0, fc);
  if (ack_loss) link.value()->set_faults(1, fc);

  uint64_t posted = 0, completed = 0;
  const uint64_t messages = total / msg;
  auto post = [&](uint64_t n) {
    for (uint64_t i = 0; i < n && posted < messages; i++, posted++) {
      ibv_sge s{uint64_t(src.data()), msg, lkey};
      ibv_send_wr wr{};
      wr.wr_id = posted;
      wr.sg_list = &s;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = uint64_t(dst.data());
      wr.wr.rdma.rkey = rkey;
      h1.post_send(q1, &wr);
    }
  };
  const Time start = engine.now();
  const auto wall0 = std::chrono::steady_clock::now();
  post(depth);
  bool failed = false;
  engine.run_until(
      [&] {
        ibv_wc wc[64];
        int n;
        while ((n = h1.poll(cq1, 64, wc)) > 0) {
          for (int i = 0; i < n; i++) failed |= wc[i].status != IBV_WC_SUCCESS;
          completed += uint64_t(n);
          post(uint64_t(n));
        }
        return completed == messages || failed;
      },
      start + Duration(int64_t(600) * 1'000'000'000'000));
  const auto wall1 = std::chrono::steady_clock::now();
  r.ok = completed == messages && !failed;
  r.sim_seconds = to_seconds(engine.now() - start);
  r.wall_seconds = std::chrono::duration<double>(wall1 - wall0).count();
  r.goodput_gbps = double(completed * msg) * 8 / r.sim_seconds / 1e9;
  r.lost = link.value()->end(0).counters()[PortCounters::tx_drop_fault];
  r.lost_acks = link.value()->end(1).counters()[PortCounters::tx_drop_fault];
  r.retransmitted = n1.counters()[NicCounters::retransmitted_packets];
  r.timeouts = n1.counters()[NicCounters::local_ack_timeout_err];
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t mib = 256;
  uint32_t msg = 65536;
  int64_t delay_us = 2;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--mib") mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (a == "--msg") msg = uint32_t(std::strtoul(argv[i + 1], nullptr, 10));
    else if (a == "--delay-us") delay_us = std::strtoll(argv[i + 1], nullptr, 10);
    else if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: %s [--mib N] [--msg BYTES] [--delay-us D] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (Status s = dpdk::init_eal({.hugepages = false, .memory_mb = 1024, .extra_args = {}}); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  std::printf("RC WRITE stream, %llu MiB in %u-byte messages, 64 outstanding, MTU 4096, 100 Gbit/s, %lld us each way\n\n",
              static_cast<unsigned long long>(mib), msg, static_cast<long long>(delay_us));
  std::printf("%-17s %-11s %10s %8s %8s %10s %13s %8s %15s\n", "recovery", "loss", "goodput", "lost", "resent",
              "resent/lost", "lost ACKs", "timeouts", "sim Gbit/wall s");
  const struct {
    double loss;
    bool acks;
    const char* name;
  } cases[] = {{0, false, "none"}, {0.001, false, "0.1% data"}, {0.01, false, "1% data"}, {0.01, true, "1% both"}};
  int failures = 0;
  for (const auto& c : cases) {
    for (LossRecovery mode : {LossRecovery::kGoBackN, LossRecovery::kSelectiveRepeat}) {
      const RunResult r = run(mode, c.loss, c.acks, mib << 20, msg, us(delay_us), seed);
      failures += !r.ok;
      char ratio[32] = "-";
      if (r.lost > 0) std::snprintf(ratio, sizeof ratio, "%.2f", double(r.retransmitted) / double(r.lost));
      std::printf("%-17s %-11s %7.2f Gb %8llu %8llu %10s %13llu %8llu %15.2f%s\n",
                  mode == LossRecovery::kGoBackN ? "go-back-N" : "selective repeat", c.name, r.goodput_gbps,
                  static_cast<unsigned long long>(r.lost), static_cast<unsigned long long>(r.retransmitted), ratio,
                  static_cast<unsigned long long>(r.lost_acks), static_cast<unsigned long long>(r.timeouts),
                  r.goodput_gbps * r.sim_seconds / r.wall_seconds, r.ok ? "" : "  FAILED");
      std::fflush(stdout);
    }
  }
  std::printf("\n(goodput in simulated time; the last column is simulated Gbit per wall-clock second)\n");
  return failures == 0 ? 0 : 1;
}
