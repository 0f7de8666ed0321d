// Tests that need packets start the EAL once per process (no hugepages).
#pragma once

#include <catch2/catch.hpp>

#include "common/engine/dpdk.h"
#include "common/engine/engine.h"

namespace rocemu::test {

inline void require_eal() {
  static const Status s = dpdk::init_eal({.hugepages = false, .memory_mb = 2048, .extra_args = {}});
  INFO(s.message());
  REQUIRE(s.ok());
}

inline std::unique_ptr<Engine> make_engine(uint64_t seed = 1, uint32_t mbufs = 8192) {
  require_eal();
  auto e = Engine::create({.mode = TimeMode::kVirtual, .seed = seed, .mbufs = mbufs});
  INFO(e.status().message());
  REQUIRE(e.ok());
  return std::move(e.value());
}

}  // namespace rocemu::test
