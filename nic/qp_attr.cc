#include "nic/qp.h"

namespace rocemu::nic {
namespace {

struct Transition {
  bool valid = false;
  int req[5] = {0, 0, 0, 0, 0};  // RC, UC, UD, XRC INI, XRC TGT
  int opt[5] = {0, 0, 0, 0, 0};
};

constexpr int kRc = 0, kUc = 1, kUd = 2, kXrcIni = 3, kXrcTgt = 4;
constexpr int kStates = IBV_QPS_ERR + 1;

using Table = std::array<std::array<Transition, kStates>, kStates>;

constexpr Table build() {
  Table t{};
  for (int s = 0; s < kStates; s++) {
    t[size_t(s)][IBV_QPS_RESET].valid = true;
    t[size_t(s)][IBV_QPS_ERR].valid = true;
  }
  auto& ri = t[IBV_QPS_RESET][IBV_QPS_INIT];
  ri.valid = true;
  ri.req[kRc] = ri.req[kUc] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  ri.req[kUd] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;

  auto& ii = t[IBV_QPS_INIT][IBV_QPS_INIT];
  ii.valid = true;
  ii.opt[kRc] = ii.opt[kUc] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  ii.opt[kUd] = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;

  auto& ir = t[IBV_QPS_INIT][IBV_QPS_RTR];
  ir.valid = true;
  ir.req[kUc] = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  ir.req[kRc] = ir.req[kUc] | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  ir.opt[kRc] = ir.opt[kUc] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
  ir.opt[kUd] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;

  auto& rr = t[IBV_QPS_RTR][IBV_QPS_RTS];
  rr.valid = true;
  rr.req[kUd] = rr.req[kUc] = IBV_QP_SQ_PSN;
  rr.req[kRc] = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  rr.opt[kUd] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
  rr.opt[kUc] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
  rr.opt[kRc] = rr.opt[kUc] | IBV_QP_MIN_RNR_TIMER;

  auto& ss = t[IBV_QPS_RTS][IBV_QPS_RTS];
  ss.valid = true;
  ss.opt[kUd] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
  ss.opt[kUc] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
  ss.opt[kRc] = ss.opt[kUc] | IBV_QP_MIN_RNR_TIMER;

  auto& sd = t[IBV_QPS_RTS][IBV_QPS_SQD];
  sd.valid = true;
  sd.opt[kRc] = sd.opt[kUc] = sd.opt[kUd] = IBV_QP_EN_SQD_ASYNC_NOTIFY;

  auto& ds = t[IBV_QPS_SQD][IBV_QPS_RTS];
  ds.valid = true;
  ds.opt[kUd] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
  ds.opt[kUc] = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;
  ds.opt[kRc] = ds.opt[kUc] | IBV_QP_MIN_RNR_TIMER;

  auto& dd = t[IBV_QPS_SQD][IBV_QPS_SQD];
  dd.valid = true;
  dd.opt[kUd] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
  dd.opt[kUc] = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PATH_MIG_STATE;
  dd.opt[kRc] = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
                IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | IBV_QP_PATH_MIG_STATE;

  auto& es = t[IBV_QPS_SQE][IBV_QPS_RTS];
  es.valid = true;
  es.opt[kUd] = IBV_QP_CUR_STATE | IBV_QP_QKEY;
  es.opt[kUc] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS;

  // XRC (the kernel's qp_state_table): as RC, but an initiator has no
  // receive side (INIT->RTR asks for what UC's does) and a target no send
  // side (RTR->RTS asks only for the timeout and the SQ PSN).
  for (auto& row : t)
    for (Transition& tr : row) {
      tr.req[kXrcIni] = tr.req[kXrcTgt] = tr.req[kRc];
      tr.opt[kXrcIni] = tr.opt[kXrcTgt] = tr.opt[kRc];
    }
  ir.req[kXrcIni] = ir.req[kUc];
  rr.req[kXrcTgt] = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
  return t;
}

constexpr Table kTable = build();

}  // namespace

const char* qp_state_name(ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "UNKNOWN";
  }
}

bool modify_qp_is_ok(ibv_qp_state cur, ibv_qp_state next, QpType type, int mask) {
  if (cur < 0 || cur >= kStates || next < 0 || next >= kStates) return false;
  if ((mask & IBV_QP_CUR_STATE) && cur != IBV_QPS_RTR && cur != IBV_QPS_RTS && cur != IBV_QPS_SQD &&
      cur != IBV_QPS_SQE)
    return false;
  const Transition& t = kTable[size_t(cur)][size_t(next)];
  if (!t.valid) return false;
  const int i = type == QpType::kRc        ? kRc
                : type == QpType::kUc      ? kUc
                : type == QpType::kUd      ? kUd
                : type == QpType::kXrcSend ? kXrcIni
                                           : kXrcTgt;
  // SQE -> RTS does not exist for RC and XRC.
  if (cur == IBV_QPS_SQE && next == IBV_QPS_RTS && type != QpType::kUc && type != QpType::kUd) return false;
  if ((mask & t.req[i]) != t.req[i]) return false;
  if (mask & ~(t.req[i] | t.opt[i] | IBV_QP_STATE)) return false;
  return true;
}

}  // namespace rocemu::nic
