// RoCEv2 invariant CRC. CRC-32 (IEEE, reflected) seeded with 0xffffffff
// over eight 0xff bytes standing for the absent LRH, then the IP header, UDP
// header, BTH, extension headers, payload and pad, with the fields routers
// may change masked to ones: IPv4 TOS, TTL and checksum; IPv6 traffic
// class, flow label and hop limit; UDP checksum; the BTH FECN/BECN/resv6
// byte. The result is complemented and sent least significant byte first
// (kernel rxe_icrc.c, scapy contrib/roce.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace rocemu::wire {

// Plain CRC-32 continuation: crc32_update(0, p, n) is zlib's crc32(0, p, n).
// Uses carry-less multiplication where the CPU has it.
uint32_t crc32_update(uint32_t crc, const uint8_t* data, size_t len);
// The same through zlib alone (the reference the fast path is tested
// against).
uint32_t crc32_reference(uint32_t crc, const uint8_t* data, size_t len);

// ICRC of a RoCEv2 packet given the bytes from the start of the IP header
// up to (not including) the ICRC field. `ipv6` selects the mask layout.
uint32_t compute_icrc(std::span<const uint8_t> ip_to_icrc, bool ipv6);

}  // namespace rocemu::wire
