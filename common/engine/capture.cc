#include "common/engine/capture.h"

#include <cerrno>
#include <cstring>
#include <vector>

namespace rocemu {
namespace {

void put32(std::vector<uint8_t>& b, uint32_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + 4);
}
void put16(std::vector<uint8_t>& b, uint16_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + 2);
}
void pad4(std::vector<uint8_t>& b) {
  while (b.size() % 4) b.push_back(0);
}
void option(std::vector<uint8_t>& b, uint16_t code, const void* data, uint16_t len) {
  put16(b, code);
  put16(b, len);
  const auto* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + len);
  pad4(b);
}
// Writes a block: type, total length, body, total length.
void block(FILE* f, uint32_t type, const std::vector<uint8_t>& body) {
  std::vector<uint8_t> b;
  const uint32_t total = uint32_t(body.size()) + 12;
  put32(b, type);
  put32(b, total);
  b.insert(b.end(), body.begin(), body.end());
  put32(b, total);
  std::fwrite(b.data(), 1, b.size(), f);
}

}  // namespace

Result<std::unique_ptr<Capture>> Capture::open(const std::string& path, uint64_t epoch_ns) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return Status::error("capture " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> shb;
  put32(shb, 0x1a2b3c4d);  // byte-order magic
  put16(shb, 1);
  put16(shb, 0);
  put32(shb, 0xffffffff);  // section length unknown
  put32(shb, 0xffffffff);
  const char app[] = "rocemu";
  option(shb, 4, app, sizeof app - 1);  // shb_userappl
  option(shb, 0, nullptr, 0);
  block(f, 0x0a0d0d0a, shb);
  return std::unique_ptr<Capture>(new Capture(f, path, epoch_ns));
}

Capture::~Capture() {
  if (f_ != nullptr) std::fclose(f_);
}

uint32_t Capture::add_interface(const std::string& name, uint32_t snaplen) {
  std::vector<uint8_t> idb;
  put16(idb, 1);  // LINKTYPE_ETHERNET
  put16(idb, 0);
  put32(idb, snaplen);
  option(idb, 2, name.data(), uint16_t(name.size()));  // if_name
  const uint8_t tsresol = 9;                           // nanoseconds
  option(idb, 9, &tsresol, 1);
  option(idb, 0, nullptr, 0);
  block(f_, 1, idb);
  return interfaces_++;
}

void Capture::write(uint32_t interface, Time when, std::span<const uint8_t> frame) {
  const uint64_t ts = epoch_ns_ + uint64_t(to_ns(when));
  const uint32_t caplen = uint32_t(frame.size());
  const uint32_t padded = (caplen + 3) & ~3u;
  const uint32_t total = 32 + padded;
  uint32_t hdr[7] = {6, total, interface, uint32_t(ts >> 32), uint32_t(ts), caplen, caplen};
  std::fwrite(hdr, 1, sizeof hdr, f_);
  std::fwrite(frame.data(), 1, caplen, f_);
  static constexpr uint8_t kZero[4] = {};
  std::fwrite(kZero, 1, padded - caplen, f_);
  std::fwrite(&total, 1, 4, f_);
  packets_++;
}

void Capture::flush() { std::fflush(f_); }

}  // namespace rocemu
