// The sysfs tree of an emulated NIC (see sysfs_tree.h), built from what
// the provider reports (DeviceInfo, PortInfo) and the NIC's counters.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nic/nic.h"
#include "nic/verbs/protocol.h"
#include "nic/verbs/sysfs_tree.h"

namespace rocemu::verbs {

using CounterList = std::vector<std::pair<std::string, uint64_t>>;

// `node` names the netdev the GIDs belong to (gid_attrs/ndevs).
std::vector<SysfsFile> sysfs_tree(const std::string& node, const DeviceInfo& dev, const PortInfo& port,
                                  const CounterList& counters);

// The tree of `n`, with its counters as they are now; engine thread.
std::vector<SysfsFile> nic_sysfs(const nic::Nic& n);

// The netdev name the tree gives the NIC: "rocemu-NODE", cut to IFNAMSIZ - 1.
std::string netdev_name(const std::string& node);

}  // namespace rocemu::verbs
