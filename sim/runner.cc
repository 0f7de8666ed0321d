#include "sim/runner.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "nic/nic.h"
#include "sim/null_memory.h"
#include "sim/sampler.h"
#include "sim/workload.h"
#include "switch/switch.h"

namespace rocemu::sim {
namespace {

using Clock = std::chrono::steady_clock;

class AllCounters final : public CounterSink {
 public:
  CounterMap values;
  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    std::string key;
    key.reserve(scope.size() + name.size() + 1);
    key.append(scope).append("/").append(name);
    values[std::move(key)] = value;
  }
};

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

class Run {
 public:
  explicit Run(const Scenario& s) : s_(s), layout_(layout_of(s.topology)) {}
  ~Run() {
    // Contexts close before the NICs go, and while the flows are there: a
    // QP flushed on the way may still raise a completion event.
    hosts_.clear();
    flows_.clear();
  }
  Status build();
  Status start_flows();
  Status loop(const RunOptions& o);
  RunResult finish();

 private:
  Status apply(const ScheduledEvent& e);
  void service_ready(Time now);
  void act_due(Time now);
  bool all_done() const;
  Time next_wake() const;
  CounterMap counters() const;

  const Scenario& s_;
  Layout layout_;
  std::unique_ptr<Engine> engine_;
  std::map<std::string, std::unique_ptr<nic::SimHost>> hosts_;
  std::vector<Flow*> ready_;
  std::vector<Flow*> batch_;  // service_ready(): the flows being served
  std::vector<std::unique_ptr<Flow>> flows_;
  // When each flow must next act (Flow::next_wake), and the earliest of
  // them: the loop visits every flow only when one is due. A flow's wake
  // changes only when it acts, when a completion is serviced, or, for an
  // on/off pattern, with the time itself: those flows are refreshed at
  // every step, the serviced ones after it (see act_due).
  std::vector<Time> wake_;
  Time min_wake_ = kTimeNever;
  std::vector<size_t> on_off_;    // flows with an on/off pattern
  std::vector<size_t> serviced_;  // flows serviced this step
  std::unordered_map<const Flow*, size_t> index_of_;
  std::unique_ptr<Sampler> sampler_;
  size_t next_event_ = 0;
  Time t0_{0};
  CounterMap start_counters_;
  Clock::time_point setup0_ = Clock::now();
  Clock::time_point wall0_ = setup0_;  // time 0 of the scenario
  double setup_seconds_ = 0;
  uint64_t events0_ = 0;
};

Status Run::build() {
  auto e = Engine::create(s_.topology.engine);
  if (!e.ok()) return e.status();
  engine_ = std::move(e.value());
  if (Status st = build_fabric(s_.topology, *engine_); !st.ok()) return st;
  engine_->start();
  for (const std::string& n : layout_.nics) {
    auto* nic = dynamic_cast<nic::Nic*>(engine_->find_node(n));
    hosts_[n] = std::make_unique<nic::SimHost>(*engine_, *nic, std::make_unique<NullMemory>());
  }
  return {};
}

// QPs for every flow, then ARP: time 0 is when every flow can send.
Status Run::start_flows() {
  uint32_t qp_index = 0;
  for (const FlowSpec& f : s_.flows) {
    const Workload& w = s_.workloads[f.workload];
    flows_.push_back(std::make_unique<Flow>(f, w, *hosts_.at(f.src), *hosts_.at(f.dst), qp_index, ready_));
    qp_index += w.qps;
    if (Status st = flows_.back()->setup(); !st.ok()) return st;
  }
  const bool resolved = engine_->run_until(
      [&] { return std::all_of(flows_.begin(), flows_.end(), [](const auto& f) { return f->resolved(); }); },
      engine_->now() + ms(10));
  if (!resolved) {
    for (const auto& f : flows_)
      if (!f->resolved())
        return Status::error(s_.file + ": flow " + f->name() +
                             ": its hosts did not learn their next hop's MAC in 10 ms (addresses, gateways, routes?)");
  }
  ready_.clear();
  t0_ = engine_->now();
  for (auto& f : flows_) f->begin(t0_);
  wake_.assign(flows_.size(), t0_);
  min_wake_ = t0_;
  for (size_t i = 0; i < flows_.size(); i++) {
    index_of_[flows_[i].get()] = i;
    if (s_.workloads[s_.flows[i].workload].on_off) on_off_.push_back(i);
  }
  start_counters_ = counters();
  sampler_ = std::make_unique<Sampler>(*engine_, s_, layout_, flows_);
  wall0_ = Clock::now();
  events0_ = engine_->iterations();
  setup_seconds_ = std::chrono::duration<double>(wall0_ - setup0_).count();
  return {};
}

CounterMap Run::counters() const {
  AllCounters c;
  engine_->report_counters(c);
  return std::move(c.values);
}

Status Run::apply(const ScheduledEvent& e) {
  if (e.kind == ScheduledEvent::Kind::kNv) {
    // Each scheduled command is staged and applied at its time.
    auto* sw = dynamic_cast<sw::Switch*>(engine_->find_node(e.node));
    if (Status s = sw->nv(e.nv); !s.ok()) return s;
    return sw->nv({"config", "apply"});
  }
  if (e.kind == ScheduledEvent::Kind::kPortFault) {
    auto* sw = dynamic_cast<sw::Switch*>(engine_->find_node(e.node));
    sw::SwitchConfig cfg = sw->config();
    cfg.interfaces[e.port].faults = e.faults;
    cfg.interfaces[e.port].pfc_storm = e.storm;
    return sw->apply(cfg);
  }
  for (const auto& l : engine_->links())
    for (int side = 0; side < 2; side++)
      if (l->end(side).owner()->name() == e.node && l->end(side).index() == e.port) {
        if (e.out) l->set_faults(side, e.faults);
        if (e.in) l->set_faults(1 - side, e.faults);
        return {};
      }
  return Status::error("no link at " + e.node + ":" + std::to_string(e.port));
}

void Run::service_ready(Time now) {
  while (!ready_.empty()) {
    batch_.swap(ready_);  // both keep their capacity: no allocation per completion
    for (Flow* f : batch_) {
      f->service(now);
      serviced_.push_back(index_of_.at(f));
    }
    batch_.clear();
  }
}

void Run::act_due(Time now) {
  if (min_wake_ <= now) {
    // A flow is due: every flow, in order, acts if due and looks ahead.
    min_wake_ = kTimeNever;
    for (size_t i = 0; i < flows_.size(); i++) {
      if (wake_[i] <= now) flows_[i]->act(now);
      wake_[i] = flows_[i]->next_wake(now);
      min_wake_ = std::min(min_wake_, wake_[i]);
    }
    serviced_.clear();
    return;
  }
  // None is due, so none acts; only the wakes that may have moved are
  // taken again (the same values the full pass above would give).
  bool changed = false;
  auto refresh = [&](size_t i) {
    const Time w = flows_[i]->next_wake(now);
    if (w == wake_[i]) return;
    wake_[i] = w;
    changed = true;
  };
  for (size_t i : serviced_) refresh(i);
  for (size_t i : on_off_) refresh(i);
  serviced_.clear();
  if (changed) min_wake_ = *std::min_element(wake_.begin(), wake_.end());
}

bool Run::all_done() const {
  return next_event_ == s_.schedule.size() &&
         std::all_of(flows_.begin(), flows_.end(), [](const auto& f) { return f->done(); });
}

Time Run::next_wake() const {
  Time t = min_wake_;
  if (next_event_ < s_.schedule.size()) t = std::min(t, t0_ + s_.schedule[next_event_].at);
  return t;
}

Status Run::loop(const RunOptions& o) {
  const Time end = t0_ + s_.duration;
  Time next_sample = t0_;
  bool stopping = false;
  double last_report = 0;
  for (;;) {
    const Time now = engine_->now();
    service_ready(now);
    for (; next_event_ < s_.schedule.size() && t0_ + s_.schedule[next_event_].at <= now; next_event_++)
      if (Status st = apply(s_.schedule[next_event_]); !st.ok()) return st;
    act_due(now);
    stopping = stopping || (s_.until_done && all_done());
    if (now == next_sample) {
      sampler_->sample(now);
      next_sample += s_.sample_interval;
      if (stopping) return {};
    }
    // Samples stay evenly spaced; the run covers its whole duration even
    // when the interval does not divide it.
    if (now >= end) return {};
    engine_->run_until([&] { return !ready_.empty(); }, std::min({next_sample, next_wake(), end}));
    if (o.progress && since(wall0_) - last_report >= 0.2) {
      last_report = since(wall0_);
      o.progress({engine_->now() - t0_, s_.duration, last_report, engine_->iterations() - events0_});
    }
  }
}

RunResult Run::finish() {
  Measurements m;
  m.end = engine_->now() - t0_;
  m.samples = sampler_->rows();
  m.start = std::move(start_counters_);
  m.final = counters();
  for (const auto& f : flows_) {
    m.flows.push_back(f->result());
    m.qps.push_back(f->qp_scopes());
  }
  m.cc = sampler_->flow_cc(m.flows);
  m.queues = sampler_->queue_stats();
  RunResult r;
  r.summary = build_summary(s_, layout_, m);
  r.series = sampler_->series();
  r.verdict = evaluate(s_.expectations, r.summary);
  r.events = engine_->iterations() - events0_;
  r.wall_seconds = since(wall0_);
  r.setup_seconds = setup_seconds_;
  return r;
}

Status write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return Status::error(p.string() + ": cannot write");
  return {};
}

}  // namespace

Result<RunResult> run_scenario(const Scenario& s, const RunOptions& o) {
  auto run = std::make_unique<Run>(s);
  if (Status st = run->build(); !st.ok()) return st;
  if (Status st = run->start_flows(); !st.ok()) return st;
  if (Status st = run->loop(o); !st.ok()) return st;
  RunResult r = run->finish();
  if (o.keep_at_exit) {
    static auto* kept = new std::vector<std::unique_ptr<Run>>;  // reachable, never destroyed
    kept->push_back(std::move(run));
  }
  return r;
}

Status write_outputs(const RunResult& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::error(dir + ": " + ec.message());
  const std::filesystem::path d(dir);
  if (Status st = write_file(d / "summary.json", r.summary.dump(2) + "\n"); !st.ok()) return st;
  for (const Series& s : r.series)
    if (Status st = write_file(d / (s.name + ".csv"), to_csv(s)); !st.ok()) return st;
  // A series this run does not have (no DCQCN counters) leaves no stale file behind.
  if (std::none_of(r.series.begin(), r.series.end(), [](const Series& s) { return s.name == "dcqcn"; }))
    std::filesystem::remove(d / "dcqcn.csv", ec);
  return {};
}

}  // namespace rocemu::sim
