#include "apps/doctor.h"

#include <algorithm>
#include <sstream>

namespace rocemu::app {
namespace {

// A NIC and the switch port at the other end of its link.
struct Attachment {
  const NicSnap* nic = nullptr;
  const SwitchSnap* sw = nullptr;
  const SwitchPortSnap* port = nullptr;
  std::string label() const { return nic->name + " -- " + sw->name + ":" + port->name; }
};

std::vector<Attachment> attachments(const FabricSnapshot& s) {
  std::vector<Attachment> out;
  for (const LinkSnap& l : s.links) {
    for (int side = 0; side < 2; side++) {
      const EndSnap& host = side == 0 ? l.a : l.b;
      const EndSnap& peer = side == 0 ? l.b : l.a;
      const NicSnap* n = s.nic(host.node);
      const SwitchSnap* sw = s.switch_named(peer.node);
      if (n == nullptr || sw == nullptr || peer.port >= sw->ports.size()) continue;
      out.push_back({n, sw, &sw->ports[peer.port]});
    }
  }
  return out;
}

std::string priorities(uint8_t mask) {
  if (mask == 0) return "none";
  if (mask == 0xff) return "every priority";
  std::string s;
  for (int p = 0; p < 8; p++)
    if ((mask >> p) & 1) s += (s.empty() ? "" : ",") + std::to_string(p);
  return s;
}

std::string tc_words(const SwitchSnap& sw, uint8_t sp) {
  const uint8_t tc = sw.tc_of(sp);
  return "switch-priority " + std::to_string(sp) + ", TC " + std::to_string(tc) + " (" +
         (sw.tc_lossless(tc) ? "lossless" : "lossy") + ", " + (sw.tc_strict[tc] ? "strict" : "dwrr") + ")";
}

// The same port in the earlier sample (null: counters count from zero).
const SwitchPortSnap* earlier(const DoctorInput& in, const SwitchSnap& sw, const SwitchPortSnap& p) {
  if (in.before == nullptr) return nullptr;
  const SwitchSnap* b = in.before->switch_named(sw.name);
  return b != nullptr && p.index < b->ports.size() ? &b->ports[p.index] : nullptr;
}

std::string interval_words(const DoctorInput& in) {
  if (in.before == nullptr) return "since the engine started";
  std::ostringstream os;
  os << "in " << double(in.now.time_ns - in.before->time_ns) / 1e6 << " ms";
  return os.str();
}

// ---- the checks ----

void host_dscp(const DoctorInput& in, std::vector<Finding>& out) {
  for (const Attachment& a : attachments(in.now)) {
    if (!a.sw->roce) continue;
    for (const QpClassSnap& q : a.nic->qps) {
      const uint8_t sp = a.sw->priority_of(q.dscp, false, q.priority);
      if (sp == a.sw->roce_sp) continue;
      std::ostringstream ev;
      ev << a.nic->name << " QP " << q.example_qpn;
      if (q.count > 1) ev << " (and " << q.count - 1 << " more)";
      ev << " sends traffic class " << unsigned(q.traffic_class) << " (DSCP " << unsigned(q.dscp) << "): at "
         << a.sw->name << " " << tc_words(*a.sw, sp) << "; " << a.sw->name << "'s RoCE DSCP is "
         << unsigned(a.sw->roce_dscp) << " (" << tc_words(*a.sw, a.sw->roce_sp) << ")";
      const unsigned tclass = unsigned(a.sw->roce_dscp) << 2 | 2;
      out.push_back({"host-dscp", a.nic->name, "the host's RoCE traffic is not classified as RoCE by the switch",
                     ev.str(),
                     "send with traffic class " + std::to_string(tclass) + " (DSCP " +
                         std::to_string(a.sw->roce_dscp) + ", ECT(0)): ib_write_bw --tclass=" +
                         std::to_string(tclass) + ", or `traffic_class: " + std::to_string(tclass) + "` on " +
                         a.nic->name + " in the topology"});
    }
  }
}

void cnp_class(const DoctorInput& in, std::vector<Finding>& out) {
  for (const Attachment& a : attachments(in.now)) {
    if (!a.sw->roce) continue;
    const uint8_t sp = a.sw->priority_of(a.nic->cnp_dscp, false, a.nic->cnp_prio);
    const uint8_t tc = a.sw->tc_of(sp);
    if (a.sw->tc_strict[tc] && !a.sw->pfc_on(sp)) continue;
    std::ostringstream ev;
    ev << a.nic->name << " sends CNPs with DSCP " << unsigned(a.nic->cnp_dscp) << ", priority "
       << unsigned(a.nic->cnp_prio) << ": at " << a.sw->name << " " << tc_words(*a.sw, sp)
       << (a.sw->pfc_on(sp) ? ", PFC on (CNPs can be paused)" : "") << "; " << a.sw->name << "'s CNP DSCP is "
       << unsigned(a.sw->cnp_dscp) << " (" << tc_words(*a.sw, a.sw->cnp_sp) << ")";
    out.push_back({"cnp-class", a.nic->name, "CNPs are not on a strict-priority, unpaused traffic class", ev.str(),
                   "set the host's CNP DSCP to the switch's (`cnp_dscp: " + std::to_string(a.sw->cnp_dscp) +
                       "` on " + a.nic->name + "; mlx5: /sys/class/net/IF/ecn/roce_np/cnp_dscp), or map it to a "
                       "strict TC without PFC (rocemu nv set qos egress-scheduler ...)"});
  }
}

void pfc_priorities(const DoctorInput& in, std::vector<Finding>& out) {
  for (const Attachment& a : attachments(in.now)) {
    const uint8_t nic = a.nic->pfc_priorities, sw = a.sw->pfc_priorities;
    // A NIC that honours PFC on every priority (the default) pauses
    // whatever the switch pauses; one that lists priorities must list
    // the switch's.
    const bool ignored = (sw & ~nic) != 0;
    if (!ignored && (nic == 0xff || nic == sw)) continue;
    out.push_back({"pfc-priorities", a.label(), "PFC is on different priorities at the two ends of the link",
                   a.nic->name + " has PFC on priorities " + priorities(nic) + "; " + a.sw->name + ":" +
                       a.port->name + " on " + priorities(sw),
                   "make them the same: `pfc: [" + (sw == 0 ? std::string() : priorities(sw)) + "]` on " + a.nic->name +
                       " (mlnx_qos --pfc), or the switch's `rocemu nv set qos pfc default-global switch-priority " +
                       priorities(nic) + "`"});
  }
  // Switch to switch: both ends read the same priorities.
  for (const LinkSnap& l : in.now.links) {
    const SwitchSnap* a = in.now.switch_named(l.a.node);
    const SwitchSnap* b = in.now.switch_named(l.b.node);
    if (a == nullptr || b == nullptr || a->pfc_priorities == b->pfc_priorities) continue;
    out.push_back({"pfc-priorities", l.a.node + ":" + l.a.port_name + " -- " + l.b.node + ":" + l.b.port_name,
                   "PFC is on different priorities at the two ends of the link",
                   a->name + " has PFC on " + priorities(a->pfc_priorities) + ", " + b->name + " on " +
                       priorities(b->pfc_priorities),
                   "set the same `qos pfc default-global switch-priority` on both switches"});
  }
}

// IPv4 + UDP + BTH + RETH + ICRC: what a RoCE packet of path_mtu payload adds.
constexpr uint32_t kRoceOverhead = 20 + 8 + 12 + 16 + 4;

void mtu(const DoctorInput& in, std::vector<Finding>& out) {
  uint32_t smallest = 0;
  std::string smallest_at;
  for (const LinkSnap& l : in.now.links) {
    for (const EndSnap* e : {&l.a, &l.b}) {
      if (smallest == 0 || e->mtu < smallest) {
        smallest = e->mtu;
        smallest_at = e->node + (e->port_name.empty() ? "" : ":" + e->port_name);
      }
    }
    if (l.a.mtu == l.b.mtu) continue;
    const std::string a = l.a.node + (l.a.port_name.empty() ? "" : ":" + l.a.port_name);
    const std::string b = l.b.node + (l.b.port_name.empty() ? "" : ":" + l.b.port_name);
    out.push_back({"mtu", a + " -- " + b, "the two ends of a link have different MTUs",
                   a + " MTU " + std::to_string(l.a.mtu) + ", " + b + " MTU " + std::to_string(l.b.mtu),
                   "give both ends one MTU (the link's `mtu`, or `rocemu nv set interface IF link mtu N`)"});
  }
  for (const NicSnap& n : in.now.nics) {
    for (const QpClassSnap& q : n.qps) {
      if (smallest == 0 || q.path_mtu + kRoceOverhead <= smallest) continue;
      out.push_back({"mtu", n.name, "QPs use a path MTU whose packets do not fit every port on the path",
                     n.name + " QP " + std::to_string(q.example_qpn) + " path MTU " + std::to_string(q.path_mtu) +
                         " (" + std::to_string(q.path_mtu + kRoceOverhead) + "-byte IP packets); " + smallest_at +
                         " has MTU " + std::to_string(smallest),
                     "raise the MTU along the path to at least " + std::to_string(q.path_mtu + kRoceOverhead) +
                         ", or use a smaller path MTU (ib_write_bw -m)"});
    }
  }
}

void ecn_off(const DoctorInput& in, std::vector<Finding>& out) {
  for (const SwitchSnap& sw : in.now.switches) {
    if (!sw.roce) continue;
    const uint8_t tc = sw.tc_of(sw.roce_sp);
    if (sw.tc_ecn[tc]) continue;
    out.push_back({"ecn-off", sw.name, "ECN marking is off on the RoCE traffic class",
                   sw.name + ": RoCE " + tc_words(sw, sw.roce_sp) + " has ECN disabled (DCQCN gets no congestion signal)",
                   "rocemu nv set qos congestion-control default-global traffic-class " + std::to_string(tc) +
                       " ecn enable"});
  }
  for (const NicSnap& n : in.now.nics) {
    if (n.ecn) continue;
    out.push_back({"ecn-off", n.name, "the host sends RoCE packets not ECN-capable", n.name + " sends Not-ECT",
                   "`ecn: true` on " + n.name + " in the topology (and a traffic class with ECT(0): 106)"});
  }
}

void pfc_without_ecn(const DoctorInput& in, std::vector<Finding>& out) {
  for (const SwitchSnap& sw : in.now.switches) {
    uint64_t pauses = 0, marks = 0;
    std::string busiest;
    uint64_t busiest_pauses = 0;
    for (const SwitchPortSnap& p : sw.ports) {
      const SwitchPortSnap* b = earlier(in, sw, p);
      uint64_t port_pauses = 0;
      for (int k = 0; k < 8; k++) {
        port_pauses += p.pfc_tx[k] - (b != nullptr ? b->pfc_tx[k] : 0);
        marks += p.tc_ecn_marked[k] - (b != nullptr ? b->tc_ecn_marked[k] : 0);
      }
      pauses += port_pauses;
      if (port_pauses > busiest_pauses) {
        busiest_pauses = port_pauses;
        busiest = p.name;
      }
    }
    if (pauses < kPfcClimbingFrames || marks >= pauses) continue;
    const uint8_t tc = sw.tc_of(sw.roce_sp);
    std::ostringstream ev;
    ev << sw.name << " sent " << pauses << " PFC frames (most on " << busiest << ": " << busiest_pauses << ") and marked "
       << marks << " packets CE " << interval_words(in) << "; RoCE TC " << unsigned(tc) << " marks from "
       << sw.tc_ecn_min[tc] << " to " << sw.tc_ecn_max[tc] << " bytes";
    out.push_back({"pfc-without-ecn", sw.name,
                   "PFC pauses are climbing while ECN marks are few: the ECN thresholds are too high",
                   ev.str(),
                   "lower the marking band so ECN acts before PFC: rocemu nv set qos congestion-control default-global "
                   "traffic-class " + std::to_string(tc) + " min-threshold 50KB max-threshold 500KB"});
  }
}

void lossless_drops(const DoctorInput& in, std::vector<Finding>& out) {
  for (const SwitchSnap& sw : in.now.switches) {
    if (!sw.pfc_on(sw.roce_sp)) continue;
    for (const SwitchPortSnap& p : sw.ports) {
      const SwitchPortSnap* b = earlier(in, sw, p);
      const uint64_t drops = p.roce_no_buffer_discard - (b != nullptr ? b->roce_no_buffer_discard : 0);
      if (drops == 0) continue;
      std::ostringstream ev;
      ev << sw.name << ":" << p.name << " dropped " << drops << " packets of the lossless RoCE priority group for want of "
         << "buffer " << interval_words(in) << "; its headroom (" << p.headroom_xoff << " bytes after XOFF) is sized for "
         << p.cable_length << " m of cable at " << double(p.speed) / 1e9 << " Gbit/s";
      out.push_back({"lossless-drops", sw.name + ":" + p.name, "drops on a lossless priority: the headroom is too small",
                     ev.str(),
                     "size the headroom for the real cable: rocemu nv set interface " + p.name +
                         " qos pfc cable-length METRES (or qos pfc default-global cable-length)"});
    }
  }
}

void watchdog_off(const DoctorInput& in, std::vector<Finding>& out) {
  for (const SwitchSnap& sw : in.now.switches) {
    if (sw.pfc_priorities == 0) continue;
    std::string off;
    for (const SwitchPortSnap& p : sw.ports)
      if (!p.watchdog) off += (off.empty() ? "" : ", ") + p.name;
    if (off.empty()) continue;
    out.push_back({"watchdog-off", sw.name, "the PFC watchdog is off on ports with PFC",
                   sw.name + " has PFC on priorities " + priorities(sw.pfc_priorities) +
                       " and no PFC watchdog on " + off + " (a PFC storm would stall the fabric)",
                   "rocemu nv set qos pfc-watchdog state enable (or per port: rocemu nv set interface IF qos "
                   "pfc-watchdog state enable)"});
  }
}

void dscp26_lossy(const DoctorInput& in, std::vector<Finding>& out) {
  constexpr uint8_t kDscp = 26;
  for (const SwitchSnap& sw : in.now.switches) {
    if (sw.pfc_priorities == 0) continue;  // a lossy fabric by design
    const uint8_t sp = sw.priority_of(kDscp, false, 3);
    if (sw.tc_lossless(sw.tc_of(sp))) continue;
    out.push_back({"dscp26-lossy", sw.name, "DSCP 26 (RoCE's usual marking) goes to a lossy class",
                   sw.name + " maps DSCP 26 to " + tc_words(sw, sp) + " while PFC is on priorities " +
                       priorities(sw.pfc_priorities),
                   "rocemu nv set qos mapping default-global dscp 26 switch-priority " +
                       std::to_string(__builtin_ctz(sw.pfc_priorities))});
  }
}

}  // namespace

const std::vector<DoctorCheck>& doctor_checks() {
  static const std::vector<DoctorCheck> kChecks = {
      {"host-dscp", "the hosts' RoCE traffic class lands on the switch's RoCE priority", host_dscp},
      {"cnp-class", "CNPs travel on a strict-priority traffic class without PFC", cnp_class},
      {"pfc-priorities", "PFC is on the same priorities at both ends of every link", pfc_priorities},
      {"mtu", "MTUs agree along every link and fit the QPs' path MTU", mtu},
      {"ecn-off", "ECN is on for the RoCE traffic class and the hosts send ECT", ecn_off},
      {"pfc-without-ecn", "PFC pauses do not climb while ECN marks stay few", pfc_without_ecn},
      {"lossless-drops", "no drops on a lossless priority", lossless_drops},
      {"watchdog-off", "the PFC watchdog is on where PFC is", watchdog_off},
      {"dscp26-lossy", "DSCP 26 maps to a lossless class on a lossless fabric", dscp26_lossy},
  };
  return kChecks;
}

std::vector<Finding> run_doctor(const DoctorInput& in) {
  std::vector<Finding> out;
  for (const DoctorCheck& c : doctor_checks()) c.run(in, out);
  return out;
}

std::string format_findings(const std::vector<Finding>& findings, const DoctorInput& in) {
  std::ostringstream os;
  os << "rocemu doctor: " << in.now.nics.size() << " NIC(s), " << in.now.switches.size() << " switch(es), "
     << in.now.links.size() << " link(s); " << doctor_checks().size() << " checks, counters " << interval_words(in)
     << "\n";
  if (findings.empty()) {
    os << "healthy: no findings\n";
    return os.str();
  }
  for (const Finding& f : findings)
    os << "\n[" << f.check << "] " << f.subject << ": " << f.problem << "\n  evidence: " << f.evidence
       << "\n  fix:      " << f.fix << "\n";
  os << "\n" << findings.size() << " finding(s)\n";
  return os.str();
}

nlohmann::json findings_json(const std::vector<Finding>& findings, const DoctorInput& in) {
  nlohmann::json j;
  j["healthy"] = findings.empty();
  j["interval_ns"] = in.before != nullptr ? in.now.time_ns - in.before->time_ns : in.now.time_ns;
  j["checks"] = nlohmann::json::array();
  for (const DoctorCheck& c : doctor_checks()) j["checks"].push_back({{"name", c.name}, {"title", c.title}});
  j["findings"] = nlohmann::json::array();
  for (const Finding& f : findings)
    j["findings"].push_back(
        {{"check", f.check}, {"subject", f.subject}, {"problem", f.problem}, {"evidence", f.evidence}, {"fix", f.fix}});
  return j;
}

}  // namespace rocemu::app
