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
    if (Status s = apply(*pending_); !s.ok())
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
