#include "apps/metrics.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <sstream>

#include "common/engine/engine.h"
#include "common/engine/port.h"
#include "nic/counters.h"
#include "switch/bridge.h"
#include "switch/ecmp.h"
#include "switch/switch_counters.h"
#include "switch/vxlan.h"

namespace rocemu::app {
namespace {

struct Sink final : CounterSink {
  std::vector<CounterSample>& out;
  std::string kind;
  explicit Sink(std::vector<CounterSample>& o) : out(o) {}
  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    out.push_back({kind, std::string(scope), std::string(name), value});
  }
};

// "rx-roce-stats.roce-packets" -> "rx_roce_stats_roce_packets"
std::string metric_word(std::string_view s) {
  std::string w;
  for (char c : s) w += std::isalnum(static_cast<unsigned char>(c)) ? char(std::tolower(static_cast<unsigned char>(c))) : '_';
  return w;
}

template <typename Set>
std::optional<std::string_view> help_in(std::string_view name) {
  for (size_t i = 0; i < Set::kCount; i++)
    if (Set::kNames[i] == name) return Set::kHelp[i];
  return std::nullopt;
}

// A counter's unit conversion into base units: what the name ends with,
// the suffix the family gets instead and the factor.
struct Unit {
  std::string_view suffix;  // in the counter's name
  std::string_view base;    // in the family's name
  double factor;
  bool gauge;
};
constexpr Unit kUnits[] = {
    {"-duration-us", "_duration_seconds", 1e-6, false},
    {"_pause_duration", "_pause_duration_seconds", 1e-6, false},  // a NIC's rx_prioN_pause_duration, in us
    {"_time_ps", "_seconds", 1e-12, false},
    {"_rate_kbps", "_rate_bits_per_second", 1e3, true},
    {"_alpha_ppm", "_alpha_ratio", 1e-6, true},
    {"watermark-bytes", "watermark_bytes", 1, true},
};

struct Family {
  std::string help;
  bool gauge = false;
  std::vector<std::pair<std::string, double>> samples;  // labels, value
};

std::string escape(std::string_view v) {
  std::string s;
  for (char c : v) {
    if (c == '\\' || c == '"') s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s;
}

std::string escape_help(std::string_view v) {
  std::string s;
  for (char c : v) {
    if (c == '\\') s += "\\\\";
    else if (c == '\n') s += "\\n";
    else s += c;
  }
  return s;
}

// The family, labels and value of one sample.
void place(const CounterSample& c, std::map<std::string, Family>& families) {
  std::vector<std::pair<std::string, std::string>> labels;
  // scope: NODE, NODE/IFNAME, NODE/qpN; a port's own name is NODE:N or NODE:IFNAME.
  const size_t sep = c.scope.find_first_of("/:");
  const std::string node = c.scope.substr(0, sep);
  labels.emplace_back("node", node);
  std::string kind = c.kind;
  if (sep != std::string::npos) {
    const std::string rest = c.scope.substr(sep + 1);
    if (rest.size() > 2 && rest.compare(0, 2, "qp") == 0 && std::isdigit(static_cast<unsigned char>(rest[2]))) {
      labels.emplace_back("qp", rest.substr(2));
      kind = "qp";
    } else {
      labels.emplace_back("port", rest);
    }
  }
  std::string_view name = c.name;
  std::optional<std::string_view> help;
  std::string group;  // the part of the family name from a prefix (pfc_, queue_)
  std::string prio_name;  // what `name` views for a per-priority NIC counter
  const auto numbered = [&](std::string_view prefix, const char* label) {
    if (name.substr(0, prefix.size()) != prefix || name.size() < prefix.size() + 2 ||
        !std::isdigit(static_cast<unsigned char>(name[prefix.size()])) || name[prefix.size() + 1] != '.')
      return false;
    labels.emplace_back(label, std::string(1, name[prefix.size()]));
    group = std::string(prefix) + "_";
    name = name.substr(prefix.size() + 2);
    return true;
  };
  // vxlan.vni10.encap-packets -> rocemu_switch_vxlan_vni_encap_packets_total{vni="10"}
  const auto per_vni = [&] {
    constexpr std::string_view kPrefix = "vxlan.vni";
    if (name.substr(0, kPrefix.size()) != kPrefix) return false;
    const size_t dot = name.find('.', kPrefix.size());
    if (dot == std::string_view::npos || dot == kPrefix.size()) return false;
    const std::string_view id = name.substr(kPrefix.size(), dot - kPrefix.size());
    for (const char ch : id)
      if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
    labels.emplace_back("vni", std::string(id));
    group = "vxlan_vni_";
    name = name.substr(dot + 1);
    return true;
  };
  if (kind == "switch") {
    if (per_vni()) {
      help = help_in<sw::VniCounters>(name);
    } else if (numbered("pfc", "priority")) {
      help = name.find("rx") == 0 ? "PFC frames (or pause time) received for the priority"
                                  : "PFC frames (or XOFF time) sent for the priority";
    } else if (numbered("queue", "tc")) {
      if (name.substr(0, 6) == "pfcwd.") {
        group += "pfcwd_";
        name = name.substr(6);
        help = help_in<sw::WatchdogCounters>(name);
      } else {
        help = name == "watermark-bytes" ? std::optional<std::string_view>("the queue's highest occupancy, bytes")
                                         : help_in<sw::QueueCounters>(name);
      }
    } else if (numbered("pg", "pg")) {
      help = help_in<sw::PgCounters>(name);
    } else {
      help = help_in<sw::PortCounters>(name);
      if (!help) help = help_in<sw::EcmpCounters>(name);
      if (!help) help = help_in<sw::VtepCounters>(name);
      if (!help) help = help_in<sw::BridgeCounters>(name);
    }
  } else if (kind == "nic") {
    // ethtool's per-priority counters: rx_prio3_pause -> prio_rx_pause{priority="3"}
    if (name.size() > 9 && (name.substr(0, 7) == "rx_prio" || name.substr(0, 7) == "tx_prio") &&
        std::isdigit(static_cast<unsigned char>(name[7])) && name[8] == '_') {
      labels.emplace_back("priority", std::string(1, name[7]));
      prio_name = std::string(name.substr(0, 3)) + std::string(name.substr(9));
      name = prio_name;
      group = "prio_";
      help = help_in<nic::NicPrioCounters>(name);
    } else {
      help = help_in<nic::NicCounters>(name);
    }
  } else if (kind == "port") {
    help = help_in<PortCounters>(name);
  } else if (kind == "qp") {
    static const std::map<std::string_view, std::string_view> kQp = {
        {"retransmitted_packets", "packets the QP sent again"},
        {"cc_rate_kbps", "DCQCN current rate of the QP"},
        {"cc_target_rate_kbps", "DCQCN target rate of the QP"},
        {"cc_alpha_ppm", "DCQCN alpha of the QP"},
        {"cc_cnps", "CNPs the QP's reaction point handled"},
        {"cc_rate_cuts", "DCQCN rate decreases"},
        {"cc_increases", "DCQCN rate increases"}};
    if (auto it = kQp.find(name); it != kQp.end()) help = it->second;
  }
  if (!help && name.substr(0, 7) == "device.") help = "the DPDK device's own statistic (rte_eth_stats / xstats)";
  std::string base = metric_word(name);
  double factor = 1;
  bool gauge = false;
  for (const Unit& u : kUnits) {
    if (name.size() >= u.suffix.size() && name.substr(name.size() - u.suffix.size()) == u.suffix) {
      base = metric_word(name.substr(0, name.size() - u.suffix.size())) + std::string(u.base);
      factor = u.factor;
      gauge = u.gauge;
      break;
    }
  }
  std::string family = "rocemu_" + metric_word(kind) + "_" + group + base;
  if (!gauge) family += "_total";
  Family& f = families[family];
  if (f.help.empty()) f.help = help ? std::string(*help) : "rocemu counter " + std::string(c.name);
  f.gauge = gauge;
  std::string l;
  for (const auto& [k, v] : labels) l += (l.empty() ? "" : ",") + k + "=\"" + escape(v) + "\"";
  f.samples.emplace_back("{" + l + "}", double(c.value) * factor);
}

}  // namespace

std::vector<CounterSample> collect_counters(const Engine& engine) {
  std::vector<CounterSample> out;
  Sink sink(out);
  // As Engine::report_counters walks them, with the kind of each reporter.
  for (const auto& n : engine.nodes()) {
    sink.kind = std::string(n->kind());
    n->report_counters(sink);
    sink.kind = "port";
    for (uint16_t i = 0; i < n->num_ports(); i++)
      if (const Port* p = n->port(i)) p->report(sink);
  }
  return out;
}

std::string prometheus_text(const std::vector<CounterSample>& samples) {
  std::map<std::string, Family> families;
  for (const CounterSample& c : samples) place(c, families);
  std::ostringstream os;
  os.precision(17);
  for (const auto& [name, f] : families) {
    os << "# HELP " << name << " " << escape_help(f.help) << "\n# TYPE " << name << " "
       << (f.gauge ? "gauge" : "counter") << "\n";
    for (const auto& [labels, value] : f.samples) os << name << labels << " " << value << "\n";
  }
  return os.str();
}

}  // namespace rocemu::app
