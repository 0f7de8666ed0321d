// The rest of libibverbs' public exports: strings, rate conversions, fork
// support, sysfs helpers, and the calls this device does not support
// (returning the errno a provider without the feature gives). Every public
// symbol is defined here or beside its object, so no call reaches the real
// libibverbs with an emulated object.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "nic/verbs/device_attrs.h"
#include "nic/verbs/provider/provider.h"
#include "nic/wc_status.h"

using namespace rocemu;

namespace {

struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},       {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},     {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},    {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, 5, 14062},     {IBV_RATE_56_GBPS, 22, 56250},    {IBV_RATE_112_GBPS, 45, 112500},
    {IBV_RATE_168_GBPS, 67, 168750},  {IBV_RATE_25_GBPS, 10, 25781},    {IBV_RATE_100_GBPS, 40, 103125},
    {IBV_RATE_200_GBPS, 80, 206250},  {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000}, {IBV_RATE_600_GBPS, 240, 637500},
    {IBV_RATE_800_GBPS, 320, 850000}, {IBV_RATE_1200_GBPS, 480, 1275000},
};

}  // namespace

extern "C" {

const char* ibv_wc_status_str(enum ibv_wc_status status) { return rocemu::nic::wc_status_name(status); }

const char* ibv_event_type_str(enum ibv_event_type event) {
  static const char* const kNames[] = {
      "CQ error", "local work queue catastrophic error", "invalid request local work queue error",
      "local access violation work queue error", "communication established", "send queue drained",
      "path migrated", "path migration request error", "local catastrophic error", "port active", "port error",
      "LID change", "P_Key change", "SM change", "SRQ catastrophic error", "SRQ limit reached",
      "last WQE reached", "client reregistration", "GID table change", "WQ fatal"};
  return unsigned(event) < sizeof kNames / sizeof kNames[0] ? kNames[event] : "unknown";
}

const char* ibv_node_type_str(enum ibv_node_type node_type) {
  switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* ibv_port_state_str(enum ibv_port_state port_state) {
  static const char* const kNames[] = {"PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE",
                                       "PORT_ACTIVE_DEFER"};
  return unsigned(port_state) < 6 ? kNames[port_state] : "unknown";
}

int ibv_rate_to_mult(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mult;
  return 0;
}

enum ibv_rate mult_to_ibv_rate(int mult) {
  for (const auto& r : kRates)
    if (r.mult == mult) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(enum ibv_rate rate) {
  for (const auto& r : kRates)
    if (r.rate == rate) return r.mbps;
  return 0;
}

enum ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const auto& r : kRates)
    if (r.mbps == mbps) return r.rate;
  return IBV_RATE_MAX;
}

int ibv_fork_init(void) { return 0; }
enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

const char* ibv_get_sysfs_path(void) { return "/sys"; }

// Read from sysfs as libibverbs does; `rocemu exec` lays out the device's
// tree (apps/device_files.h). Where it could not (no mount namespace
// without root), the few files tools read are answered here.
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr || buf == nullptr || size == 0) return -1;
  char path[512];
  std::snprintf(path, sizeof path, "%s/%s", dir, file);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (std::strstr(dir, verbs::kDeviceName) == nullptr) return -1;
    const char* v = nullptr;
    if (std::strcmp(file, "board_id") == 0) v = verbs::kBoardId;
    else if (std::strcmp(file, "node_type") == 0) v = "1: CA";
    else if (std::strcmp(file, "fw_ver") == 0) v = verbs::kFwVer;
    if (v == nullptr) return -1;
    const int n = std::snprintf(buf, size, "%s", v);
    return n < int(size) ? n : int(size) - 1;
  }
  ssize_t n = read(fd, buf, size);
  close(fd);
  if (n <= 0) return -1;
  if (size_t(n) == size) n--;
  buf[n] = '\0';
  if (n > 0 && buf[n - 1] == '\n') buf[--n] = '\0';
  return int(n);
}

void ibv_register_driver(const char*, void*) {}

int ibv_resolve_eth_l2_from_gid(ibv_context*, ibv_ah_attr*, uint8_t[6], uint16_t*) { return EOPNOTSUPP; }

// No device memory (max_dm_size 0): none to import.
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_dm(ibv_dm*) {}

int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

}  // extern "C"
