#include "common/config/fault_kinds.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

#include "common/config/config.h"

namespace rocemu::config {
namespace {

using U = FaultUnit;

// clang-format off
constexpr FaultKind kKinds[] = {
    {"loss",          U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.loss = p; }},
    {"corrupt",       U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.corrupt = p; }},
    {"duplicate",     U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.duplicate = p; }},
    {"reorder",       U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.reorder = p; }},
    {"delay",         U::kTime,        [](FaultConfig& f, double, Duration t, uint64_t, bool) { f.delay = t; }},
    {"jitter",        U::kTime,        [](FaultConfig& f, double, Duration t, uint64_t, bool) { f.jitter = t; }},
    {"reorder_delay", U::kTime,        [](FaultConfig& f, double, Duration t, uint64_t, bool) { f.reorder_delay = t; }},
    {"rate",          U::kRate,        [](FaultConfig& f, double, Duration, uint64_t r, bool) { f.rate_bps = r; }},
    {"link_down",     U::kFlag,        [](FaultConfig& f, double, Duration, uint64_t, bool b) { f.link_down = b; }},
};
// clang-format on

constexpr std::array<std::string_view, std::size(kKinds) + 2> kKeys = [] {
  std::array<std::string_view, std::size(kKinds) + 2> k{};
  for (size_t i = 0; i < std::size(kKinds); i++) k[i] = kKinds[i].key;
  k[std::size(kKinds)] = "burst";
  k[std::size(kKinds) + 1] = "drop";
  return k;
}();

