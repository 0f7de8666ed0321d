// The floor for a busy-polling round trip on this machine when three
// pollers share the cores (perftest's client, its server and the engine
// thread): two processes ping-pong one cache line each way through shared
// memory, each spinning on the other's, while a third process spins
// without pause (unless --no-spinner). Reported like perftest's latency
// tests: half a round trip, the median ("typical"), the mean and the 99th
// percentile, in microseconds.
//   rocemu_pingpong_bench SECONDS [--no-spinner] [--fifo]
// --fifo gives the spinner SCHED_FIFO priority 1, the engine thread's.
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

struct alignas(64) Line {
  std::atomic<uint64_t> v{0};
};
struct Shared {
  Line ping, pong, stop;
};

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  bool spinner = true, fifo = false;
  for (int i = 2; i < argc; i++) {
    if (std::strcmp(argv[i], "--no-spinner") == 0) spinner = false;
    else if (std::strcmp(argv[i], "--fifo") == 0) fifo = true;
    else {
      std::fprintf(stderr, "usage: rocemu_pingpong_bench SECONDS [--no-spinner] [--fifo]\n");
      return 2;
    }
  }
  void* m = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return 1;
  auto* sh = new (m) Shared;

  const pid_t echo = fork();
  if (echo == 0) {
    for (uint64_t seen = 0;;) {
      uint64_t v;
      while ((v = sh->ping.v.load(std::memory_order_acquire)) == seen)
        if (sh->stop.v.load(std::memory_order_relaxed)) _exit(0);
      seen = v;
      sh->pong.v.store(v, std::memory_order_release);
    }
  }
  pid_t spin = -1;
  if (spinner) {
    spin = fork();
    if (spin == 0) {
      if (fifo) {
        sched_param sp{};
        sp.sched_priority = 1;
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) std::perror("rocemu_pingpong_bench: SCHED_FIFO");
      }
      volatile uint64_t n = 0;
      while (!sh->stop.v.load(std::memory_order_relaxed)) n = n + 1;
      _exit(0);
    }
  }

  std::vector<uint32_t> rtt_ns;
  rtt_ns.reserve(1u << 24);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto prev = t0;
  for (uint64_t seq = 1; rtt_ns.size() < rtt_ns.capacity(); seq++) {
    sh->ping.v.store(seq, std::memory_order_release);
    while (sh->pong.v.load(std::memory_order_acquire) != seq) {
    }
    const auto now = clock::now();
    rtt_ns.push_back(uint32_t(std::min<int64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - prev).count(),
                                                UINT32_MAX)));
    prev = now;
    if (std::chrono::duration<double>(now - t0).count() >= seconds) break;
  }
  sh->stop.v.store(1, std::memory_order_relaxed);
  waitpid(echo, nullptr, 0);
  if (spin > 0) waitpid(spin, nullptr, 0);

  const size_t n = rtt_ns.size();
  double sum = 0;
  for (uint32_t r : rtt_ns) sum += r;
  std::sort(rtt_ns.begin(), rtt_ns.end());
  const double typical = rtt_ns[n / 2] / 2e3, p99 = rtt_ns[std::min(n - 1, n * 99 / 100)] / 2e3;
  std::printf("typical %.3f usec, mean %.3f, 99%% %.3f (half round trips, %zu round trips, %s)\n", typical,
              sum / double(n) / 2e3, p99, n,
              spinner ? (fifo ? "a SCHED_FIFO spinner beside" : "a spinner beside") : "no spinner");
  return 0;
}
