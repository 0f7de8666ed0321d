// `nv show` views: NVUE's `qos roce`, `qos roce counters|status` and
// `interface` keys in NVUE's order, SONiC's queue, PFC, watchdog and
// watermark tables in SONiC's words. Each is an NvView (nvue_view.h): a
// table by default, plain values with -o json|yaml.
#include <algorithm>
#include <array>

#include "common/config/config.h"
#include "switch/switch.h"

namespace rocemu::sw {
namespace {

// A set of values by their runs, as NVUE lists DSCPs: "0-25,27-47,49-63".
NvValue runs(const std::vector<int>& v) {
  std::string s;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) j++;
    s += (s.empty() ? "" : ",") + std::to_string(v[i]);
    if (j > i + 1) s += "-" + std::to_string(v[j]);
    else if (j == i + 1) s += "," + std::to_string(v[j]);
    i = j + 1;
  }
  return NvValue(ojson(v), s.empty() ? "-" : s);
}

NvValue us_of(Duration d) { return NvValue(uint64_t(to_ns(d) / 1000)); }
// A configured time: integer µs in -o json (a 1.5ms detection time is not
// cut to 1), as it was given in the table.
NvValue time_of(Duration d) { return NvValue(uint64_t(to_ns(d) / 1000), config::format_duration(d)); }
const char* state_word(bool on) { return on ? "enabled" : "disabled"; }

const char* const kPoolNames[2][2] = {{"lossy-default-ingress", "roce-reserved-ingress"},
                                      {"lossy-default-egress", "roce-reserved-egress"}};

}  // namespace

NvView Switch::view_qos_roce() const {
  const QosConfig& q = cfg_.qos;
  NvView v;
  v.field("enable", q.roce.enable ? "on" : "off");
  v.field("mode", q.roce.enable ? std::string(roce_mode_name(q.roce.mode)) : std::string("none"));
  uint8_t ecn_tcs = 0;
  for (int tc = 0; tc < kNumTc; tc++)
    if (q.congestion[tc].ecn) ecn_tcs |= uint8_t(1u << tc);
  const WredProfile& w = q.congestion[roce_tc_].wred;
  v.group("pfc")
      .field("pfc-priority", nv_list(q.pfc.switch_priorities))
      .field("rx-enabled", state_word(q.pfc.rx && q.pfc.switch_priorities))
      .field("tx-enabled", state_word(q.pfc.tx && q.pfc.switch_priorities))
      .field("cable-length", q.pfc.cable_length)
      .end();
  v.group("congestion-control")
      .field("congestion-mode", "ECN")
      .field("enabled-tc", nv_list(ecn_tcs))
      .field("min-threshold", nv_bytes(w.min_threshold))
      .field("max-threshold", nv_bytes(w.max_threshold))
      .field("probability", w.probability)
      .end();
  const char* trust = q.mapping.trust == Trust::kBoth  ? "pcp,dscp"
                      : q.mapping.trust == Trust::kL3  ? "dscp"
                      : q.mapping.trust == Trust::kL2  ? "pcp"
                                                       : "port";
  v.group("trust").field("trust-mode", trust).end();
  v.group("lldp-app-tlv")
      .field("priority", q.roce.roce_sp)
      .field("protocol-id", 4791)
      .field("selector", "UDP")
      .end();

  auto& map = v.table("RoCE PCP/DSCP->SP mapping", {"pcp", "dscp", "switch-prio"});
  for (int sp = 0; sp < kNumSwitchPriorities; sp++) {
    std::vector<int> dscps, pcps;
    for (int d = 0; d < kNumDscp; d++)
      if (q.mapping.dscp_to_sp[d] == sp) dscps.push_back(d);
    for (int p = 0; p < kNumSwitchPriorities; p++)
      if (q.mapping.pcp_to_sp[p] == sp) pcps.push_back(p);
    if (!dscps.empty() || !pcps.empty()) map.rows.push_back({runs(pcps), runs(dscps), sp});
  }
  auto& ets = v.table("RoCE SP->TC mapping and ETS", {"switch-prio", "traffic-class", "scheduler-weight"});
  for (int sp = 0; sp < kNumSwitchPriorities; sp++) {
    const uint8_t tc = q.sp_to_tc[sp];
    const TcSchedule& s = q.scheduler[tc];
    ets.rows.push_back({sp, tc,
                        s.mode == SchedulerMode::kStrict ? std::string("strict")
                                                         : "DWRR-" + std::to_string(s.bw_percent) + "%"});
  }
  auto& pools = v.table("RoCE pool config", {"name", "mode", "size", "switch-priorities", "traffic-class"});
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
      pools.rows.push_back({kPoolNames[dir][pool], "Dynamic", nv_bytes(bp.size), nv_list(sps), nv_list(tcs)});
    }
  }
  v.table("Exception List", {"description"});
  return v;
}

