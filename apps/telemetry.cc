#include "apps/telemetry.h"

#include <rte_telemetry.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

namespace rocemu::app {
namespace {

// What one reply may hold: telemetry's dict and array limits, and a size
// well inside the 16 KiB it writes a reply into (beyond that it would drop
// entries without a word).
constexpr size_t kMaxEntries = RTE_TEL_MAX_DICT_ENTRIES;
constexpr size_t kMaxArray = RTE_TEL_MAX_ARRAY_ENTRIES;
constexpr size_t kMaxReplyBytes = 12u << 10;

// The engine the commands serve (they are registered once per process).
struct Source {
  std::mutex mu;
  Telemetry::Post post;
  Telemetry::Collect collect;
  bool registered = false;
};
// Never destroyed: DPDK's telemetry client threads may still run (and take
// the mutex) while static destructors run at exit.
Source& source() {
  static Source* s = new Source;
  return *s;
}

// Every counter, taken on the engine thread for this request.
std::optional<std::vector<CounterSample>> snapshot() {
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::vector<CounterSample> samples;
  };
  auto pending = std::make_shared<Pending>();
  {
    Source& s = source();
    std::lock_guard lock(s.mu);
    if (!s.post) return std::nullopt;
    s.post([pending, collect = s.collect] {
      std::vector<CounterSample> samples = collect();
      std::lock_guard l(pending->mu);
      pending->samples = std::move(samples);
      pending->done = true;
      pending->cv.notify_all();
    });
  }
  std::unique_lock l(pending->mu);
  if (!pending->cv.wait_for(l, Telemetry::kDeadline, [&] { return pending->done; })) return std::nullopt;
  return std::move(pending->samples);
}

int reply_text(rte_tel_data* d, const std::string& text) {
  rte_tel_data_string(d, text.substr(0, RTE_TEL_MAX_SINGLE_STRING_LEN - 1).c_str());
  return 0;
}

int unavailable(rte_tel_data* d) {
  return reply_text(d, "rocemu: the engine did not answer (stopped, or busy for " +
                           std::to_string(Telemetry::kDeadline.count()) + " ms)");
}

// Counters from rocemu's own node, not the fabric's.
bool fabric(const CounterSample& c) { return c.kind != "host-agent"; }

std::string node_of(const std::string& scope) { return scope.substr(0, scope.find_first_of("/:")); }

// Names in order of first appearance.
template <typename F>
std::vector<std::string> distinct(const std::vector<CounterSample>& samples, F name_of) {
  std::vector<std::string> out;
  for (const CounterSample& c : samples) {
    if (!fabric(c)) continue;
    std::string n = name_of(c);
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  return out;
}

int reply_array(rte_tel_data* d, const std::vector<std::string>& items) {
  rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
  for (size_t i = 0; i < items.size(); i++) {
    if (i + 1 == kMaxArray && items.size() > kMaxArray) {
      rte_tel_data_add_array_string(d, ("... and " + std::to_string(items.size() - i) + " more").c_str());
      break;
    }
    rte_tel_data_add_array_string(d, items[i].c_str());
  }
  return 0;
}

int cmd_nodes(const char*, const char*, rte_tel_data* d) {
  const auto snap = snapshot();
  if (!snap) return unavailable(d);
  return reply_array(d, distinct(*snap, [](const CounterSample& c) { return node_of(c.scope); }));
}

int cmd_scopes(const char*, const char*, rte_tel_data* d) {
  const auto snap = snapshot();
  if (!snap) return unavailable(d);
  return reply_array(d, distinct(*snap, [](const CounterSample& c) { return c.scope; }));
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

int cmd_counters(const char*, const char* params, rte_tel_data* d) {
  const std::string p = params != nullptr ? params : "";
  if (p.empty()) return reply_text(d, "usage: /rocemu/counters,SCOPE[,PREFIX] (/rocemu/scopes lists the scopes)");
  const size_t comma = p.find(',');
  const std::string scope = p.substr(0, comma);
  const std::string prefix = comma == std::string::npos ? "" : p.substr(comma + 1);
  const auto snap = snapshot();
  if (!snap) return unavailable(d);
  std::vector<const CounterSample*> hits;
  bool scope_known = false;
  for (const CounterSample& c : *snap) {
    if (!fabric(c) || c.scope != scope) continue;
    scope_known = true;
    if (starts_with(c.name, prefix) || starts_with(Telemetry::key(c.name), prefix)) hits.push_back(&c);
  }
  if (!scope_known) return reply_text(d, "no scope '" + scope + "' (/rocemu/scopes lists them)");
  if (hits.empty()) return reply_text(d, "no counter of " + scope + " starts with '" + prefix + "'");
  size_t bytes = 2;
  for (const CounterSample* c : hits) bytes += c->name.size() + std::to_string(c->value).size() + 4;
  if (hits.size() > kMaxEntries || bytes > kMaxReplyBytes) {
    // One reply cannot hold them: name the parts to ask for.
    std::vector<std::string> parts;
    for (const CounterSample* c : hits) {
      const std::string k = Telemetry::key(c->name);
      const size_t cut = std::min(k.find('/', prefix.size()), k.find('_', prefix.size() + 1));
      const std::string part = k.substr(0, cut);
      if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
    }
    std::string list;
    for (const auto& x : parts) list += (list.empty() ? "" : " ") + x;
    return reply_text(d, scope + " has " + std::to_string(hits.size()) +
                             " counters, more than one reply holds: ask for a part, /rocemu/counters," + scope +
                             ",PREFIX (prefixes: " + list + ")");
  }
  rte_tel_data_start_dict(d);
  for (const CounterSample* c : hits) rte_tel_data_add_dict_u64(d, Telemetry::key(c->name).c_str(), c->value);
  return 0;
}

}  // namespace

std::string Telemetry::key(std::string_view counter_name) {
  std::string k;
  for (char c : counter_name) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/') k += c;
    else if (c == '.') k += '/';
    else k += '_';
  }
  return k;
}

Status Telemetry::start(Post post, Collect collect) {
  Source& s = source();
  std::lock_guard lock(s.mu);
  s.post = std::move(post);
  s.collect = std::move(collect);
  if (s.registered) return {};
  struct Command {
    const char* path;
    telemetry_cb fn;
    const char* help;
  };
  const Command commands[] = {
      {"/rocemu/nodes", cmd_nodes, "rocemu: the fabric's nodes"},
      {"/rocemu/scopes", cmd_scopes, "rocemu: every scope with counters (h1, h1:0, sw1/swp1, h1/qp17, ...)"},
      {"/rocemu/counters", cmd_counters,
       "rocemu: a scope's counters. Parameters: SCOPE[,PREFIX] (e.g. h1, sw1/swp1,queue3)"},
  };
  for (const Command& c : commands)
    if (const int rc = rte_telemetry_register_cmd(c.path, c.fn, c.help); rc != 0)
      return Status::error(std::string("DPDK telemetry: registering ") + c.path + ": error " + std::to_string(rc));
  s.registered = true;
  return {};
}

void Telemetry::stop() {
  Source& s = source();
  std::lock_guard lock(s.mu);
  s.post = nullptr;
  s.collect = nullptr;
}

}  // namespace rocemu::app
