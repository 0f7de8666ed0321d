// Without libFuzzer (gcc): the control fuzzer's entry point over inputs
// from a seeded generator, so every build runs the sessions and checks.
//   rocemu_fuzz_control [COUNT]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/engine/rng.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  const int count = argc > 1 ? std::atoi(argv[1]) : 400;
  rocemu::Rng rng(12345);
  for (int i = 0; i < count; i++) {
    std::vector<uint8_t> input(16 + rng.next() % 2048);
    for (auto& b : input) b = uint8_t(rng.next());
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("ran %d control sessions\n", count);
  return 0;
}
