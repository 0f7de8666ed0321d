// RoCEv2 transport headers: BTH and the extension headers used by RC, UC,
// UD and XRC, plus the opcode table that says which extension headers follow
// the BTH (IBA vol. 1 ch. 9; kernel rxe rxe_hdr.h / rxe_opcode.c).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "common/byteorder.h"

namespace rocemu::wire {

// ---------------------------------------------------------------- BTH ----
struct __attribute__((packed)) Bth {
  uint8_t opcode;
  uint8_t flags;  // SE:1 MigReq:1 PadCnt:2 TVer:4
  be16 pkey;
  be32 qpn_word;  // FECN:1 BECN:1 resv:6 DestQP:24
  be32 psn_word;  // AckReq:1 resv:7 PSN:24

  bool se() const { return flags & 0x80; }
  bool mig_req() const { return flags & 0x40; }
  uint8_t pad_count() const { return (flags >> 4) & 3; }
  uint8_t tver() const { return flags & 0x0f; }
  bool fecn() const { return qpn_word.get() & 0x80000000u; }
  bool becn() const { return qpn_word.get() & 0x40000000u; }
  uint32_t dest_qp() const { return qpn_word.get() & 0xffffff; }
  bool ack_req() const { return psn_word.get() & 0x80000000u; }
  uint32_t psn() const { return psn_word.get() & 0xffffff; }

  void set_flags(bool se, bool mig_req, uint8_t pad_count) {
    flags = uint8_t((se ? 0x80 : 0) | (mig_req ? 0x40 : 0) | (pad_count & 3) << 4);
  }
  void set_qpn(uint32_t qpn, bool fecn = false, bool becn = false) {
    qpn_word.set((fecn ? 0x80000000u : 0) | (becn ? 0x40000000u : 0) | (qpn & 0xffffff));
  }
  void set_psn(uint32_t psn, bool ack_req) {
    psn_word.set((ack_req ? 0x80000000u : 0) | (psn & 0xffffff));
  }
};
static_assert(sizeof(Bth) == 12);

// --------------------------------------------------- extension headers ----
struct __attribute__((packed)) Reth {  // RDMA extended transport header
  be64 va;
  be32 rkey;
  be32 dma_length;
};
static_assert(sizeof(Reth) == 16);

struct __attribute__((packed)) Aeth {  // ACK extended transport header
  be32 word;  // syndrome:8 MSN:24

  uint8_t syndrome() const { return uint8_t(word.get() >> 24); }
  uint32_t msn() const { return word.get() & 0xffffff; }
  void set(uint8_t syndrome, uint32_t msn) { word.set(uint32_t(syndrome) << 24 | (msn & 0xffffff)); }
};
static_assert(sizeof(Aeth) == 4);

struct __attribute__((packed)) AtomicEth {
  be64 va;
  be32 rkey;
  be64 swap_add;
  be64 compare;
};
static_assert(sizeof(AtomicEth) == 28);

struct __attribute__((packed)) AtomicAckEth {
  be64 orig;
};
static_assert(sizeof(AtomicAckEth) == 8);

struct __attribute__((packed)) ImmDt {
  be32 imm;
};
static_assert(sizeof(ImmDt) == 4);

struct __attribute__((packed)) Ieth {
  be32 rkey;
};
static_assert(sizeof(Ieth) == 4);

struct __attribute__((packed)) Deth {
  be32 qkey;
  be32 src_qp_word;  // resv:8 SrcQP:24

  uint32_t src_qp() const { return src_qp_word.get() & 0xffffff; }
  void set_src_qp(uint32_t qpn) { src_qp_word.set(qpn & 0xffffff); }
};
static_assert(sizeof(Deth) == 8);

// XRC extended transport header (IBA annex A14): the XRC SRQ a request of an
// XRC transport is for, at the target. Every XRC request carries it.
struct __attribute__((packed)) Xrceth {
  be32 srqn_word;  // resv:8 XRCSRQ:24

