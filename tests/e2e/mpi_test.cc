// Debian's Open MPI (mpirun, the UCX PML), unmodified, across the fabric:
// four ranks alternating between h1 and h2, each started by mpirun as
// `rocemu exec NODE -- rocemu-mpi-check` (an MPMD command line), so every
// rank opens its node's emulated NIC. UCX may use rc_verbs and ud_verbs
// only (no shared memory, no TCP): the MPI traffic has to cross the
// switch as RoCE, and the switch's counters must show it did.
#include <nlohmann/json.hpp>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

// RoCE packets the switch has sent towards h1 (swp1) and h2 (swp2).
uint64_t roce_through_switch(const Fabric& f) {
  uint64_t n = 0;
  for (const char* swp : {"swp1", "swp2"}) {
    const auto [st, out] = f.rocemu({"nv", "show", "interface", swp, "qos", "roce", "counters", "-o", "json"});
    REQUIRE(st == 0);
    n += nlohmann::json::parse(out)["tx-roce-stats"]["roce-packets"].get<uint64_t>();
  }
  return n;
}

}  // namespace

TEST_CASE("Open MPI (UCX PML over rc_verbs/ud_verbs) runs ping-pong, allreduce and alltoall across h1 and h2",
          "[e2e][mpi]") {
  Fabric f;
  std::vector<std::string> argv = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
                                   // The UCX PML or nothing: an MPI that fell back to TCP must fail.
                                   "--mca", "pml", "ucx", "--mca", "btl", "self", "--mca", "osc", "ucx",
                                   "-x", "UCX_TLS=rc_verbs,ud_verbs", "-x", "UCX_NET_DEVICES=rocemu0:1",
                                   "-x", "ROCEMU_RUNTIME_DIR"};
  for (int rank = 0; rank < 4; rank++) {
    if (rank > 0) argv.push_back(":");
    argv.insert(argv.end(), {"-np", "1", bin("rocemu"), "exec", rank % 2 == 0 ? "h1" : "h2", "--",
                             bin("rocemu-mpi-check")});
  }
  const uint64_t before = roce_through_switch(f);
  const auto [status, out] = run(argv, f.env(), std::chrono::seconds(120));
  INFO(out);
  CHECK(status == 0);
  for (int rank = 0; rank < 4; rank++)
    CHECK_THAT(out, Catch::Contains("rank " + std::to_string(rank) +
                                    " of 4: ping-pong ok, allreduce ok, alltoall ok"));
  // Rank 0 (h1) and rank 1 (h2) alone exchanged 5 round trips of every
  // size 8 B x 4^k up to 2 MiB (mpi_check.cc): at most 4096 payload bytes
  // per RoCE packet, each crossing the switch once.
  uint64_t ping_pong_bytes = 0;
  for (uint64_t bytes = 8; bytes <= (uint64_t(4) << 20); bytes *= 4) ping_pong_bytes += 2 * 5 * bytes;
  const uint64_t after = roce_through_switch(f);
  INFO("RoCE packets through sw1: " << after - before << ", ping-pong bytes " << ping_pong_bytes);
  CHECK(after - before >= ping_pong_bytes / 4096);
}
