// The copy limit of the verbs provider's data path, measured on this
// machine: how fast one core moves 64 KiB blocks into another process with
// process_vm_writev (16 blocks per call), the way the engine writes
// received payload. `vmcopy SECONDS procmem` writes through the process's
// /proc/PID/mem instead (one pwrite per block), the alternative
// verbs/process_memory.h compares with. Prints GB/s.
#include <fcntl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 1.0;
  const bool pvm = !(argc > 2 && std::strcmp(argv[2], "procmem") == 0);
  constexpr size_t kBlock = 64 * 1024, kBlocks = 16;
  // The target: a child with a 4 MiB buffer (fits in cache like a
  // perftest buffer of 64 KiB messages).
  std::vector<uint8_t> target(kBlock * kBlocks * 4, 0);
  int ready[2];
  if (pipe(ready) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {
    std::memset(target.data(), 1, target.size());  // touch every page
    [[maybe_unused]] ssize_t w = write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char c;
  if (read(ready[0], &c, 1) != 1) return 1;
  std::vector<uint8_t> src(kBlock * kBlocks, 7);
  iovec local{src.data(), src.size()};
  const int mem = open(("/proc/" + std::to_string(child) + "/mem").c_str(), O_RDWR | O_CLOEXEC);
  if (mem < 0) {
    std::perror("/proc/PID/mem");
    kill(child, SIGKILL);
    return 1;
  }
  iovec remote[kBlocks];
  uint64_t bytes = 0;
  size_t round = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (size_t i = 0; i < kBlocks; i++)
      remote[i] = {target.data() + ((round * kBlocks + i) % (target.size() / kBlock)) * kBlock, kBlock};
    ssize_t n = 0;
    if (pvm) {
      n = process_vm_writev(child, &local, 1, remote, kBlocks, 0);
    } else {
      for (size_t i = 0; i < kBlocks; i++)
        n += pwrite(mem, src.data() + i * kBlock, kBlock, off_t(reinterpret_cast<uintptr_t>(remote[i].iov_base)));
    }
    if (n != ssize_t(src.size())) {
      std::perror(pvm ? "process_vm_writev" : "pwrite /proc/PID/mem");
      kill(child, SIGKILL);
      return 1;
    }
    bytes += uint64_t(n);
    round++;
    if ((round & 15) == 0) elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::printf("%.3f\n", double(bytes) / elapsed / 1e9);
  return 0;
}
