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
    {"loss",                  U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.loss = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.loss; return v; }},
    {"corrupt",               U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.corrupt = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.corrupt; return v; }},
    {"duplicate",             U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.duplicate = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.duplicate; return v; }},
    {"reorder",               U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.reorder = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.reorder; return v; }},
    {"loss_correlation",      U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.loss_correlation = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.loss_correlation; return v; }},
    {"corrupt_correlation",   U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.corrupt_correlation = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.corrupt_correlation; return v; }},
    {"duplicate_correlation", U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.duplicate_correlation = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.duplicate_correlation; return v; }},
    {"reorder_correlation",   U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.reorder_correlation = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.reorder_correlation; return v; }},
    {"delay_correlation",     U::kProbability, [](FaultConfig& f, double p, Duration, uint64_t, bool) { f.delay_correlation = p; },
     [](const FaultConfig& f) { FaultValue v; v.probability = f.delay_correlation; return v; }},
    {"delay",                 U::kTime,        [](FaultConfig& f, double, Duration t, uint64_t, bool) { f.delay = t; },
     [](const FaultConfig& f) { FaultValue v; v.time = f.delay; return v; }},
    {"jitter",                U::kTime,        [](FaultConfig& f, double, Duration t, uint64_t, bool) { f.jitter = t; },
     [](const FaultConfig& f) { FaultValue v; v.time = f.jitter; return v; }},
    {"reorder_delay",         U::kTime,        [](FaultConfig& f, double, Duration t, uint64_t, bool) { f.reorder_delay = t; },
     [](const FaultConfig& f) { FaultValue v; v.time = f.reorder_delay; return v; }},
    {"reorder_gap",           U::kCount,       [](FaultConfig& f, double, Duration, uint64_t n, bool) { f.reorder_gap = uint32_t(n); },
     [](const FaultConfig& f) { FaultValue v; v.number = f.reorder_gap; return v; }},
    {"rate",                  U::kRate,        [](FaultConfig& f, double, Duration, uint64_t r, bool) { f.rate_bps = r; },
     [](const FaultConfig& f) { FaultValue v; v.number = f.rate_bps.value_or(0); return v; }},
    {"link_down",             U::kFlag,        [](FaultConfig& f, double, Duration, uint64_t, bool b) { f.link_down = b; },
     [](const FaultConfig& f) { FaultValue v; v.flag = f.link_down; return v; }},
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
  // netem's optional correlation after a value: the next word a percentage.
  bool next_is_percent() const { return next_is_number() && peek().back() == '%'; }

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
  Status count(std::string_view kind, uint64_t& n) {
    std::string v;
    if (Status s = value(kind, v); !s.ok()) return s;
    char* end = nullptr;
    const unsigned long long c = std::strtoull(v.c_str(), &end, 10);
    if (!bare_number(v) || end != v.c_str() + v.size() || c < 1 || c > (1u << 30))
      return Status::error(std::string(kind) + ": '" + v + "' is not a count from 1");
    n = c;
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

// P% [C%]: a probability and netem's optional correlation (a bare number
// after it is a correlation without its unit, unless `time_may_follow`).
Status read_chance(Words& w, std::string_view kind, double& p, double& correlation, bool time_may_follow = false) {
  if (Status s = w.probability(kind, p); !s.ok()) return s;
  if (w.next_is_percent() || (w.next_is_number() && !time_may_follow))
    return w.probability(std::string(kind) + " correlation", correlation);
  return {};
}

// delay TIME [JITTER [C%]] [distribution uniform]
Status read_delay(Words& w, FaultConfig& fc) {
  if (Status s = w.time("delay", fc.delay); !s.ok()) return s;
  if (w.next_is_percent())
    return Status::error("delay: a correlation (" + w.peek() + ") follows a jitter (delay 100us 10us 25%)");
  if (w.next_is_number()) {
    if (Status s = w.time("delay jitter", fc.jitter); !s.ok()) return s;
    if (w.next_is_percent())
      if (Status s = w.probability("delay correlation", fc.delay_correlation); !s.ok()) return s;
  }
  if (!w.done() && w.peek() == "distribution") {
    w.take();
    const std::string d = w.done() ? "" : w.take();
    if (d != "uniform")
      return Status::error("delay distribution: '" + d + "': the jitter is uniform only (distribution uniform)");
  }
  return {};
}

// reorder P% [C%] [gap N] [TIME], the last rocemu's: without a delay
// netem cannot reorder; rocemu holds the chosen frames back TIME instead.
Status read_reorder(Words& w, FaultConfig& fc, bool& hold_back_given) {
  if (Status s = read_chance(w, "reorder", fc.reorder, fc.reorder_correlation, true); !s.ok()) return s;
  if (!w.done() && w.peek() == "gap") {
    w.take();
    uint64_t n = 0;
    if (Status s = w.count("reorder gap", n); !s.ok()) return s;
    fc.reorder_gap = uint32_t(n);
  }
  if (w.next_is_number()) {
    hold_back_given = true;
    return w.time("reorder delay", fc.reorder_delay);
  }
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
  bool reorder_given = false, gap_given = false, hold_back_given = false;
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
        s = read_chance(w, "loss", fc.loss, fc.loss_correlation);
      }
    } else if (kind == "corrupt") {
      s = read_chance(w, "corrupt", fc.corrupt, fc.corrupt_correlation);
    } else if (kind == "duplicate") {
      s = read_chance(w, "duplicate", fc.duplicate, fc.duplicate_correlation);
    } else if (kind == "delay") {
      s = read_delay(w, fc);
    } else if (kind == "reorder") {
      reorder_given = true;
      s = read_reorder(w, fc, hold_back_given);
    } else if (kind == "gap") {  // netem takes it apart from reorder too
      uint64_t n = 0;
      s = w.count("gap", n);
      fc.reorder_gap = uint32_t(n);
      gap_given = true;
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
      uint64_t n = 0;
      bool b = true;
      switch (k->unit) {
        case FaultUnit::kProbability: s = w.probability(k->key, p); break;
        case FaultUnit::kTime: s = w.time(k->key, t); break;
        case FaultUnit::kRate: s = w.rate(k->key, n); break;
        case FaultUnit::kCount: s = w.count(k->key, n); break;
        case FaultUnit::kFlag: break;
      }
      if (s.ok()) k->set(fc, p, t, n, b);
    } else {
      s = Status::error("unknown fault '" + kind + "' (faults: " + kind_names() + ")");
    }
    if (!s.ok()) return s;
  }
  if (out.link_up && fc.any()) return Status::error("link up: removes link-down faults; give it alone");
  if (gap_given && !reorder_given) return Status::error("gap: needs reorder P% (as netem: reorder 25% gap 5)");
  if (hold_back_given && fc.delay.count() > 0)
    return Status::error("reorder: with a delay the frames reordered go at once (netem); a hold-back time is for "
                         "reorder without a delay");
  if (Status s = fc.validate(); !s.ok()) return s;
  return out;
}