  uint32_t srqn() const { return srqn_word.get() & 0xffffff; }
  void set_srqn(uint32_t srqn) { srqn_word.set(srqn & 0xffffff); }
};
static_assert(sizeof(Xrceth) == 4);

inline constexpr uint32_t kIcrcLen = 4;
inline constexpr uint32_t kCnpPadLen = 16;  // CNP: BTH + 16 reserved bytes + ICRC

// ------------------------------------------------------ AETH syndrome ----
// Bits 7:5 select the kind; the low 5 bits are a credit count (ACK), an RNR
// timer code (RNR NAK) or a NAK code.
enum class AethKind : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
enum class NakCode : uint8_t {
  kPsnSeqError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
inline constexpr uint8_t kAethCreditsUnlimited = 0x1f;
constexpr AethKind aeth_kind(uint8_t syndrome) { return AethKind(syndrome >> 5); }
constexpr uint8_t aeth_value(uint8_t syndrome) { return syndrome & 0x1f; }
constexpr uint8_t aeth_ack(uint8_t credits = kAethCreditsUnlimited) { return credits & 0x1f; }
constexpr uint8_t aeth_rnr_nak(uint8_t timer_code) { return uint8_t(0x20 | (timer_code & 0x1f)); }
constexpr uint8_t aeth_nak(NakCode code) { return uint8_t(0x60 | uint8_t(code)); }
static_assert(aeth_nak(NakCode::kPsnSeqError) == 0x60);
static_assert(aeth_nak(NakCode::kRemoteOperationalError) == 0x63);

// The RNR NAK timer code (IBA table 45) as nanoseconds; code 0 is 655.36 ms.
uint32_t rnr_timer_ns(uint8_t code);

// ------------------------------------------------------- opcode table ----
enum class Transport : uint8_t { kRc = 0x00, kUc = 0x20, kRd = 0x40, kUd = 0x60, kCnp = 0x80, kXrc = 0xa0 };

// Extension headers, in the order they follow the BTH on the wire.
enum ExtHeader : uint8_t {
  kExtDeth = 0,
  kExtXrceth,
  kExtReth,
  kExtAtomicEth,
  kExtAeth,
  kExtAtomicAck,
  kExtImmDt,
  kExtIeth,
  kNumExtHeaders
};
static_assert(kNumExtHeaders <= 8, "OpcodeInfo::ext_mask has a bit per header");
inline constexpr std::array<uint8_t, kNumExtHeaders> kExtHeaderLen = {
    sizeof(Deth), sizeof(Xrceth), sizeof(Reth), sizeof(AtomicEth), sizeof(Aeth), sizeof(AtomicAckEth),
    sizeof(ImmDt), sizeof(Ieth)};
inline constexpr std::array<std::string_view, kNumExtHeaders> kExtHeaderName = {
    "DETH", "XRCETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH"};

enum OpFlag : uint16_t {
  kOpPayload = 1 << 0,   // may carry payload
  kOpFirst = 1 << 1,     // first packet of a message (ONLY = FIRST | LAST)
  kOpMiddle = 1 << 2,
  kOpLast = 1 << 3,
  kOpRequest = 1 << 4,   // sent by a requester
  kOpResponse = 1 << 5,  // sent by a responder
  kOpSend = 1 << 6,
  kOpWrite = 1 << 7,
  kOpRead = 1 << 8,      // READ request or READ response
  kOpAtomic = 1 << 9,    // atomic request or atomic ACK
  kOpAck = 1 << 10,      // ACKNOWLEDGE
  kOpImm = 1 << 11,
  kOpInv = 1 << 12,
  kOpCnp = 1 << 13,
  kOpAtomicWrite = 1 << 14,  // RDMA ATOMIC WRITE (IBA 1.5): RETH + 8 bytes stored at once
};

struct OpcodeInfo {
  std::string_view name;  // e.g. "RC_RDMA_WRITE_FIRST"; empty = not a valid opcode
  uint16_t flags = 0;
  uint8_t ext_mask = 0;  // bit i set = ExtHeader i follows the BTH (8 headers: 8 bits)
  uint8_t ext_len = 0;   // total bytes of those headers

  constexpr bool valid() const { return !name.empty(); }
  constexpr bool has(ExtHeader h) const { return (ext_mask >> h) & 1; }
  constexpr bool is(uint16_t f) const { return (flags & f) == f; }
  constexpr bool any(uint16_t f) const { return (flags & f) != 0; }
};

// Named opcodes (full 8-bit value, transport bits included).
namespace op {
inline constexpr uint8_t kSendFirst = 0x00, kSendMiddle = 0x01, kSendLast = 0x02,
                         kSendLastImm = 0x03, kSendOnly = 0x04, kSendOnlyImm = 0x05,
                         kWriteFirst = 0x06, kWriteMiddle = 0x07, kWriteLast = 0x08,
                         kWriteLastImm = 0x09, kWriteOnly = 0x0a, kWriteOnlyImm = 0x0b,
                         kReadRequest = 0x0c, kReadRespFirst = 0x0d, kReadRespMiddle = 0x0e,
                         kReadRespLast = 0x0f, kReadRespOnly = 0x10, kAck = 0x11,
                         kAtomicAck = 0x12, kCmpSwap = 0x13, kFetchAdd = 0x14,
                         kSendLastInv = 0x16, kSendOnlyInv = 0x17, kAtomicWrite = 0x1d;
inline constexpr uint8_t kCnp = 0x81;
constexpr uint8_t rc(uint8_t o) { return o; }
constexpr uint8_t uc(uint8_t o) { return uint8_t(0x20 | o); }
constexpr uint8_t ud(uint8_t o) { return uint8_t(0x60 | o); }
constexpr uint8_t xrc(uint8_t o) { return uint8_t(0xa0 | o); }
// The operation without its transport: RC, UC and XRC share the low 5 bits.
constexpr uint8_t base(uint8_t full) { return uint8_t(full & 0x1f); }
}  // namespace op

// The opcode table (roce.cc), read inline: every packet sent and received
// looks its opcode up, some several times.
extern const std::array<OpcodeInfo, 256> kOpcodeTable;
// kExtOffset[opcode][h]: where extension header h starts after the BTH.
extern const std::array<std::array<uint8_t, kNumExtHeaders>, 256> kExtOffset;

inline const OpcodeInfo& opcode_info(uint8_t opcode) { return kOpcodeTable[opcode]; }
constexpr Transport opcode_transport(uint8_t opcode) { return Transport(opcode & 0xe0); }
// Offset of an extension header from the end of the BTH, for this opcode.
inline uint8_t ext_offset(uint8_t opcode, ExtHeader h) { return kExtOffset[opcode][h]; }

}  // namespace rocemu::wire