bool starts_with_digit(std::string_view s) { return !s.empty() && ((s[0] >= '0' && s[0] <= '9') || s[0] == '.'); }
bool bare_number(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789.") == std::string_view::npos; }

std::string netem_rate(uint64_t bps) {
  if (bps % 1'000'000'000 == 0) return std::to_string(bps / 1'000'000'000) + "gbit";
  if (bps % 1'000'000 == 0) return std::to_string(bps / 1'000'000) + "mbit";
  if (bps % 1'000 == 0) return std::to_string(bps / 1'000) + "kbit";
  return std::to_string(bps) + "bit";
}

std::string percent(double p) {
  char b[32];
  std::snprintf(b, sizeof b, "%g%%", p * 100);
  return b;
}

// Reads the words of one command line, each value with its unit.
class Words {
 public:
  explicit Words(std::span<const std::string> w) : w_(w) {}
  bool done() const { return i_ >= w_.size(); }
  const std::string& peek() const { return w_[i_]; }
  std::string take() { return w_[i_++]; }
  bool next_is_number() const { return !done() && starts_with_digit(peek()); }

  Status value(std::string_view kind, std::string& out) {
    if (done()) return Status::error(std::string(kind) + ": needs a value");
    out = take();
    return {};
  }
  Status probability(std::string_view kind, double& p) {
    std::string v;
    if (Status s = value(kind, v); !s.ok()) return s;
    if (bare_number(v)) return Status::error(std::string(kind) + ": '" + v + "' needs a unit (" + v + "%)");
    const std::string num = v.size() > 1 && v.back() == '%' ? v.substr(0, v.size() - 1) : "";
    char* end = nullptr;
    const double pct = std::strtod(num.c_str(), &end);
    if (num.empty() || end != num.c_str() + num.size() || pct < 0 || pct > 100)
      return Status::error(std::string(kind) + ": '" + v + "' is not a percentage from 0% to 100%");
    p = pct / 100;
    return {};
  }
  Status time(std::string_view kind, Duration& t) {
    std::string v;
    if (Status s = value(kind, v); !s.ok()) return s;
    if (bare_number(v))
      return Status::error(std::string(kind) + ": '" + v + "' needs a unit (e.g. " + v + "us, " + v + "ms, " + v +
                           "ns)");
    const auto d = parse_duration(v);
    if (!d) return Status::error(std::string(kind) + ": '" + v + "' is not a time (e.g. 100us, 5ms)");
    t = *d;
    return {};
  }
  Status rate(std::string_view kind, uint64_t& r) {
    std::string v;
    if (Status s = value(kind, v); !s.ok()) return s;
    if (bare_number(v))
      return Status::error(std::string(kind) + ": '" + v + "' needs a unit (e.g. " + v + "gbit, " + v + "mbit)");
    const auto parsed = parse_rate(v);
    if (!parsed) return Status::error(std::string(kind) + ": '" + v + "' is not a rate (e.g. 10gbit, 400mbit, 25G)");
    r = *parsed;
    return {};
  }

 private:
  std::span<const std::string> w_;
  size_t i_ = 0;
};

Status read_gemodel(Words& w, FaultConfig& fc) {
  // netem: p enters the bad state, r leaves it, 1-h is the loss in the
  // bad state, 1-k in the good one; r defaults to 1-p, 1-h to 100%, 1-k to 0.
  GilbertElliott ge;
  if (Status s = w.probability("loss gemodel", ge.p_good_to_bad); !s.ok()) return s;
  ge.p_bad_to_good = 1 - ge.p_good_to_bad;
  ge.loss_bad = 1;
  ge.loss_good = 0;
  double* rest[] = {&ge.p_bad_to_good, &ge.loss_bad, &ge.loss_good};
  for (double* slot : rest) {
    if (!w.next_is_number()) break;
    if (Status s = w.probability("loss gemodel", *slot); !s.ok()) return s;
  }
  fc.burst = ge;
  return {};
}

Status read_drop_match(Words& w, FaultConfig& fc) {
  if (w.done() || w.peek() != "match") return Status::error("drop: expected `match` (drop match qpn=N psn=N opcode=N)");
  w.take();
  DropRule r;
  int fields = 0;
  while (!w.done() && w.peek().find('=') != std::string::npos) {
    const std::string kv = w.take();
    const std::string key = kv.substr(0, kv.find('='));
    const std::string val = kv.substr(kv.find('=') + 1);
    char* end = nullptr;
    const unsigned long long v = std::strtoull(val.c_str(), &end, 0);
    if (val.empty() || end != val.c_str() + val.size() || val[0] == '-')
      return Status::error("drop match: '" + kv + "': '" + val + "' is not a number");
    const bool u24 = v <= 0xffffff;
    if (key == "qpn" && u24) r.qpn = uint32_t(v);
    else if (key == "psn" && u24) r.psn = uint32_t(v);
    else if (key == "opcode" && v <= 255) r.opcode = uint8_t(v);
    else if (key == "every" && v >= 1 && v <= (1u << 30)) r.every_nth = uint32_t(v);
    else if (key == "times" && v <= (1u << 30)) r.times = uint32_t(v);
    else if (key == "qpn" || key == "psn") return Status::error("drop match: " + key + ": " + val + " does not fit in 24 bits");
    else if (key == "opcode") return Status::error("drop match: opcode: " + val + " is not 0..255");
    else if (key == "every" || key == "times") return Status::error("drop match: " + key + ": " + val + " is out of range");
    else return Status::error("drop match: '" + key + "' is not qpn, psn, opcode, every or times");
    fields++;
  }
  if (fields == 0) return Status::error("drop match: needs qpn=N, psn=N, opcode=N, every=N or times=N");
  fc.drop.push_back(r);
  return {};
}

std::string kind_names() {
  std::string s = "loss, delay, rate, duplicate, reorder, corrupt, drop, link";
  for (const FaultKind& k : kKinds)
    if (s.find(k.key) == std::string::npos) s += ", " + std::string(k.key);
  return s;
}

}  // namespace

std::span<const FaultKind> fault_kinds() { return kKinds; }
std::span<const std::string_view> fault_keys() { return kKeys; }

