#include "nic/cc/cc_config.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <variant>

namespace rocemu::nic::cc {
namespace {

bool all_digits(const YAML::Node& n) {
  if (!n.IsScalar() || n.Scalar().empty()) return false;
  const std::string& s = n.Scalar();
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(uint8_t(c)) != 0; });
}

// How a knob's value is written, in mlx5's units when it is a bare number.
enum class Unit { kMbps, kMicros, kBytes64, kInt, kBool, kPrios };

struct Knob {
  const char* name;
  Unit unit;
  // kMbps, kMicros: the value must be above 0 (a zero rate floor, timer or
  // alpha period would stall or disable the algorithm).
  std::variant<double DcqcnParams::*, Duration DcqcnParams::*, uint64_t DcqcnParams::*, uint32_t DcqcnParams::*,
               bool DcqcnParams::*, uint8_t DcqcnParams::*>
      member;
  int64_t lo = 0, hi = 0;  // kInt
  bool positive = false;
};

// One table: every knob, its unit and where it goes.
const Knob kKnobs[] = {
    {"rpg_time_reset", Unit::kMicros, &DcqcnParams::rpg_time_reset, 0, 0, true},
    {"rpg_byte_reset", Unit::kBytes64, &DcqcnParams::rpg_byte_reset},
    {"rpg_threshold", Unit::kInt, &DcqcnParams::rpg_threshold, 0, 31},
    {"rpg_max_rate", Unit::kMbps, &DcqcnParams::rpg_max_rate_bps},
    {"rpg_ai_rate", Unit::kMbps, &DcqcnParams::rpg_ai_rate_bps},
    {"rpg_hai_rate", Unit::kMbps, &DcqcnParams::rpg_hai_rate_bps},
    {"rpg_gd", Unit::kInt, &DcqcnParams::rpg_gd, 1, 15},
    {"rpg_min_dec_fac", Unit::kInt, &DcqcnParams::rpg_min_dec_fac, 0, 100},
    {"rpg_min_rate", Unit::kMbps, &DcqcnParams::rpg_min_rate_bps, 0, 0, true},
    {"rate_to_set_on_first_cnp", Unit::kMbps, &DcqcnParams::rate_to_set_on_first_cnp_bps},
    {"dce_tcp_g", Unit::kInt, &DcqcnParams::dce_tcp_g, 0, 1024},
    {"dce_tcp_rtt", Unit::kMicros, &DcqcnParams::dce_tcp_rtt, 0, 0, true},
    {"initial_alpha_value", Unit::kInt, &DcqcnParams::initial_alpha_value, 0, 1024},
    {"rate_reduce_monitor_period", Unit::kMicros, &DcqcnParams::rate_reduce_monitor_period},
    {"clamp_tgt_rate", Unit::kBool, &DcqcnParams::clamp_tgt_rate},
    {"clamp_tgt_rate_ati", Unit::kBool, &DcqcnParams::clamp_tgt_rate_ati},
    {"min_time_between_cnps", Unit::kMicros, &DcqcnParams::min_time_between_cnps},
    {"roce_rp_enable", Unit::kPrios, &DcqcnParams::rp_enable},
    {"roce_np_enable", Unit::kPrios, &DcqcnParams::np_enable},
};