NvView Switch::view_roce_counters(uint16_t port) const {
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
  // NVUE prints the groups and their counters in alphabetical order.
  NvView v(NvView::Columns::kOperational);
  v.group("rx-non-roce-stats")
      .field("buffer-max-usage", nv_bytes(mmu_.port_ingress_watermark(port, lossy)))
      .field("buffer-usage", nv_bytes(mmu_.port_ingress_bytes(port, lossy)))
      .field("no-buffer-discard", c[PortCounters::rx_non_roce_no_buffer_discard])
      .field("non-roce-bytes", nv_bytes(c[PortCounters::rx_non_roce_bytes]))
      .field("non-roce-packets", c[PortCounters::rx_non_roce_packets])
      .field("pg-max-usage", nv_bytes(other_pg_wm))
      .field("pg-usage", nv_bytes(other_pg))
      .end();
  v.group("rx-pfc-stats")
      .field("pause-duration", us_of(p.pause[prio].duration(now)))
      .field("pause-packets", p.pfc_rx[prio])
      .end();
  v.group("rx-roce-stats")
      .field("buffer-max-usage", nv_bytes(mmu_.port_ingress_watermark(port, roce_in_pool)))
      .field("buffer-usage", nv_bytes(mmu_.port_ingress_bytes(port, roce_in_pool)))
      .field("no-buffer-discard", c[PortCounters::rx_roce_no_buffer_discard])
      .field("pg-max-usage", nv_bytes(roce_pg.watermark))
      .field("pg-usage", nv_bytes(roce_pg.total()))
      .field("roce-bytes", nv_bytes(c[PortCounters::rx_roce_bytes]))
      .field("roce-packets", c[PortCounters::rx_roce_packets])
      .end();
  v.group("tx-cnp-stats")
      .field("buffer-max-usage", nv_bytes(mmu_.port_egress_watermark(port, cnp_out_pool)))
      .field("buffer-usage", nv_bytes(mmu_.port_egress_bytes(port, cnp_out_pool)))
      .field("cnp-bytes", nv_bytes(c[PortCounters::tx_cnp_bytes]))
      .field("cnp-packets", c[PortCounters::tx_cnp_packets])
      .field("tc-max-usage", nv_bytes(mmu_.queue(port, cnp_tc_).watermark))
      .field("tc-usage", nv_bytes(mmu_.queue(port, cnp_tc_).total()))
      .field("unicast-no-buffer-discard", c[PortCounters::tx_cnp_no_buffer_discard])
      .end();
  v.group("tx-ecn-stats").field("ecn-marked-packets", c[PortCounters::tx_ecn_marked_packets]).end();
  v.group("tx-pfc-stats")
      .field("pause-duration", us_of(p.xoff[prio].duration(now)))
      .field("pause-packets", p.pfc_tx[prio])
      .end();
  v.group("tx-roce-stats")
      .field("buffer-max-usage", nv_bytes(mmu_.port_egress_watermark(port, roce_out_pool)))
      .field("buffer-usage", nv_bytes(mmu_.port_egress_bytes(port, roce_out_pool)))
      .field("roce-bytes", nv_bytes(c[PortCounters::tx_roce_bytes]))
      .field("roce-packets", c[PortCounters::tx_roce_packets])
      .field("tc-max-usage", nv_bytes(mmu_.queue(port, roce_tc_).watermark))
      .field("tc-usage", nv_bytes(mmu_.queue(port, roce_tc_).total()))
      .field("unicast-no-buffer-discard", c[PortCounters::tx_roce_no_buffer_discard])
      .end();
  return v;
}

