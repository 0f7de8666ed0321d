// rocemu fault add|del|list|clear: faults on links and switch ports in
// tc-netem's forms, each with an id and counters of what it did. Runs on
// the engine thread.
//
// A target is a port (h1, sw1:swp1: the internal link at it, what it sends
// (out), what it receives (in) or both), a link by name (h1:0-sw1:0: out
// is a to b), or a switch port on an external DPDK port (the switch's own
// fault stage on what it receives). `pfc-storm` makes the switch at a
// switch port send PFC on its own.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>

#include "apps/engine_handlers.h"
#include "apps/ports.h"
#include "common/config/config.h"
#include "common/config/fault_kinds.h"
#include "switch/switch.h"

namespace rocemu::app {
namespace {

constexpr const char* kFaultUsage =
    "usage: rocemu fault add TARGET [out|in|both] KIND PARAMS... | list | del ID | clear [TARGET]";

// The fault stages a target names.
struct Target {
  std::string label;  // as the user named it: h1:0, sw1:swp1, h1:0-sw1:0
  std::string dir;    // out, in or both
  std::string where;  // "link h1:0-sw1:0" or "sw1's fault stage"
  std::vector<FaultStage*> stages;
  sw::Switch* sw = nullptr;  // a switch port: the switch and its port
  uint16_t port = 0;
};

// A fault added at run time.
struct Record {
  uint32_t id = 0;
  Target target;
  std::string what;    // in the words `fault add` reads
  bool storm = false;  // a PFC storm: in the switch's configuration, not a stage
};

// Engine thread only.
struct Registry {
  uint32_t next_id = 1;
  std::vector<Record> records;
};
Registry& fault_registry() {
  static Registry r;
  return r;
}

bool is_dir(const std::string& w) { return w == "out" || w == "in" || w == "both"; }

std::optional<Target> resolve_target(Engine& engine, const std::string& spec, const std::string& dir,
                                     std::string& err) {
  Target t;
  t.dir = dir;
  if (InternalLink* l = engine.find_link(spec)) {
    t.label = l->name();
    t.where = "link " + l->name();
    if (dir != "in") t.stages.push_back(&l->faults(0));
    if (dir != "out") t.stages.push_back(&l->faults(1));
    return t;
  }
  const auto ref = resolve_port(engine, spec, err);
  if (!ref) return std::nullopt;
  t.label = ref->label;
  t.sw = dynamic_cast<sw::Switch*>(ref->node);
  t.port = ref->port;
  for (const auto& l : engine.links())
    for (int s = 0; s < 2; s++)
      if (l->end(s).owner() == ref->node && l->end(s).index() == ref->port) {
        t.where = "link " + l->name();
        if (dir != "in") t.stages.push_back(&l->faults(s));
        if (dir != "out") t.stages.push_back(&l->faults(1 - s));
        return t;
      }
  if (t.sw != nullptr && t.sw->port(ref->port) != nullptr) {
    if (dir == "out") {
      err = ref->label + " is an external port: its fault stage is on what it receives (in)";
      return std::nullopt;
    }
    t.stages.push_back(&t.sw->port_faults(ref->port));
    t.where = t.sw->name() + "'s fault stage";
    return t;
  }
  err = "no internal link or switch port at " + ref->label;
  return std::nullopt;
}

// pfc-storm prio P[,P...] [quanta N] [interval TIME]
Status read_storm(const std::vector<std::string>& w, size_t i, sw::PfcStorm& storm) {
  storm = sw::PfcStorm{};
  storm.enable = true;
  storm.priorities = 0;
  for (; i < w.size(); i += 2) {
    if (i + 1 >= w.size()) return Status::error("pfc-storm: " + w[i] + " needs a value");
    const std::string& key = w[i];
    const std::string& v = w[i + 1];
    if (key == "prio" || key == "priority" || key == "switch-priority") {
      size_t at = 0;
      while (at <= v.size()) {
        const size_t comma = std::min(v.find(',', at), v.size());
        const std::string one = v.substr(at, comma - at);
        if (one.size() != 1 || one[0] < '0' || one[0] > '7')
          return Status::error("pfc-storm: prio: '" + v + "' is not a list of priorities 0..7 (3 or 3,4)");
        storm.priorities |= uint8_t(1u << (one[0] - '0'));
        at = comma + 1;
      }
    } else if (key == "quanta") {
      char* end = nullptr;
      const unsigned long q = std::strtoul(v.c_str(), &end, 10);
      if (v.empty() || end != v.c_str() + v.size() || q < 1 || q > 0xffff)
        return Status::error("pfc-storm: quanta: '" + v + "' is not 1..65535");
      storm.quanta = uint16_t(q);
    } else if (key == "interval") {
      if (v.find_first_not_of("0123456789.") == std::string::npos)
        return Status::error("pfc-storm: interval: '" + v + "' needs a unit (e.g. " + v + "us)");
      const auto d = config::parse_duration(v);
      if (!d) return Status::error("pfc-storm: interval: '" + v + "' is not a time (e.g. 10us)");
      storm.interval = *d;
    } else {
      return Status::error("pfc-storm: '" + key + "' is not prio, quanta or interval");
    }
  }
  if (storm.priorities == 0) return Status::error("pfc-storm: needs prio P (e.g. pfc-storm prio 3)");
  return {};
}

Status set_storm(sw::Switch& s, uint16_t port, const sw::PfcStorm& storm) {
  sw::SwitchConfig cfg = s.config();
  cfg.interfaces[port].pfc_storm = storm;
  return s.apply(cfg);
}

// Takes a switch port's configured faults (topology, NVUE) out of its
// configuration, so that a later change does not bring them back.
Status clear_switch_port(sw::Switch& s, uint16_t port) {
  sw::SwitchConfig cfg = s.config();
  cfg.interfaces[port].faults = FaultConfig{};
  cfg.interfaces[port].pfc_storm = sw::PfcStorm{};
  return s.apply(cfg);
}

// The same for every port of a switch, in one change.
Status clear_switch_ports(sw::Switch& s) {
  sw::SwitchConfig cfg = s.config();
  bool any = false;
  for (auto& f : cfg.interfaces) {
    any |= f.faults.any() || f.pfc_storm.enable;
    f.faults = FaultConfig{};
    f.pfc_storm = sw::PfcStorm{};
  }
  return any ? s.apply(cfg) : Status{};
}

std::string storm_words(const sw::PfcStorm& s) {
  std::string prios;
  for (int p = 0; p < 8; p++)
    if ((s.priorities >> p) & 1) prios += (prios.empty() ? "" : ",") + std::to_string(p);
  std::string w = "pfc-storm prio " + prios;
  if (s.quanta != 0xffff) w += " quanta " + std::to_string(s.quanta);
  if (s.interval.count() > 0) w += " interval " + config::format_duration(s.interval);
  return w;
}

// Removes the link-down faults from a target's stages (`link up`).
int link_up(Target& t, std::string& out) {
  int removed = 0;
  for (FaultStage* st : t.stages) {
    if (st->configured().link_down) {
      FaultConfig c = st->configured();
      c.link_down = false;
      st->configure(c);
      removed++;
    }
  }
  if (t.sw != nullptr && t.sw->config().interfaces[t.port].faults.link_down) {
    sw::SwitchConfig cfg = t.sw->config();
    cfg.interfaces[t.port].faults.link_down = false;
    [[maybe_unused]] const Status st = t.sw->apply(cfg);
  }
  auto& recs = fault_registry().records;
  for (auto it = recs.begin(); it != recs.end();) {
    bool down = false;
    for (FaultStage* st : it->target.stages)
      if (const FaultStage::Entry* e = st->find(it->id); e != nullptr && e->injector.config().link_down) down = true;
    const bool here = std::any_of(it->target.stages.begin(), it->target.stages.end(), [&](FaultStage* s) {
      return std::find(t.stages.begin(), t.stages.end(), s) != t.stages.end();
    });
    if (down && here) {
      for (FaultStage* st : it->target.stages) st->remove(it->id);
      it = recs.erase(it);
      removed++;
    } else {
      ++it;
    }
  }
  out = t.label + ": link up (" + std::to_string(removed) + " link-down fault(s) removed)";
  return 0;
}

int add(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  if (w.size() < 4) {
    out = kFaultUsage;
    return EINVAL;
  }
  size_t i = 3;
  const std::string dir = is_dir(w[i]) ? w[i++] : "both";
  auto t = resolve_target(engine, w[2], dir, out);
  if (!t) return EINVAL;
  Registry& reg = fault_registry();
  if (i < w.size() && w[i] == "pfc-storm") {
    if (t->sw == nullptr) {
      out = "pfc-storm: " + t->label + " is not a switch port (a switch sends the storm)";
      return EINVAL;
    }
    sw::PfcStorm storm;
    if (Status s = read_storm(w, i + 1, storm); !s.ok()) {
      out = s.message();
      return EINVAL;
    }
    if (Status s = set_storm(*t->sw, t->port, storm); !s.ok()) {
      out = s.message();
      return EINVAL;
    }
    std::erase_if(reg.records, [&](const Record& r) { return r.storm && r.target.sw == t->sw && r.target.port == t->port; });
    t->stages.clear();
    const Record r{reg.next_id++, *t, storm_words(storm), true};
    reg.records.push_back(r);
    out = "fault " + std::to_string(r.id) + ": " + t->label + ": " + r.what;
    return 0;
  }
  auto parsed = config::parse_fault_words(std::span(w).subspan(i));
  if (!parsed.ok()) {
    out = parsed.status().message();
    return EINVAL;
  }
  if (parsed->link_up) return link_up(*t, out);
  // Each frame through a stage meets every fault of it: a bound, so that
  // a client adding faults in a loop cannot slow the fabric without end.
  constexpr size_t kMaxFaultsPerStage = 32;
  for (const FaultStage* st : t->stages)
    if (st->entries().size() > kMaxFaultsPerStage) {
      out = t->label + ": already " + std::to_string(kMaxFaultsPerStage) +
            " faults added; `rocemu fault del ID` or `fault clear` some first";
      return EBUSY;
    }
  const Record r{reg.next_id++, *t, config::describe_faults(parsed->faults), false};
  for (FaultStage* st : t->stages) st->add(r.id, parsed->faults);
  reg.records.push_back(r);
  out = "fault " + std::to_string(r.id) + ": " + t->label + " (" + t->where + ", " + dir + "): " + r.what;
  return 0;
}

FaultStats stats_of(const Record& r) {
  FaultStats sum;
  for (const FaultStage* st : r.target.stages)
    if (const FaultStage::Entry* e = st->find(r.id)) {
      sum.dropped += e->stats.dropped;
      sum.delayed += e->stats.delayed;
      sum.duplicated += e->stats.duplicated;
      sum.corrupted += e->stats.corrupted;
    }
  return sum;
}

void fault_row(std::string& out, const std::string& id, const std::string& target, const std::string& dir,
         const std::string& what, const std::array<std::string, 4>& counts) {
  char line[512];
  std::snprintf(line, sizeof line, "%-4s %-20s %-5s %-34s %8s %8s %10s %9s\n", id.c_str(), target.c_str(), dir.c_str(),
                what.c_str(), counts[0].c_str(), counts[1].c_str(), counts[2].c_str(), counts[3].c_str());
  out += line;
}

std::array<std::string, 4> counts(const FaultStats& s) {
  return {std::to_string(s.dropped), std::to_string(s.delayed), std::to_string(s.duplicated),
          std::to_string(s.corrupted)};
}
const std::array<std::string, 4> kNoCounts = {"-", "-", "-", "-"};

// Every fault in force: those added here by id, then those of the
// topology or NVUE configuration (id "-": `fault clear TARGET` removes them).
int list(Engine& engine, std::string& out) {
  fault_row(out, "id", "target", "dir", "fault", {"dropped", "delayed", "duplicated", "corrupted"});
  for (const Record& r : fault_registry().records)
    fault_row(out, std::to_string(r.id), r.target.label, r.storm ? "out" : r.target.dir, r.what,
        r.storm ? kNoCounts : counts(stats_of(r)));
  for (const auto& l : engine.links())
    for (int side = 0; side < 2; side++) {
      const FaultStage& st = l->faults(side);
      if (!st.configured().any()) continue;
      fault_row(out, "-", l->name(), side == 0 ? "out" : "in", config::describe_faults(st.configured()),
          counts(st.find(0)->stats));
    }
  for (const auto& n : engine.nodes()) {
    auto* s = dynamic_cast<sw::Switch*>(n.get());
    if (s == nullptr) continue;
    for (uint16_t p = 0; p < s->num_ports(); p++) {
      const auto& f = s->config().interfaces[p];
      const FaultStage& st = s->port_faults(p);
      if (st.configured().any())
        fault_row(out, "-", s->name() + ":" + f.name, "in", config::describe_faults(st.configured()),
            counts(st.find(0)->stats));
      const bool added = std::any_of(fault_registry().records.begin(), fault_registry().records.end(),
                                     [&](const Record& r) { return r.storm && r.target.sw == s && r.target.port == p; });
      if (f.pfc_storm.enable && !added) fault_row(out, "-", s->name() + ":" + f.name, "out", storm_words(f.pfc_storm), kNoCounts);
    }
  }
  return 0;
}

Status remove_record(const Record& r) {
  for (FaultStage* st : r.target.stages) st->remove(r.id);
  if (r.storm) return set_storm(*r.target.sw, r.target.port, sw::PfcStorm{});
  return {};
}

int del(const std::vector<std::string>& w, std::string& out) {
  if (w.size() != 3) {
    out = "usage: rocemu fault del ID (ids: rocemu fault list)";
    return EINVAL;
  }
  auto& recs = fault_registry().records;
  const auto it = std::find_if(recs.begin(), recs.end(), [&](const Record& r) { return std::to_string(r.id) == w[2]; });
  if (it == recs.end()) {
    std::vector<std::string> ids;
    for (const Record& r : recs) ids.push_back(std::to_string(r.id));
    out = "no fault " + w[2] + " (faults: " + (ids.empty() ? "none" : joined(ids)) + ")";
    return EINVAL;
  }
  const Status removed = remove_record(*it);
  out = "fault " + w[2] + " removed: " + it->target.label + ": " + it->what;
  recs.erase(it);
  if (!removed.ok()) {
    out += " (but " + removed.message() + ")";
    return EIO;
  }
  return 0;
}

// A switch that refused to drop its configured faults keeps them in force
// too: its stage gets back what its configuration still says.
constexpr const char* kConfiguredStay = "run-time faults removed, configured faults stay: ";
void restore_configured(sw::Switch& s, const sw::SwitchConfig& cfg, uint16_t port) {
  if (port < cfg.interfaces.size()) s.port_faults(port).configure(cfg.interfaces[port].faults);
}

std::string failures(const std::vector<std::string>& failed) {
  std::string s;
  for (const auto& f : failed) s += (s.empty() ? "" : "; ") + f;
  return s;
}

// Every fault everywhere: each link, each switch (its ports' configured
// faults and storms in one change), whatever fails on the way; the
// failures are named and make it exit 1.
int clear_all(Engine& engine, std::string& out) {
  std::vector<std::string> failed;
  auto& recs = fault_registry().records;
  for (const Record& r : recs)
    if (Status st = remove_record(r); !st.ok()) failed.push_back(r.target.label + ": " + st.message());
  recs.clear();
  for (const auto& l : engine.links())
    for (int side = 0; side < 2; side++) l->faults(side).clear();
  for (const auto& n : engine.nodes()) {
    auto* s = dynamic_cast<sw::Switch*>(n.get());
    if (s == nullptr) continue;
    const sw::SwitchConfig before = s->config();
    for (uint16_t p = 0; p < s->num_ports(); p++) s->port_faults(p).clear();
    if (Status st = clear_switch_ports(*s); !st.ok()) {
      for (uint16_t p = 0; p < s->num_ports(); p++) restore_configured(*s, before, p);
      failed.push_back(s->name() + ": " + kConfiguredStay + st.message());
    }
  }
  if (failed.empty()) {
    out = "every fault cleared";
    return 0;
  }
  out = "every fault cleared but: " + failures(failed);
  return EIO;
}

int clear(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  if (w.size() > 3) {
    out = "usage: rocemu fault clear [TARGET]";
    return EINVAL;
  }
  if (w.size() == 2) return clear_all(engine, out);
  auto& recs = fault_registry().records;
  auto t = resolve_target(engine, w[2], "both", out);
  if (!t) return EINVAL;
  const auto touches = [&](const Record& r) {
    if (r.storm) return t->sw != nullptr && r.target.sw == t->sw && r.target.port == t->port;
    return std::any_of(r.target.stages.begin(), r.target.stages.end(), [&](FaultStage* s) {
      return std::find(t->stages.begin(), t->stages.end(), s) != t->stages.end();
    });
  };
  std::vector<std::string> failed;
  for (auto it = recs.begin(); it != recs.end();) {
    if (touches(*it)) {
      if (Status st = remove_record(*it); !st.ok()) failed.push_back("fault " + std::to_string(it->id) + ": " + st.message());
      it = recs.erase(it);
    } else {
      ++it;
    }
  }
  for (FaultStage* st : t->stages) st->clear();
  if (t->sw != nullptr) {
    const sw::SwitchConfig before = t->sw->config();
    t->sw->port_faults(t->port).clear();
    if (Status st = clear_switch_port(*t->sw, t->port); !st.ok()) {
      restore_configured(*t->sw, before, t->port);
      failed.push_back(t->label + ": " + kConfiguredStay + st.message());
    }
  }
  out = t->label + " (" + t->where + "): faults cleared";
  if (failed.empty()) return 0;
  out += " but: " + failures(failed);
  return EIO;
}

}  // namespace

int handle_fault(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  const std::string sub = w.size() > 1 ? w[1] : "";
  if (sub == "add") return add(engine, w, out);
  if (sub == "list" && w.size() == 2) return list(engine, out);
  if (sub == "del" || sub == "delete") return del(w, out);
  if (sub == "clear") return clear(engine, w, out);
  out = sub.empty() || sub == "list" ? kFaultUsage
                                     : "'" + sub + "' is not add, list, del or clear (e.g. rocemu fault add " + sub +
                                           " loss 1%)";
  return EINVAL;
}

}  // namespace rocemu::app
