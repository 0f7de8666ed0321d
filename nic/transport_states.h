// The states of the responder's and the completer's packet handling, as
// kernel rxe names its resp_states and comp_states: each step of a received
// packet's handling returns the next step or an error state; a table gives
// each its name.
#pragma once

#include <cstdint>

namespace rocemu::nic {

// Responder (responder.cc): a request packet goes through the checks in
// this order -- PSN, XRC SRQ (an XRC target's), opcode sequence, length,
// rkey, resources -- then is
// executed. A duplicate READ or atomic takes the rkey and resource checks
// too. Error states NAK (RC) or drop the message (UC).
#define ROCEMU_RESP_STATES(X)                                                             \
  X(kCheckPsn, "check_psn")                                                               \
  X(kCheckXrcSrq, "check_xrc_srq")                                                        \
  X(kCheckOpSeq, "check_op_seq")                                                          \
  X(kCheckLength, "check_length")                                                         \
  X(kCheckRkey, "check_rkey")                                                             \
  X(kCheckResources, "check_resources")                                                   \
  X(kExecute, "execute")                                                                  \
  X(kComplete, "complete")                                                                \
  X(kTrimmed, "trimmed")                                                                  \
  X(kDuplicate, "duplicate")                                                              \
  X(kOutOfSequence, "out_of_sequence")                                                    \
  X(kUcResync, "uc_resync")                                                               \
  X(kDone, "done")                                                                        \
  X(kErrOpSeq, "err_op_seq")                   /* NAK invalid request */                  \
  X(kErrLength, "err_length")                  /* NAK invalid request */                  \
  X(kErrMisalignedAtomic, "err_misaligned_atomic") /* NAK invalid request */              \
  X(kErrTooManyRdAtomic, "err_too_many_rd_atomic") /* NAK invalid request */              \
  X(kErrRkey, "err_rkey")                      /* NAK remote access error */              \
  X(kErrRnr, "err_rnr")                        /* RNR NAK: no receive WQE (not fatal) */  \
  X(kErrRemoteOp, "err_remote_op")             /* NAK remote operational error */         \
  X(kErrLocalLength, "err_local_length")       /* receive buffer too short: NAK inv. */   \
  X(kErrLocalAccess, "err_local_access")       /* receive SGE refused: NAK rem. op. */   \
  X(kErrXrcSrq, "err_xrc_srq")                 /* XRCETH names no SRQ of the domain: NAK rem. access */

enum class RespState : uint8_t {
#define ROCEMU_STATE_ENUM(name, text) name,
  ROCEMU_RESP_STATES(ROCEMU_STATE_ENUM)
#undef ROCEMU_STATE_ENUM
};
inline constexpr bool is_error(RespState s) { return s >= RespState::kErrOpSeq; }
const char* resp_state_name(RespState s);

// Completer (completer.cc): a response packet's handling.
#define ROCEMU_COMP_STATES(X)                                                          \
  X(kCheckState, "check_state")                                                       \
  X(kCheckTrimmed, "check_trimmed")                                                   \
  X(kCheckAck, "check_ack")                                                           \
  X(kAck, "ack")                                                                      \
  X(kRnrNak, "rnr_nak")                                                               \
  X(kNak, "nak")                                                                      \
  X(kFindWqe, "find_wqe")                                                             \
  X(kAtomicAck, "atomic_ack")                                                         \
  X(kCheckReadPsn, "check_read_psn")                                                  \
  X(kCheckReadShape, "check_read_shape")                                              \
  X(kReadResponse, "read_response")                                                   \
  X(kDone, "done")                                                                    \
  X(kErrBadResponse, "err_bad_response") /* IBV_WC_BAD_RESP_ERR, the WQE fails */

enum class CompState : uint8_t {
#define ROCEMU_STATE_ENUM(name, text) name,
  ROCEMU_COMP_STATES(ROCEMU_STATE_ENUM)
#undef ROCEMU_STATE_ENUM
};
const char* comp_state_name(CompState s);

// What a receive handler did with the frame it was given: the dispatcher
// (Nic::handle_frame) frees it unless a handler kept it.
enum class RxDisposition : uint8_t { kFree, kKept };

}  // namespace rocemu::nic
