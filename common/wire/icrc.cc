#include "common/wire/icrc.h"

#include <immintrin.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "common/wire/ip.h"
#include "common/wire/roce.h"

namespace rocemu::wire {

namespace {

// CRC-32 by folding with carry-less multiplication (Gopal et al., "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ", Intel 2009), for
// the bit-reflected IEEE polynomial. Works on the raw (not inverted)
// register, over a multiple of 16 bytes, at least 64.
//   k1, k2: fold 512 bits;  k3, k4: fold 128 bits;  k5: 64 -> 32 bits;
//   p, u:   Barrett reduction (P' and mu for the reflected polynomial).
#define ROCEMU_CLMUL __attribute__((target("pclmul,sse4.1")))

ROCEMU_CLMUL inline __m128i load(const uint8_t* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); }

// One fold: the 128-bit lane times x^k, added to the next block.
ROCEMU_CLMUL inline __m128i fold(__m128i acc, __m128i k, __m128i next) {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(acc, k, 0x00), _mm_clmulepi64_si128(acc, k, 0x11)), next);
}

ROCEMU_CLMUL uint32_t fold_pclmul(uint32_t raw, const uint8_t* p, size_t n) {
  const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
  const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
  const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124);
  const __m128i pu = _mm_set_epi64x(0x01f7011641, 0x01db710641);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i a = _mm_xor_si128(load(p), _mm_cvtsi32_si128(int(raw)));
  __m128i b = load(p + 16), c = load(p + 32), d = load(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    a = fold(a, k1k2, load(p));
    b = fold(b, k1k2, load(p + 16));
    c = fold(c, k1k2, load(p + 32));
    d = fold(d, k1k2, load(p + 48));
  }
  a = fold(a, k3k4, b);
  a = fold(a, k3k4, c);
  a = fold(a, k3k4, d);
  for (; n >= 16; p += 16, n -= 16) a = fold(a, k3k4, load(p));
  // 128 -> 64 bits.
  a = _mm_xor_si128(_mm_srli_si128(a, 8), _mm_clmulepi64_si128(a, k3k4, 0x10));
  // 64 -> 32 bits.
  a = _mm_xor_si128(_mm_srli_si128(a, 4), _mm_clmulepi64_si128(_mm_and_si128(a, low32), k5, 0x00));
  // Barrett reduction.
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), pu, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), pu, 0x00);
  return uint32_t(_mm_extract_epi32(_mm_xor_si128(a, t), 1));
}

const bool kHavePclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");

}  // namespace

uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t len) {
  if (kHavePclmul && len >= 64) {
    const size_t bulk = len & ~size_t(15);
    crc = ~fold_pclmul(~crc, data, bulk);
    data += bulk;
    len -= bulk;
  }
  return uint32_t(::crc32_z(crc, data, len));
}

uint32_t crc32_reference(uint32_t crc, const uint8_t* data, size_t len) {
  return uint32_t(::crc32_z(crc, data, len));
}

uint32_t compute_icrc(std::span<const uint8_t> pkt, bool ipv6) {
  const size_t ip_len = ipv6 ? sizeof(Ipv6Hdr) : sizeof(Ipv4Hdr);
  const size_t masked_len = ip_len + sizeof(UdpHdr) + sizeof(Bth);
  if (pkt.size() < masked_len) return 0;

  // 8 bytes of pseudo LRH (all ones) followed by a masked copy of IP+UDP+BTH.
  uint8_t head[8 + sizeof(Ipv6Hdr) + sizeof(UdpHdr) + sizeof(Bth)];
  std::memset(head, 0xff, 8);
  std::memcpy(head + 8, pkt.data(), masked_len);
  uint8_t* ip = head + 8;
  if (ipv6) {
    // version:4 | traffic class:8 | flow label:20 -> keep only the version.
    ip[0] |= 0x0f;
    ip[1] = ip[2] = ip[3] = 0xff;
    ip[7] = 0xff;  // hop limit
  } else {
    ip[1] = 0xff;             // TOS
    ip[8] = 0xff;             // TTL
    ip[10] = ip[11] = 0xff;   // header checksum
  }
  uint8_t* udp = ip + ip_len;
  udp[6] = udp[7] = 0xff;  // UDP checksum
  uint8_t* bth = udp + sizeof(UdpHdr);
  bth[4] = 0xff;  // FECN, BECN, resv6

  uint32_t crc = crc32_update(0, head, 8 + masked_len);
  crc = crc32_update(crc, pkt.data() + masked_len, pkt.size() - masked_len);
  return crc;
}

}  // namespace rocemu::wire
