// Running the independent dissectors (tshark, scapy) over a pcap of oracle
// frames and turning what they say into a list of problems, one line each.
#pragma once

#include <string>
#include <vector>

#include "tests/oracle/oracle_packets.h"

namespace rocemu::test {

// Runs `cmd` with /bin/sh, its stdout in `out`: its exit status (-1 if it
// did not exit). Throws if it cannot be started.
int run_command(const std::string& cmd, std::string& out);

// One row per frame: every requested field's occurrences, in order.
struct TsharkFrame {
  std::vector<std::vector<std::string>> values;  // by field index
  bool malformed = false;
  std::vector<std::string> errors;    // expert messages of severity error
  std::vector<std::string> warnings;  // expert messages of severity warning
};

struct TsharkRun {
  int status = -1;
  std::string stderr_text;
  std::vector<std::string> fields;
  std::vector<TsharkFrame> frames;
};

// `tshark -T fields` over `pcap` with the preferences the oracle needs;
// `ignore_ipv6_zero_udp_checksum` false keeps Wireshark's default there.
TsharkRun run_tshark(const std::string& pcap, const std::vector<std::string>& fields,
                     bool ignore_ipv6_zero_udp_checksum = true);

// Every disagreement between what tshark decoded and `frames` expects,
// plus every malformed frame and expert error.
std::vector<std::string> tshark_problems(const std::vector<OracleFrame>& frames, const TsharkRun& run);

struct ScapyRun {
  int status = -1;
  std::string output;                  // stdout and stderr
  std::vector<std::string> problems;   // "FAIL ..." lines
  int checked_ipv4 = 0, checked_ipv6 = 0, checked_vlan = 0, checked_cnp = 0;
  std::string icrc_ipv6_source;        // "scapy" or "backport"
};

// Writes what scapy must find in each RoCE frame of `frames` (one line per
// frame) and runs tests/oracle/scapy_check.py with /usr/bin/python3.
ScapyRun run_scapy(const std::string& pcap, const std::vector<OracleFrame>& frames, const std::string& expect_path);

}  // namespace rocemu::test