NvView Switch::view_roce_status(uint16_t port) const {
  NvView v = view_qos_roce();
  auto& pools = v.table("RoCE Pool Status", {"pool-id", "name", "size", "current-usage", "max-usage"});
  int id = 0;
  for (int dir = 0; dir < 2; dir++) {
    for (int pool = 0; pool < (mmu_.has_lossless_pool() ? 2 : 1); pool++) {
      const BufferPool& bp = dir == 0 ? mmu_.ingress_pool(pool) : mmu_.egress_pool(pool);
      pools.rows.push_back(
          {id++, kPoolNames[dir][pool], nv_bytes(bp.size),
           nv_bytes(dir == 0 ? mmu_.port_ingress_bytes(port, pool) : mmu_.port_egress_bytes(port, pool)),
           nv_bytes(dir == 0 ? mmu_.port_ingress_watermark(port, pool) : mmu_.port_egress_watermark(port, pool))});
    }
  }
  return v;
}

NvView Switch::view_pfc_counters() const {
  // SONiC `show pfc counters`: frames per priority, received and sent.
  NvView v(NvView::Columns::kOperational);
  std::vector<std::string> cols = {"Port"};
  for (int prio = 0; prio < kNumPriorities; prio++) cols.push_back("PFC" + std::to_string(prio));
  for (const bool rx : {true, false}) {
    auto& t = v.table(rx ? "Port Rx" : "Port Tx", cols);
    for (const auto& p : ports_) {
      std::vector<NvValue> row = {cfg_.interfaces[p->index].name};
      for (int prio = 0; prio < kNumPriorities; prio++) row.emplace_back(rx ? p->pfc_rx[prio] : p->pfc_tx[prio]);
      t.rows.push_back(std::move(row));
    }
  }
  return v;
}

NvView Switch::view_queue_counters(uint16_t port) const {
  // SONiC `show queue counters`, with ECN/WRED, depth and watermark.
  NvView v(NvView::Columns::kOperational);
  std::vector<std::string> cols = {"TxQ"};
  for (size_t i = 0; i < QueueCounters::kCount; i++) cols.emplace_back(QueueCounters::kNames[i]);
  for (const char* c : {"depth-bytes", "depth-packets", "watermark-bytes", "lossless"}) cols.emplace_back(c);
  auto& t = v.table("queue counters", cols);
  const PortRuntime& p = *ports_.at(port);
  for (uint8_t tc = 0; tc < kNumTc; tc++) {
    const QueueCounters& c = p.queue_counters[tc];
    std::vector<NvValue> row = {"UC" + std::to_string(tc)};
    for (size_t i = 0; i < QueueCounters::kCount; i++) {
      const bool bytes = QueueCounters::kNames[i].ends_with("bytes");
      row.push_back(bytes ? nv_bytes(c.v[i]) : NvValue(c.v[i]));
    }
    row.push_back(nv_bytes(mmu_.queue(port, tc).total()));
    row.emplace_back(p.queue[tc].size());
    row.push_back(nv_bytes(mmu_.queue(port, tc).watermark));
    row.emplace_back(mmu_.queue(port, tc).lossless ? "yes" : "no");
    t.rows.push_back(std::move(row));
  }
  return v;
}

NvView Switch::view_pfc_watchdog(std::optional<uint16_t> only) const {
  const PfcWatchdog& w = cfg_.qos.watchdog;
  NvView v;
  if (!only) {
    v.field("state", state_word(w.enable))
        .field("polling-interval", time_of(w.polling_interval))
        .field("detection-time", time_of(w.detection_time))
        .field("restoration-time", time_of(w.restoration_time))
        .field("action", std::string(watchdog_action_name(w.action)));
  }
  // SONiC `show pfcwd stats`: each lossless queue of each port.
  std::vector<std::string> cols = {"interface", "traffic-class", "status"};
  for (size_t i = 0; i < WatchdogCounters::kCount; i++) cols.emplace_back(WatchdogCounters::kNames[i]);
  auto& t = v.table("queues", cols);
  for (const auto& p : ports_) {
    if (only && p->index != *only) continue;
    for (uint8_t tc = 0; tc < kNumTc; tc++) {
      if (((lossless_tcs_ >> tc) & 1) == 0) continue;
      std::vector<NvValue> row = {cfg_.interfaces[p->index].name, tc,
                                  !p->watchdog ? "disabled" : p->wd[tc].storm ? "stormed" : "operational"};
      for (size_t i = 0; i < WatchdogCounters::kCount; i++) row.emplace_back(p->wd[tc].counters.v[i]);
      t.rows.push_back(std::move(row));
    }
  }
  return v;
}

