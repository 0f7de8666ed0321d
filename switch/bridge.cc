#include "switch/bridge.h"

#include <algorithm>

namespace rocemu::sw {

uint64_t MacTable::key(uint16_t vlan, const wire::MacAddr& mac) {
  uint64_t k = vlan;
  for (const uint8_t b : mac.b) k = (k << 8) | b;
  return k;
}

MacTable::Learn MacTable::learn(uint16_t vlan, const wire::MacAddr& mac, const MacPlace& place, Time now,
                                size_t& aged) {
  const uint64_t k = key(vlan, mac);
  auto it = map_.find(k);
  if (it != map_.end() && is_aged(it->second, now)) {  // forgotten: learned afresh
    map_.erase(it);
    it = map_.end();
    aged++;
  }
  if (it != map_.end()) {
    MacEntry& e = it->second;
    e.seen = now;
    if (e.place == place) return Learn::kRefreshed;
    e.place = place;
    e.learned = now;
    return Learn::kMoved;
  }
  if (map_.size() >= capacity_) aged += std::erase_if(map_, [&](const auto& kv) { return is_aged(kv.second, now); });
  if (map_.size() >= capacity_) return Learn::kFull;
  map_.emplace(k, MacEntry{vlan, mac, place, now, now});
  return Learn::kLearned;
}

std::optional<MacPlace> MacTable::lookup(uint16_t vlan, const wire::MacAddr& mac, Time now, bool& aged) {
  aged = false;
  auto it = map_.find(key(vlan, mac));
  if (it == map_.end()) return std::nullopt;
  if (is_aged(it->second, now)) {
    map_.erase(it);
    aged = true;
    return std::nullopt;
  }
  return it->second.place;
}

void MacTable::flush_port(uint16_t port) {
  std::erase_if(map_, [&](const auto& kv) { return !kv.second.place.remote && kv.second.place.port == port; });
}

std::vector<MacEntry> MacTable::entries(Time now) const {
  std::vector<std::pair<uint64_t, MacEntry>> all;
  for (const auto& kv : map_)
    if (!is_aged(kv.second, now)) all.push_back(kv);
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<MacEntry> out;
  out.reserve(all.size());
  for (auto& [k, e] : all) out.push_back(e);
  return out;
}

}  // namespace rocemu::sw
