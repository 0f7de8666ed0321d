#include "sim/workload.h"

#include <algorithm>

#include "common/wire/psn.h"

namespace rocemu::sim {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
// Fixed I/O addresses per QP (k): the requester's buffer and the responder's.
constexpr uint64_t kReqBase = 0x1000'0000'0000ull;
constexpr uint64_t kRespBase = 0x7000'0000'0000ull;

ibv_mtu to_ibv_mtu(uint32_t bytes) {
  switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return IBV_MTU_1024;
  }
}

}  // namespace

Flow::Flow(const FlowSpec& spec, const Workload& w, nic::SimHost& src, nic::SimHost& dst, uint32_t index,
           std::vector<Flow*>& ready)
    : spec_(spec), w_(w), src_(src), dst_(dst), index_(index), ready_(ready) {}

void Flow::arm(nic::SimHost::Cq* cq) { cq->shadow.ring.header()->arm.store(1, std::memory_order_release); }

// A completion event on `cq` queues this flow for service (once).
void Flow::watch(nic::SimHost& host, nic::SimHost::Cq* cq) {
  host.nic().find_cq(host.context(), cq->handle)->on_event = [this] {
    if (!queued_) {
      queued_ = true;
      ready_.push_back(this);
    }
  };
  arm(cq);
}

Status Flow::setup_qp(QpPair& q, uint32_t k) {
  nic::SimHost& rq = requester();
  nic::SimHost& rs = responder();
  const uint32_t depth = w_.window + 1;
  q.req_cq = rq.create_cq(depth * 2);
  q.resp_cq = rs.create_cq(depth * 4);
  const ibv_qp_cap cap{depth, w_.verb == Verb::kSend ? 2 * depth : 1, 1, 1, 0};
  q.req = q.req_cq ? rq.create_qp(nic::QpType::kRc, q.req_cq, q.req_cq, cap) : nullptr;
  q.resp = q.resp_cq ? rs.create_qp(nic::QpType::kRc, q.resp_cq, q.resp_cq, cap) : nullptr;
  q.req_addr = kReqBase + (uint64_t(k) << 32);
  q.resp_addr = kRespBase + (uint64_t(k) << 32);
  // NullMemory: the host address is the I/O address; nothing backs it.
  q.req_key = rq.reg_mr(reinterpret_cast<void*>(q.req_addr), w_.message_size, kAccess, nullptr, q.req_addr);
  q.resp_key = rs.reg_mr(reinterpret_cast<void*>(q.resp_addr), w_.message_size, kAccess, nullptr, q.resp_addr);
  if (q.req == nullptr || q.resp == nullptr || q.req_key == 0 || q.resp_key == 0)
    return Status::error("flow " + name() + ": creating QP " + std::to_string(k) + " failed");
  nic::SimHost::ConnectOpts o;
  o.mtu = to_ibv_mtu(w_.mtu);
  o.timeout = w_.timeout;
  o.retry_cnt = w_.retry_cnt;
  o.traffic_class = w_.traffic_class;
  if (int e = nic::SimHost::connect(rq, q.req, rs, q.resp, o); e != 0)
    return Status::error("flow " + name() + ": connecting QP " + std::to_string(k) + " failed (errno " +
                         std::to_string(e) + ")");
  watch(rq, q.req_cq);
  if (w_.verb == Verb::kSend) {
    watch(rs, q.resp_cq);
    for (uint32_t i = 0; i < 2 * w_.window; i++)
      if (post_recv(q) != 0) return Status::error("flow " + name() + ": posting receives failed");
  }
  return {};
}

Status Flow::setup() {
  qps_.resize(w_.qps);
  for (uint32_t i = 0; i < w_.qps; i++) {
    // Messages go round-robin over the QPs.
    if (spec_.messages > 0) qps_[i].quota = spec_.messages / w_.qps + (i < spec_.messages % w_.qps ? 1 : 0);
    if (Status s = setup_qp(qps_[i], index_ + i); !s.ok()) return s;
  }
  mtu_ = qps_[0].req->nic_qp->mtu;
  packets_per_message_ = uint32_t(std::max<uint64_t>(1, (w_.message_size + mtu_ - 1) / mtu_));
  return {};
}

bool Flow::resolved() const {
  for (const QpPair& q : qps_)
    if (!q.req->nic_qp->neighbor_ok || !q.resp->nic_qp->neighbor_ok) return false;
  return true;
}

void Flow::begin(Time t0) {
  t0_ = t0;
  start_ = t0 + w_.start;
  result_.start = w_.start;
  for (QpPair& q : qps_) q.last_psn = progress_psn(q);
  // A flow that may post nothing (all quotas 0) is done at once.
  done_ = std::all_of(qps_.begin(), qps_.end(), [&](const QpPair& q) { return spec_.messages > 0 && q.quota == 0; });
}

bool Flow::may_post(const QpPair& q, Time now) const {
  if (failed_ || now < start_ || q.outstanding >= w_.window) return false;
  if (q.quota > 0 && q.posted >= q.quota) return false;
  if (spec_.messages == 0 && now >= start_ + w_.duration) return false;
  if (w_.on_off) {
    const Duration period = w_.on_off->on + w_.on_off->off;
    if ((now - start_) % period >= w_.on_off->on) return false;
  }
  return true;
}

