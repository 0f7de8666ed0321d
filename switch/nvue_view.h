// One `nv show` as NVUE prints it, built once and printed three ways:
//
//   (default)  a key column with `operational` and `applied` columns (a
//              state-only view, counters, has `operational` alone), nesting
//              by two-space indent, then each table under its title
//              underlined with `=`, its rows indented four spaces; sizes
//              humanised (146.48 KB: NVUE's KB and MB are 1024-based)
//   -o json    the same keys in the same order with plain values (bytes as
//              integers, no operational/applied wrapping); a table is a
//              list of rows keyed by its column names
//   -o yaml    the same as YAML
//
// A view of one table and no keys prints the table alone (no title) and
// is a plain list with -o; several tables and no keys print under their
// titles and are an object of lists.
#pragma once

#include <nlohmann/json.hpp>

#include <deque>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/status.h"

namespace rocemu::sw {

using ojson = nlohmann::ordered_json;

// A value: what -o json gives, and what the table prints when it differs.
struct NvValue {
  ojson plain;
  std::string text;  // empty: printed from `plain`

  NvValue() = default;
  // A plain value prints as itself.
  template <typename T>
    requires(!std::is_same_v<std::decay_t<T>, NvValue> && std::is_constructible_v<ojson, T>)
  NvValue(T&& v) : plain(std::forward<T>(v)) {}  // NOLINT(google-explicit-constructor)
  NvValue(ojson v, std::string t) : plain(std::move(v)), text(std::move(t)) {}
  std::string str() const;
};

// Bytes, humanised as NVUE prints them ("0 Bytes", "9.98 KB", "1.43 MB").
NvValue nv_bytes(uint64_t bytes);
// A set of 0..7 as NVUE lists it ("0,3"; "" when empty), plain a list.
NvValue nv_list(uint8_t mask);

class NvView {
 public:
  enum class Columns { kOperationalApplied, kOperational };
  explicit NvView(Columns c = Columns::kOperationalApplied) : columns_(c) {}

  // Key/value part. group() opens a nested level, end() closes it.
  NvView& group(std::string key);
  NvView& end();
  NvView& field(std::string key, NvValue v);
  // A field whose applied (configured) value differs from what runs: an
  // unset setting shows its operational value alone.
  NvView& field(std::string key, NvValue operational, std::optional<NvValue> applied);

  struct Table {
    std::string title;
    std::vector<std::string> columns;
    std::vector<std::vector<NvValue>> rows;
  };
  // The table stays where it is when others are added.
  Table& table(std::string title, std::vector<std::string> columns);

  // The text NVUE prints, or the plain values.
  std::string text() const;
  ojson plain() const;

  // `format` is "table" (or "auto"), "json" or "yaml".
  std::string render(const std::string& format) const;

 private:
  struct Row {
    int depth;
    std::string key;
    std::optional<NvValue> operational, applied;  // none: a group heading
    bool group = false;
  };
  Columns columns_;
  int depth_ = 0;
  std::vector<Row> rows_;
  std::deque<Table> tables_;  // table() hands out references: they must stay put
};

// Takes `-o json|yaml|auto` out of `words` (anywhere after the command),
// leaving the format ("table" by default) in `format`; an unknown format,
// or `-o` with nothing after it, is an error.
Status take_output_format(std::vector<std::string>& words, std::string& format);

// ojson as YAML text, keys in their order.
std::string yaml_text(const ojson& j);

}  // namespace rocemu::sw
