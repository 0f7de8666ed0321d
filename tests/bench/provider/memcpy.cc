// The physical limit of a DMA that is one memcpy per byte, measured on this
// machine: how fast one core copies with libc's memcpy in 64 KiB calls (the
// size of a perftest message; the engine copies no more per call).
//   rocemu_memcpy_bench SECONDS cache      one 64 KiB source and one 64 KiB
//                                          destination, reused (cache-resident,
//                                          as perftest's reused buffers are)
//   rocemu_memcpy_bench SECONDS dram [MIB] a source and a destination of MIB
//                                          MiB each (default 1024, far larger
//                                          than the last-level cache), walked
//                                          through in 64 KiB calls
// Prints one line: "<GB/s> GB/s ..." (GB = 1e9 bytes), then what was copied.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

uint8_t* buffer(size_t bytes, int fill) {
  void* p = nullptr;
  constexpr size_t kHuge = 2 << 20;
  if (posix_memalign(&p, bytes >= kHuge ? kHuge : 4096, bytes) != 0) {
    std::fprintf(stderr, "rocemu_memcpy_bench: cannot allocate %zu bytes\n", bytes);
    std::exit(1);
  }
  // Transparent hugepages where allowed: faulting in 2 GiB page by page
  // takes seconds on a VM; the copy's rate does not depend on it here.
  if (bytes >= kHuge) madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, fill, bytes);  // every page present before timing
  return static_cast<uint8_t*>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || (std::strcmp(argv[2], "cache") != 0 && std::strcmp(argv[2], "dram") != 0)) {
    std::fprintf(stderr, "usage: rocemu_memcpy_bench SECONDS cache|dram [MIB]\n");
    return 2;
  }
  const double seconds = std::atof(argv[1]);
  const bool dram = std::strcmp(argv[2], "dram") == 0;
  constexpr size_t kBlock = 64 * 1024;
  const size_t bytes = dram ? size_t(argc > 3 ? std::atol(argv[3]) : 1024) << 20 : kBlock;
  if (bytes < kBlock || bytes % kBlock != 0) {
    std::fprintf(stderr, "rocemu_memcpy_bench: the buffers must be whole 64 KiB blocks\n");
    return 2;
  }
  uint8_t* src = buffer(bytes, 7);
  uint8_t* dst = buffer(bytes, 0);
  // The size through a volatile: the compiler calls libc's memcpy (the
  // engine's copy) instead of expanding a constant-size copy inline.
  volatile size_t block = kBlock;
  const size_t blocks = bytes / kBlock;
  // One untimed pass: the cache-resident case starts with both buffers in cache.
  for (size_t i = 0; i < blocks; i++) std::memcpy(dst + i * kBlock, src + i * kBlock, block);
  uint64_t copied = 0;
  size_t next = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int k = 0; k < 64; k++) {
      std::memcpy(dst + next * kBlock, src + next * kBlock, block);
      asm volatile("" ::: "memory");  // every copy happens
      next = next + 1 == blocks ? 0 : next + 1;
    }
    copied += 64 * kBlock;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  if (dst[bytes - 1] != 7) return 1;
  const double gbs = double(copied) / elapsed / 1e9;
  std::printf("%.3f GB/s (%s: %llu bytes in %.3f s, 64 KiB memcpy calls, buffers of %zu bytes)\n", gbs,
              dram ? "dram" : "cache", static_cast<unsigned long long>(copied), elapsed, bytes);
  return 0;
}
