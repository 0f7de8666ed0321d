#include "common/wire/roce.h"

namespace rocemu::wire {
namespace {

constexpr uint8_t bit(ExtHeader h) { return uint8_t(1u << h); }

constexpr OpcodeInfo make(std::string_view name, uint16_t flags, uint8_t ext_mask) {
  OpcodeInfo info{name, flags, ext_mask, 0};
  for (int h = 0; h < kNumExtHeaders; h++)
    if ((ext_mask >> h) & 1) info.ext_len = uint8_t(info.ext_len + kExtHeaderLen[h]);
  return info;
}

constexpr uint16_t kReqSend = kOpRequest | kOpSend | kOpPayload;
constexpr uint16_t kReqWrite = kOpRequest | kOpWrite | kOpPayload;
constexpr uint16_t kOnly = kOpFirst | kOpLast;

// The opcodes RC, UC and XRC share (UC: SEND and WRITE only), named as
// IBA table 38 and Wireshark name them; an XRC request carries an XRCETH
// before its other headers.
struct OpName {
  uint8_t op;
  std::string_view rc, uc, xrc;
};
constexpr OpName kSharedNames[] = {
    {op::kSendFirst, "RC_SEND_FIRST", "UC_SEND_FIRST", "XRC_SEND_FIRST"},
    {op::kSendMiddle, "RC_SEND_MIDDLE", "UC_SEND_MIDDLE", "XRC_SEND_MIDDLE"},
    {op::kSendLast, "RC_SEND_LAST", "UC_SEND_LAST", "XRC_SEND_LAST"},
    {op::kSendLastImm, "RC_SEND_LAST_WITH_IMMEDIATE", "UC_SEND_LAST_WITH_IMMEDIATE", "XRC_SEND_LAST_WITH_IMMEDIATE"},
    {op::kSendOnly, "RC_SEND_ONLY", "UC_SEND_ONLY", "XRC_SEND_ONLY"},
    {op::kSendOnlyImm, "RC_SEND_ONLY_WITH_IMMEDIATE", "UC_SEND_ONLY_WITH_IMMEDIATE", "XRC_SEND_ONLY_WITH_IMMEDIATE"},
    {op::kWriteFirst, "RC_RDMA_WRITE_FIRST", "UC_RDMA_WRITE_FIRST", "XRC_RDMA_WRITE_FIRST"},
    {op::kWriteMiddle, "RC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_MIDDLE", "XRC_RDMA_WRITE_MIDDLE"},
    {op::kWriteLast, "RC_RDMA_WRITE_LAST", "UC_RDMA_WRITE_LAST", "XRC_RDMA_WRITE_LAST"},
    {op::kWriteLastImm, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
     "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE"},
    {op::kWriteOnly, "RC_RDMA_WRITE_ONLY", "UC_RDMA_WRITE_ONLY", "XRC_RDMA_WRITE_ONLY"},
    {op::kWriteOnlyImm, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
     "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE"},
    {op::kReadRequest, "RC_RDMA_READ_REQUEST", "", "XRC_RDMA_READ_REQUEST"},
    {op::kReadRespFirst, "RC_RDMA_READ_RESPONSE_FIRST", "", "XRC_RDMA_READ_RESPONSE_FIRST"},
    {op::kReadRespMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", "", "XRC_RDMA_READ_RESPONSE_MIDDLE"},
    {op::kReadRespLast, "RC_RDMA_READ_RESPONSE_LAST", "", "XRC_RDMA_READ_RESPONSE_LAST"},
    {op::kReadRespOnly, "RC_RDMA_READ_RESPONSE_ONLY", "", "XRC_RDMA_READ_RESPONSE_ONLY"},
    {op::kAck, "RC_ACKNOWLEDGE", "", "XRC_ACKNOWLEDGE"},
    {op::kAtomicAck, "RC_ATOMIC_ACKNOWLEDGE", "", "XRC_ATOMIC_ACKNOWLEDGE"},
    {op::kCmpSwap, "RC_CMP_SWAP", "", "XRC_CMP_SWAP"},
    {op::kFetchAdd, "RC_FETCH_ADD", "", "XRC_FETCH_ADD"},
    {op::kSendLastInv, "RC_SEND_LAST_WITH_INVALIDATE", "", "XRC_SEND_LAST_WITH_INVALIDATE"},
    {op::kSendOnlyInv, "RC_SEND_ONLY_WITH_INVALIDATE", "", "XRC_SEND_ONLY_WITH_INVALIDATE"},
};

// Flags and extension headers of each shared operation (without XRCETH).
constexpr void shared_shape(uint8_t o, uint16_t& flags, uint8_t& ext) {
  const uint8_t reth = bit(kExtReth), aeth = bit(kExtAeth), atm = bit(kExtAtomicEth),
                atmack = bit(kExtAtomicAck), imm = bit(kExtImmDt), ieth = bit(kExtIeth);
  constexpr uint16_t kResp = kOpResponse;
  switch (o) {
    case op::kSendFirst: flags = kReqSend | kOpFirst; ext = 0; break;
    case op::kSendMiddle: flags = kReqSend | kOpMiddle; ext = 0; break;
    case op::kSendLast: flags = kReqSend | kOpLast; ext = 0; break;
    case op::kSendLastImm: flags = kReqSend | kOpLast | kOpImm; ext = imm; break;
    case op::kSendOnly: flags = kReqSend | kOnly; ext = 0; break;
    case op::kSendOnlyImm: flags = kReqSend | kOnly | kOpImm; ext = imm; break;
    case op::kWriteFirst: flags = kReqWrite | kOpFirst; ext = reth; break;
    case op::kWriteMiddle: flags = kReqWrite | kOpMiddle; ext = 0; break;
    case op::kWriteLast: flags = kReqWrite | kOpLast; ext = 0; break;
    case op::kWriteLastImm: flags = kReqWrite | kOpLast | kOpImm; ext = imm; break;
    case op::kWriteOnly: flags = kReqWrite | kOnly; ext = reth; break;
    case op::kWriteOnlyImm: flags = kReqWrite | kOnly | kOpImm; ext = uint8_t(reth | imm); break;
    case op::kReadRequest: flags = kOpRequest | kOpRead | kOnly; ext = reth; break;
    case op::kReadRespFirst: flags = kResp | kOpRead | kOpPayload | kOpFirst; ext = aeth; break;
    case op::kReadRespMiddle: flags = kResp | kOpRead | kOpPayload | kOpMiddle; ext = 0; break;
    case op::kReadRespLast: flags = kResp | kOpRead | kOpPayload | kOpLast; ext = aeth; break;
    case op::kReadRespOnly: flags = kResp | kOpRead | kOpPayload | kOnly; ext = aeth; break;
    case op::kAck: flags = kResp | kOpAck | kOnly; ext = aeth; break;
    case op::kAtomicAck: flags = kResp | kOpAtomic | kOnly; ext = uint8_t(aeth | atmack); break;
    case op::kCmpSwap:
    case op::kFetchAdd: flags = kOpRequest | kOpAtomic | kOnly; ext = atm; break;
    case op::kSendLastInv: flags = kReqSend | kOpLast | kOpInv; ext = ieth; break;
    case op::kSendOnlyInv: flags = kReqSend | kOnly | kOpInv; ext = ieth; break;
    default: flags = 0; ext = 0; break;
  }
}

constexpr std::array<OpcodeInfo, 256> build_table() {
  std::array<OpcodeInfo, 256> t{};
  for (const OpName& n : kSharedNames) {
    uint16_t flags = 0;
    uint8_t ext = 0;
    shared_shape(n.op, flags, ext);
    t[n.op] = make(n.rc, flags, ext);
    if (!n.uc.empty()) t[op::uc(n.op)] = make(n.uc, flags, ext);
    // XRC: requests name the target's SRQ; responses are RC's.
    const bool request = (flags & kOpRequest) != 0;
    t[op::xrc(n.op)] = make(n.xrc, flags, request ? uint8_t(ext | bit(kExtXrceth)) : ext);
  }
  const uint8_t imm = bit(kExtImmDt), deth = bit(kExtDeth);
  // IBA 1.5 (rxe since Linux 6.2), RC only: answered by a READ response without payload.
  t[op::kAtomicWrite] = make("RC_RDMA_ATOMIC_WRITE", kOpRequest | kOpPayload | kOpAtomicWrite | kOnly, bit(kExtReth));
  t[op::ud(op::kSendOnly)] = make("UD_SEND_ONLY", kReqSend | kOnly, deth);
  t[op::ud(op::kSendOnlyImm)] = make("UD_SEND_ONLY_WITH_IMMEDIATE", kReqSend | kOnly | kOpImm, uint8_t(deth | imm));
  t[op::kCnp] = make("CNP", kOpCnp, 0);
  return t;
}

constexpr std::array<OpcodeInfo, 256> kOpcodeTableBuilt = build_table();

constexpr std::array<std::array<uint8_t, kNumExtHeaders>, 256> build_ext_offsets() {
  std::array<std::array<uint8_t, kNumExtHeaders>, 256> t{};
  for (int o = 0; o < 256; o++) {
    uint8_t off = 0;
    for (int h = 0; h < kNumExtHeaders; h++) {
      t[size_t(o)][size_t(h)] = off;
      if (kOpcodeTableBuilt[size_t(o)].has(ExtHeader(h))) off = uint8_t(off + kExtHeaderLen[size_t(h)]);
    }
  }
  return t;
}

// The table is the single source of header layout; check it against the
// lengths the IBA spec gives (BTH excluded).
static_assert(kOpcodeTableBuilt[op::kWriteFirst].ext_len == 16);
static_assert(kOpcodeTableBuilt[op::kWriteOnlyImm].ext_len == 20);
static_assert(kOpcodeTableBuilt[op::kReadRespMiddle].ext_len == 0);
static_assert(kOpcodeTableBuilt[op::kAtomicAck].ext_len == 12);
static_assert(kOpcodeTableBuilt[op::kCmpSwap].ext_len == 28);
static_assert(kOpcodeTableBuilt[op::ud(op::kSendOnlyImm)].ext_len == 12);
static_assert(kOpcodeTableBuilt[op::uc(op::kWriteOnly)].ext_len == 16);
static_assert(kOpcodeTableBuilt[op::kSendOnlyInv].ext_len == 4);
static_assert(kOpcodeTableBuilt[op::kAtomicWrite].ext_len == 16);
static_assert(!kOpcodeTableBuilt[op::uc(op::kAtomicWrite)].valid());
static_assert(!kOpcodeTableBuilt[0x15].valid() && !kOpcodeTableBuilt[op::uc(op::kReadRequest)].valid());
static_assert(kOpcodeTableBuilt[0xa4].ext_len == 4 && kOpcodeTableBuilt[0xa4].name == "XRC_SEND_ONLY");
static_assert(kOpcodeTableBuilt[op::xrc(op::kWriteOnlyImm)].ext_len == 24);
static_assert(kOpcodeTableBuilt[op::xrc(op::kCmpSwap)].ext_len == 32);
static_assert(kOpcodeTableBuilt[op::xrc(op::kAck)].ext_len == 4 && kOpcodeTableBuilt[0xb1].name == "XRC_ACKNOWLEDGE");
static_assert(!kOpcodeTableBuilt[op::xrc(0x15)].valid());

}  // namespace

constexpr std::array<OpcodeInfo, 256> kOpcodeTable = kOpcodeTableBuilt;
constexpr std::array<std::array<uint8_t, kNumExtHeaders>, 256> kExtOffset = build_ext_offsets();
static_assert(kExtOffset[op::kWriteOnlyImm][kExtImmDt] == 16);
static_assert(kExtOffset[op::xrc(op::kWriteOnlyImm)][kExtReth] == 4 && kExtOffset[op::xrc(op::kWriteOnlyImm)][kExtImmDt] == 20);

uint32_t rnr_timer_ns(uint8_t code) {
  // IBA vol. 1 table 45, in units of 10 us; code 0 means 655.36 ms.
  static constexpr uint32_t k10us[32] = {
      65536, 1,   2,   3,   4,    6,    8,    12,   16,   24,    32,    48,    64,    96,    128,   192,
      256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return k10us[code & 0x1f] * 10000;
}

}  // namespace rocemu::wire
