// A mixed RC workload with its own oracle: WRITEs, SENDs, READs and
// FETCH_ADDs between two hosts, every byte checked, every completion
// checked for order and status.
#pragma once

#include <arpa/inet.h>

#include <string>

#include "tests/nic/fabric.h"

namespace rocemu::test {

struct WorkloadSpec {
  int writes = 8;
  int sends = 8;
  int reads = 4;
  int atomics = 8;
  uint32_t max_len = 65536;  // message sizes vary up to this
  uint32_t seed = 1;
  nic::SimHost::ConnectOpts connect{};
  Duration limit = ms(2000);
};

struct WorkloadResult {
  bool finished = false;
  std::string failure;  // empty if every check passed
  uint64_t requester_retransmits = 0;
};

WorkloadResult run_rc_workload(TwoNics& f, const WorkloadSpec& spec);

}  // namespace rocemu::test
