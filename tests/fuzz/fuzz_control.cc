// libFuzzer target: control-protocol sessions against an in-process
// control server (tests/fuzz/control_fuzz.h). With ROCEMU_FUZZ=ON (clang)
// it is linked with -fsanitize=fuzzer and the server's sources are built
// into it with coverage; otherwise control_fuzz_main.cc runs it over
// generated inputs.
#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/control_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string why = rocemu::test::fuzz_control_session(data, size);
  if (!why.empty()) {
    std::fprintf(stderr, "control server contract broken on a %zu-byte input: %s\n", size, why.c_str());
    std::abort();
  }
  return 0;
}