std::string describe_faults(const FaultConfig& fc) {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  // P% and its correlation, if any
  auto chance = [](double p, double correlation) {
    return percent(p) + (correlation > 0 ? " " + percent(correlation) : "");
  };
  if (fc.link_down) add("link down");
  if (fc.loss > 0) add("loss " + chance(fc.loss, fc.loss_correlation));
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
  if (fc.delay.count() > 0 || fc.jitter.count() > 0) {
    std::string d = "delay " + format_duration(fc.delay);
    if (fc.jitter.count() > 0) {
      d += " " + format_duration(fc.jitter);
      if (fc.delay_correlation > 0) d += " " + percent(fc.delay_correlation);
    }
    add(d);
  }
  if (fc.reorder > 0) {
    std::string r = "reorder " + chance(fc.reorder, fc.reorder_correlation);
    if (fc.reorder_gap > 1) r += " gap " + std::to_string(fc.reorder_gap);
    if (fc.delay.count() == 0) r += " " + format_duration(fc.reorder_delay);
    add(r);
  }
  if (fc.duplicate > 0) add("duplicate " + chance(fc.duplicate, fc.duplicate_correlation));
  if (fc.corrupt > 0) add("corrupt " + chance(fc.corrupt, fc.corrupt_correlation));
  if (fc.rate_bps) add("rate " + netem_rate(*fc.rate_bps));
  return s.empty() ? "none" : s;
}

}  // namespace rocemu::config
