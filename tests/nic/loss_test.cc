#include "tests/nic/workload.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

struct Case {
  const char* name;
  FaultConfig faults;
};

std::vector<Case> fault_cases() {
  std::vector<Case> c;
  FaultConfig f;
  f.loss = 0.001;
  c.push_back({"loss 0.1%", f});
  f.loss = 0.01;
  c.push_back({"loss 1%", f});
  f.loss = 0.05;
  c.push_back({"loss 5%", f});
  f = FaultConfig{};
  f.burst = GilbertElliott{.p_good_to_bad = 0.005, .p_bad_to_good = 0.3, .loss_good = 0, .loss_bad = 0.8};
  c.push_back({"burst loss", f});
  f = FaultConfig{};
  f.reorder = 0.02;
  f.reorder_delay = us(3);
  c.push_back({"reordering", f});
  f = FaultConfig{};
  f.duplicate = 0.02;
  c.push_back({"duplication", f});
  f = FaultConfig{};
  f.corrupt = 0.01;
  c.push_back({"corruption", f});
  f = FaultConfig{};
  f.loss = 0.01;
  f.reorder = 0.01;
  f.duplicate = 0.01;
  f.corrupt = 0.005;
  f.jitter = ns(500);
  c.push_back({"everything at once", f});
  return c;
}

// The mixed workload with the same faults in both directions.
WorkloadResult run_faulted(TwoNics& f, const FaultConfig& faults, uint32_t max_len, ibv_mtu mtu, uint32_t seed) {
  f.link->set_faults(0, faults);
  f.link->set_faults(1, faults);
  WorkloadSpec spec;
  spec.writes = 12;
  spec.sends = 12;
  spec.reads = 8;
  spec.atomics = 12;
  spec.max_len = max_len;
  spec.connect.mtu = mtu;
  spec.seed = seed;
  return run_rc_workload(f, spec);
}

}  // namespace

TEST_CASE("Every byte arrives once and intact under injected faults", "[sim][nic][loss]") {
  const auto mode = GENERATE(nic::LossRecovery::kGoBackN, nic::LossRecovery::kSelectiveRepeat);
  const auto cases = fault_cases();
  const size_t which = GENERATE(range(size_t(0), size_t(8)));
  const Case& c = cases[which];
  INFO((mode == nic::LossRecovery::kGoBackN ? "go-back-N, " : "selective repeat, ") << c.name);
  TwoNics f(11 + which, mode);
  const auto r = run_faulted(f, c.faults, 40000, IBV_MTU_1024, uint32_t(which + 1));
  CHECK(r.failure == "");
  CHECK(r.finished);
  if (c.faults.loss >= 0.01) CHECK(r.requester_retransmits > 0);
}

TEST_CASE("16 MiB messages survive 1% loss", "[sim][nic][loss]") {
  const auto mode = GENERATE(nic::LossRecovery::kGoBackN, nic::LossRecovery::kSelectiveRepeat);
  TwoNics f(5, mode);
  FaultConfig fc;
  fc.loss = 0.01;
  f.link->set_faults(0, fc);
  f.link->set_faults(1, fc);
  WorkloadSpec spec;
  spec.writes = 1;
  spec.sends = 1;
  spec.reads = 1;
  spec.atomics = 1;
  spec.max_len = 16 << 20;
  spec.connect.mtu = IBV_MTU_4096;
  spec.seed = 3;
  spec.limit = ms(5000);
  const auto r = run_rc_workload(f, spec);
  CHECK(r.failure == "");
}

TEST_CASE("Batched DMA keeps every byte under faults", "[sim][nic][loss]") {
  // Read-ahead frames dropped on a resend, deferred writes flushed before
  // every completion and ACK: the provider's data path, in virtual time.
  const auto mode = GENERATE(nic::LossRecovery::kGoBackN, nic::LossRecovery::kSelectiveRepeat);
  const auto cases = fault_cases();
  const size_t which = GENERATE(size_t(1), size_t(7));  // loss 1%, everything at once
  const Case& c = cases[which];
  INFO((mode == nic::LossRecovery::kGoBackN ? "go-back-N, " : "selective repeat, ") << c.name);
  TwoNics f(21 + which, mode, LinkParams{}, 16384, false, /*batched_dma=*/true);
  const auto r = run_faulted(f, c.faults, 200000, IBV_MTU_4096, uint32_t(which + 7));
  CHECK(r.failure == "");
  CHECK(r.finished);
  CHECK(r.requester_retransmits > 0);
}
