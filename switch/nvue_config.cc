// NVUE's revisions on a running switch: `nv set`/`nv unset` edit a pending
// copy of the configuration, `nv config diff` shows what it changes, `nv
// config apply` validates it whole and makes it the running one (on the
// engine thread, between bursts: queued packets stay queued), `nv config
// show` prints the running one as a topology's switch section, `nv config
// detach` drops the pending changes.
#include <algorithm>
#include <functional>

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

namespace {

// A three-way merge of one setting: the running value (`now`) where the
// pending copy left it as it was when staging began (`was`), the staged
// value where the pending copy changed it.
template <class T, class Eq = std::equal_to<>>
void merge(T& staged, const T& was, const T& now, Eq same = {}) {
  if (same(staged, was)) staged = now;
}

// What a drop rule matches and how often, not its counters.
bool same_rule(const DropRule& a, const DropRule& b) {
  return a.qpn == b.qpn && a.psn == b.psn && a.opcode == b.opcode && a.every_nth == b.every_nth &&
         a.times == b.times;
}
bool same_drop(const std::vector<DropRule>& a, const std::vector<DropRule>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), same_rule);
}
bool same_burst(const std::optional<GilbertElliott>& a, const std::optional<GilbertElliott>& b) {
  if (!a || !b) return a.has_value() == b.has_value();
  return a->p_good_to_bad == b->p_good_to_bad && a->p_bad_to_good == b->p_bad_to_good &&
         a->loss_good == b->loss_good && a->loss_bad == b->loss_bad;
}
bool same_address(const std::optional<IpPrefix>& a, const std::optional<IpPrefix>& b) {
  if (!a || !b) return a.has_value() == b.has_value();
  return a->str() == b->str();
}

void merge_faults(FaultConfig& staged, const FaultConfig& was, const FaultConfig& now) {
  merge(staged.loss, was.loss, now.loss);
  merge(staged.loss_correlation, was.loss_correlation, now.loss_correlation);
  merge(staged.burst, was.burst, now.burst, same_burst);
  merge(staged.drop, was.drop, now.drop, same_drop);
  merge(staged.corrupt, was.corrupt, now.corrupt);
  merge(staged.corrupt_correlation, was.corrupt_correlation, now.corrupt_correlation);
  merge(staged.delay, was.delay, now.delay);
  merge(staged.jitter, was.jitter, now.jitter);
  merge(staged.delay_correlation, was.delay_correlation, now.delay_correlation);
  merge(staged.reorder, was.reorder, now.reorder);
  merge(staged.reorder_correlation, was.reorder_correlation, now.reorder_correlation);
  merge(staged.reorder_gap, was.reorder_gap, now.reorder_gap);
  merge(staged.reorder_delay, was.reorder_delay, now.reorder_delay);
  merge(staged.duplicate, was.duplicate, now.duplicate);
  merge(staged.duplicate_correlation, was.duplicate_correlation, now.duplicate_correlation);
  merge(staged.link_down, was.link_down, now.link_down);
  merge(staged.rate_bps, was.rate_bps, now.rate_bps);
}

void merge_storm(PfcStorm& staged, const PfcStorm& was, const PfcStorm& now) {
  merge(staged.enable, was.enable, now.enable);
  merge(staged.priorities, was.priorities, now.priorities);
  merge(staged.quanta, was.quanta, now.quanta);
  merge(staged.interval, was.interval, now.interval);
}

void merge_interface(InterfaceConfig& staged, const InterfaceConfig& was, const InterfaceConfig& now) {
  merge(staged.name, was.name, now.name);
  merge(staged.mac, was.mac, now.mac);
  merge(staged.address, was.address, now.address, same_address);
  merge(staged.speed, was.speed, now.speed);
  merge(staged.mtu, was.mtu, now.mtu);
  merge(staged.cable_length, was.cable_length, now.cable_length);
  merge(staged.pfc_watchdog, was.pfc_watchdog, now.pfc_watchdog);
  merge(staged.access, was.access, now.access);
  merge_faults(staged.faults, was.faults, now.faults);
  merge_storm(staged.pfc_storm, was.pfc_storm, now.pfc_storm);
}

}  // namespace

void Switch::rebase_pending(const SwitchConfig& before) {
  SwitchConfig& mine = *pending_;
  // Per interface, per setting: what the pending copy did not change itself
  // follows the running config (a rocemu fault change, a scenario's fault).
  for (uint16_t i = 0; i < cfg_.interfaces.size(); i++)
    merge_interface(mine.interfaces[i], before.interfaces[i], cfg_.interfaces[i]);
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
