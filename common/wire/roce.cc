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

// SEND and WRITE opcodes shared by RC and UC (UC = RC | 0x20).
constexpr void add_send_write(std::array<OpcodeInfo, 256>& t, uint8_t base) {
  const uint8_t reth = bit(kExtReth), imm = bit(kExtImmDt);
  const bool uc = base == 0x20;
  t[base | op::kSendFirst] = make(uc ? "UC_SEND_FIRST" : "RC_SEND_FIRST", kReqSend | kOpFirst, 0);
  t[base | op::kSendMiddle] = make(uc ? "UC_SEND_MIDDLE" : "RC_SEND_MIDDLE", kReqSend | kOpMiddle, 0);
  t[base | op::kSendLast] = make(uc ? "UC_SEND_LAST" : "RC_SEND_LAST", kReqSend | kOpLast, 0);
  t[base | op::kSendLastImm] = make(uc ? "UC_SEND_LAST_WITH_IMMEDIATE" : "RC_SEND_LAST_WITH_IMMEDIATE",
                                    kReqSend | kOpLast | kOpImm, imm);
  t[base | op::kSendOnly] = make(uc ? "UC_SEND_ONLY" : "RC_SEND_ONLY", kReqSend | kOnly, 0);
  t[base | op::kSendOnlyImm] = make(uc ? "UC_SEND_ONLY_WITH_IMMEDIATE" : "RC_SEND_ONLY_WITH_IMMEDIATE",
                                    kReqSend | kOnly | kOpImm, imm);
  t[base | op::kWriteFirst] = make(uc ? "UC_RDMA_WRITE_FIRST" : "RC_RDMA_WRITE_FIRST", kReqWrite | kOpFirst, reth);
  t[base | op::kWriteMiddle] = make(uc ? "UC_RDMA_WRITE_MIDDLE" : "RC_RDMA_WRITE_MIDDLE", kReqWrite | kOpMiddle, 0);
  t[base | op::kWriteLast] = make(uc ? "UC_RDMA_WRITE_LAST" : "RC_RDMA_WRITE_LAST", kReqWrite | kOpLast, 0);
  t[base | op::kWriteLastImm] = make(uc ? "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE" : "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
                                     kReqWrite | kOpLast | kOpImm, imm);
  t[base | op::kWriteOnly] = make(uc ? "UC_RDMA_WRITE_ONLY" : "RC_RDMA_WRITE_ONLY", kReqWrite | kOnly, reth);
  t[base | op::kWriteOnlyImm] = make(uc ? "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE" : "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
                                     kReqWrite | kOnly | kOpImm, uint8_t(reth | imm));
}

constexpr std::array<OpcodeInfo, 256> build_table() {
  std::array<OpcodeInfo, 256> t{};
  add_send_write(t, 0x00);
  add_send_write(t, 0x20);
  const uint8_t reth = bit(kExtReth), aeth = bit(kExtAeth), atm = bit(kExtAtomicEth),
                atmack = bit(kExtAtomicAck), imm = bit(kExtImmDt), ieth = bit(kExtIeth),
                deth = bit(kExtDeth);
  constexpr uint16_t kResp = kOpResponse;
  t[op::kReadRequest] = make("RC_RDMA_READ_REQUEST", kOpRequest | kOpRead | kOnly, reth);
  t[op::kReadRespFirst] = make("RC_RDMA_READ_RESPONSE_FIRST", kResp | kOpRead | kOpPayload | kOpFirst, aeth);
  t[op::kReadRespMiddle] = make("RC_RDMA_READ_RESPONSE_MIDDLE", kResp | kOpRead | kOpPayload | kOpMiddle, 0);
  t[op::kReadRespLast] = make("RC_RDMA_READ_RESPONSE_LAST", kResp | kOpRead | kOpPayload | kOpLast, aeth);
  t[op::kReadRespOnly] = make("RC_RDMA_READ_RESPONSE_ONLY", kResp | kOpRead | kOpPayload | kOnly, aeth);
  t[op::kAck] = make("RC_ACKNOWLEDGE", kResp | kOpAck | kOnly, aeth);
  t[op::kAtomicAck] = make("RC_ATOMIC_ACKNOWLEDGE", kResp | kOpAtomic | kOnly, uint8_t(aeth | atmack));
  t[op::kCmpSwap] = make("RC_CMP_SWAP", kOpRequest | kOpAtomic | kOnly, atm);
  t[op::kFetchAdd] = make("RC_FETCH_ADD", kOpRequest | kOpAtomic | kOnly, atm);
  t[op::kSendLastInv] = make("RC_SEND_LAST_WITH_INVALIDATE", kReqSend | kOpLast | kOpInv, ieth);
  t[op::kSendOnlyInv] = make("RC_SEND_ONLY_WITH_INVALIDATE", kReqSend | kOnly | kOpInv, ieth);
  // IBA 1.5 (rxe since Linux 6.2): answered by a READ response without payload.
  t[op::kAtomicWrite] = make("RC_RDMA_ATOMIC_WRITE", kOpRequest | kOpPayload | kOpAtomicWrite | kOnly, reth);
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

}  // namespace

constexpr std::array<OpcodeInfo, 256> kOpcodeTable = kOpcodeTableBuilt;
constexpr std::array<std::array<uint8_t, kNumExtHeaders>, 256> kExtOffset = build_ext_offsets();
static_assert(kExtOffset[op::kWriteOnlyImm][kExtImmDt] == 16);

uint32_t rnr_timer_ns(uint8_t code) {
  // IBA vol. 1 table 45, in units of 10 us; code 0 means 655.36 ms.
  static constexpr uint32_t k10us[32] = {
      65536, 1,   2,   3,   4,    6,    8,    12,   16,   24,    32,    48,    64,    96,    128,   192,
      256,   384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
  return k10us[code & 0x1f] * 10000;
}

}  // namespace rocemu::wire
