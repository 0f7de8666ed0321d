// Reads classic pcap and pcapng files into frames, for tests that compare
// against captures made elsewhere (Linux rxe, tshark).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rocemu::test {

struct CapturedFrame {
  uint64_t ts_ns = 0;
  uint32_t interface = 0;
  std::vector<uint8_t> bytes;
};

// Throws std::runtime_error on an unreadable or malformed file.
std::vector<CapturedFrame> read_capture(const std::string& path);

// Writes a classic pcap (Ethernet, ns timestamps) for the oracle tools.
void write_pcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames);

}  // namespace rocemu::test
