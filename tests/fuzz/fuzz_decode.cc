// libFuzzer target: wire::decode() and everything a decoded view exposes,
// plus FaultInjector::corrupt() on a copy (tests/fuzz/decode_check.h).
// With ROCEMU_FUZZ=ON (clang) this is linked with -fsanitize=fuzzer;
// otherwise replay_main.cc runs it over the seed corpus. A longer run,
// from the build directory (a crash file replays when given as argument):
//   mkdir -p /tmp/corpus
//   tests/fuzz/rocemu_fuzz_decode -max_len=9300 /tmp/corpus tests/fuzz/seed
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/fuzz/decode_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The corruption's seed comes from the input, so a crash reproduces.
  uint64_t seed = size;
  for (size_t i = 0; i < size && i < 64; i++) seed = (seed ^ data[i]) * 0x100000001b3ull;
  const std::string why = rocemu::test::check_decode({data, size}, seed);
  if (!why.empty()) {
    std::fprintf(stderr, "wire::decode contract broken on a %zu-byte input: %s\n", size, why.c_str());
    std::abort();
  }
  return 0;
}
