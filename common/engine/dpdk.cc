#include "common/engine/dpdk.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_log.h>
#include <rte_mbuf_dyn.h>
#include <rte_mbuf_pool_ops.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "common/engine/lazy_payload.h"
#include "common/log.h"
#include "common/wire/build.h"

namespace rocemu::dpdk {
namespace {

std::mutex g_eal_mutex;
bool g_eal_started = false;
Status g_eal_status;
bool g_telemetry = false;

// Every packet pool, for materialize_from().
std::mutex g_pools_mutex;
std::vector<rte_mempool*> g_pools;

// Where a lazy frame's payload is: in the last bytes of its data room,
// which a lazy frame (at most a 4096-byte payload behind its headers)
// never reaches.
struct LazyNote {
  const uint8_t* src;
  uint32_t at;   // from buf_addr
  uint32_t len;
};
LazyNote& lazy_note(rte_mbuf* m) {
  return *reinterpret_cast<LazyNote*>(static_cast<uint8_t*>(m->buf_addr) + m->buf_len - sizeof(LazyNote));
}
uint64_t g_lazy_made = 0, g_lazy_materialized = 0, g_lazy_walks = 0;

void register_lazy_flag() {
  static std::once_flag once;
  std::call_once(once, [] {
    static const rte_mbuf_dynflag desc = {"rocemu_lazy_payload", 0};
    const int bit = rte_mbuf_dynflag_register(&desc);
    if (bit >= 0) g_lazy_payload_flag = 1ull << bit;
    else logger("engine")->warn("no mbuf flag for frames that point at the sender's memory: two copies per byte");
  });
}

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

// DPDK places a pool's buffers one after the other from the start of a
// chunk, aligned to a cache line, and never across a page boundary where
// a buffer fits in a page (rte_mempool_op_populate_helper).
size_t PacketPool::zone_bytes(uint32_t n, size_t elt, size_t page) {
  const size_t whole = elt <= page ? (n + page / elt - 1) / (page / elt) * page : size_t(n) * elt;
  // Chunks are cut at page boundaries; where a buffer is larger than a
  // page, the one across each cut is lost.
  return RTE_ALIGN_CEIL(whole + kMaxChunks * (elt + RTE_CACHE_LINE_SIZE), page);
}

size_t PacketPool::chunk_bytes(uint32_t made, uint32_t n, size_t elt, size_t page) {
  const uint32_t want = std::min(std::max(kFirstChunk, made), n - made);
  return RTE_ALIGN_CEIL(size_t(want) * elt, page);
}

Result<PacketPool*> PacketPool::create(const std::string& name, uint32_t n_mbufs) {
  if (!eal_running()) return Status::error("packet pool '" + name + "': the DPDK EAL is not running");
  const auto failed = [&](const std::string& what) {
    return Status::error("packet pool '" + name + "' of " + std::to_string(n_mbufs) + " mbufs: " + what);
  };
  const uint16_t priv = uint16_t(RTE_ALIGN(sizeof(PktMeta), RTE_MBUF_PRIV_ALIGN));
  const uint16_t data_room = RTE_PKTMBUF_HEADROOM + kMaxFrame;
  // As rte_pktmbuf_pool_create() does, without populating.
  rte_mempool* mp = rte_mempool_create_empty(name.c_str(), n_mbufs, sizeof(rte_mbuf) + priv + data_room, 256,
                                             sizeof(rte_pktmbuf_pool_private), SOCKET_ID_ANY, 0);
  if (mp == nullptr) return failed(std::string("the pool: ") + rte_strerror(rte_errno));
  if (int rc = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), nullptr); rc != 0) {
    rte_mempool_free(mp);
    return failed(std::string("its ops: ") + rte_strerror(-rc));
  }
  rte_pktmbuf_pool_private init{};
  init.mbuf_data_room_size = data_room;
  init.mbuf_priv_size = priv;
  rte_pktmbuf_pool_init(mp, &init);
  // One IOVA-contiguous zone, in the pages DPDK would use (hugepages, if
  // the EAL has them), for every buffer.
  size_t page = 0;
  if (int rc = rte_mempool_get_page_size(mp, &page); rc < 0 || page == 0) {
    rte_mempool_free(mp);
    return failed("no page size");
  }
  const size_t elt = size_t(mp->header_size) + mp->elt_size + mp->trailer_size;
  const rte_memzone* mz = rte_memzone_reserve_aligned(("mz-" + name).c_str(), zone_bytes(n_mbufs, elt, page),
                                                      SOCKET_ID_ANY, RTE_MEMZONE_IOVA_CONTIG, page);
  if (mz == nullptr) {
    // No contiguous zone that large (hugepages in physical-address mode):
    // every buffer made now, wherever the EAL finds room.
    if (rte_mempool_populate_default(mp) < 0) {
      rte_mempool_free(mp);
      return failed("its buffers: " + std::string(rte_strerror(rte_errno)));
    }
    rte_mempool_obj_iter(mp, rte_pktmbuf_init, nullptr);
    register_lazy_flag();
    {
      std::lock_guard lock(g_pools_mutex);
      g_pools.push_back(mp);
    }
    return new PacketPool(mp, nullptr, n_mbufs, page);
  }
  auto* pool = new PacketPool(mp, mz, n_mbufs, page);
  register_lazy_flag();
  {
    std::lock_guard lock(g_pools_mutex);
    g_pools.push_back(mp);
  }
  if (!pool->grow()) {
    delete pool;
    return failed("its first buffers could not be made");
  }
  return pool;
}

