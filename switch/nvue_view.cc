#include "switch/nvue_view.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace rocemu::sw {
namespace {

// Columns padded to the widest cell, two spaces apart, no trailing blanks.
std::string line_of(const std::vector<std::string>& cells, const std::vector<size_t>& width, size_t indent) {
  std::string l(indent, ' ');
  for (size_t i = 0; i < cells.size(); i++) {
    std::string c = cells[i];
    if (i + 1 < cells.size()) c.resize(std::max(width[i], c.size()) + 2, ' ');
    l += c;
  }
  while (!l.empty() && l.back() == ' ') l.pop_back();
  return l + "\n";
}

std::string grid(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                 size_t indent) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); i++) {
    width[i] = header[i].size();
    for (const auto& r : rows) width[i] = std::max(width[i], r[i].size());
  }
  std::vector<std::string> dashes;
  for (const size_t w : width) dashes.emplace_back(w, '-');
  std::string out = line_of(header, width, indent) + line_of(dashes, width, indent);
  for (const auto& r : rows) out += line_of(r, width, indent);
  return out;
}

// Might a YAML 1.1 reader (python3-yaml) read this plain scalar as other
// than a string: a boolean or null word, or anything that starts as a
// number, a date or a sexagesimal does ("10:20" is 620 there)?
bool resolves_to_non_string(const std::string& s) {
  if (s.empty()) return true;
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  static const char* const kWords[] = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"};
  for (const char* w : kWords)
    if (l == w) return true;
  const char c = s[0];
  return std::isdigit(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
}

// Numbers and booleans as their types, strings as strings: quoted when
// they would read back as something else.
void emit(YAML::Emitter& e, const ojson& j) {
  if (j.is_object()) {
    e << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      e << YAML::Key;
      emit(e, ojson(k));
      e << YAML::Value;
      emit(e, v);
    }
    e << YAML::EndMap;
  } else if (j.is_array()) {
    if (j.empty() || std::all_of(j.begin(), j.end(), [](const ojson& v) { return v.is_primitive(); })) e << YAML::Flow;
    e << YAML::BeginSeq;
    for (const auto& v : j) emit(e, v);
    e << YAML::EndSeq;
  } else if (j.is_null()) {
    e << YAML::Null;
  } else if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    if (resolves_to_non_string(s)) e << YAML::DoubleQuoted;
    e << s;
  } else if (j.is_boolean()) {
    e << j.get<bool>();
  } else {
    e << j.dump();  // a number: its JSON text is a YAML number
  }
}

}  // namespace

std::string NvValue::str() const {
  if (!text.empty()) return text;
  if (plain.is_string()) return plain.get<std::string>();
  if (plain.is_null()) return "";
  if (plain.is_array()) {
    std::string s;
    for (const auto& v : plain) s += (s.empty() ? "" : ",") + (v.is_string() ? v.get<std::string>() : v.dump());
    return s;
  }
  return plain.dump();
}

NvValue nv_bytes(uint64_t bytes) {
  char buf[32];
  const double b = double(bytes);
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu Bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes < 1024ull * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f KB", b / 1024.0);
  } else if (bytes < 1024ull * 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.2f MB", b / (1024.0 * 1024.0));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GB", b / (1024.0 * 1024.0 * 1024.0));
  }
  return NvValue(bytes, buf);
}

NvValue nv_list(uint8_t mask) {
  ojson l = ojson::array();
  for (int i = 0; i < 8; i++)
    if ((mask >> i) & 1) l.push_back(i);
  NvValue v(l);
  if (l.empty()) v.text = "none";
  return v;
}

NvView& NvView::group(std::string key) {
  rows_.push_back({depth_, std::move(key), std::nullopt, std::nullopt, true});
  depth_++;
  return *this;
}

NvView& NvView::end() {
  if (depth_ > 0) depth_--;
  return *this;
}

NvView& NvView::field(std::string key, NvValue v) {
  NvValue applied = v;
  return field(std::move(key), std::move(v), std::optional<NvValue>(std::move(applied)));
}

NvView& NvView::field(std::string key, NvValue operational, std::optional<NvValue> applied) {
  rows_.push_back({depth_, std::move(key), std::move(operational), std::move(applied), false});
  return *this;
}

NvView::Table& NvView::table(std::string title, std::vector<std::string> columns) {
  tables_.push_back({std::move(title), std::move(columns), {}});
  return tables_.back();
}

std::string NvView::text() const {
  std::string out;
  if (!rows_.empty()) {
    const bool applied = columns_ == Columns::kOperationalApplied;
    std::vector<std::string> header = {"", "operational"};
    if (applied) header.emplace_back("applied");
    std::vector<std::vector<std::string>> rows;
    for (const Row& r : rows_) {
      std::vector<std::string> cells = {std::string(size_t(2 * r.depth), ' ') + r.key,
                                        r.operational ? r.operational->str() : ""};
      if (applied) cells.push_back(r.applied ? r.applied->str() : "");
      rows.push_back(std::move(cells));
    }
    out = grid(header, rows, 0);
  }
  const bool titled = !rows_.empty() || tables_.size() > 1;
  for (const Table& t : tables_) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : t.rows) {
      std::vector<std::string> cells;
      for (const NvValue& v : r) cells.push_back(v.str());
      rows.push_back(std::move(cells));
    }
    if (!titled) {
      out += grid(t.columns, rows, 0);
      continue;
    }
    if (!out.empty()) out += "\n";
    out += t.title + "\n" + std::string(t.title.size(), '=') + "\n";
    out += rows.empty() ? "    No Data\n" : grid(t.columns, rows, 4);
  }
  return out;
}

ojson NvView::plain() const {
  const auto table_json = [](const Table& t) {
    ojson list = ojson::array();
    for (const auto& r : t.rows) {
      ojson o = ojson::object();
      for (size_t i = 0; i < t.columns.size(); i++) o[t.columns[i]] = r[i].plain;
      list.push_back(std::move(o));
    }
    return list;
  };
  if (rows_.empty() && tables_.size() == 1) return table_json(tables_.front());
  ojson root = ojson::object();
  // The object each depth writes into; a group heading opens the next.
  std::vector<ojson*> at = {&root};
  for (const Row& r : rows_) {
    at.resize(size_t(r.depth) + 1);
    ojson& parent = *at.back();
    if (r.group) {
      parent[r.key] = ojson::object();
      at.push_back(&parent[r.key]);
    } else {
      parent[r.key] = r.operational ? r.operational->plain : r.applied->plain;
    }
  }
  for (const Table& t : tables_) root[t.title] = table_json(t);
  return root;
}

std::string NvView::render(const std::string& format) const {
  if (format == "json") return plain().dump(2);
  if (format == "yaml") return yaml_text(plain());
  return text();
}

Status take_output_format(std::vector<std::string>& words, std::string& format) {
  format = "table";
  for (size_t i = 0; i < words.size(); i++) {
    if (words[i] != "-o" && words[i] != "--output") continue;
    if (i + 1 >= words.size() ||
        (words[i + 1] != "json" && words[i + 1] != "yaml" && words[i + 1] != "auto"))
      return Status::error("nv show: " + words[i] + " takes json, yaml or auto" +
                           (i + 1 < words.size() ? ", got '" + words[i + 1] + "'" : std::string()));
    format = words[i + 1] == "auto" ? "table" : words[i + 1];
    words.erase(words.begin() + long(i), words.begin() + long(i) + 2);
    i--;
  }
  return {};
}

std::string yaml_text(const ojson& j) {
  YAML::Emitter e;
  emit(e, j);
  return std::string(e.c_str()) + "\n";
}

}  // namespace rocemu::sw
