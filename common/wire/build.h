// Encoders. RoCE packets are built in two steps so the payload can be placed
// straight into the frame (by DMA, in the NIC): write_roce_headers() lays
// down Ethernet..extension headers with the lengths of the final packet,
// the caller copies the payload behind them, and seal_roce() writes the pad
// and the ICRC.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "common/wire/ethernet.h"
#include "common/wire/ip.h"
#include "common/wire/pfc.h"
#include "common/wire/roce.h"

namespace rocemu::wire {

// Everything below the BTH that stays the same for all packets of a flow.
struct PathHeaders {
  MacAddr src_mac, dst_mac;
  bool vlan = false;
  uint16_t vid = 0;
  uint8_t pcp = 0;
  bool ipv6 = false;
  IpAddr src_ip, dst_ip;
  uint8_t dscp = 0;
  Ecn ecn = Ecn::kNotEct;
  uint8_t ttl = 64;           // hop limit for IPv6
  uint32_t flow_label = 0;    // IPv6 only
  uint16_t udp_sport = 0xc000;
  uint16_t ipv4_id = 0;

  uint32_t l2_len() const { return vlan ? 18 : 14; }
  uint32_t l3_len() const { return ipv6 ? 40 : 20; }
  // Ethernet + VLAN + IP + UDP
  uint32_t outer_len() const { return l2_len() + l3_len() + 8; }
};

// The transport header fields; only the extension headers the opcode table
// lists for `opcode` are written.
struct RoceFields {
  uint8_t opcode = 0;
  bool se = false;
  bool mig_req = false;
  bool fecn = false, becn = false;
  bool ack_req = false;
  uint16_t pkey = 0xffff;
  uint32_t dest_qp = 0;
  uint32_t psn = 0;
  // extension headers
  uint64_t reth_va = 0;
  uint32_t reth_rkey = 0;
  uint32_t reth_len = 0;
  uint8_t aeth_syndrome = 0;
  uint32_t aeth_msn = 0;
  uint64_t atomic_va = 0;
  uint32_t atomic_rkey = 0;
  uint64_t atomic_swap_add = 0;
  uint64_t atomic_compare = 0;
  uint64_t atomic_orig = 0;
  uint32_t imm = 0;         // as the application sees it (host order)
  uint32_t ieth_rkey = 0;
  uint32_t deth_qkey = 0;
  uint32_t deth_src_qp = 0;
  uint32_t xrc_srqn = 0;    // XRC requests: the target's SRQ
};

// Bytes needed for all headers up to the payload.
uint32_t roce_header_len(const PathHeaders& path, uint8_t opcode);
// Bytes of the whole frame for a payload of `payload_len` bytes.
uint32_t roce_frame_len(const PathHeaders& path, uint8_t opcode, uint32_t payload_len);
constexpr uint8_t pad_for(uint32_t payload_len) { return uint8_t((4 - (payload_len & 3)) & 3); }

// Writes all headers for a packet whose payload will be `payload_len`
// bytes. Returns the header length, or 0 if `out` is too small for the
// whole frame.
uint32_t write_roce_headers(std::span<uint8_t> out, const PathHeaders& path, const RoceFields& f,
                            uint32_t payload_len);
// Writes pad bytes and the ICRC once the payload is in place.
void seal_roce(std::span<uint8_t> frame, const PathHeaders& path, uint32_t payload_len);
// Writes only the pad bytes: the ICRC is left for seal_icrc(), to be
// computed when (and if) someone looks at the bytes.
void pad_roce(std::span<uint8_t> frame, uint32_t payload_len);
// Recomputes the ICRC of a complete frame in place (after e.g. trimming).
void reseal_roce(std::span<uint8_t> frame, uint32_t l3_off, bool ipv6);
// The same, finding the IP header behind Ethernet (and one VLAN tag);
// false, and nothing written, if the frame is not IPv4 or IPv6.
bool seal_icrc(std::span<uint8_t> frame);

// Whole packet in one call; returns the frame length or 0 if `out` is too small.
uint32_t encode_roce(std::span<uint8_t> out, const PathHeaders& path, const RoceFields& f,
                     std::span<const uint8_t> payload);

// CNP: BTH opcode 0x81 with BECN set, 16 zero bytes, ICRC.
uint32_t encode_cnp(std::span<uint8_t> out, const PathHeaders& path, uint32_t dest_qp);

// 802.1Qbb PFC frame (60 bytes, no FCS). `quanta[i]` applies to priority i
// when bit i of `class_enable` is set.
uint32_t encode_pfc(std::span<uint8_t> out, const MacAddr& src, uint8_t class_enable,
                    const uint16_t (&quanta)[kNumPriorities]);

// ARP request/reply (padded to 60 bytes).
uint32_t encode_arp(std::span<uint8_t> out, uint16_t oper, const MacAddr& sha, uint32_t spa,
                    const MacAddr& tha, uint32_t tpa, const MacAddr& dst);

// The UDP source port rdma-core derives from an IPv6 flow label
// (ibv_flow_label_to_udp_sport), and the flow label derived from a QPN pair
// when the application set none (rdma_calc_flow_label).
constexpr uint16_t flow_label_to_udp_sport(uint32_t fl) {
  const uint32_t lo = (fl & 0x03fff) ^ ((fl & 0xfc000) >> 14);
  return uint16_t(lo | 0xc000);
}
constexpr uint32_t calc_flow_label(uint32_t lqpn, uint32_t rqpn) {
  uint64_t v = uint64_t(lqpn) * rqpn;
  v ^= v >> 20;
  v ^= v >> 40;
  return uint32_t(v & 0xfffff);
}

}  // namespace rocemu::wire
