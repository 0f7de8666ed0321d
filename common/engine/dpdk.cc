#include "common/engine/dpdk.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sched.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "common/log.h"
#include "common/wire/build.h"

namespace rocemu::dpdk {
namespace {

std::mutex g_eal_mutex;
bool g_eal_started = false;
Status g_eal_status;
bool g_telemetry = false;

// "0-3" style list of the CPUs this thread may run on.
std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "0";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &set)) continue;
    int last = c;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) last++;
    if (!out.empty()) out += ',';
    out += std::to_string(c);
    if (last > c) out += "-" + std::to_string(last);
    c = last;
  }
  return out.empty() ? "0" : out;
}

// Where the EAL makes its runtime directory (as eal_create_runtime_dir
// does), so that telemetry, whose socket lives there and whose failure
// fails the whole EAL, is only asked for where it can work.
Status telemetry_possible() {
  const char* dir = std::getenv("RUNTIME_DIRECTORY");
  if (dir == nullptr) dir = getuid() == 0 ? "/var/run" : std::getenv("XDG_RUNTIME_DIR");
  if (dir == nullptr) dir = "/tmp";
  const std::string base = std::string(dir) + "/dpdk";
  if (mkdir(base.c_str(), 0700) != 0 && errno != EEXIST) return Status::error(base + ": " + std::strerror(errno));
  if (access(base.c_str(), W_OK | X_OK) != 0) return Status::error(base + ": " + std::strerror(errno));
  const std::string sock = base + "/" + file_prefix() + "/dpdk_telemetry.v2";
  if (sock.size() >= sizeof(sockaddr_un{}.sun_path)) return Status::error(sock + ": too long for a socket");
  return {};
}

}  // namespace

bool hugepages_available() {
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
    std::ifstream f(d.path() / "free_hugepages");
    uint64_t free_pages = 0;
    if (f >> free_pages && free_pages > 0) return true;
  }
  return false;
}

std::vector<std::string> eal_args(const EalOptions& opts) {
  std::vector<std::string> args = {"rocemu", "--log-level=lib.*:error", "--log-level=pmd.*:error"};
  if (!opts.telemetry) args.push_back("--no-telemetry");
  if (!opts.pci) args.push_back("--no-pci");
  // One lcore (the caller's thread). Pinned only when asked: EAL would
  // otherwise tie the engine, and every thread it starts later, to CPU 0.
  args.push_back(opts.main_cpu >= 0 ? "--lcores=0@" + std::to_string(opts.main_cpu)
                                    : "--lcores=0@(" + allowed_cpus() + ")");
  if (opts.hugepages && hugepages_available()) {
    args.push_back("--in-memory");
  } else {
    args.push_back("--no-huge");
    args.push_back("--no-shconf");
    args.push_back("-m");
    args.push_back(std::to_string(opts.memory_mb));
  }
  args.push_back("--file-prefix=" + file_prefix());
  for (const auto& a : opts.extra_args) args.push_back(a);
  return args;
}

std::string file_prefix() { return "rocemu-" + std::to_string(getpid()); }

std::string telemetry_socket() {
  std::lock_guard lock(g_eal_mutex);
  if (!g_eal_started || !g_eal_status.ok() || !g_telemetry) return "";
  return std::string(rte_eal_get_runtime_dir()) + "/dpdk_telemetry.v2";
}

Status init_eal(const EalOptions& opts) {
  std::lock_guard lock(g_eal_mutex);
  if (g_eal_started) return g_eal_status;
  g_eal_started = true;
  if (opts.hugepages && !hugepages_available())
    logger("engine")->warn("no free hugepages: the EAL starts without them (--no-huge)");
  EalOptions o = opts;
  if (o.telemetry) {
    if (Status s = telemetry_possible(); !s.ok()) {
      logger("engine")->warn("DPDK telemetry is off: {}", s.message());
      o.telemetry = false;
    }
  }
  g_telemetry = o.telemetry;
  std::vector<std::string> args = eal_args(o);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // EAL's getopt use touches the global optind; keep the caller's.
  const int saved_optind = optind;
  const int rc = rte_eal_init(int(args.size()), argv.data());
  optind = saved_optind;
  if (rc < 0) {
    g_eal_status = Status::error(std::string("DPDK EAL failed to start: ") + rte_strerror(rte_errno));
  }
  return g_eal_status;
}

bool eal_running() {
  std::lock_guard lock(g_eal_mutex);
  return g_eal_started && g_eal_status.ok();
}

Result<PacketPool*> PacketPool::create(const std::string& name, uint32_t n_mbufs) {
  if (!eal_running()) return Status::error("packet pool '" + name + "': the DPDK EAL is not running");
  const uint16_t priv = uint16_t(RTE_ALIGN(sizeof(PktMeta), RTE_MBUF_PRIV_ALIGN));
  rte_mempool* mp = rte_pktmbuf_pool_create(name.c_str(), n_mbufs, 256, priv,
                                            RTE_PKTMBUF_HEADROOM + kMaxFrame, SOCKET_ID_ANY);
  if (mp == nullptr)
    return Status::error("packet pool '" + name + "' of " + std::to_string(n_mbufs) +
                         " mbufs: " + rte_strerror(rte_errno));
  return new PacketPool(mp, n_mbufs);
}

PacketPool::~PacketPool() { rte_mempool_free(mp_); }

rte_mbuf* PacketPool::alloc_copy(std::span<const uint8_t> frame) {
  if (frame.size() > kMaxFrame) return nullptr;
  rte_mbuf* m = alloc();
  if (m == nullptr) return nullptr;
  char* p = rte_pktmbuf_append(m, uint16_t(frame.size()));
  std::memcpy(p, frame.data(), frame.size());
  return m;
}

void seal_slow(rte_mbuf* m) {
  wire::seal_icrc(bytes(m));
  meta(m).flags &= uint8_t(~kMetaIcrcPending);
}

uint32_t PacketPool::in_use() const { return rte_mempool_in_use_count(mp_); }

}  // namespace rocemu::dpdk