const FaultKind* find_fault_kind(std::string_view key) {
  for (const FaultKind& k : kKinds)
    if (k.key == key) return &k;
  return nullptr;
}

Result<FaultWords> parse_fault_words(std::span<const std::string> words) {
  FaultWords out;
  FaultConfig& fc = out.faults;
  Words w(words);
  if (w.done()) return Status::error("no fault given (" + kind_names() + ")");
  while (!w.done()) {
    std::string kind = w.take();
    std::replace(kind.begin(), kind.end(), '-', '_');
    Status s;
    if (kind == "loss") {
      if (!w.done() && w.peek() == "gemodel") {
        w.take();
        s = read_gemodel(w, fc);
      } else {
        if (!w.done() && w.peek() == "random") w.take();
        s = w.probability("loss", fc.loss);
      }
    } else if (kind == "delay") {
      s = w.time("delay", fc.delay);
      if (s.ok() && w.next_is_number()) s = w.time("delay jitter", fc.jitter);
    } else if (kind == "reorder") {
      s = w.probability("reorder", fc.reorder);
      if (s.ok() && w.next_is_number()) s = w.time("reorder delay", fc.reorder_delay);
    } else if (kind == "drop") {
      s = read_drop_match(w, fc);
    } else if (kind == "link") {
      const std::string state = w.done() ? "" : w.take();
      if (state == "down") fc.link_down = true;
      else if (state == "up") out.link_up = true;
      else s = Status::error("link: expected down or up");
    } else if (const FaultKind* k = find_fault_kind(kind)) {
      double p = 0;
      Duration t{0};
      uint64_t r = 0;
      bool b = true;
      switch (k->unit) {
        case FaultUnit::kProbability: s = w.probability(k->key, p); break;
        case FaultUnit::kTime: s = w.time(k->key, t); break;
        case FaultUnit::kRate: s = w.rate(k->key, r); break;
        case FaultUnit::kFlag: break;
      }
      if (s.ok()) k->set(fc, p, t, r, b);
    } else {
      s = Status::error("unknown fault '" + kind + "' (faults: " + kind_names() + ")");
    }
    if (!s.ok()) return s;
  }
  if (out.link_up && fc.any()) return Status::error("link up: removes link-down faults; give it alone");
  if (Status s = fc.validate(); !s.ok()) return s;
  return out;
}

std::string describe_faults(const FaultConfig& fc) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (fc.link_down) add("link down");
  if (fc.loss > 0) add("loss " + percent(fc.loss));
  if (fc.burst) {
    const GilbertElliott& g = *fc.burst;
    add("loss gemodel " + percent(g.p_good_to_bad) + " " + percent(g.p_bad_to_good) + " " + percent(g.loss_bad) +
        " " + percent(g.loss_good));
  }
  for (const DropRule& r : fc.drop) {
    std::string m = "drop match";
    if (r.qpn) m += " qpn=" + std::to_string(*r.qpn);
    if (r.psn) m += " psn=" + std::to_string(*r.psn);
    if (r.opcode) m += " opcode=" + std::to_string(*r.opcode);
    if (r.every_nth != 1) m += " every=" + std::to_string(r.every_nth);
    if (r.times != 0) m += " times=" + std::to_string(r.times);
    add(m);
  }
  if (fc.delay.count() > 0 || fc.jitter.count() > 0)
    add("delay " + format_duration(fc.delay) + (fc.jitter.count() > 0 ? " " + format_duration(fc.jitter) : ""));
  if (fc.reorder > 0) add("reorder " + percent(fc.reorder) + " " + format_duration(fc.reorder_delay));
  if (fc.duplicate > 0) add("duplicate " + percent(fc.duplicate));
  if (fc.corrupt > 0) add("corrupt " + percent(fc.corrupt));
  if (fc.rate_bps) add("rate " + netem_rate(*fc.rate_bps));
  return s.empty() ? "none" : s;
}

}  // namespace rocemu::config
