// A set of frames that exercises every header our encoders write, each with
// the field values an independent dissector must find in it. The oracle
// tests write them to a pcap for tshark and scapy; the decoder robustness
// tests and the fuzzer's seed corpus start from the same frames.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/wire/build.h"

namespace rocemu::test {

// One field as tshark names it, with the value it must decode to: a number
// (compared numerically, whatever base tshark prints it in) or a text
// (addresses, compared as printed).
struct FieldExpect {
  std::string field;
  std::optional<uint64_t> number;
  std::string text;
  int occurrence = -1;  // which occurrence must match; -1: every one (and at least one)

  static FieldExpect num(std::string f, uint64_t v) { return {std::move(f), v, {}}; }
  static FieldExpect str(std::string f, std::string v) { return {std::move(f), std::nullopt, std::move(v)}; }
  FieldExpect& at(int n) {
    occurrence = n;
    return *this;
  }
};

enum class FrameKind : uint8_t { kRoce, kPfc, kArp };

struct OracleFrame {
  std::string name;  // e.g. "RC_SEND_ONLY ipv6 vlan"
  FrameKind kind = FrameKind::kRoce;
  std::vector<uint8_t> bytes;

  // What was encoded (RoCE frames).
  wire::PathHeaders path;
  wire::RoceFields fields;
  uint32_t payload_len = 0;

  // What tshark must decode.
  std::vector<FieldExpect> expect;
};

// Every opcode of the opcode table in four paths (IPv4/IPv6, with and
// without an 802.1Q tag), every AETH kind (ACK, RNR NAK, each NAK code),
// CNPs, PFC frames with several class-enable vectors and ARP. Every field
// gets a value distinct from the others and from its neighbours' values.
std::vector<OracleFrame> oracle_frames();

// The tshark field names the expectations use, in a fixed order.
std::vector<std::string> oracle_field_names(const std::vector<OracleFrame>& frames);

}  // namespace rocemu::test
