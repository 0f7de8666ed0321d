#include "common/config/config.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace rocemu::config {
namespace {

// Splits "2.5ms" into 2.5 and "ms".
bool split_number(std::string_view text, double& value, std::string_view& unit) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == 'e' ||
                             (i == 0 && (text[i] == '-' || text[i] == '+'))))
    i++;
  // "1e" followed by a unit letter: back off the 'e' unless digits follow.
  if (i > 0 && text[i - 1] == 'e') i--;
  if (i == 0) return false;
  const std::string num(text.substr(0, i));
  char* end = nullptr;
  value = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(value)) return false;
  unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return true;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<uint64_t> parse_rate(std::string_view text) {
  double v;
  std::string_view unit;
  if (!split_number(text, v, unit) || v <= 0) return std::nullopt;
  std::string u = lower(unit);
  for (const char* suffix : {"bps", "bit/s", "b/s", "bit"}) {
    const std::string s(suffix);
    if (u.size() >= s.size() && u.compare(u.size() - s.size(), s.size(), s) == 0) {
      u.resize(u.size() - s.size());
      break;
    }
  }
  double mult = 1;
  if (u.empty()) mult = 1;
  else if (u == "k") mult = 1e3;
  else if (u == "m") mult = 1e6;
  else if (u == "g") mult = 1e9;
  else if (u == "t") mult = 1e12;
  else return std::nullopt;
  const double bps = v * mult;
  if (bps < 1 || bps > 1e15) return std::nullopt;
  return uint64_t(std::llround(bps));
}

std::optional<Duration> parse_duration(std::string_view text) {
  double v;
  std::string_view unit;
  if (!split_number(text, v, unit) || v < 0) return std::nullopt;
  const std::string u = lower(unit);
  double ps_per = 0;
  if (u.empty() || u == "ns") ps_per = 1e3;
  else if (u == "ps") ps_per = 1;
  else if (u == "us" || u == "µs") ps_per = 1e6;
  else if (u == "ms") ps_per = 1e9;
  else if (u == "s") ps_per = 1e12;
  else return std::nullopt;
  const double p = v * ps_per;
  if (p > 9e18) return std::nullopt;
  return Duration(int64_t(std::llround(p)));
}

std::optional<uint64_t> parse_size(std::string_view text) {
  double v;
  std::string_view unit;
  if (!split_number(text, v, unit) || v < 0) return std::nullopt;
  const std::string u = lower(unit);
  double mult = 0;
  if (u.empty() || u == "b") mult = 1;
  else if (u == "kb") mult = 1e3;
  else if (u == "mb") mult = 1e6;
  else if (u == "gb") mult = 1e9;
  else if (u == "kib") mult = 1024;
  else if (u == "mib") mult = 1024.0 * 1024;
  else if (u == "gib") mult = 1024.0 * 1024 * 1024;
  else return std::nullopt;
  return uint64_t(std::llround(v * mult));
}

std::string format_rate(uint64_t bps) {
  if (bps % 1000000000 == 0) return std::to_string(bps / 1000000000) + "G";
  if (bps % 1000000 == 0) return std::to_string(bps / 1000000) + "M";
  return std::to_string(bps);
}

std::string format_duration(Duration d) {
  const int64_t p = d.count();
  if (p % 1000000000 == 0) return std::to_string(p / 1000000000) + "ms";
  if (p % 1000000 == 0) return std::to_string(p / 1000000) + "us";
  if (p % 1000 == 0) return std::to_string(p / 1000) + "ns";
  return std::to_string(p) + "ps";
}

void Context::error(const YAML::Node& at, std::string_view field, std::string_view message) {
  std::ostringstream os;
  // No file (values from a command line): the field alone.
  if (!file_.empty()) {
    os << file_;
    if (at.IsDefined() && at.Mark().line >= 0) os << ":" << at.Mark().line + 1;
    os << ": ";
  }
  os << prefix_ << field << ": " << message;
  errors_.push_back(os.str());
}

