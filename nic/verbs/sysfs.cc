#include "nic/verbs/sysfs.h"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/counters.h"
#include "nic/verbs/device_attrs.h"
#include "nic/verbs/server.h"

namespace rocemu::verbs {
namespace {

std::string guid_text(uint64_t g) {
  char b[24];
  std::snprintf(b, sizeof b, "%04x:%04x:%04x:%04x", unsigned(g >> 48) & 0xffff, unsigned(g >> 32) & 0xffff,
                unsigned(g >> 16) & 0xffff, unsigned(g) & 0xffff);
  return b;
}

std::string gid_text(const uint8_t* raw) {
  std::string s;
  char b[8];
  for (int i = 0; i < 16; i += 2) {
    std::snprintf(b, sizeof b, "%s%02x%02x", i == 0 ? "" : ":", raw[i], raw[i + 1]);
    s += b;
  }
  return s;
}

// The CPUs the device is close to: all of them (local_cpus is a hex mask
// in 32-bit groups separated by commas, most significant first).
std::string local_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_CONF);
  const int cpus = n > 0 ? int(n) : 1;
  std::string out;
  for (int group = (cpus - 1) / 32; group >= 0; group--) {
    const int in_group = std::min(32, cpus - group * 32);
    const uint32_t mask = in_group == 32 ? 0xffffffffu : (1u << in_group) - 1;
    char b[12];
    std::snprintf(b, sizeof b, "%s%08x", out.empty() ? "" : ",", mask);
    out += b;
  }
  return out;
}

uint64_t counter(const CounterList& c, const char* name) {
  for (const auto& [n, v] : c)
    if (n == name) return v;
  return 0;
}

// ports/1/counters: the IB port (PMA) counters mlx5 also shows for a RoCE
// port, from the NIC's own. The data counters are in 4-byte words.
CounterList port_counters(const CounterList& c) {
  return {
      {"port_xmit_data", counter(c, "tx_roce_bytes") / 4},
      {"port_rcv_data", counter(c, "rx_roce_bytes") / 4},
      {"port_xmit_packets", counter(c, "tx_roce_packets")},
      {"port_rcv_packets", counter(c, "rx_roce_packets")},
      {"unicast_xmit_packets", counter(c, "tx_roce_packets")},
      {"unicast_rcv_packets", counter(c, "rx_roce_packets")},
      {"multicast_xmit_packets", 0},  // no multicast
      {"multicast_rcv_packets", 0},
      {"port_rcv_errors", counter(c, "rx_icrc_error") + counter(c, "rx_malformed")},
      {"port_xmit_discards", counter(c, "tx_no_mbuf")},
      {"symbol_error", 0},  // no physical layer
      {"link_downed", 0},
      {"link_error_recovery", 0},
      {"local_link_integrity_errors", 0},
      {"excessive_buffer_overrun_errors", 0},
      {"VL15_dropped", 0},
  };
}

}  // namespace

std::string netdev_name(const std::string& node) { return ("rocemu-" + node).substr(0, 15); }

std::vector<SysfsFile> sysfs_tree(const std::string& node, const DeviceInfo& dev, const PortInfo& port,
                                  const CounterList& counters) {
  std::vector<SysfsFile> files;
  const std::string ib = std::string(kSysfsIbRoot) + "/" + kDeviceName;
  const std::string p1 = ib + "/ports/1";
  auto file = [&](const std::string& path, const std::string& text) {
    files.push_back({SysfsFile::Kind::kFile, path, text + "\n"});
  };
  const bool active = port.state == IBV_PORT_ACTIVE;
  file(p1 + "/state", active ? "4: ACTIVE" : "1: DOWN");
  file(p1 + "/phys_state", active ? "5: LinkUp" : "3: Disabled");
  file(p1 + "/rate", rate_text(port.rate_bps));
  for (const auto& [name, value] : counters) file(p1 + "/hw_counters/" + name, std::to_string(value));
  for (const auto& [name, value] : port_counters(counters)) file(p1 + "/counters/" + name, std::to_string(value));
  file(ib + "/node_type", "1: CA");
  file(ib + "/node_guid", guid_text(dev.node_guid));
  file(ib + "/sys_image_guid", guid_text(dev.node_guid));
  file(ib + "/node_desc", node + " " + kDeviceName);
  file(ib + "/fw_ver", kFwVer);
  file(ib + "/hw_rev", std::to_string(kHwVer));
  file(ib + "/hca_type", kHcaType);
  file(ib + "/board_id", kBoardId);
  // No PCI device behind it: NUMA_NO_NODE, as the kernel shows for one.
  file(ib + "/device/numa_node", "-1");
  file(ib + "/device/local_cpus", local_cpus());
  file(p1 + "/link_layer", "Ethernet");
  file(p1 + "/lid", "0x0");
  file(p1 + "/sm_lid", "0x0");
  file(p1 + "/lid_mask_count", "0");
  file(p1 + "/sm_sl", "0");
  char cap[16];
  std::snprintf(cap, sizeof cap, "0x%08x", unsigned(IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS));
  file(p1 + "/cap_mask", cap);
  file(p1 + "/pkeys/0", "0xffff");
  for (int i = 0; i < dev.num_gids && i < kMaxGids; i++) {
    const std::string n = std::to_string(i);
    file(p1 + "/gids/" + n, gid_text(dev.gids[i].raw));
    file(p1 + "/gid_attrs/types/" + n, dev.gids[i].type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
    file(p1 + "/gid_attrs/ndevs/" + n, netdev_name(node));
  }
  const std::string uv = std::string(kSysfsVerbsRoot) + "/" + kUverbsName;
  file(std::string(kSysfsVerbsRoot) + "/abi_version", "6");
  file(uv + "/ibdev", kDeviceName);
  file(uv + "/abi_version", "1");
  const std::string devno = std::to_string(kUverbsMajor) + ":" + std::to_string(kUverbsMinor);
  file(uv + "/dev", devno);
  files.push_back({SysfsFile::Kind::kCharDevice, std::string(kDevIbRoot) + "/" + kUverbsName, devno});
  // The rdma_cm device: the provider answers its open() (provider/ucma.cc),
  // so a plain file marks the place; no device number is made for it.
  files.push_back({SysfsFile::Kind::kFile, std::string(kDevIbRoot) + "/" + kRdmaCmName, ""});
  return files;
}

std::vector<SysfsFile> nic_sysfs(const nic::Nic& n) {
  struct Own final : CounterSink {
    std::string_view scope;
    CounterList list;
    explicit Own(std::string_view sc) : scope(sc) {}
    void counter(std::string_view sc, std::string_view name, uint64_t value) override {
      if (sc == scope) list.emplace_back(std::string(name), value);
    }
  } own(n.name());
  n.report_counters(own);
  return sysfs_tree(n.name(), device_info(n), port_info(n), own.list);
}

}  // namespace rocemu::verbs
