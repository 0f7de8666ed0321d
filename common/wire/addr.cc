#include <arpa/inet.h>

#include <bit>
#include <cstdio>
#include <cstring>

#include "common/wire/ethernet.h"
#include "common/wire/ip.h"

namespace rocemu::wire {

std::optional<MacAddr> MacAddr::parse(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddr m{};
  for (int i = 0; i < 6; i++) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(text[size_t(i) * 3]), lo = hex(text[size_t(i) * 3 + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    if (i < 5 && text[size_t(i) * 3 + 2] != ':') return std::nullopt;
    m.b[size_t(i)] = uint8_t(hi << 4 | lo);
  }
  return m;
}

std::string MacAddr::str() const {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5]);
  return buf;
}

IpAddr IpAddr::v4(uint32_t host_order) {
  IpAddr a;
  a.b[10] = a.b[11] = 0xff;
  a.b[12] = uint8_t(host_order >> 24);
  a.b[13] = uint8_t(host_order >> 16);
  a.b[14] = uint8_t(host_order >> 8);
  a.b[15] = uint8_t(host_order);
  return a;
}

bool IpAddr::is_v4() const {
  for (int i = 0; i < 10; i++)
    if (b[size_t(i)] != 0) return false;
  return b[10] == 0xff && b[11] == 0xff;
}

uint32_t IpAddr::v4_host_order() const {
  return uint32_t(b[12]) << 24 | uint32_t(b[13]) << 16 | uint32_t(b[14]) << 8 | b[15];
}

std::optional<IpAddr> IpAddr::parse(std::string_view text) {
  std::string s(text);
  in_addr a4{};
  if (inet_pton(AF_INET, s.c_str(), &a4) == 1) return v4(ntohl(a4.s_addr));
  IpAddr a;
  if (inet_pton(AF_INET6, s.c_str(), a.b.data()) == 1) return a;
  return std::nullopt;
}

std::string IpAddr::str() const {
  char buf[INET6_ADDRSTRLEN];
  if (is_v4()) {
    in_addr a4{htonl(v4_host_order())};
    inet_ntop(AF_INET, &a4, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, b.data(), buf, sizeof buf);
  }
  return buf;
}

uint16_t ipv4_checksum(std::span<const uint8_t> h) {
  // The one's complement sum does not care about byte order (RFC 1071,
  // 2.B): add 32-bit words as they are in memory, fold, and swap once.
  static_assert(std::endian::native == std::endian::little);
  uint64_t sum = 0;
  if (h.size() == 20) {  // no options: almost every header
    uint32_t w[5];
    std::memcpy(w, h.data(), sizeof w);
    sum = uint64_t(w[0]) + w[1] + w[2] + w[3] + w[4];
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return __builtin_bswap16(uint16_t(~sum));
  }
  size_t i = 0;
  for (; i + 4 <= h.size(); i += 4) {
    uint32_t w;
    std::memcpy(&w, h.data() + i, 4);
    sum += w;
  }
  if (i + 2 <= h.size()) {
    uint16_t w;
    std::memcpy(&w, h.data() + i, 2);
    sum += w;
    i += 2;
  }
  if (i < h.size()) sum += h[i];  // an odd last byte is the high half of a zero-padded word
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return __builtin_bswap16(uint16_t(~sum));
}

}  // namespace rocemu::wire
