// A flow of a scenario as an application drives it: RC QPs between two
// in-process verbs hosts (nic/sim_host.h), messages posted up to a window
// per QP, completions taken from completion events (an armed CQ, as
// ibv_req_notify_cq + a completion channel) so nothing polls between
// events. Times are engine times; results are kept since the scenario's
// time 0.
#pragma once

#include <vector>

#include "nic/sim_host.h"
#include "sim/scenario.h"
#include "sim/summary.h"

namespace rocemu::sim {

class Flow {
 public:
  // `index` numbers the flow's QPs apart from every other flow's (their
  // memory regions sit at fixed I/O addresses, so packets repeat exactly).
  // `ready` collects flows with completions waiting.
  Flow(const FlowSpec& spec, const Workload& w, nic::SimHost& src, nic::SimHost& dst, uint32_t index,
       std::vector<Flow*>& ready);
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;

  const std::string& name() const { return spec_.name; }
  // Before time 0: memory regions, CQs, QPs, connected INIT -> RTR -> RTS.
  Status setup();
  // Both ends of every QP know their next hop's MAC.
  bool resolved() const;
  // Time 0.
  void begin(Time t0);
  // When the flow must act without a completion (start, the next on
  // period, the end of its duration); kTimeNever if it need not.
  Time next_wake(Time now) const;
  // Posts what the window and the pattern allow now.
  void act(Time now);
  // Takes the completions waiting, accounts them, posts more.
  void service(Time now);
  bool done() const { return done_; }
  // Payload bytes on their way so far, packet by packet: sent for the
  // first time (WRITE, SEND) or received by the requester (READ).
  uint64_t progress_bytes();
  const FlowResult& result() const { return result_; }
  FlowQps qp_scopes() const;

 private:
  struct QpPair {
    nic::SimHost::Qp* req = nullptr;  // posts the messages
    nic::SimHost::Qp* resp = nullptr;
    nic::SimHost::Cq* req_cq = nullptr;
    nic::SimHost::Cq* resp_cq = nullptr;
    uint32_t req_key = 0, resp_key = 0;
    uint64_t req_addr = 0, resp_addr = 0;
    uint64_t quota = 0;  // messages to post; 0: no limit
    uint64_t posted = 0;
    uint32_t outstanding = 0;
    uint32_t last_psn = 0;
    uint64_t packets = 0;  // of progress (see progress_bytes)
  };
  nic::SimHost& requester() const { return spec_verb_read() ? dst_ : src_; }
  nic::SimHost& responder() const { return spec_verb_read() ? src_ : dst_; }
  bool spec_verb_read() const { return w_.verb == Verb::kRead; }
  Status setup_qp(QpPair& q, uint32_t k);
  uint32_t progress_psn(const QpPair& q) const;
  void watch(nic::SimHost& host, nic::SimHost::Cq* cq);
  static void arm(nic::SimHost::Cq* cq);
  bool may_post(const QpPair& q, Time now) const;
  int post(QpPair& q);
  int post_recv(QpPair& q);
  void take_completions(QpPair& q, Time now);
  void take_receives(QpPair& q);
  void check_done(Time now);

  FlowSpec spec_;
  const Workload& w_;
  nic::SimHost& src_;
  nic::SimHost& dst_;
  uint32_t index_;
  std::vector<Flow*>& ready_;
  bool queued_ = false;
  std::vector<QpPair> qps_;
  uint32_t packets_per_message_ = 1;
  uint32_t mtu_ = 1024;
  Time t0_{0};
  Time start_{0};
  bool failed_ = false;
  bool done_ = false;
  FlowResult result_;
};

}  // namespace rocemu::sim