NvView Switch::view_pg_watermark(uint16_t port) const {
  // SONiC `show priority-group watermark shared|headroom`, with the PG's setup.
  NvView v(NvView::Columns::kOperational);
  auto& t = v.table("priority groups", {"priority-group", "lossless", "xoff", "reserved", "shared", "headroom",
                                        "shared-watermark", "headroom-watermark", "headroom-size", "xon",
                                        "threshold"});
  for (uint8_t g = 0; g < kNumPg; g++) {
    const PgBuffer& pg = mmu_.pg(port, g);
    t.rows.push_back({g, pg.lossless ? "yes" : "no", pg.xoff ? "asserted" : "-", nv_bytes(pg.reserved),
                      nv_bytes(pg.shared), nv_bytes(pg.headroom), nv_bytes(pg.shared_watermark),
                      nv_bytes(pg.headroom_watermark), nv_bytes(pg.headroom_size), nv_bytes(pg.xon),
                      nv_bytes(mmu_.pg_threshold(port, g))});
  }
  return v;
}

NvView Switch::view_buffer_pools() const {
  NvView v(NvView::Columns::kOperational);
  auto& t = v.table("buffer pools", {"name", "mode", "size", "current-usage", "max-usage"});
  for (int dir = 0; dir < 2; dir++) {
    for (int pool = 0; pool < (mmu_.has_lossless_pool() ? 2 : 1); pool++) {
      const BufferPool& bp = dir == 0 ? mmu_.ingress_pool(pool) : mmu_.egress_pool(pool);
      t.rows.push_back({kPoolNames[dir][pool], "Dynamic", nv_bytes(bp.size), nv_bytes(bp.used),
                        nv_bytes(bp.watermark)});
    }
  }
  return v;
}

NvView Switch::view_interface(uint16_t port) const {
  const PortRuntime& p = *ports_.at(port);
  const InterfaceConfig& f = cfg_.interfaces[port];
  // operational: what runs; applied: what is configured (nothing: the default).
  const auto applied = [](const auto& opt, auto fmt) -> std::optional<NvValue> {
    if (!opt) return std::nullopt;
    return fmt(*opt);
  };
  NvView v;
  v.field("type", "swp");
  v.field("mac", p.mac.str(), applied(f.mac, [](const wire::MacAddr& m) { return NvValue(m.str()); }));
  v.group("link")
      .field("state", this->port(port) != nullptr && !p.fault.link_down() ? "up" : "down", std::nullopt)
      .field("speed", NvValue(p.speed, config::format_rate(p.speed)),
             applied(f.speed, [](uint64_t s) { return NvValue(s, config::format_rate(s)); }))
      .field("mtu", p.mtu, applied(f.mtu, [](uint32_t m) { return NvValue(m); }))
      .field("cable-length", p.cable_length, applied(f.cable_length, [](uint32_t m) { return NvValue(m); }))
      .end();
  if (f.address) v.group("ip").field("address", f.address->str()).end();
  if (f.access)  // NVUE: interface <if> bridge domain br_default access
    v.group("bridge").group("domain").group(kBridgeDomain).field("access", int(*f.access)).end().end().end();
  v.group("headroom")
      .field("xoff", nv_bytes(p.headroom.xoff), std::nullopt)
      .field("xon", nv_bytes(p.headroom.xon), std::nullopt)
      .field("size", nv_bytes(p.headroom.size), std::nullopt)
      .end();
  v.field("pfc-watchdog", state_word(p.watchdog),
          applied(f.pfc_watchdog, [](bool on) { return NvValue(state_word(on)); }));
  v.field("pfc-storm", state_word(f.pfc_storm.enable));
  v.group("counters");
  for (size_t i = 0; i < PortCounters::kCount; i++)
    v.field(std::string(PortCounters::kNames[i]), p.counters.v[i], std::nullopt);
  v.end();
  return v;
}

