#include "sim/baseline.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/config/config.h"

namespace rocemu::sim {
namespace {

// What --write-baseline saves: these sections' numbers (recursively or
// only their own), then every expectation's metric.
struct Section {
  std::string_view path;
  bool recursive;
};
constexpr Section kBaselineSections[] = {
    {"flow_stats", true},       {"workloads", true}, {"bottleneck", false},   {"ecn", false},   {"cnp", false},
    {"dcqcn", false},           {"pfc", false},      {"pfc_watchdog", false}, {"drops", false}, {"trims", false},
    {"retransmissions", false},
};

void leaves(const Json& j, const std::string& path, bool recursive, std::vector<std::string>& out) {
  for (const auto& [k, v] : j.items()) {
    const std::string p = path + "." + k;
    if (v.is_number()) out.push_back(p);
    else if (v.is_object() && recursive) leaves(v, p, true, out);
  }
}

std::vector<std::string> baseline_metrics(const Scenario& s, const Json& summary) {
  std::vector<std::string> out;
  for (const Section& sec : kBaselineSections)
    if (const Json* j = find_metric(summary, sec.path)) leaves(*j, std::string(sec.path), sec.recursive, out);
  for (const Expectation& e : s.expectations)
    if (std::find(out.begin(), out.end(), e.metric) == out.end()) out.push_back(e.metric);
  return out;
}

void read_metric(const YAML::Node& key, const YAML::Node& v, config::Context& ctx, Baseline& b) {
  const std::string f = "metrics." + key.Scalar();
  ctx.check_keys(v, f, {"value", "tolerance"});
  if (!v.IsMap() || !v["value"] || !v["tolerance"]) {
    ctx.error(v.IsDefined() ? v : key, f, "expected {value: N, tolerance: 5% | N}");
    return;
  }
  BaselineMetric m{key.Scalar(), 0, 0, false};
  m.value = ctx.number(v["value"], f + ".value", -1e300, 1e300).value_or(0);
  std::string tol = v["tolerance"].IsScalar() ? v["tolerance"].Scalar() : "";
  if (tol.ends_with('%')) {
    m.relative = true;
    tol.pop_back();
  }
  char* end = nullptr;
  const double t = std::strtod(tol.c_str(), &end);
  if (tol.empty() || end != tol.c_str() + tol.size() || !(t >= 0))
    ctx.error(v["tolerance"], f + ".tolerance", "expected a percentage (5%) or an absolute difference (0.5)");
  m.tolerance = m.relative ? t / 100 : t;
  b.metrics.push_back(std::move(m));
}

}  // namespace

Result<Baseline> parse_baseline(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::error(file + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  config::Context ctx(file);
  Baseline b;
  if (!root.IsMap() || !root["metrics"] || !root["metrics"].IsMap())
    return Status::error(file + ": expected a mapping with scenario and metrics: {METRIC: {value, tolerance}}");
  ctx.check_keys(root, "", {"scenario", "seed", "metrics"});
  if (root["scenario"]) b.scenario = ctx.str(root["scenario"], "scenario").value_or("");
  if (root["seed"]) b.seed = uint64_t(ctx.integer(root["seed"], "seed", 0, INT64_MAX).value_or(0));
  for (const auto& kv : root["metrics"]) read_metric(kv.first, kv.second, ctx, b);
  if (!ctx.ok()) return ctx.status();
  return b;
}

Result<Baseline> load_baseline(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::error(path + ": cannot open the baseline file");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_baseline(ss.str(), path);
}

std::string baseline_yaml(const Scenario& s, const Json& summary, double tolerance_percent) {
  std::ostringstream y;
  y << "# rocemu sim baseline of scenario " << s.name << ". A metric passes while it stays\n"
    << "# within its tolerance of the value: a percentage of it (5%) or an absolute difference (0.5).\n"
    << "scenario: " << s.name << "\nseed: " << s.seed << "\nmetrics:\n";
  for (const std::string& m : baseline_metrics(s, summary)) {
    const Json* v = find_metric(summary, m);
    if (v == nullptr || !(v->is_number() || v->is_boolean())) continue;
    const std::string value = v->is_boolean() ? (v->get<bool>() ? "1" : "0") : v->dump();
    y << "  \"" << m << "\": {value: " << value << ", tolerance: " << format_number(tolerance_percent) << "%}\n";
  }
  return y.str();
}

Verdict compare_baseline(const Baseline& b, const Json& summary) {
  Verdict v;
  for (const BaselineMetric& m : b.metrics) {
    const double allowed = m.relative ? std::fabs(m.value) * m.tolerance : m.tolerance;
    const std::string tol = m.relative ? format_number(m.tolerance * 100) + "%" : format_number(m.tolerance);
    Check c{"baseline " + m.metric, m.metric, "within " + tol + " of " + format_number(m.value),
            metric_value(summary, m.metric), false};
    c.pass = c.measured && std::fabs(*c.measured - m.value) <= allowed;
    v.checks.push_back(std::move(c));
  }
  return v;
}

}  // namespace rocemu::sim