Time Flow::next_wake(Time now) const {
  if (done_) return kTimeNever;
  if (now < start_) return start_;
  Time wake = kTimeNever;
  if (spec_.messages == 0 && now < start_ + w_.duration) wake = start_ + w_.duration;
  if (w_.on_off) {
    const Duration period = w_.on_off->on + w_.on_off->off;
    const Time next_on = start_ + ((now - start_) / period + 1) * period;
    if ((now - start_) % period >= w_.on_off->on) wake = std::min(wake, next_on);
  }
  return wake;
}

int Flow::post(QpPair& q) {
  ibv_sge sg{q.req_addr, uint32_t(w_.message_size), q.req_key};
  ibv_send_wr wr{};
  wr.wr_id = q.posted;
  wr.sg_list = &sg;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.opcode = w_.verb == Verb::kWrite ? IBV_WR_RDMA_WRITE : w_.verb == Verb::kSend ? IBV_WR_SEND : IBV_WR_RDMA_READ;
  if (w_.verb != Verb::kSend) {
    wr.wr.rdma.remote_addr = q.resp_addr;
    wr.wr.rdma.rkey = q.resp_key;
  }
  return requester().post_send(q.req, &wr);
}

int Flow::post_recv(QpPair& q) {
  ibv_sge sg{q.resp_addr, uint32_t(w_.message_size), q.resp_key};
  ibv_recv_wr wr{};
  wr.sg_list = &sg;
  wr.num_sge = 1;
  return responder().post_recv(q.resp, &wr);
}

void Flow::act(Time now) {
  for (QpPair& q : qps_) {
    while (may_post(q, now)) {
      if (post(q) != 0) {
        failed_ = true;
        break;
      }
      q.posted++;
      q.outstanding++;
      result_.messages_posted++;
    }
  }
  check_done(now);
}

void Flow::take_completions(QpPair& q, Time now) {
  ibv_wc wc[32];
  int n;
  while ((n = requester().poll(q.req_cq, 32, wc)) > 0) {
    for (int i = 0; i < n; i++) {
      q.outstanding -= q.outstanding > 0 ? 1 : 0;
      if (wc[i].status != IBV_WC_SUCCESS) {
        result_.errors++;
        failed_ = true;
        continue;
      }
      result_.messages_completed++;
      result_.bytes += w_.message_size;
      result_.finish = now - t0_;
    }
  }
}

void Flow::take_receives(QpPair& q) {
  ibv_wc wc[32];
  int n;
  while ((n = responder().poll(q.resp_cq, 32, wc)) > 0)
    for (int i = 0; i < n; i++)
      if (wc[i].status == IBV_WC_SUCCESS && post_recv(q) != 0) failed_ = true;
}

void Flow::service(Time now) {
  queued_ = false;
  for (QpPair& q : qps_) {
    // Armed before taking what is there: a completion from here on raises
    // a new event.
    arm(q.req_cq);
    take_completions(q, now);
    if (w_.verb == Verb::kSend) {
      arm(q.resp_cq);
      take_receives(q);
    }
  }
  act(now);
}

void Flow::check_done(Time now) {
  if (done_) return;
  uint32_t outstanding = 0;
  bool more = false;
  for (const QpPair& q : qps_) {
    outstanding += q.outstanding;
    more = more || (q.quota > 0 && q.posted < q.quota);
  }
  if (spec_.messages == 0) more = now < start_ + w_.duration;
  if (failed_ || (!more && outstanding == 0 && now >= start_)) {
    done_ = true;
    result_.completed = !failed_;
    if (result_.messages_completed == 0) result_.finish = now - t0_;
  }
}

uint32_t Flow::progress_psn(const QpPair& q) const {
  // WRITE and SEND: the highest PSN ever sent (resends do not count);
  // READ: the oldest unacknowledged one, which response packets advance.
  const nic::Qp& n = *q.req->nic_qp;
  return spec_verb_read() ? n.req.una_psn : n.req.sent_high;
}

uint64_t Flow::progress_bytes() {
  uint64_t bytes = 0;
  for (QpPair& q : qps_) {
    const uint32_t psn = progress_psn(q);
    const int32_t d = wire::psn_diff(psn, q.last_psn);
    if (d > 0) q.packets += uint64_t(d);
    q.last_psn = psn;
    // Whole messages, then the packets of the one in progress (all full).
    bytes += q.packets / packets_per_message_ * w_.message_size + q.packets % packets_per_message_ * mtu_;
  }
  return bytes;
}

FlowQps Flow::qp_scopes() const {
  FlowQps s;
  const std::string req = requester().nic().name() + "/qp";
  const std::string resp = responder().nic().name() + "/qp";
  for (const QpPair& q : qps_) {
    s.requester.push_back(req + std::to_string(q.req->qpn));
    // The data leaves from the source: the requester, or for READ the responder.
    s.data_sender.push_back(spec_verb_read() ? resp + std::to_string(q.resp->qpn) : req + std::to_string(q.req->qpn));
  }
  return s;
}

}  // namespace rocemu::sim