void Context::error(std::string_view field, std::string_view message) {
  errors_.push_back((file_.empty() ? "" : file_ + ": ") + prefix_ + std::string(field) + ": " + std::string(message));
}

Status Context::status() const {
  if (errors_.empty()) return {};
  std::string all;
  for (const auto& e : errors_) {
    if (!all.empty()) all += "\n";
    all += e;
  }
  return Status::error(all);
}

std::optional<std::string> Context::str(const YAML::Node& n, std::string_view field) {
  if (!n.IsScalar()) {
    error(n, field, "expected a string");
    return std::nullopt;
  }
  return n.Scalar();
}

std::optional<int64_t> Context::integer(const YAML::Node& n, std::string_view field, int64_t lo, int64_t hi) {
  if (!n.IsScalar()) {
    error(n, field, "expected an integer");
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  int64_t v = 0;
  int base = 10;
  std::string_view digits = s;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
  if (ec != std::errc() || p != digits.data() + digits.size()) {
    error(n, field, "'" + s + "' is not an integer");
    return std::nullopt;
  }
  if (v < lo || v > hi) {
    error(n, field, std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return std::nullopt;
  }
  return v;
}

std::optional<double> Context::number(const YAML::Node& n, std::string_view field, double lo, double hi) {
  if (!n.IsScalar()) {
    error(n, field, "expected a number");
    return std::nullopt;
  }
  const std::string& s = n.Scalar();
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(v)) {
    error(n, field, "'" + s + "' is not a number");
    return std::nullopt;
  }
  if (v < lo || v > hi) {
    std::ostringstream os;
    os << s << " is out of range [" << lo << ", " << hi << "]";
    error(n, field, os.str());
    return std::nullopt;
  }
  return v;
}

std::optional<bool> Context::boolean(const YAML::Node& n, std::string_view field) {
  if (n.IsScalar()) {
    const std::string s = lower(n.Scalar());
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  error(n, field, "expected true or false");
  return std::nullopt;
}

std::optional<uint64_t> Context::rate(const YAML::Node& n, std::string_view field) {
  if (n.IsScalar())
    if (auto r = parse_rate(n.Scalar())) return r;
  error(n, field, "'" + (n.IsScalar() ? n.Scalar() : std::string("?")) + "' is not a rate (e.g. 100G, 25Gbps)");
  return std::nullopt;
}

std::optional<Duration> Context::duration(const YAML::Node& n, std::string_view field) {
  if (n.IsScalar())
    if (auto d = parse_duration(n.Scalar())) return d;
  error(n, field, "'" + (n.IsScalar() ? n.Scalar() : std::string("?")) + "' is not a duration (e.g. 1us, 500ns)");
  return std::nullopt;
}

std::optional<uint64_t> Context::size(const YAML::Node& n, std::string_view field) {
  if (n.IsScalar())
    if (auto s = parse_size(n.Scalar())) return s;
  error(n, field, "'" + (n.IsScalar() ? n.Scalar() : std::string("?")) + "' is not a size (e.g. 9216, 150KB, 32MiB)");
  return std::nullopt;
}

std::optional<std::string> Context::choice(const YAML::Node& n, std::string_view field,
                                           std::initializer_list<std::string_view> choices) {
  auto s = str(n, field);
  if (!s) return std::nullopt;
  for (auto c : choices)
    if (*s == c) return s;
  std::string list;
  for (auto c : choices) list += (list.empty() ? "" : ", ") + std::string(c);
  error(n, field, "'" + *s + "' is not one of: " + list);
  return std::nullopt;
}

void Context::check_keys(const YAML::Node& n, std::string_view field, std::initializer_list<std::string_view> known) {
  check_keys(n, field, std::span<const std::string_view>(known.begin(), known.size()));
}

void Context::check_keys(const YAML::Node& n, std::string_view field, std::span<const std::string_view> known) {
  if (!n.IsMap()) return;
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    bool found = false;
    for (auto k : known) found = found || key == k;
    if (!found) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      error(kv.first, std::string(field) + (field.empty() ? "" : ".") + key, "unknown field (known: " + list + ")");
    }
  }
}

}  // namespace rocemu::config