PacketPool::~PacketPool() {
  {
    std::lock_guard lock(g_pools_mutex);
    std::erase(g_pools, mp_);
  }
  rte_mempool_free(mp_);
  if (mz_ != nullptr) rte_memzone_free(mz_);
}

rte_mbuf* PacketPool::alloc_after_growing() {
  return grow() ? rte_pktmbuf_alloc(mp_) : nullptr;
}

bool PacketPool::grow() {
  if (!can_grow()) return false;
  const size_t elt = size_t(mp_->header_size) + mp_->elt_size + mp_->trailer_size;
  uint32_t made = mp_->populated_size;
  const size_t len = std::min(chunk_bytes(made, mp_->size, elt, page_), mz_->len - used_bytes_);
  char* addr = static_cast<char*>(mz_->addr) + used_bytes_;
  const rte_iova_t iova = mz_->iova == RTE_BAD_IOVA ? RTE_BAD_IOVA : mz_->iova + used_bytes_;
  const int added = len == 0 ? 0 : rte_mempool_populate_iova(mp_, addr, iova, len, nullptr, nullptr);
  if (added <= 0) {
    // Never again: an allocation that finds the pool empty fails at once.
    grow_failed_ = true;
    logger("engine")->error("packet pool {}: only {} of {} buffers could be made ({})", mp_->name, made, mp_->size,
                            added < 0 ? rte_strerror(-added) : "no room left in its zone");
    return false;
  }
  used_bytes_ += len;
  // The new buffers (the pool lists its objects in the order they were
  // made) are initialised as rte_pktmbuf_pool_create() does. They are in
  // the pool already, but only this thread allocates from it while it grows.
  rte_mempool_obj_iter(
      mp_,
      [](rte_mempool* mp, void* first, void* obj, unsigned index) {
        if (index >= *static_cast<uint32_t*>(first)) rte_pktmbuf_init(mp, nullptr, obj, index);
      },
      &made);
  return true;
}

Status PacketPool::populate_all() {
  while (mp_->populated_size < mp_->size)
    if (!grow()) return Status::error(std::string("packet pool ") + mp_->name + ": only " +
                                      std::to_string(mp_->populated_size) + " of " + std::to_string(mp_->size) +
                                      " buffers could be made");
  return {};
}

