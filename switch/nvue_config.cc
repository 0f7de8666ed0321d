// NVUE's revisions on a running switch: `nv set`/`nv unset` edit a pending
// copy of the configuration, `nv config diff` shows what it changes, `nv
// config apply` validates it whole and makes it the running one (on the
// engine thread, between bursts: queued packets stay queued), `nv config
// show` prints the running one as a topology's switch section, `nv config
// detach` drops the pending changes.
#include "switch/nvue.h"
#include "switch/nvue_yaml.h"
#include "switch/switch.h"

namespace rocemu::sw {

Status Switch::nv_stage(const std::vector<std::string>& words) {
  SwitchConfig next = pending_ ? *pending_ : cfg_;
  if (Status s = nv_edit(next, words); !s.ok()) return s;  // the pending copy is kept as it was
  pending_ = std::move(next);
  return {};
}

void Switch::rebase_pending(const SwitchConfig& before) {
  SwitchConfig& mine = *pending_;
  // Per interface: whole if the pending copy left it as it was, else its
  // faults and storm each (what rocemu fault changes) if left as they were.
  for (uint16_t i = 0; i < cfg_.interfaces.size(); i++) {
    const InterfaceConfig& was = before.interfaces[i];
    const InterfaceConfig& now = cfg_.interfaces[i];
    InterfaceConfig& staged = mine.interfaces[i];
    if (interface_text(staged, i) == interface_text(was, i)) {
      staged = now;
      continue;
    }
    if (faults_text(staged.faults) == faults_text(was.faults)) staged.faults = now.faults;
    if (storm_text(staged.pfc_storm) == storm_text(was.pfc_storm)) staged.pfc_storm = now.pfc_storm;
  }
  // Everything else as one: taken if the pending copy left it as it was.
  const auto rest = [&](SwitchConfig c) {
    c.interfaces = before.interfaces;
    return switch_config_text(c);
  };
  if (rest(mine) == rest(before)) {
    std::vector<InterfaceConfig> interfaces = std::move(mine.interfaces);
    mine = cfg_;
    mine.interfaces = std::move(interfaces);
  }
  // Nothing left to apply: nothing staged.
  if (switch_config_text(mine) == switch_config_text(cfg_)) pending_.reset();
}

Status Switch::nv_config(const std::vector<std::string>& words, nlohmann::json* out) {
  const auto at = [&](size_t i) { return i < words.size() ? words[i] : std::string(); };
  const std::string what = at(1);
  const auto reply = [&](std::string text) {
    if (out != nullptr) *out = std::move(text);
    return Status{};
  };
  // Only the output forms each command has; anything else is refused.
  const auto only = [&](size_t from, std::initializer_list<const char*> allowed) -> Status {
    for (size_t i = from; i < words.size(); i++) {
      bool ok = false;
      for (const char* a : allowed) ok |= words[i] == a;
      if (!ok) return Status::error("nv config " + what + ": unexpected '" + words[i] + "'");
    }
    return {};
  };
  if (what == "diff") {
    if (Status s = only(2, {"-o", "yaml"}); !s.ok()) return s;
    return reply(pending_ ? switch_config_diff(cfg_, *pending_) : std::string());
  }
  if (what == "apply") {
    if (Status s = only(2, {"-y", "--assume-yes"}); !s.ok()) return s;
    if (!pending_) return reply("no pending changes");
    if (Status s = apply_running(*pending_); !s.ok())
      return Status::error("nv config apply: " + s.message() +
                           "; nothing was applied (the pending changes are kept: nv config diff)");
    pending_.reset();
    return reply("applied");
  }
  if (what == "show") {
    if (Status s = only(2, {"-o", "yaml"}); !s.ok()) return s;
    return reply(switch_config_text(cfg_));
  }
  if (what == "detach") {
    if (Status s = only(2, {}); !s.ok()) return s;
    const bool had = pending_.has_value();
    pending_.reset();
    return reply(had ? "pending changes dropped" : "no pending changes");
  }
  return Status::error("nv config: expected diff, apply, show, save or detach" +
                       (what.empty() ? std::string() : ", got '" + what + "'"));
}

}  // namespace rocemu::sw
