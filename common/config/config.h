// Reading YAML configuration (topology and scenario files) with errors that
// name the file, line and field. A file is validated whole: every error is
// collected and nothing is applied unless there are none.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu::config {

// An Ethernet MTU, for a link and a switch interface alike: IPv4's
// minimum to a jumbo frame.
inline constexpr int64_t kMinMtu = 68;
inline constexpr int64_t kMaxMtu = 9216;

// Parses "100G", "25Gbps", "10gbit", "400M", "10000000" (bit/s).
std::optional<uint64_t> parse_rate(std::string_view text);
// Parses "1us", "500ns", "2.5ms", "1s", "300ps" (no unit = ns).
std::optional<Duration> parse_duration(std::string_view text);
// Parses "150KB", "1.5MB", "32MiB", "9216" (bytes; KB = 1000, KiB = 1024).
std::optional<uint64_t> parse_size(std::string_view text);
std::string format_rate(uint64_t bps);
std::string format_duration(Duration d);

class Context {
 public:
  explicit Context(std::string file) : file_(std::move(file)) {}

  // Fields named from here on start with `prefix` (e.g. "topology." while
  // a scenario file reads its inline topology); returns the previous one.
  std::string set_prefix(std::string prefix) { return std::exchange(prefix_, std::move(prefix)); }

  // Records "file:line: field: message".
  void error(const YAML::Node& at, std::string_view field, std::string_view message);
  void error(std::string_view field, std::string_view message);  // no line
  bool ok() const { return errors_.empty(); }
  size_t error_count() const { return errors_.size(); }
  // All errors, one per line; or ok.
  Status status() const;
  const std::string& file() const { return file_; }

  // Typed readers: return the value, or record an error and return nullopt.
  // `field` is the full path used in messages (e.g. "links[0].rate").
  std::optional<std::string> str(const YAML::Node& n, std::string_view field);
  std::optional<int64_t> integer(const YAML::Node& n, std::string_view field, int64_t lo, int64_t hi);
  std::optional<double> number(const YAML::Node& n, std::string_view field, double lo, double hi);
  std::optional<bool> boolean(const YAML::Node& n, std::string_view field);
  std::optional<uint64_t> rate(const YAML::Node& n, std::string_view field);
  std::optional<Duration> duration(const YAML::Node& n, std::string_view field);
  std::optional<uint64_t> size(const YAML::Node& n, std::string_view field);
  // One of `choices`.
  std::optional<std::string> choice(const YAML::Node& n, std::string_view field,
                                    std::initializer_list<std::string_view> choices);
  // Records an error for each key of map `n` not in `known`.
  void check_keys(const YAML::Node& n, std::string_view field, std::initializer_list<std::string_view> known);
  void check_keys(const YAML::Node& n, std::string_view field, std::span<const std::string_view> known);

 private:
  std::string file_;
  std::string prefix_;
  std::vector<std::string> errors_;
};

}  // namespace rocemu::config
