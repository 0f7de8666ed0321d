#include "tests/support/pcap_file.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace rocemu::test {
namespace {

uint32_t rd32(const uint8_t* p, bool swap) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return swap ? __builtin_bswap32(v) : v;
}
uint16_t rd16(const uint8_t* p, bool swap) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return swap ? __builtin_bswap16(v) : v;
}

std::vector<CapturedFrame> read_classic(const std::vector<uint8_t>& d) {
  const uint32_t magic = rd32(d.data(), false);
  bool swap = false, nanos = false;
  if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d) {
    nanos = magic == 0xa1b23c4d;
  } else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1) {
    swap = true;
    nanos = magic == 0x4d3cb2a1;
  } else {
    throw std::runtime_error("not a pcap file");
  }
  std::vector<CapturedFrame> out;
  size_t off = 24;
  while (off + 16 <= d.size()) {
    const uint32_t sec = rd32(&d[off], swap), frac = rd32(&d[off + 4], swap);
    const uint32_t caplen = rd32(&d[off + 8], swap);
    off += 16;
    if (off + caplen > d.size()) throw std::runtime_error("truncated pcap record");
    CapturedFrame f;
    f.ts_ns = uint64_t(sec) * 1000000000ull + (nanos ? frac : uint64_t(frac) * 1000);
    f.bytes.assign(d.begin() + long(off), d.begin() + long(off + caplen));
    out.push_back(std::move(f));
    off += caplen;
  }
  return out;
}

std::vector<CapturedFrame> read_pcapng(const std::vector<uint8_t>& d) {
  std::vector<CapturedFrame> out;
  bool swap = false;
  size_t off = 0;
  while (off + 12 <= d.size()) {
    uint32_t type = rd32(&d[off], false);
    if (type == 0x0a0d0d0a) {
      const uint32_t bom = rd32(&d[off + 8], false);
      swap = bom == 0x4d3c2b1a;
      if (!swap && bom != 0x1a2b3c4d) throw std::runtime_error("bad pcapng byte-order magic");
    }
    type = rd32(&d[off], swap);
    const uint32_t len = rd32(&d[off + 4], swap);
    if (len < 12 || off + len > d.size()) throw std::runtime_error("truncated pcapng block");
    if (type == 6) {  // enhanced packet block
      CapturedFrame f;
      f.interface = rd32(&d[off + 8], swap);
      const uint64_t ts = uint64_t(rd32(&d[off + 12], swap)) << 32 | rd32(&d[off + 16], swap);
      f.ts_ns = ts;  // resolution as declared by the interface; rocemu writes ns
      const uint32_t caplen = rd32(&d[off + 20], swap);
      if (28 + caplen > len) throw std::runtime_error("pcapng packet longer than its block");
      f.bytes.assign(d.begin() + long(off + 28), d.begin() + long(off + 28 + caplen));
      out.push_back(std::move(f));
    }
    (void)rd16;
    off += len;
  }
  return out;
}

}  // namespace

std::vector<CapturedFrame> read_capture(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<uint8_t> d((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (d.size() < 24) throw std::runtime_error(path + ": too short for a capture");
  if (rd32(d.data(), false) == 0x0a0d0d0a) return read_pcapng(d);
  return read_classic(d);
}

void write_pcap(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path);
  auto put32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto put16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  put32(0xa1b23c4d);  // nanosecond pcap
  put16(2);
  put16(4);
  put32(0);
  put32(0);
  put32(65535);
  put32(1);  // LINKTYPE_ETHERNET
  uint32_t i = 0;
  for (const auto& f : frames) {
    put32(1);
    put32(i++ * 1000);
    put32(uint32_t(f.size()));
    put32(uint32_t(f.size()));
    out.write(reinterpret_cast<const char*>(f.data()), long(f.size()));
  }
}

}  // namespace rocemu::test
