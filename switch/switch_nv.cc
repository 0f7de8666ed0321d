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
  auto port_of = [&](const std::string& name, int& port) -> Status {
    port = cfg_.find_interface(name);
    if (port < 0)
      return Status::error("nv " + verb + " interface: no interface '" + name + "' (" + cfg_.interface_range() + ")");
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
      int port;
      if (Status s = port_of(at(3), port); !s.ok()) return s;
      clear_counters(uint16_t(port));
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
    int port;
    if (Status s = port_of(at(2), port); !s.ok()) return s;
    const uint16_t p = uint16_t(port);
    if (at(3) == "qos" && at(4) == "roce" && at(5) == "counters") {
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
      return Status::error("nv show interface " + at(2) + ": expected qos roce counters, qos roce status, "
                           "qos pfc-watchdog, queue or priority-group");
    }
  } else if (what == "pfc") {
    j = show_pfc_counters();
  } else if (what == "pfcwd") {
    j = show_pfc_watchdog();
  } else if (what == "queue" && words.size() >= 4) {
    int port;
    if (Status s = port_of(at(3), port); !s.ok()) return s;
    j = show_queue_counters(uint16_t(port));
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
