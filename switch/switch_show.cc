// `show` views as JSON: NVUE's `qos roce` and `qos roce counters` field
// names, SONiC's queue, PFC, watchdog and watermark tables.
#include <cstdio>

#include "switch/switch.h"

namespace rocemu::sw {
namespace {

using nlohmann::json;

// NVUE prints buffer sizes in KB/MB of 1024.
std::string nvue_size(uint64_t bytes) {
  char buf[32];
  if (bytes >= 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f MB", double(bytes) / (1024.0 * 1024.0));
  } else if (bytes >= 1024) {
    std::snprintf(buf, sizeof buf, "%.2f KB", double(bytes) / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  }
  return buf;
}

std::string list_of(uint8_t mask) {
  std::string s;
  for (int i = 0; i < 8; i++)
    if ((mask >> i) & 1) s += (s.empty() ? "" : ",") + std::to_string(i);
  return s;
}

// NVUE shows every configured key with its operational and applied value;
// here the switch applies atomically, so both are the same.
json op_applied(const json& v) { return json{{"operational", v}, {"applied", v}}; }

uint64_t us_of(Duration d) { return uint64_t(to_ns(d) / 1000); }

}  // namespace

json Switch::show_qos_roce() const {
  const QosConfig& q = cfg_.qos;
  json out;
  out["enable"] = op_applied(q.roce.enable ? "on" : "off");
  out["mode"] = op_applied(q.roce.enable ? std::string(roce_mode_name(q.roce.mode)) : "");
  uint8_t ecn_tcs = 0;
  for (int tc = 0; tc < kNumTc; tc++)
    if (q.congestion[tc].ecn) ecn_tcs |= uint8_t(1u << tc);
  const WredProfile& w = q.congestion[roce_tc_].wred;
  out["pfc"] = {{"pfc-priority", op_applied(list_of(q.pfc.switch_priorities))},
                {"rx-enabled", op_applied(q.pfc.rx && q.pfc.switch_priorities ? "enabled" : "disabled")},
                {"tx-enabled", op_applied(q.pfc.tx && q.pfc.switch_priorities ? "enabled" : "disabled")},
                {"cable-length", op_applied(q.pfc.cable_length)}};
  out["congestion-control"] = {{"congestion-mode", op_applied("ECN")},
                               {"enabled-tc", op_applied(list_of(ecn_tcs))},
                               {"min-threshold", op_applied(nvue_size(w.min_threshold))},
                               {"max-threshold", op_applied(nvue_size(w.max_threshold))},
                               {"probability", op_applied(w.probability)}};
  std::string trust = q.mapping.trust == Trust::kBoth  ? "pcp,dscp"
                      : q.mapping.trust == Trust::kL3  ? "dscp"
                      : q.mapping.trust == Trust::kL2  ? "pcp"
                                                       : "port";
  out["trust"] = {{"trust-mode", op_applied(trust)}};
  out["lldp-app-tlv"] = {{"priority", op_applied(q.roce.roce_sp)},
                         {"protocol-id", op_applied(4791)},
                         {"selector", op_applied("UDP")}};
  json dscp_map = json::array();
  for (int sp = 0; sp < kNumSwitchPriorities; sp++) {
    std::string dscps, pcps;
    for (int d = 0; d < kNumDscp; d++)
      if (q.mapping.dscp_to_sp[d] == sp) dscps += (dscps.empty() ? "" : ",") + std::to_string(d);
    for (int p = 0; p < kNumSwitchPriorities; p++)
      if (q.mapping.pcp_to_sp[p] == sp) pcps += (pcps.empty() ? "" : ",") + std::to_string(p);
    if (!dscps.empty() || !pcps.empty()) dscp_map.push_back({{"pcp", pcps}, {"dscp", dscps}, {"switch-prio", sp}});
  }
  out["RoCE PCP/DSCP->SP mapping"] = dscp_map;
  json ets = json::array();
  for (int sp = 0; sp < kNumSwitchPriorities; sp++) {
    const uint8_t tc = q.sp_to_tc[sp];
    const TcSchedule& s = q.scheduler[tc];
    ets.push_back({{"switch-prio", sp},
                   {"traffic-class", tc},
                   {"scheduler-weight", s.mode == SchedulerMode::kStrict ? std::string("strict")
                                                                          : "DWRR-" + std::to_string(s.bw_percent) + "%"}});
  }
  out["RoCE SP->TC mapping and ETS"] = ets;
  json pools = json::array();
  const char* names[2][2] = {{"lossy-default-ingress", "roce-reserved-ingress"},
                             {"lossy-default-egress", "roce-reserved-egress"}};
  const uint8_t lossless_sps = q.pfc.switch_priorities;
  for (int dir = 0; dir < 2; dir++) {
    for (int pool = 0; pool < (mmu_.has_lossless_pool() ? 2 : 1); pool++) {
      const BufferPool& bp = dir == 0 ? mmu_.ingress_pool(pool) : mmu_.egress_pool(pool);
      const uint8_t sps = !mmu_.has_lossless_pool() ? uint8_t(0xff)
                          : pool == kLosslessPool   ? lossless_sps
                                                    : uint8_t(~lossless_sps);
      uint8_t tcs = 0;
      for (int sp = 0; sp < 8; sp++)
        if ((sps >> sp) & 1) tcs |= uint8_t(1u << q.sp_to_tc[sp]);
      pools.push_back({{"name", names[dir][pool]},
                       {"mode", "Dynamic"},
                       {"size", nvue_size(bp.size)},
                       {"switch-priorities", list_of(sps)},
                       {"traffic-class", list_of(tcs)}});
    }
  }
  out["RoCE pool config"] = pools;
  out["Exception List"] = json::array();
  return out;
}

json Switch::show_roce_counters(uint16_t port) const {
  const PortRuntime& p = *ports_.at(port);
  const Time now = current_time();
  const PortCounters& c = p.counters;
  const uint8_t prio = cfg_.qos.roce.roce_sp;
  const PgBuffer& roce_pg = mmu_.pg(port, roce_pg_);
  uint64_t other_pg = 0, other_pg_wm = 0;
  for (uint8_t g = 0; g < kNumPg; g++) {
    if (g == roce_pg_) continue;
    other_pg += mmu_.pg(port, g).total();
    other_pg_wm = std::max(other_pg_wm, mmu_.pg(port, g).watermark);
  }
  const int lossy = kLossyPool;
  const int roce_in_pool = roce_pg.pool;
  const int roce_out_pool = mmu_.queue(port, roce_tc_).pool;
  const int cnp_out_pool = mmu_.queue(port, cnp_tc_).pool;
  json out;
  out["rx-pfc-stats"] = {{"pause-duration", us_of(p.pause[prio].duration(now))}, {"pause-packets", p.pfc_rx[prio]}};
  out["tx-pfc-stats"] = {{"pause-duration", us_of(p.xoff[prio].duration(now))}, {"pause-packets", p.pfc_tx[prio]}};
  out["rx-roce-stats"] = {{"buffer-max-usage", mmu_.port_ingress_watermark(port, roce_in_pool)},
                          {"buffer-usage", mmu_.port_ingress_bytes(port, roce_in_pool)},
                          {"no-buffer-discard", c[PortCounters::rx_roce_no_buffer_discard]},
                          {"pg-max-usage", roce_pg.watermark},
                          {"pg-usage", roce_pg.total()},
                          {"roce-bytes", c[PortCounters::rx_roce_bytes]},
                          {"roce-packets", c[PortCounters::rx_roce_packets]}};
  out["rx-non-roce-stats"] = {{"buffer-max-usage", mmu_.port_ingress_watermark(port, lossy)},
                              {"buffer-usage", mmu_.port_ingress_bytes(port, lossy)},
                              {"no-buffer-discard", c[PortCounters::rx_non_roce_no_buffer_discard]},
                              {"non-roce-bytes", c[PortCounters::rx_non_roce_bytes]},
                              {"non-roce-packets", c[PortCounters::rx_non_roce_packets]},
                              {"pg-max-usage", other_pg_wm},
                              {"pg-usage", other_pg}};
  out["tx-roce-stats"] = {{"buffer-max-usage", mmu_.port_egress_watermark(port, roce_out_pool)},
                          {"buffer-usage", mmu_.port_egress_bytes(port, roce_out_pool)},
                          {"roce-bytes", c[PortCounters::tx_roce_bytes]},
                          {"roce-packets", c[PortCounters::tx_roce_packets]},
                          {"tc-max-usage", mmu_.queue(port, roce_tc_).watermark},
                          {"tc-usage", mmu_.queue(port, roce_tc_).total()},
                          {"unicast-no-buffer-discard", c[PortCounters::tx_roce_no_buffer_discard]}};
  out["tx-cnp-stats"] = {{"buffer-max-usage", mmu_.port_egress_watermark(port, cnp_out_pool)},
                         {"buffer-usage", mmu_.port_egress_bytes(port, cnp_out_pool)},
                         {"cnp-bytes", c[PortCounters::tx_cnp_bytes]},
                         {"cnp-packets", c[PortCounters::tx_cnp_packets]},
                         {"tc-max-usage", mmu_.queue(port, cnp_tc_).watermark},
                         {"tc-usage", mmu_.queue(port, cnp_tc_).total()},
                         {"unicast-no-buffer-discard", c[PortCounters::tx_cnp_no_buffer_discard]}};
  out["tx-ecn-stats"] = {{"ecn-marked-packets", c[PortCounters::tx_ecn_marked_packets]}};
  return out;
}

json Switch::show_roce_status(uint16_t port) const {
  json out = show_qos_roce();
  json pools = json::array();
  const char* names[2][2] = {{"lossy-default-ingress", "roce-reserved-ingress"},
                             {"lossy-default-egress", "roce-reserved-egress"}};
  int id = 0;
  for (int dir = 0; dir < 2; dir++) {
    for (int pool = 0; pool < (mmu_.has_lossless_pool() ? 2 : 1); pool++) {
      const BufferPool& bp = dir == 0 ? mmu_.ingress_pool(pool) : mmu_.egress_pool(pool);
      pools.push_back({{"pool-id", id++},
                       {"name", names[dir][pool]},
                       {"size", bp.size},
                       {"current-usage", dir == 0 ? mmu_.port_ingress_bytes(port, pool) : mmu_.port_egress_bytes(port, pool)},
                       {"max-usage", dir == 0 ? mmu_.port_ingress_watermark(port, pool) : mmu_.port_egress_watermark(port, pool)}});
    }
  }
  out["RoCE Pool Status"] = pools;
  return out;
}

json Switch::show_pfc_counters() const {
  const Time now = current_time();
  json out;
  for (const auto& p : ports_) {
    json rx = json::array(), tx = json::array(), rxd = json::array(), txd = json::array();
    for (int prio = 0; prio < kNumPriorities; prio++) {
      rx.push_back(p->pfc_rx[prio]);
      tx.push_back(p->pfc_tx[prio]);
      rxd.push_back(us_of(p->pause[prio].duration(now)));
      txd.push_back(us_of(p->xoff[prio].duration(now)));
    }
    out[cfg_.interfaces[p->index].name] = {
        {"rx", rx}, {"tx", tx}, {"rx-pause-duration-us", rxd}, {"tx-pause-duration-us", txd}};
  }
  return out;
}

json Switch::queue_json(const PortRuntime& p, uint8_t tc) const {
  json q;
  q["txq"] = "UC" + std::to_string(tc);
  const QueueCounters& c = p.queue_counters[tc];
  for (size_t i = 0; i < QueueCounters::kCount; i++) q[std::string(QueueCounters::kNames[i])] = c.v[i];
  q["depth-bytes"] = mmu_.queue(p.index, tc).total();
  q["depth-packets"] = p.queue[tc].size();
  q["watermark-bytes"] = mmu_.queue(p.index, tc).watermark;
  q["lossless"] = mmu_.queue(p.index, tc).lossless;
  return q;
}

json Switch::show_queue_counters(uint16_t port) const {
  json out = json::array();
  const PortRuntime& p = *ports_.at(port);
  for (uint8_t tc = 0; tc < kNumTc; tc++) out.push_back(queue_json(p, tc));
  return out;
}

json Switch::show_pfc_watchdog() const {
  const PfcWatchdog& w = cfg_.qos.watchdog;
  json out;
  out["config"] = {{"polling-interval-ms", to_ns(w.polling_interval) / 1000000},
                   {"detection-time-ms", to_ns(w.detection_time) / 1000000},
                   {"restoration-time-ms", to_ns(w.restoration_time) / 1000000},
                   {"action", watchdog_action_name(w.action)}};
  json ports;
  for (const auto& p : ports_) {
    json queues;
    for (uint8_t tc = 0; tc < kNumTc; tc++) {
      if (((lossless_tcs_ >> tc) & 1) == 0) continue;
      json q;
      q["status"] = !p->watchdog ? "disabled" : p->wd[tc].storm ? "stormed" : "operational";
      for (size_t i = 0; i < WatchdogCounters::kCount; i++)
        q[std::string(WatchdogCounters::kNames[i])] = p->wd[tc].counters.v[i];
      queues[std::to_string(tc)] = q;
    }
    ports[cfg_.interfaces[p->index].name] = queues;
  }
  out["queues"] = ports;
  return out;
}

json Switch::show_pg_watermark(uint16_t port) const {
  json out = json::array();
  for (uint8_t g = 0; g < kNumPg; g++) {
    const PgBuffer& pg = mmu_.pg(port, g);
    out.push_back({{"pg", g},
                   {"lossless", pg.lossless},
                   {"xoff", pg.xoff},
                   {"reserved", pg.reserved},
                   {"shared", pg.shared},
                   {"headroom", pg.headroom},
                   {"shared-watermark", pg.shared_watermark},
                   {"headroom-watermark", pg.headroom_watermark},
                   {"headroom-size", pg.headroom_size},
                   {"xon", pg.xon},
                   {"threshold", mmu_.pg_threshold(port, g)}});
  }
  return out;
}

json Switch::show_buffer_pools() const {
  json out;
  const char* names[2][2] = {{"lossy-default-ingress", "roce-reserved-ingress"},
                             {"lossy-default-egress", "roce-reserved-egress"}};
  for (int dir = 0; dir < 2; dir++) {
    for (int pool = 0; pool < (mmu_.has_lossless_pool() ? 2 : 1); pool++) {
      const BufferPool& bp = dir == 0 ? mmu_.ingress_pool(pool) : mmu_.egress_pool(pool);
      out[names[dir][pool]] = {{"size", bp.size}, {"current-usage", bp.used}, {"max-usage", bp.watermark},
                               {"mode", "dynamic"}};
    }
  }
  return out;
}

json Switch::show_interface(uint16_t port) const {
  const PortRuntime& p = *ports_.at(port);
  const InterfaceConfig& f = cfg_.interfaces[port];
  json out;
  out["name"] = f.name;
  out["mac"] = p.mac.str();
  out["connected"] = this->port(port) != nullptr;
  out["link"] = {{"speed", p.speed}, {"mtu", p.mtu}, {"cable-length", p.cable_length}};
  if (f.address) out["ip-address"] = f.address->str();
  out["headroom"] = {{"xoff", p.headroom.xoff}, {"xon", p.headroom.xon}, {"size", p.headroom.size}};
  out["pfc-watchdog"] = p.watchdog ? "enabled" : "disabled";
  out["pfc-storm"] = f.pfc_storm.enable;
  json c;
  for (size_t i = 0; i < PortCounters::kCount; i++) c[std::string(PortCounters::kNames[i])] = p.counters.v[i];
  out["counters"] = c;
  return out;
}

json Switch::show_routes() const {
  json out;
  json routes = json::array();
  if (routes_ != nullptr) {
    for (const Route& r : routes_->routes()) {
      json j = {{"prefix", r.prefix.str()}, {"interface", cfg_.interfaces[r.port].name}};
      if (r.via) j["via"] = r.via->str();
      if (r.mac) j["mac"] = r.mac->str();
      routes.push_back(j);
    }
    json neigh = json::array();
    for (const auto& [ip, e] : routes_->neighbors())
      neigh.push_back({{"ip", ip.str()},
                       {"mac", e.mac.str()},
                       {"interface", cfg_.interfaces[e.port].name},
                       {"type", e.is_static ? "static" : "learned"}});
    out["neighbors"] = neigh;
    json groups = json::array();
    for (const EcmpGroup& g : routes_->ecmp_groups()) {
      json members = json::array();
      for (uint32_t i = g.first; i < g.first + g.count; i++) {
        const EcmpMember& m = routes_->ecmp_member(i);
        const NextHop& nh = routes_->next_hop(m.next_hop);
        json j = {{"interface", cfg_.interfaces[nh.port].name}};
        if (!nh.glean) j["via"] = nh.ip.str();
        for (size_t c = 0; c < EcmpCounters::kCount; c++) j[std::string(EcmpCounters::kNames[c])] = m.counters.v[c];
        members.push_back(j);
      }
      groups.push_back({{"prefix", g.prefix.str()}, {"next-hops", members}});
    }
    out["ecmp-groups"] = groups;
    out["load-balancing"] = std::string(load_balancing_name(cfg_.ecmp.load_balancing));
  }
  out["routes"] = routes;
  return out;
}

}  // namespace rocemu::sw
