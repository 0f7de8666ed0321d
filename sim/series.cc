#include "sim/series.h"

#include <cmath>
#include <cstdio>

namespace rocemu::sim {
namespace {

void append_fixed(std::string& out, double v, int decimals) {
  char buf[64];
  const double f = std::pow(10.0, decimals);
  double r = std::round(v * f) / f;
  if (r == 0) r = 0;  // no "-0.000"
  std::snprintf(buf, sizeof buf, "%.*f", decimals, r);
  out += buf;
}

}  // namespace

std::string to_csv(const Series& s) {
  std::string out = "time_us";
  for (const Column& c : s.columns) out += "," + c.name();
  out += "\n";
  for (size_t row = 0; row < s.time_us.size(); row++) {
    append_fixed(out, s.time_us[row], 3);
    for (const Column& c : s.columns) {
      out += ",";
      append_fixed(out, c.at(row), c.decimals());
    }
    out += "\n";
  }
  return out;
}

}  // namespace rocemu::sim
