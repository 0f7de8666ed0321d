#include "nic/cm/mad.h"

#include <algorithm>
#include <cstring>

namespace rocemu::nic::cm {

const char* attr_name(Attr a) {
  switch (a) {
    case Attr::kReq: return "REQ";
    case Attr::kMra: return "MRA";
    case Attr::kRej: return "REJ";
    case Attr::kRep: return "REP";
    case Attr::kRtu: return "RTU";
    case Attr::kDreq: return "DREQ";
    case Attr::kDrep: return "DREP";
    case Attr::kSidrReq: return "SIDR_REQ";
    case Attr::kSidrRep: return "SIDR_REP";
  }
  return "unknown";
}

Mad::Mad(Attr attr, uint64_t tid) {
  auto& h = *reinterpret_cast<MadHeader*>(raw_.data());
  h.base_version = 1;
  h.mgmt_class = kMgmtClassCm;
  h.class_version = kCmClassVersion;
  h.method = kMadMethodSend;
  h.tid.set(tid);
  h.attr_id.set(uint16_t(attr));
}

std::optional<Mad> Mad::parse(std::span<const uint8_t> payload) {
  if (payload.size() < kMadSize) return std::nullopt;
  Mad m;
  std::memcpy(m.raw_.data(), payload.data(), kMadSize);
  const MadHeader& h = m.header();
  if (h.base_version != 1 || h.mgmt_class != kMgmtClassCm || h.class_version != kCmClassVersion ||
      h.method != kMadMethodSend)
    return std::nullopt;
  return m;
}

uint64_t Mad::get(Field f) const {
  const uint8_t* msg = message();
  uint64_t v = 0;
  for (unsigned i = 0; i < f.width; i++) {
    const unsigned bit = f.offset * 8u + f.bit + i;
    v = v << 1 | ((msg[bit / 8] >> (7 - bit % 8)) & 1u);
  }
  return v;
}

void Mad::set(Field f, uint64_t v) {
  uint8_t* msg = message();
  for (unsigned i = 0; i < f.width; i++) {
    const unsigned bit = f.offset * 8u + f.bit + i;
    const uint8_t mask = uint8_t(0x80u >> (bit % 8));
    if ((v >> (f.width - 1 - i)) & 1u) msg[bit / 8] |= mask;
    else msg[bit / 8] &= uint8_t(~mask);
  }
}

void Mad::set_bytes(Bytes b, std::span<const uint8_t> src) {
  uint8_t* dst = message() + b.offset;
  std::memset(dst, 0, b.length);
  if (!src.empty()) std::memcpy(dst, src.data(), std::min<size_t>(src.size(), b.length));
}

void CmaHeader::encode(std::span<uint8_t, kSize> out) const {
  out[0] = 0;  // cma_version
  out[1] = uint8_t(ip_version << 4);
  out[2] = uint8_t(src_port >> 8);
  out[3] = uint8_t(src_port);
  std::memcpy(out.data() + 4, src.data(), 16);
  std::memcpy(out.data() + 20, dst.data(), 16);
}

std::optional<CmaHeader> CmaHeader::decode(std::span<const uint8_t> in) {
  if (in.size() < kSize || in[0] != 0) return std::nullopt;
  CmaHeader h;
  h.ip_version = in[1] >> 4;
  if (h.ip_version != 4 && h.ip_version != 6) return std::nullopt;
  h.src_port = uint16_t(in[2] << 8 | in[3]);
  std::memcpy(h.src.data(), in.data() + 4, 16);
  std::memcpy(h.dst.data(), in.data() + 20, 16);
  return h;
}

}  // namespace rocemu::nic::cm
