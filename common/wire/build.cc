#include "common/wire/build.h"

#include <cstring>

#include "common/wire/icrc.h"

namespace rocemu::wire {
namespace {

// Ethernet (+VLAN) header; returns its length.
uint32_t write_l2(uint8_t* p, const MacAddr& dst, const MacAddr& src, bool vlan, uint8_t pcp,
                  uint16_t vid, EtherType type) {
  auto* eth = reinterpret_cast<EthHdr*>(p);
  eth->dst = dst;
  eth->src = src;
  if (!vlan) {
    eth->ether_type.set(uint16_t(type));
    return sizeof(EthHdr);
  }
  eth->ether_type.set(uint16_t(EtherType::kVlan));
  auto* tag = reinterpret_cast<VlanTag*>(p + sizeof(EthHdr));
  tag->set_tci(pcp, false, vid);
  tag->ether_type.set(uint16_t(type));
  return sizeof(EthHdr) + sizeof(VlanTag);
}

}  // namespace

uint32_t roce_header_len(const PathHeaders& path, uint8_t opcode) {
  return path.outer_len() + sizeof(Bth) + opcode_info(opcode).ext_len;
}

uint32_t roce_frame_len(const PathHeaders& path, uint8_t opcode, uint32_t payload_len) {
  return roce_header_len(path, opcode) + payload_len + pad_for(payload_len) + kIcrcLen;
}

uint32_t write_roce_headers(std::span<uint8_t> out, const PathHeaders& path, const RoceFields& f,
                            uint32_t payload_len) {
  const OpcodeInfo& info = opcode_info(f.opcode);
  const uint32_t frame_len = roce_frame_len(path, f.opcode, payload_len);
  if (out.size() < frame_len) return 0;
  uint8_t* p = out.data();
  const uint8_t pad = pad_for(payload_len);
  const uint32_t l2 = write_l2(p, path.dst_mac, path.src_mac, path.vlan, path.pcp, path.vid,
                               path.ipv6 ? EtherType::kIpv6 : EtherType::kIpv4);
  const uint32_t udp_len = frame_len - l2 - path.l3_len();
  uint8_t* l3 = p + l2;
  if (path.ipv6) {
    auto* ip = reinterpret_cast<Ipv6Hdr*>(l3);
    ip->set(uint8_t(path.dscp << 2 | uint8_t(path.ecn)), path.flow_label);
    ip->payload_length.set(uint16_t(udp_len));
    ip->next_header = kIpProtoUdp;
    ip->hop_limit = path.ttl;
    ip->src = path.src_ip.b;
    ip->dst = path.dst_ip.b;
  } else {
    auto* ip = reinterpret_cast<Ipv4Hdr*>(l3);
    const uint8_t tos = uint8_t(path.dscp << 2 | uint8_t(path.ecn));
    const uint16_t total_length = uint16_t(udp_len + sizeof(Ipv4Hdr));
    constexpr uint16_t kFrag = 0x4000;  // don't fragment, as RoCE NICs send
    const uint32_t src = path.src_ip.v4_host_order(), dst = path.dst_ip.v4_host_order();
    ip->version_ihl = 0x45;
    ip->tos = tos;
    ip->total_length.set(total_length);
    ip->id.set(path.ipv4_id);
    ip->frag.set(kFrag);
    ip->ttl = path.ttl;
    ip->protocol = kIpProtoUdp;
    ip->src.set(src);
    ip->dst.set(dst);
    // The RFC 1071 sum of the words just written, from the values rather
    // than read back from the frame: a load of the header right after its
    // byte-wide stores waits for them to reach the cache (no store
    // forwarding), once per packet sent. Same value as ipv4_checksum().
    uint32_t sum = uint32_t(0x4500 | tos) + total_length + path.ipv4_id + kFrag +
                   (uint32_t(path.ttl) << 8 | kIpProtoUdp) + (src >> 16) + (src & 0xffff) + (dst >> 16) +
                   (dst & 0xffff);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    ip->checksum.set(uint16_t(~sum));
  }
  auto* udp = reinterpret_cast<UdpHdr*>(l3 + path.l3_len());
  udp->src_port.set(path.udp_sport);
  udp->dst_port.set(kRoceV2Port);
  udp->length.set(uint16_t(udp_len));
  udp->checksum.set(0);

  uint8_t* t = reinterpret_cast<uint8_t*>(udp) + sizeof(UdpHdr);
  auto* bth = reinterpret_cast<Bth*>(t);
  bth->opcode = f.opcode;
  bth->set_flags(f.se, f.mig_req, pad);
  bth->pkey.set(f.pkey);
  bth->set_qpn(f.dest_qp, f.fecn, f.becn);
  bth->set_psn(f.psn, f.ack_req);
  t += sizeof(Bth);
  if (info.has(kExtDeth)) {
    auto* h = reinterpret_cast<Deth*>(t);
    h->qkey.set(f.deth_qkey);
    h->set_src_qp(f.deth_src_qp);
    t += sizeof(Deth);
  }
  if (info.has(kExtXrceth)) {
    reinterpret_cast<Xrceth*>(t)->set_srqn(f.xrc_srqn);
    t += sizeof(Xrceth);
  }
  if (info.has(kExtReth)) {
    auto* h = reinterpret_cast<Reth*>(t);
    h->va.set(f.reth_va);
    h->rkey.set(f.reth_rkey);
    h->dma_length.set(f.reth_len);
    t += sizeof(Reth);
  }
  if (info.has(kExtAtomicEth)) {
    auto* h = reinterpret_cast<AtomicEth*>(t);
    h->va.set(f.atomic_va);
    h->rkey.set(f.atomic_rkey);
    h->swap_add.set(f.atomic_swap_add);
    h->compare.set(f.atomic_compare);
    t += sizeof(AtomicEth);
  }
  if (info.has(kExtAeth)) {
    reinterpret_cast<Aeth*>(t)->set(f.aeth_syndrome, f.aeth_msn);
    t += sizeof(Aeth);
  }
  if (info.has(kExtAtomicAck)) {
    reinterpret_cast<AtomicAckEth*>(t)->orig.set(f.atomic_orig);
    t += sizeof(AtomicAckEth);
  }
  if (info.has(kExtImmDt)) {
    reinterpret_cast<ImmDt*>(t)->imm.set(f.imm);
    t += sizeof(ImmDt);
  }
  if (info.has(kExtIeth)) {
    reinterpret_cast<Ieth*>(t)->rkey.set(f.ieth_rkey);
    t += sizeof(Ieth);
  }
  return uint32_t(t - p);
}

void seal_roce(std::span<uint8_t> frame, const PathHeaders& path, uint32_t payload_len) {
  pad_roce(frame, payload_len);
  reseal_roce(frame, path.l2_len(), path.ipv6);
}

void pad_roce(std::span<uint8_t> frame, uint32_t payload_len) {
  const uint32_t pad = pad_for(payload_len);
  const uint32_t icrc_off = uint32_t(frame.size()) - kIcrcLen;
  std::memset(frame.data() + icrc_off - pad, 0, pad);
}

bool seal_icrc(std::span<uint8_t> frame) {
  if (frame.size() < 14) return false;
  uint32_t l3 = 14;
  uint16_t type = uint16_t(frame[12] << 8 | frame[13]);
  if (type == 0x8100) {
    if (frame.size() < 18) return false;
    l3 = 18;
    type = uint16_t(frame[16] << 8 | frame[17]);
  }
  const bool ipv6 = type == 0x86dd;
  if (!ipv6 && type != 0x0800) return false;
  const uint32_t min_ip = ipv6 ? 40 : 20;
  if (frame.size() < l3 + min_ip + kIcrcLen) return false;
  reseal_roce(frame, l3, ipv6);
  return true;
}

void reseal_roce(std::span<uint8_t> frame, uint32_t l3_off, bool ipv6) {
  const uint32_t icrc_off = uint32_t(frame.size()) - kIcrcLen;
  const uint32_t icrc = compute_icrc(frame.subspan(l3_off, icrc_off - l3_off), ipv6);
  uint8_t* q = frame.data() + icrc_off;
  q[0] = uint8_t(icrc);
  q[1] = uint8_t(icrc >> 8);
  q[2] = uint8_t(icrc >> 16);
  q[3] = uint8_t(icrc >> 24);
}

uint32_t encode_roce(std::span<uint8_t> out, const PathHeaders& path, const RoceFields& f,
                     std::span<const uint8_t> payload) {
  const uint32_t hdr = write_roce_headers(out, path, f, uint32_t(payload.size()));
  if (hdr == 0) return 0;
  if (!payload.empty()) std::memcpy(out.data() + hdr, payload.data(), payload.size());
  const uint32_t len = roce_frame_len(path, f.opcode, uint32_t(payload.size()));
  seal_roce(out.first(len), path, uint32_t(payload.size()));
  return len;
}

uint32_t encode_cnp(std::span<uint8_t> out, const PathHeaders& path, uint32_t dest_qp) {
  RoceFields f;
  f.opcode = op::kCnp;
  f.becn = true;
  f.dest_qp = dest_qp;
  f.psn = 0;
  static constexpr uint8_t kZero[kCnpPadLen] = {};
  return encode_roce(out, path, f, kZero);
}

uint32_t encode_pfc(std::span<uint8_t> out, const MacAddr& src, uint8_t class_enable,
                    const uint16_t (&quanta)[kNumPriorities]) {
  if (out.size() < kPfcFrameLen) return 0;
  std::memset(out.data(), 0, kPfcFrameLen);
  const uint32_t l2 = write_l2(out.data(), kMacControlMac, src, false, 0, 0, EtherType::kMacControl);
  auto* pfc = reinterpret_cast<PfcHdr*>(out.data() + l2);
  pfc->opcode.set(kPfcOpcode);
  pfc->class_enable.set(class_enable);
  for (int i = 0; i < kNumPriorities; i++) pfc->time[i].set((class_enable >> i) & 1 ? quanta[i] : 0);
  return kPfcFrameLen;
}

uint32_t encode_arp(std::span<uint8_t> out, uint16_t oper, const MacAddr& sha, uint32_t spa,
                    const MacAddr& tha, uint32_t tpa, const MacAddr& dst) {
  constexpr uint32_t kLen = 60;
  if (out.size() < kLen) return 0;
  std::memset(out.data(), 0, kLen);
  const uint32_t l2 = write_l2(out.data(), dst, sha, false, 0, 0, EtherType::kArp);
  auto* arp = reinterpret_cast<ArpHdr*>(out.data() + l2);
  arp->htype.set(1);
  arp->ptype.set(0x0800);
  arp->hlen = 6;
  arp->plen = 4;
  arp->oper.set(oper);
  arp->sha = sha;
  arp->spa.set(spa);
  arp->tha = tha;
  arp->tpa.set(tpa);
  return kLen;
}

}  // namespace rocemu::wire
