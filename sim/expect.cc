#include "sim/expect.h"

#include <cmath>
#include <cstdio>

namespace rocemu::sim {

bool Verdict::pass() const { return failures() == 0; }

size_t Verdict::failures() const {
  size_t n = 0;
  for (const Check& c : checks) n += c.pass ? 0 : 1;
  return n;
}

bool holds(Op op, double m, double v, double within_percent) {
  switch (op) {
    case Op::kLt: return m < v;
    case Op::kLe: return m <= v;
    case Op::kGt: return m > v;
    case Op::kGe: return m >= v;
    case Op::kEq: return m == v;
    case Op::kWithin: return std::fabs(m - v) <= std::fabs(v) * within_percent / 100;
  }
  return false;
}

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

Verdict evaluate(const std::vector<Expectation>& expectations, const Json& summary) {
  Verdict v;
  for (const Expectation& e : expectations) {
    Check c{e.name, e.metric, e.text + " " + format_number(e.value), metric_value(summary, e.metric), false};
    c.pass = c.measured && holds(e.op, *c.measured, e.value, e.within_percent);
    v.checks.push_back(std::move(c));
  }
  return v;
}

std::string format_verdict(const std::string& title, const Verdict& v) {
  std::string out;
  for (const Check& c : v.checks) {
    const std::string measured = c.measured ? format_number(*c.measured) : "missing";
    out += std::string(c.pass ? "  PASS  " : "  FAIL  ") + c.name + ": " + c.metric + " = " + measured + " (" +
           c.condition + ")\n";
  }
  out += title + ": " + (v.pass() ? "PASS" : "FAIL") + " (" + std::to_string(v.checks.size() - v.failures()) + " of " +
         std::to_string(v.checks.size()) + " passed)\n";
  return out;
}

}  // namespace rocemu::sim
