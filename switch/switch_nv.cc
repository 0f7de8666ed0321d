// Switch::nv: NVUE-style set/unset/config/show/action on a running switch.
#include "switch/nvue.h"
#include "switch/switch.h"

namespace rocemu::sw {
namespace {

std::string at_or_empty(const std::vector<std::string>& w, size_t i) { return i < w.size() ? w[i] : std::string(); }

// `words` from `from` are exactly `tail`.
bool is_tail(const std::vector<std::string>& words, size_t from, std::initializer_list<const char*> tail) {
  if (words.size() != from + tail.size()) return false;
  size_t i = from;
  for (const char* w : tail)
    if (words[i++] != w) return false;
  return true;
}

}  // namespace

Status Switch::nv(const std::vector<std::string>& words, nlohmann::json* out) {
  if (words.empty()) return Status::error("nv: expected set, unset, config, show or action");
  const std::string& verb = words[0];
  if (verb == "set" || verb == "unset") return nv_stage(words);
  if (verb == "config") return nv_config(words, out);
  std::string text;
  Status s = verb == "action" ? nv_action(words, text)
             : verb == "show" ? nv_show(words, text)
                              : Status::error("nv: expected set, unset, config, show or action, got '" + verb + "'");
  if (s.ok() && out != nullptr) *out = std::move(text);
  return s;
}

Status Switch::nv_action(const std::vector<std::string>& words, std::string& out) {
  // Exactly these two forms: anything else clears nothing. Each port is
  // cleared and named, as NVUE reports it.
  std::vector<uint16_t> ports;
  if (at_or_empty(words, 1) == "clear" && at_or_empty(words, 2) == "interface" &&
      is_tail(words, 4, {"qos", "roce", "counters"})) {
    auto p = cfg_.find_interfaces(words[3]);
    if (!p.ok()) return Status::error("nv action clear interface: " + p.status().message());
    ports = std::move(p.value());
  } else if (is_tail(words, 1, {"clear", "qos", "counters"})) {
    for (uint16_t i = 0; i < ports_.size(); i++) ports.push_back(i);
    mmu_.clear_watermarks();
  } else {
    return Status::error("nv action: expected `clear interface <if> qos roce counters` or `clear qos counters`");
  }
  for (const uint16_t p : ports) {
    clear_counters(p);
    out += cfg_.interfaces[p].name + ": counters cleared\n";
  }
  out += "Action succeeded";
  return {};
}

Status Switch::nv_show(const std::vector<std::string>& command, std::string& out) {
  std::vector<std::string> words = command;
  std::string format;
  if (Status s = take_output_format(words, format); !s.ok()) return s;
  const auto at = [&](size_t i) { return at_or_empty(words, i); };
  // One port, or a list or range of them (swp1,swp3, swp1-4).
  const auto ports_of = [&](const std::string& name, std::vector<uint16_t>& ports) -> Status {
    auto p = cfg_.find_interfaces(name);
    if (!p.ok()) return Status::error("nv show interface: " + p.status().message());
    ports = std::move(p.value());
    return {};
  };
  NvView view;
  const std::string what = at(1);
  const auto none_after = [&](size_t i) -> Status {
    if (words.size() <= i) return {};
    return Status::error("nv show " + what + ": unexpected '" + words[i] + "'");
  };
  if (what == "qos" && at(2) == "roce") {
    if (Status s = none_after(3); !s.ok()) return s;
    view = view_qos_roce();
  } else if (what == "qos" && at(2) == "buffer") {
    view = view_buffer_pools();
  } else if (what == "qos" && at(2) == "pfc-watchdog") {
    view = view_pfc_watchdog();
  } else if (what == "interface" && words.size() >= 3) {
    std::vector<uint16_t> ports;
    if (Status s = ports_of(at(2), ports); !s.ok()) return s;
    // Several ports: each one's view under its name.
    if (ports.size() > 1) {
      ojson all = ojson::object();
      std::string text;
      for (const uint16_t p : ports) {
        NvView one;
        if (Status s = interface_view(p, std::vector<std::string>(words.begin() + 3, words.end()), one); !s.ok())
          return s;
        const std::string& name = cfg_.interfaces[p].name;
        if (format == "table") text += (text.empty() ? "" : "\n") + name + "\n" + std::string(name.size(), '=') +
                                       "\n" + one.text();
        all[name] = one.plain();
      }
      out = format == "json" ? all.dump(2) : format == "yaml" ? yaml_text(all) : text;
      return {};
    }
    if (Status s = interface_view(ports.front(), std::vector<std::string>(words.begin() + 3, words.end()), view);
        !s.ok())
      return s;
  } else if (what == "pfc") {
    view = view_pfc_counters();
  } else if (what == "pfcwd") {
    view = view_pfc_watchdog();
  } else if (what == "queue" && words.size() >= 4) {
    std::vector<uint16_t> ports;
    if (Status s = ports_of(at(3), ports); !s.ok()) return s;
    if (ports.size() != 1) return Status::error("nv show queue counters: one interface, got '" + at(3) + "'");
    view = view_queue_counters(ports.front());
  } else if (what == "vrf" || what == "route" || what == "router") {
    view = view_routes();
  } else if (what == "bridge" && at(2) == "domain" && at(3) == kBridgeDomain && at(4) == "mac-table") {
    if (Status s = none_after(5); !s.ok()) return s;
    view = view_mac_table();
  } else if (what == "system" && at(2) == "forwarding" && (words.size() == 3 || at(3) == "ecmp-hash")) {
    if (Status s = none_after(at(3).empty() ? 3 : 4); !s.ok()) return s;
    view = view_system_forwarding(!at(3).empty());
  } else if (what == "nve" && at(2) == "vxlan") {
    if (Status s = none_after(3); !s.ok()) return s;
    view = view_vxlan();
  } else {
    return Status::error("nv show: expected qos roce, qos buffer, qos pfc-watchdog, interface <if> ..., pfc counters, "
                         "pfcwd stats, queue counters <if>, vrf, system forwarding [ecmp-hash], nve vxlan or "
                         "bridge domain br_default mac-table");
  }
  out = view.render(format);
  return {};
}

Status Switch::interface_view(uint16_t p, const std::vector<std::string>& rest, NvView& view) const {
  const auto at = [&](size_t i) { return at_or_empty(rest, i); };
  if (at(0) == "counters" && at(1) == "qos")
    return view_counters_qos(p, std::vector<std::string>(rest.begin() + 2, rest.end()), view);
  if (rest.size() == 3 && at(0) == "qos" && at(1) == "roce" && at(2) == "counters") {
    view = view_roce_counters(p);
  } else if (at(0) == "qos" && at(1) == "roce" && (rest.size() == 2 || (rest.size() == 3 && at(2) == "status"))) {
    view = view_roce_status(p);
  } else if (rest.size() == 2 && at(0) == "qos" && at(1) == "pfc-watchdog") {
    view = view_pfc_watchdog(p);
  } else if ((rest.size() == 1 && at(0) == "queue") || (rest.size() == 2 && at(0) == "qos" && at(1) == "queue")) {
    view = view_queue_counters(p);
  } else if (rest.size() == 1 && at(0) == "priority-group") {
    view = view_pg_watermark(p);
  } else if (rest.empty()) {
    view = view_interface(p);
  } else {
    return Status::error("nv show interface " + cfg_.interfaces[p].name +
                         ": expected counters qos [egress-queue-stats|ingress-buffer-stats|pfc-stats], "
                         "qos roce counters, qos roce status, qos pfc-watchdog, queue or priority-group");
  }
  return {};
}

}  // namespace rocemu::sw
