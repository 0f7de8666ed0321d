// InfiniBand CM MADs (IBA vol. 1 ch. 12; kernel include/rdma/ibta_vol1_c12.h)
// as RoCEv2 carries them: a UD SEND to QP1 whose payload is a 256-byte
// management datagram, a 24-byte MAD header then a 232-byte CM message.
// Each message field is a row (byte offset after the MAD header, first bit
// counted from the byte's most significant bit, width in bits), read and
// written through one pair of accessors; byte arrays (GIDs, private data)
// are (offset, length) rows.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "common/byteorder.h"

namespace rocemu::nic::cm {

inline constexpr size_t kMadSize = 256;
inline constexpr size_t kMadHeaderSize = 24;
inline constexpr size_t kCmMessageSize = kMadSize - kMadHeaderSize;  // 232
inline constexpr uint8_t kMgmtClassCm = 0x07;
inline constexpr uint8_t kCmClassVersion = 2;
inline constexpr uint8_t kMadMethodSend = 0x03;
inline constexpr uint32_t kGsiQpn = 1;
inline constexpr uint32_t kGsiQkey = 0x80010000;  // IB_QP1_QKEY

enum class Attr : uint16_t {
  kReq = 0x10,
  kMra = 0x11,
  kRej = 0x12,
  kRep = 0x13,
  kRtu = 0x14,
  kDreq = 0x15,
  kDrep = 0x16,
  kSidrReq = 0x17,
  kSidrRep = 0x18,
};
const char* attr_name(Attr a);

struct __attribute__((packed)) MadHeader {
  uint8_t base_version;
  uint8_t mgmt_class;
  uint8_t class_version;
  uint8_t method;
  be16 status;
  be16 class_specific;
  be64 tid;
  be16 attr_id;
  be16 reserved;
  be32 attr_mod;
};
static_assert(sizeof(MadHeader) == kMadHeaderSize);

// A field of a CM message: `width` bits from bit `bit` (0 = most
// significant) of byte `offset` on.
struct Field {
  uint16_t offset;
  uint8_t bit;
  uint8_t width;
};
struct Bytes {
  uint16_t offset;
  uint16_t length;
};

// The fields rdma_cm uses, per message (offsets as in ibta_vol1_c12.h
// less the MAD header).
namespace req {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kServiceId{8, 0, 64};
inline constexpr Field kCaGuid{16, 0, 64};
inline constexpr Field kQkey{28, 0, 32};
inline constexpr Field kQpn{32, 0, 24};
inline constexpr Field kResponderResources{35, 0, 8};
inline constexpr Field kInitiatorDepth{39, 0, 8};
inline constexpr Field kRemoteCmResponseTimeout{43, 0, 5};
inline constexpr Field kTransportType{43, 5, 2};  // 0 RC, 1 UC, 3 extended
inline constexpr Field kEndToEndFlowControl{43, 7, 1};
inline constexpr Field kStartingPsn{44, 0, 24};
inline constexpr Field kLocalCmResponseTimeout{47, 0, 5};
inline constexpr Field kRetryCount{47, 5, 3};
inline constexpr Field kPkey{48, 0, 16};
inline constexpr Field kPathMtu{50, 0, 4};
inline constexpr Field kRnrRetryCount{50, 5, 3};
inline constexpr Field kMaxCmRetries{51, 0, 4};
inline constexpr Field kSrq{51, 4, 1};
inline constexpr Field kExtendedTransportType{51, 5, 3};  // 1 XRC with transport type 3
inline constexpr Field kLocalLid{52, 0, 16};
inline constexpr Field kRemoteLid{54, 0, 16};
inline constexpr Bytes kLocalGid{56, 16};
inline constexpr Bytes kRemoteGid{72, 16};
inline constexpr Field kFlowLabel{88, 0, 20};
inline constexpr Field kPacketRate{91, 2, 6};
inline constexpr Field kTrafficClass{92, 0, 8};
inline constexpr Field kHopLimit{93, 0, 8};
inline constexpr Field kSl{94, 0, 4};
inline constexpr Field kSubnetLocal{94, 4, 1};
inline constexpr Field kLocalAckTimeout{95, 0, 5};
inline constexpr Bytes kPrivateData{140, 92};
}  // namespace req

namespace rep {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kRemoteCommId{4, 0, 32};
inline constexpr Field kQkey{8, 0, 32};
inline constexpr Field kQpn{12, 0, 24};
inline constexpr Field kStartingPsn{20, 0, 24};
inline constexpr Field kResponderResources{24, 0, 8};
inline constexpr Field kInitiatorDepth{25, 0, 8};
inline constexpr Field kTargetAckDelay{26, 0, 5};
inline constexpr Field kFailoverAccepted{26, 5, 2};
inline constexpr Field kEndToEndFlowControl{26, 7, 1};
inline constexpr Field kRnrRetryCount{27, 0, 3};
inline constexpr Field kSrq{27, 3, 1};
inline constexpr Field kCaGuid{28, 0, 64};
inline constexpr Bytes kPrivateData{36, 196};
}  // namespace rep

namespace rej {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kRemoteCommId{4, 0, 32};
inline constexpr Field kMessageRejected{8, 0, 2};  // 0 REQ, 1 REP, 2 other
inline constexpr Field kRejectInfoLength{9, 0, 7};
inline constexpr Field kReason{10, 0, 16};
inline constexpr Bytes kPrivateData{84, 148};
}  // namespace rej

namespace rtu {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kRemoteCommId{4, 0, 32};
inline constexpr Bytes kPrivateData{8, 224};
}  // namespace rtu

namespace dreq {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kRemoteCommId{4, 0, 32};
inline constexpr Field kRemoteQpn{8, 0, 24};
inline constexpr Bytes kPrivateData{12, 220};
}  // namespace dreq

namespace drep {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kRemoteCommId{4, 0, 32};
inline constexpr Bytes kPrivateData{8, 224};
}  // namespace drep

namespace mra {
inline constexpr Field kLocalCommId{0, 0, 32};
inline constexpr Field kRemoteCommId{4, 0, 32};
inline constexpr Field kMessageMraed{8, 0, 2};
inline constexpr Field kServiceTimeout{9, 0, 5};
}  // namespace mra

namespace sidr_req {
inline constexpr Field kRequestId{0, 0, 32};
inline constexpr Field kPkey{4, 0, 16};
inline constexpr Field kServiceId{8, 0, 64};
inline constexpr Bytes kPrivateData{16, 216};
}  // namespace sidr_req

namespace sidr_rep {
inline constexpr Field kRequestId{0, 0, 32};
inline constexpr Field kStatus{4, 0, 8};
inline constexpr Field kQpn{8, 0, 24};
inline constexpr Field kServiceId{12, 0, 64};
inline constexpr Field kQkey{20, 0, 32};
inline constexpr Bytes kPrivateData{96, 136};
}  // namespace sidr_rep

// REJ reasons (IBA table 112; ib_cm.h).
inline constexpr uint16_t kRejTimeout = 1;
inline constexpr uint16_t kRejInvalidServiceId = 8;
inline constexpr uint16_t kRejStaleConn = 10;
inline constexpr uint16_t kRejConsumerDefined = 28;
// SIDR_REP status: no listener for the service ID.
inline constexpr uint8_t kSidrUnsupported = 1;
inline constexpr uint8_t kSidrReject = 2;

// One CM MAD: header plus message, big-endian as on the wire.
class Mad {
 public:
  Mad() = default;
  // A SEND of `attr` with transaction ID `tid`.
  Mad(Attr attr, uint64_t tid);
  // The MAD in `payload` if it is a CM SEND of at least 256 bytes.
  static std::optional<Mad> parse(std::span<const uint8_t> payload);

