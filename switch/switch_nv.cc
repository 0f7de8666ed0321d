// Switch::nv: NVUE-style set/unset/config/show/action on a running switch.
#include "switch/nvue.h"
#include "switch/switch.h"

namespace rocemu::sw {

Status Switch::nv(const std::vector<std::string>& words, nlohmann::json* out) {
  if (words.empty()) return Status::error("nv: expected set, unset, config, show or action");
  const std::string& verb = words[0];
  if (verb == "set" || verb == "unset") return nv_stage(words);
  if (verb == "config") return nv_config(words, out);
  auto at = [&](size_t i) -> std::string { return i < words.size() ? words[i] : std::string(); };
  // One port, or a list or range of them (swp1,swp3, swp1-4).
  auto ports_of = [&](const std::string& name, std::vector<uint16_t>& ports) -> Status {
    auto p = cfg_.find_interfaces(name);
    if (!p.ok()) return Status::error("nv " + verb + " interface: " + p.status().message());
    ports = std::move(p.value());
    return {};
  };
  if (verb == "action") {
    // Exactly these two forms: anything else clears nothing.
    const auto is = [&](std::initializer_list<const char*> tail, size_t from) {
      if (words.size() != from + tail.size()) return false;
      size_t i = from;
      for (const char* w : tail)
        if (words[i++] != w) return false;
      return true;
    };
    if (at(1) == "clear" && at(2) == "interface" && is({"qos", "roce", "counters"}, 4)) {
      std::vector<uint16_t> ports;
      if (Status s = ports_of(at(3), ports); !s.ok()) return s;
      for (const uint16_t p : ports) clear_counters(p);
      return {};
    }
    if (is({"clear", "qos", "counters"}, 1)) {
      clear_counters();
      return {};
    }
    return Status::error("nv action: expected `clear interface <if> qos roce counters` or `clear qos counters`");
  }
  if (verb != "show") return Status::error("nv: expected set, unset, config, show or action, got '" + verb + "'");
  nlohmann::json j;
  const std::string what = at(1);
  if (what == "qos" && at(2) == "roce") {
    j = show_qos_roce();
  } else if (what == "qos" && at(2) == "buffer") {
    j = show_buffer_pools();
  } else if (what == "qos" && at(2) == "pfc-watchdog") {
    j = show_pfc_watchdog();
  } else if (what == "interface" && words.size() >= 3) {
    std::vector<uint16_t> ports;
    if (Status s = ports_of(at(2), ports); !s.ok()) return s;
    // Several ports: each one's view under its name.
    if (ports.size() > 1) {
      for (const uint16_t p : ports) {
        std::vector<std::string> one = words;
        one[2] = cfg_.interfaces[p].name;
        nlohmann::json v;
        if (Status s = nv(one, &v); !s.ok()) return s;
        j[cfg_.interfaces[p].name] = std::move(v);
      }
      if (out != nullptr) *out = std::move(j);
      return {};
    }
    const uint16_t p = ports.front();
    if (at(3) == "counters" && at(4) == "qos") {
      if (Status s = show_counters_qos(p, std::vector<std::string>(words.begin() + 5, words.end()), j); !s.ok())
        return s;
    } else if (at(3) == "qos" && at(4) == "roce" && at(5) == "counters") {
      j = show_roce_counters(p);
    } else if (at(3) == "qos" && at(4) == "roce" && (at(5) == "status" || at(5).empty())) {
      j = show_roce_status(p);
    } else if (at(3) == "qos" && at(4) == "pfc-watchdog") {
      j = show_pfc_watchdog()["queues"][cfg_.interfaces[p].name];
    } else if (at(3) == "queue" || (at(3) == "qos" && at(4) == "queue")) {
      j = show_queue_counters(p);
    } else if (at(3) == "priority-group") {
      j = show_pg_watermark(p);
    } else if (at(3).empty()) {
      j = show_interface(p);
    } else {
      return Status::error("nv show interface " + at(2) +
                           ": expected counters qos, qos roce counters, qos roce status, "
                           "qos pfc-watchdog, queue or priority-group");
    }
  } else if (what == "pfc") {
    j = show_pfc_counters();
  } else if (what == "pfcwd") {
    j = show_pfc_watchdog();
  } else if (what == "queue" && words.size() >= 4) {
    std::vector<uint16_t> ports;
    if (Status s = ports_of(at(3), ports); !s.ok()) return s;
    if (ports.size() != 1) return Status::error("nv show queue counters: one interface, got '" + at(3) + "'");
    j = show_queue_counters(ports.front());
  } else if (what == "vrf" || what == "route" || what == "router") {
    j = show_routes();
  } else {
    return Status::error("nv show: expected qos roce, qos buffer, qos pfc-watchdog, interface <if> ..., pfc counters, "
                         "pfcwd stats, queue counters <if> or vrf");
  }
  if (out != nullptr) *out = std::move(j);
  return {};
}

}  // namespace rocemu::sw
