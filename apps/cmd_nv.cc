// rocemu nv: the words go to the switch's Switch::nv on the engine thread
// (handle_nv), except `nv config save [FILE]`, which the client writes
// from `nv config show` so that FILE is read in the user's directory.
#include "apps/cmd_nv.h"

#include <cerrno>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/runtime.h"
#include "common/engine/engine.h"
#include "common/private_files.h"
#include "switch/switch.h"

namespace rocemu::app {
namespace {

// The words after `nv`, without `--switch NAME` (given back in `name`).
std::vector<std::string> switch_words(const std::vector<std::string>& w, std::string& name) {
  std::vector<std::string> words(w.begin() + 1, w.end());
  if (words.size() >= 2 && words[0] == "--switch") {
    name = words[1];
    words.erase(words.begin(), words.begin() + 2);
  }
  return words;
}

}  // namespace

int handle_nv(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  std::string name;
  const std::vector<std::string> words = switch_words(w, name);
  sw::Switch* target = nullptr;
  for (const auto& n : engine.nodes()) {
    auto* s = dynamic_cast<sw::Switch*>(n.get());
    if (s == nullptr || (!name.empty() && s->name() != name)) continue;
    if (target != nullptr && name.empty()) {
      out = "several switches: say which with `rocemu nv --switch NAME ...`";
      return EINVAL;
    }
    target = s;
  }
  if (target == nullptr) {
    out = name.empty() ? "this fabric has no switch" : "no switch named '" + name + "'";
    return ENODEV;
  }
  nlohmann::json j;
  const Status s = target->nv(words, &j);
  if (!s.ok()) {
    out = s.message();
    return EINVAL;
  }
  // Text (a diff, a YAML config, a table) is printed as it is.
  out = j.is_null() ? "" : j.is_string() ? j.get<std::string>() : j.dump(2);
  return 0;
}

int cmd_nv(const std::vector<std::string>& w) {
  std::string name;
  const std::vector<std::string> words = switch_words(w, name);
  if (words.size() < 2 || words[0] != "config" || words[1] != "save") return cmd_engine(w);
  if (words.size() > 3) {
    std::fprintf(stderr, "rocemu nv config save: expected at most one FILE, got '%s'\n", words[3].c_str());
    return 2;
  }
  const RuntimePaths paths = runtime_paths();
  const std::string file =
      words.size() == 3 ? words[2] : paths.dir + "/nv-startup" + (name.empty() ? "" : "-" + name) + ".yaml";
  std::vector<std::string> show = {"nv"};
  if (!name.empty()) show.insert(show.end(), {"--switch", name});
  show.insert(show.end(), {"config", "show", "-o", "yaml"});
  std::string yaml;
  if (const int e = engine_command(paths, show, yaml); e != 0) {
    std::fprintf(stderr, "rocemu nv: %s\n", yaml.c_str());
    return e == EINVAL || e == ENODEV ? 2 : 1;
  }
  if (Status s = write_private_file(file, yaml); !s.ok()) {
    std::fprintf(stderr, "rocemu nv config save: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("saved the running configuration to %s\n", file.c_str());
  return 0;
}

}  // namespace rocemu::app
