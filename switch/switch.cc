#include "switch/switch.h"

#include <atomic>

#include "common/engine/engine.h"
#include "common/engine/ethdev_port.h"
#include "common/log.h"
#include "switch/nvue_yaml.h"

namespace rocemu::sw {
namespace {

std::atomic<uint32_t> g_table_counter{0};

}  // namespace

Switch::Switch(std::string name, SwitchConfig cfg) : Node(std::move(name), cfg.num_ports), cfg_(std::move(cfg)) {
  log_ = logger("switch");
  if (cfg_.interfaces.size() != cfg_.num_ports) {
    const size_t old = cfg_.interfaces.size();
    cfg_.interfaces.resize(cfg_.num_ports);
    for (size_t i = old; i < cfg_.num_ports; i++) cfg_.interfaces[i].name = port_name(uint16_t(i));
  }
  ports_.reserve(cfg_.num_ports);
  for (uint16_t i = 0; i < cfg_.num_ports; i++) {
    auto p = std::make_unique<PortRuntime>();
    p->sw = this;
    p->index = i;
    p->pause_timer.bind<&PortRuntime::on_pause_expiry>(p.get());
    p->refresh_timer.bind<&PortRuntime::on_refresh>(p.get());
    p->delay_timer.bind<&PortRuntime::on_delay>(p.get());
    p->storm_timer.bind<&PortRuntime::on_storm>(p.get());
    p->pace_timer.bind<&PortRuntime::on_pace>(p.get());
    p->fault.bind({.dropped = &p->counters[PortCounters::drop_fault],
                   .corrupted = &p->counters[PortCounters::fault_corrupted],
                   .duplicated = &p->counters[PortCounters::fault_duplicated],
                   .delayed = &p->counters[PortCounters::fault_delayed]});
    ports_.push_back(std::move(p));
  }
  is_touched_.assign(cfg_.num_ports, 0);
  touched_.reserve(cfg_.num_ports);
  watchdog_timer_.bind<&Switch::on_watchdog>(this);
  auto table = RouteTable::create("swrt" + std::to_string(g_table_counter++));
  if (table.ok()) {
    routes_ = std::move(table.value());
  } else {
    route_status_ = table.status();
    log_->error("{}: {}", this->name(), route_status_.message());
  }
  if (Status s = cfg_.validate(); !s.ok()) log_->error("{}: {}", this->name(), s.message());
}

Switch::~Switch() {
  for (auto& p : ports_) {
    for (auto& q : p->queue) q.clear();
    p->control.clear();
    dpdk::free_burst(p->hold, p->n_hold);
    p->fault.held().clear();
  }
}

Time Switch::current_time() const { return started_ ? engine().now() : Time(0); }

void Switch::derive_port(PortRuntime& p, const SwitchConfig& cfg, bool load_faults) {
  const InterfaceConfig& f = cfg.interfaces[p.index];
  Port* port = this->port(p.index);
  p.mac = cfg.port_mac(p.index);
  p.speed = f.speed.value_or(port != nullptr ? port->rate_bps() : 100'000'000'000ull);
  p.mtu = f.mtu.value_or(port != nullptr ? port->mtu() : 9216);
  p.cable_length = f.cable_length.value_or(cfg.qos.pfc.cable_length);
  p.headroom = compute_headroom(p.speed, p.mtu, p.cable_length, cfg.qos.headroom);
  if (cfg.qos.pfc.xoff) p.headroom.xoff = *cfg.qos.pfc.xoff;
  if (cfg.qos.pfc.xon) p.headroom.xon = *cfg.qos.pfc.xon;
  if (cfg.qos.pfc.xoff || cfg.qos.pfc.xon) p.headroom.size = p.headroom.xoff + p.headroom.xon;
  // What the partner may send after it should have seen XOFF, at its line
  // rate for as long as it may run ahead (mmu.h). Not part of the
  // configured headroom: the modelled fabric needs none of it.
  const Duration slack = port != nullptr ? port->peer_tx_slack() : Duration(0);
  p.slack_bytes = uint64_t(static_cast<unsigned __int128>(slack.count()) * p.speed / 8'000'000'000'000ull);
  p.watchdog = f.pfc_watchdog.value_or(cfg.qos.watchdog.enable);
  p.batch_tx = dynamic_cast<EthdevPort*>(port) != nullptr;
  p.scheduler.configure(cfg.qos.scheduler);
  // Loading the configured faults again starts them afresh (a drop rule's
  // count of what it matched and dropped): only when they change.
  if (load_faults) p.fault.configure(f.faults);
}

Status Switch::rebuild(const SwitchConfig& cfg, Time now) {
  if (routes_ == nullptr) return route_status_;
  // The one step that can fail past validation (the route table: rte_lpm
  // out of rules or tbl8 groups) goes first. If it fails, the table that
  // loaded before is loaded again and nothing else has changed: queues,
  // XOFF being asserted and fault state are as they were.
  // (The first build goes on without routes: there is nothing to go back to.)
  const Status routed = routes_->load(cfg);
  if (!routed.ok() && faults_loaded_) {
    [[maybe_unused]] const Status back = routes_->load(cfg_);
    return routed;
  }
  std::vector<uint8_t> load_faults(ports_.size(), 1);
  if (faults_loaded_)
    for (size_t i = 0; i < ports_.size(); i++)
      load_faults[i] = faults_text(cfg_.interfaces[i].faults) != faults_text(cfg.interfaces[i].faults);
  const bool fresh_bridge = !faults_loaded_ || !same_bridge(cfg_, cfg);
  if (&cfg != &cfg_) cfg_ = cfg;
  faults_loaded_ = true;
  vtep_ip_ = cfg_.vxlan.enabled() ? cfg_.vxlan.source->v4_host_order() : 0;
  rebuild_bridge(fresh_bridge);
  const QosConfig& q = cfg_.qos;
  for (uint8_t sp = 0; sp < kNumSwitchPriorities; sp++) sp_pg_[sp] = q.pg_of(sp);
  lossless_tcs_ = q.lossless_tcs();
  pfc_rx_prios_ = q.pfc.rx ? q.pfc.switch_priorities : 0;
  pfc_tx_prios_ = q.pfc.tx ? q.pfc.switch_priorities : 0;
  roce_pg_ = q.pg_of(q.roce.roce_sp);
  roce_tc_ = q.tc_of(q.roce.roce_sp);
  cnp_tc_ = q.tc_of(q.roce.cnp_sp);
  trim_tc_ = q.tc_of(q.trim.switch_priority);
  std::vector<Mmu::PortHeadroom> hr(ports_.size());
  for (auto& p : ports_) {
    derive_port(*p, cfg_, load_faults[p->index] != 0);
    hr[p->index] = {p->headroom.xoff, p->headroom.xon, p->slack_bytes};
    if (p->fault.link_down()) mac_table_.flush_port(p->index);  // nothing is behind a port whose link is down
  }
  mmu_.configure(q, hr);
  if (!started_) return routed;
  for (auto& p : ports_) {
    // Priorities no longer lossless: release any XOFF we assert.
    if (const uint8_t gone = p->xoff_mask & ~pfc_tx_prios_; gone != 0) {
      for (int prio = 0; prio < kNumPriorities; prio++)
        if ((gone >> prio) & 1) p->xoff[prio].release(now);
      p->xoff_mask &= uint8_t(~gone);
      p->xon_pending |= gone;
      p->pfc_pending = true;
    }
    for (uint8_t g = 0; g < kNumPg; g++) {
      PgBuffer& pg = mmu_.pg(p->index, g);
      if (pg.xoff && !pg.lossless) pg.xoff = false;
    }
    const PfcStorm& storm = cfg_.interfaces[p->index].pfc_storm;
    if (storm.enable && !p->storm_timer.armed()) timers().schedule(p->storm_timer, now);
    if (!storm.enable) timers().cancel(p->storm_timer);
    kick(*p, now);
  }
  bool any_watchdog = false;
  for (auto& p : ports_) any_watchdog |= p->watchdog;
  if (any_watchdog && !watchdog_timer_.armed())
    timers().schedule(watchdog_timer_, now + cfg_.qos.watchdog.polling_interval);
  if (!any_watchdog) timers().cancel(watchdog_timer_);
  return routed;
}

void Switch::on_start(Time now) {
  for (auto& p : ports_) p->fault.reseed(Rng::derive(rng().next(), p->index));
  started_ = true;
  if (Status s = rebuild(cfg_, now); !s.ok()) log_->error("{}: {}", name(), s.message());
  log_->debug("{}: started with {} ports, qos roce {}", name(), ports_.size(),
              cfg_.qos.roce.enable ? roce_mode_name(cfg_.qos.roce.mode) : "off");
}

Status Switch::apply(const SwitchConfig& cfg) {
  const SwitchConfig before = cfg_;
  if (Status s = apply_running(cfg); !s.ok()) return s;
  if (pending_) rebase_pending(before);
  return {};
}

Status Switch::apply_running(const SwitchConfig& cfg) {
  if (cfg.num_ports != cfg_.num_ports)
    return Status::error("ports: a switch keeps its " + std::to_string(cfg_.num_ports) + " ports");
  if (Status s = cfg.validate(); !s.ok()) return s;
  if (!started_) {
    cfg_ = cfg;
    return {};
  }
  // On error rebuild has changed nothing.
  return rebuild(cfg, current_time());
}

void Switch::on_tx_ready(uint16_t port, Time now) {
  if (port < ports_.size()) kick(*ports_[port], now);
}

void Switch::PortRuntime::on_pause_expiry(Time now) { sw->kick(*this, now); }
void Switch::PortRuntime::on_pace(Time now) { sw->kick(*this, now); }

void Switch::PortRuntime::on_refresh(Time now) {
  if (xoff_mask == 0) return;
  pfc_pending = true;
  sw->kick(*this, now);
}

void Switch::PortRuntime::on_storm(Time now) {
  const PfcStorm& s = sw->cfg_.interfaces[index].pfc_storm;
  if (!s.enable) return;
  storm_pending = true;
  sw->kick(*this, now);
  const Duration every = s.interval.count() > 0 ? s.interval : quanta_to_duration(s.quanta, speed) / 2;
  sw->timers().schedule(storm_timer, now + std::max(every, ns(100)));
}

void Switch::clear_counters(uint16_t port) {
  PortRuntime& p = *ports_.at(port);
  const Time now = current_time();
  p.counters.clear();
  for (auto& q : p.queue_counters) q.clear();
  for (auto& g : p.pg_counters) g.clear();
  for (auto& w : p.wd) w.counters.clear();
  p.pfc_rx.fill(0);
  p.pfc_tx.fill(0);
  for (auto& t : p.pause) t.clear_counters(now);
  for (auto& t : p.xoff) t.clear_counters(now);
  if (routes_ != nullptr) routes_->clear_ecmp_counters(port);
}

void Switch::clear_counters() {
  for (uint16_t i = 0; i < ports_.size(); i++) clear_counters(i);
  vtep_counters_.clear();
  bridge_counters_.clear();
  for (VniRuntime& r : vnis_) r.counters.clear();
  mmu_.clear_watermarks();
}

// What ECMP sent to each port, over every group the port is a member of;
// nullopt for a port in no group.
std::vector<std::optional<EcmpCounters>> Switch::ecmp_port_counters() const {
  std::vector<std::optional<EcmpCounters>> out(ports_.size());
  if (routes_ == nullptr) return out;
  for (const EcmpGroup& g : routes_->ecmp_groups()) {
    for (uint32_t i = g.first; i < g.first + g.count; i++) {
      const EcmpMember& m = routes_->ecmp_member(i);
      const uint16_t port = routes_->next_hop(m.next_hop).port;
      if (port >= out.size()) continue;
      if (!out[port]) out[port].emplace();
      for (size_t c = 0; c < EcmpCounters::kCount; c++) out[port]->v[c] += m.counters.v[c];
    }
  }
  return out;
}

void Switch::report_counters(CounterSink& sink) const {
  const Time now = current_time();
  const std::vector<std::optional<EcmpCounters>> ecmp = ecmp_port_counters();
  // The VTEP's, under the switch's own scope ("sw1/vxlan.encap-packets").
  if (cfg_.vxlan.enabled())
    for (size_t i = 0; i < VtepCounters::kCount; i++) sink.counter(name(), VtepCounters::kNames[i], vtep_counters_.v[i]);
  if (cfg_.vxlan.enabled())  // per VNI: "sw1/vxlan.vni10.encap-packets"
    for (const VniRuntime& r : vnis_)
      for (size_t i = 0; i < VniCounters::kCount; i++)
        sink.counter(name(), "vxlan.vni" + std::to_string(r.vni) + "." + std::string(VniCounters::kNames[i]),
                     r.counters.v[i]);
  if (!cfg_.bridge.vlans.empty())
    for (size_t i = 0; i < BridgeCounters::kCount; i++)
      sink.counter(name(), BridgeCounters::kNames[i], bridge_counters_.v[i]);
  for (const auto& p : ports_) {
    const std::string scope = name() + "/" + cfg_.interfaces[p->index].name;
    for (size_t i = 0; i < PortCounters::kCount; i++) sink.counter(scope, PortCounters::kNames[i], p->counters.v[i]);
    if (const auto& e = ecmp[p->index])
      for (size_t i = 0; i < EcmpCounters::kCount; i++) sink.counter(scope, EcmpCounters::kNames[i], e->v[i]);
    // An external port's device counts its own drops (rings, buffers).
    if (const rocemu::Port* attached = port(p->index)) attached->report_device(sink, scope);
    for (int prio = 0; prio < kNumPriorities; prio++) {
      const std::string pfx = "pfc" + std::to_string(prio) + ".";
      sink.counter(scope, pfx + "rx-pause-packets", p->pfc_rx[prio]);
      sink.counter(scope, pfx + "tx-pause-packets", p->pfc_tx[prio]);
      sink.counter(scope, pfx + "rx-pause-duration-us", uint64_t(to_ns(p->pause[prio].duration(now)) / 1000));
      sink.counter(scope, pfx + "tx-pause-duration-us", uint64_t(to_ns(p->xoff[prio].duration(now)) / 1000));
    }
    for (int pg = 0; pg < kNumPg; pg++) {  // NVUE's ingress-buffer-stats
      const std::string pfx = "pg" + std::to_string(pg) + ".";
      for (size_t i = 0; i < PgCounters::kCount; i++)
        sink.counter(scope, pfx + std::string(PgCounters::kNames[i]), p->pg_counters[size_t(pg)].v[i]);
    }
    for (int tc = 0; tc < kNumTc; tc++) {
      const std::string pfx = "queue" + std::to_string(tc) + ".";
      for (size_t i = 0; i < QueueCounters::kCount; i++)
        sink.counter(scope, pfx + std::string(QueueCounters::kNames[i]), p->queue_counters[tc].v[i]);
      sink.counter(scope, pfx + "watermark-bytes", mmu_.queue(p->index, uint8_t(tc)).watermark);
      if ((lossless_tcs_ >> tc) & 1) {
        for (size_t i = 0; i < WatchdogCounters::kCount; i++)
          sink.counter(scope, pfx + "pfcwd." + std::string(WatchdogCounters::kNames[i]), p->wd[tc].counters.v[i]);
      }
    }
  }
}

}  // namespace rocemu::sw