  Attr attr() const { return Attr(header().attr_id.get()); }
  uint64_t tid() const { return header().tid.get(); }
  const MadHeader& header() const { return *reinterpret_cast<const MadHeader*>(raw_.data()); }

  uint64_t get(Field f) const;
  void set(Field f, uint64_t v);
  std::span<const uint8_t> bytes(Bytes b) const { return {message() + b.offset, b.length}; }
  // Copies at most b.length bytes of `src`; the rest stays zero.
  void set_bytes(Bytes b, std::span<const uint8_t> src);

  std::span<const uint8_t> wire() const { return raw_; }

 private:
  const uint8_t* message() const { return raw_.data() + kMadHeaderSize; }
  uint8_t* message() { return raw_.data() + kMadHeaderSize; }
  std::array<uint8_t, kMadSize> raw_{};
};

// The rdma_cm private-data header that opens a REQ's or SIDR_REQ's private
// data (kernel cma.c struct cma_hdr): version 0, IP version in the high
// nibble, the active side's port, then source and destination as
// IPv4-mapped IPv6 (an IPv4 address in the last 4 bytes).
struct CmaHeader {
  uint8_t ip_version = 4;
  uint16_t src_port = 0;
  std::array<uint8_t, 16> src{}, dst{};
  static constexpr size_t kSize = 36;
  void encode(std::span<uint8_t, kSize> out) const;
  static std::optional<CmaHeader> decode(std::span<const uint8_t> in);
};

// The IP-based service ID of port space `ps` (RDMA_PS_TCP 0x106, UDP
// 0x111, IB 0x13f) and port: ps << 16 | port.
constexpr uint64_t service_id(uint16_t ps, uint16_t port) { return uint64_t(ps) << 16 | port; }
constexpr uint16_t service_port(uint64_t sid) { return uint16_t(sid & 0xffff); }
constexpr uint16_t service_ps(uint64_t sid) { return uint16_t(sid >> 16); }

}  // namespace rocemu::nic::cm