rte_mbuf* PacketPool::alloc_copy(std::span<const uint8_t> frame) {
  if (frame.size() > kMaxFrame) return nullptr;
  rte_mbuf* m = alloc();
  if (m == nullptr) return nullptr;
  char* p = rte_pktmbuf_append(m, uint16_t(frame.size()));
  std::memcpy(p, frame.data(), frame.size());
  return m;
}

uint64_t g_lazy_payload_flag = 0;

bool make_lazy(rte_mbuf* m, uint8_t* at, const uint8_t* src, uint32_t len) {
  if (g_lazy_payload_flag == 0) return false;
  auto* const buf = static_cast<uint8_t*>(m->buf_addr);
  // The payload, its pad and the ICRC stay clear of the note.
  if (at < buf || size_t(at - buf) + len + 8 + sizeof(LazyNote) > m->buf_len) return false;
  lazy_note(m) = {src, uint32_t(at - buf), len};
  m->ol_flags |= g_lazy_payload_flag;
  g_lazy_made++;
  return true;
}

void materialize_slow(rte_mbuf* m) {
  const LazyNote& n = lazy_note(m);
  std::memcpy(static_cast<uint8_t*>(m->buf_addr) + n.at, n.src, n.len);
  m->ol_flags &= ~g_lazy_payload_flag;
  g_lazy_materialized++;
}

const uint8_t* lazy_source(rte_mbuf* m, const uint8_t* p, size_t len) {
  if (!lazy(m)) return nullptr;
  const LazyNote& n = lazy_note(m);
  const uint8_t* at = static_cast<const uint8_t*>(m->buf_addr) + n.at;
  if (p < at || p + len > at + n.len) return nullptr;
  return n.src + (p - at);
}

void materialize_from(const void* begin, const void* end) {
  if (g_lazy_payload_flag == 0) return;
  struct Range {
    const uint8_t *begin, *end;
  } r{static_cast<const uint8_t*>(begin), static_cast<const uint8_t*>(end)};
  std::lock_guard lock(g_pools_mutex);
  g_lazy_walks++;
  for (rte_mempool* mp : g_pools) {
    // Free buffers may still carry the flag (alloc clears it): filling one
    // in is harmless, its bytes are nobody's.
    rte_mempool_obj_iter(
        mp,
        [](rte_mempool*, void* arg, void* obj, unsigned) {
          auto* m = static_cast<rte_mbuf*>(obj);
          if (!lazy(m)) return;
          const auto& rg = *static_cast<const Range*>(arg);
          const LazyNote& n = lazy_note(m);
          if (n.src < rg.end && n.src + n.len > rg.begin) materialize_slow(m);
        },
        &r);
  }
}

namespace {
uint64_t g_lazy_made_at_walk = 0;  // g_lazy_made at the last materialize_all()
}

void materialize_all() {
  // Every lazy frame alive now was made since the last walk (that walk
  // filled in the ones before it).
  if (g_lazy_made == g_lazy_made_at_walk) return;
  g_lazy_made_at_walk = g_lazy_made;
  materialize_from(nullptr, reinterpret_cast<const void*>(UINTPTR_MAX));
}

uint64_t lazy_walked_at() { return g_lazy_made_at_walk; }
uint64_t lazy_walks() { return g_lazy_walks; }
uint64_t lazy_frames_made() { return g_lazy_made; }
uint64_t lazy_frames_materialized() { return g_lazy_materialized; }

void seal_slow(rte_mbuf* m) {
  materialize(m);
  wire::seal_icrc(bytes(m));
  meta(m).flags &= uint8_t(~kMetaIcrcPending);
}

uint32_t PacketPool::in_use() const { return mp_->populated_size - rte_mempool_avail_count(mp_); }

uint32_t PacketPool::available() const {
  return rte_mempool_avail_count(mp_) + (can_grow() ? mp_->size - mp_->populated_size : 0);
}

}  // namespace rocemu::dpdk
