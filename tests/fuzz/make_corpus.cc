// Writes the fuzzer's seed corpus, one frame per file: every oracle frame
// (every opcode over IPv4/IPv6 with and without VLAN, CNP, PFC, ARP) and
// one frame per opcode and size from the real rxe captures in tests/data.
// Run at build time, so no binary corpus is committed.
//   rocemu_fuzz_corpus OUT_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/wire/packet.h"
#include "tests/oracle/oracle_packets.h"
#include "tests/support/pcap_file.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  fs::remove_all(dir);
  fs::create_directories(dir);
  int n = 0;
  auto write = [&](const std::string& prefix, const std::vector<uint8_t>& bytes) {
    char name[64];
    std::snprintf(name, sizeof name, "%s-%04d", prefix.c_str(), n++);
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
  };
  for (const auto& f : rocemu::test::oracle_frames()) write("oracle", f.bytes);
  std::set<std::pair<int, size_t>> seen;
  for (const char* file : {"rxe-rocev2-ipv4.pcap", "rxe-rocev2-ipv4-loss10.pcap"}) {
    for (const auto& f : rocemu::test::read_capture(std::string(ROCEMU_TEST_DATA) + "/" + file)) {
      rocemu::wire::PacketView v;
      const bool roce = rocemu::wire::decode(f.bytes, v) == rocemu::wire::DecodeError::kOk && v.is_roce;
      if (seen.insert({roce ? v.opcode : -1, f.bytes.size()}).second) write("rxe", f.bytes);
    }
  }
  std::printf("wrote %d seed inputs to %s\n", n, dir.c_str());
  return 0;
}
