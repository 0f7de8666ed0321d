// Time series sampled during a run, written as CSV: one file per series,
// a time column (microseconds since the scenario's time 0) and one column
// per quantity, each with a fixed number of decimals so the bytes repeat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rocemu::sim {

// A column that stays empty (reads 0) until its first nonzero value, so
// the runner can watch thousands of queues and keep the ones that moved.
class Column {
 public:
  Column(std::string name, int decimals) : name_(std::move(name)), decimals_(decimals) {}
  // Called once per row, in order.
  void set(size_t row, double v) {
    if (first_ == kNone) {
      if (v == 0) return;
      first_ = row;
    }
    values_.push_back(v);
  }
  double at(size_t row) const { return first_ == kNone || row < first_ ? 0 : values_[row - first_]; }
  bool moved() const { return first_ != kNone; }
  const std::string& name() const { return name_; }
  int decimals() const { return decimals_; }

 private:
  static constexpr size_t kNone = ~size_t(0);
  std::string name_;
  int decimals_;
  size_t first_ = kNone;
  std::vector<double> values_;
};

struct Series {
  std::string name;  // file stem: "flows" -> flows.csv
  std::vector<double> time_us;
  std::vector<Column> columns;
};

std::string to_csv(const Series& s);

}  // namespace rocemu::sim