NvView Switch::view_routes() const {
  NvView v(NvView::Columns::kOperational);
  auto& routes = v.table("routes", {"prefix", "interface", "via", "mac"});
  auto& neigh = v.table("neighbors", {"ip", "mac", "interface", "type"});
  std::vector<std::string> ecmp_cols = {"prefix", "interface", "via"};
  for (size_t c = 0; c < EcmpCounters::kCount; c++) ecmp_cols.emplace_back(EcmpCounters::kNames[c]);
  auto& groups = v.table("ecmp-groups", ecmp_cols);
  if (routes_ == nullptr) return v;
  v.field("load-balancing", std::string(load_balancing_name(cfg_.ecmp.load_balancing)));
  // An overlay route's interface is its VNI ("vni10"), its via the remote VTEP.
  for (const Route& r : routes_->routes())
    routes.rows.push_back({r.prefix.str(), r.overlay() ? "vni" + std::to_string(r.vni) : cfg_.interfaces[r.port].name,
                           r.overlay() ? r.vtep->str() : r.via ? r.via->str() : std::string("-"),
                           r.mac ? r.mac->str() : std::string("-")});
  for (const auto& [ip, e] : routes_->neighbors())
    neigh.rows.push_back(
        {ip.str(), e.mac.str(), cfg_.interfaces[e.port].name, e.is_static ? "static" : "learned"});
  for (const EcmpGroup& g : routes_->ecmp_groups()) {
    for (uint32_t i = g.first; i < g.first + g.count; i++) {
      const EcmpMember& m = routes_->ecmp_member(i);
      const NextHop& nh = routes_->next_hop(m.next_hop);
      std::vector<NvValue> row = {g.prefix.str(),
                                  nh.tunnel ? "vni" + std::to_string(nh.vni) : cfg_.interfaces[nh.port].name,
                                  nh.glean ? std::string("-") : nh.ip.str()};
      for (size_t c = 0; c < EcmpCounters::kCount; c++) row.emplace_back(m.counters.v[c]);
      groups.rows.push_back(std::move(row));
    }
  }
  return v;
}

NvView Switch::view_vxlan() const {
  const VxlanConfig& x = cfg_.vxlan;
  const auto list = [](const std::vector<wire::IpAddr>& l) {
    std::string t;
    for (const wire::IpAddr& a : l) t += (t.empty() ? "" : ",") + a.str();
    return t.empty() ? std::string("none") : t;
  };
  NvView v(NvView::Columns::kOperational);
  v.field("state", state_word(x.enabled()));
  v.group("source").field("address", x.source ? x.source->str() : std::string("none")).end();
  v.field("port", x.port);
  v.group("encapsulation")
      .group("dscp")
      .field("action", std::string(vxlan_dscp_action_name(x.encap_dscp)))
      .field("value", int(x.dscp_value))
      .end()
      .end();
  v.group("decapsulation").group("dscp").field("action", "preserve").end().group("ecn").field("mode", "rfc6040-normal").end().end();
  v.group("flooding").field("head-end-replication", list(x.flood)).end();
  v.group("counters");
  for (size_t i = 0; i < VtepCounters::kCount; i++) v.field(std::string(VtepCounters::kNames[i]), vtep_counters_.v[i]);
  v.end();
  v.field("mac-learning", x.mac_learning ? "on" : "off");
  // A bridged VNI shows its VLAN (NVUE: bridge domain br_default vlan V vni N), a routed one its VRF.
  auto& vnis = v.table("vni", {"vni", "vrf", "vlan", "head-end-replication"});
  for (const VxlanVni& n : x.vnis)
    vnis.rows.push_back({n.vni, n.bridged() ? std::string() : n.vrf, n.bridged() ? ojson(n.vlan) : ojson(""),
                         list(n.flood)});
  return v;
}

NvView Switch::view_system_forwarding(bool ecmp_hash_only) const {
  const EcmpConfig& e = cfg_.ecmp;
  // NVUE lists the hash fields by name.
  std::array<std::string_view, EcmpHashField::kCount> names = EcmpHashField::kNames;
  std::sort(names.begin(), names.end());
  NvView v;
  if (!ecmp_hash_only) v.group("ecmp-hash");
  for (const std::string_view n : names) v.field(std::string(n), e.hashes(*parse_ecmp_hash_field(n)) ? "on" : "off");
  if (ecmp_hash_only) return v;
  v.end();
  v.field("hash-seed", e.hash_seed);
  v.field("load-balancing", std::string(load_balancing_name(e.load_balancing)));  // rocemu's: topology only
  const PacketTrim& t = cfg_.qos.trim;
  v.group("packet-trim")
      .field("state", state_word(t.enable))
      .field("size", t.size)
      .group("remark")
      .field("dscp", int(t.remark_dscp))
      .end()
      .field("switch-priority", int(t.switch_priority))
      .field("traffic-class", nv_list(t.eligible_tc))
      .end();
  return v;
}

}  // namespace rocemu::sw