void set_knob(const Knob& k, const YAML::Node& v, const std::string& where, config::Context& ctx, DcqcnParams& p) {
  if (k.positive && v.IsScalar()) {
    const std::string& t = v.Scalar();
    const bool zero = all_digits(v) ? t.find_first_not_of('0') == std::string::npos
                                    : k.unit == Unit::kMbps ? config::parse_rate(t) == uint64_t(0)
                                                            : config::parse_duration(t) == Duration(0);
    if (zero) {
      ctx.error(v, where, "must be above 0");
      return;
    }
  }
  switch (k.unit) {
    case Unit::kMbps:
      if (all_digits(v)) {
        if (auto i = ctx.integer(v, where, 0, 1'000'000'000)) p.*std::get<double DcqcnParams::*>(k.member) = double(*i) * 1e6;
      } else if (auto r = ctx.rate(v, where)) {
        p.*std::get<double DcqcnParams::*>(k.member) = double(*r);
      }
      return;
    case Unit::kMicros:
      if (all_digits(v)) {
        if (auto i = ctx.integer(v, where, 0, 100'000'000)) p.*std::get<Duration DcqcnParams::*>(k.member) = us(*i);
      } else if (auto d = ctx.duration(v, where)) {
        p.*std::get<Duration DcqcnParams::*>(k.member) = *d;
      }
      return;
    case Unit::kBytes64:
      if (all_digits(v)) {
        if (auto i = ctx.integer(v, where, 0, int64_t(1) << 40)) p.*std::get<uint64_t DcqcnParams::*>(k.member) = uint64_t(*i) * 64;
      } else if (auto b = ctx.size(v, where)) {
        p.*std::get<uint64_t DcqcnParams::*>(k.member) = *b;
      }
      return;
    case Unit::kInt:
      if (auto i = ctx.integer(v, where, k.lo, k.hi)) p.*std::get<uint32_t DcqcnParams::*>(k.member) = uint32_t(*i);
      return;
    case Unit::kBool:
      if (v.IsScalar() && (v.Scalar() == "0" || v.Scalar() == "1")) {  // mlx5's form
        p.*std::get<bool DcqcnParams::*>(k.member) = v.Scalar() == "1";
      } else if (auto b = ctx.boolean(v, where)) {
        p.*std::get<bool DcqcnParams::*>(k.member) = *b;
      }
      return;
    case Unit::kPrios: {
      if (!v.IsSequence()) {
        ctx.error(v, where, "expected a list of priorities 0..7, e.g. [3]");
        return;
      }
      uint8_t mask = 0;
      for (size_t i = 0; i < v.size(); i++)
        if (auto pr = ctx.integer(v[i], where + "[" + std::to_string(i) + "]", 0, 7)) mask |= uint8_t(1u << *pr);
      p.*std::get<uint8_t DcqcnParams::*>(k.member) = mask;
      return;
    }
  }
}

}  // namespace

std::vector<std::string> knob_names() {
  std::vector<std::string> v;
  for (const Knob& k : kKnobs) v.emplace_back(k.name);
  return v;
}

void set_knobs(const YAML::Node& knobs, std::string_view field, config::Context& ctx, DcqcnParams& p) {
  const std::string f(field);
  if (!knobs.IsMap()) {
    ctx.error(knobs, f, "expected a mapping of mlx5 knob names to values");
    return;
  }
  DcqcnParams next = p;
  const size_t errors = ctx.error_count();
  for (const auto& kv : knobs) {
    const std::string key = kv.first.Scalar();
    const auto k = std::find_if(std::begin(kKnobs), std::end(kKnobs), [&](const Knob& x) { return key == x.name; });
    if (k == std::end(kKnobs)) {
      std::string names;
      for (const Knob& x : kKnobs) names += std::string(names.empty() ? "" : ", ") + x.name;
      ctx.error(kv.first, f + "." + key, "unknown knob; expected one of " + names);
      continue;
    }
    set_knob(*k, kv.second, f + "." + key, ctx, next);
  }
  if (ctx.error_count() == errors) p = next;
}

std::vector<std::pair<std::string, std::string>> show_knobs(const DcqcnParams& p) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto number = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", v);
    return std::string(buf);
  };
  for (const Knob& k : kKnobs) {
    std::string v;
    switch (k.unit) {
      case Unit::kMbps: v = number(p.*std::get<double DcqcnParams::*>(k.member) / 1e6); break;
      case Unit::kMicros: v = number(to_us(p.*std::get<Duration DcqcnParams::*>(k.member))); break;
      case Unit::kBytes64: v = std::to_string(p.*std::get<uint64_t DcqcnParams::*>(k.member) / 64); break;
      case Unit::kInt: v = std::to_string(p.*std::get<uint32_t DcqcnParams::*>(k.member)); break;
      case Unit::kBool: v = p.*std::get<bool DcqcnParams::*>(k.member) ? "1" : "0"; break;
      case Unit::kPrios: {
        const uint8_t mask = p.*std::get<uint8_t DcqcnParams::*>(k.member);
        for (int prio = 0; prio < 8; prio++)
          if ((mask >> prio) & 1) v += std::string(v.empty() ? "" : ",") + std::to_string(prio);
        v = "[" + v + "]";
        break;
      }
    }
    out.emplace_back(k.name, v);
  }
  return out;
}

CcConfig parse_cc(const YAML::Node& n, std::string_view field, config::Context& ctx) {
  const std::string f(field);
  CcConfig c;
  if (n.IsScalar()) {
    if (auto a = ctx.choice(n, f, {"none", "dcqcn"})) c.algorithm = *a;
    return c;
  }
  if (!n.IsMap()) {
    ctx.error(n, f, "expected none, dcqcn, or a mapping {algorithm: dcqcn, profile: mlx5, <mlx5 knob>: value}");
    return c;
  }
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    const std::string where = f + "." + key;
    if (key == "algorithm") {
      if (auto a = ctx.choice(kv.second, where, {"none", "dcqcn"})) c.algorithm = *a;
    } else if (key == "profile") {
      if (auto pr = ctx.choice(kv.second, where, {"mlx5", "paper", "hpcc"})) c.profile = *pr;
    } else if (std::none_of(std::begin(kKnobs), std::end(kKnobs), [&](const Knob& k) { return key == k.name; })) {
      std::string names;
      for (const Knob& k : kKnobs) names += std::string(names.empty() ? "" : ", ") + k.name;
      ctx.error(kv.first, where, "unknown key; expected algorithm, profile or one of " + names);
    }
  }
  // The profile first, then the knobs over it.
  DcqcnParams::profile(c.profile, c.dcqcn);
  for (const Knob& k : kKnobs)
    if (const auto& v = n[k.name]) set_knob(k, v, f + "." + k.name, ctx, c.dcqcn);
  return c;
}

}  // namespace rocemu::nic::cc
