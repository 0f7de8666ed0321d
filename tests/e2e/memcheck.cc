// rocemu-memcheck: registered memory keeps the application's semantics,
// whichever way the engine reaches it (moved onto a memfd it maps, or
// process_vm_readv/writev). One process, two QPs on one NIC: each case
// registers buffers of one kind, RDMA WRITEs one into the other and READs
// it back, and checks every byte of both MRs and every byte around them
// (the rest of their pages, neighbouring heap data) before, during and
// after registration.
//
//   rocemu-memcheck CASE...   malloc memalign mmap hugepages file overlap reuse
//                             fork mprotect threads thread_dereg thread_writes
//                             close_device map_count odp (or all); each prints
//                             "case NAME: ok, moved M of N" (M: MRs whose
//                             pages the engine maps) or "case NAME: skipped"
//   rocemu-memcheck --hold    registers, then transfers until killed
//                             ("holding" once its MRs are in use)
//   rocemu-memcheck --engine-dies
//                             registers and transfers, prints "ready", waits
//                             for SIGUSR1 (the engine killed meanwhile), then
//                             checks its buffers still hold their data and
//                             can be written ("intact")
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_failures = 0;
#define CHECKM(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      g_failures++;                                                \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);    \
      std::fprintf(stderr, __VA_ARGS__);                           \
      std::fprintf(stderr, "\n");                                  \
    }                                                              \
  } while (0)

constexpr size_t kPage = 4096;

uint8_t pattern(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
  x ^= x >> 31;
  return uint8_t(x ^ (x >> 17));
}
void fill(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) p[i] = pattern(seed, i);
}
// The first byte of p[0, n) that is not pattern(seed), or n.
size_t differs(const uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != pattern(seed, i)) return i;
  return n;
}

// The line of /proc/self/maps holding `p` ("" if none).
std::string vma_of(const void* p) {
  const auto a = reinterpret_cast<uint64_t>(p);
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    const uint64_t start = std::strtoull(line.c_str(), nullptr, 16);
    const uint64_t end = std::strtoull(line.c_str() + line.find('-') + 1, nullptr, 16);
    if (a >= start && a < end) return line;
  }
  return "";
}
bool on_memfd(const void* p) { return vma_of(p).find("/memfd:rocemu-mr") != std::string::npos; }

struct Verbs {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* a = nullptr;  // posts
  ibv_qp* b = nullptr;  // its peer
};
Verbs g;

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

void connect_qp(ibv_qp* q, uint32_t peer, const ibv_gid& gid) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = kAccess;
  CHECKM(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0, "INIT");
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer;
  a.rq_psn = 0;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = 3;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  CHECKM(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) == 0,
         "RTR");
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  CHECKM(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                  IBV_QP_MAX_QP_RD_ATOMIC) == 0,
         "RTS");
}

void open_verbs() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::fprintf(stderr, "rocemu-memcheck: no RDMA device\n");
    std::exit(2);
  }
  g.ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (g.ctx == nullptr) std::exit(2);
  g.pd = ibv_alloc_pd(g.ctx);
  g.cq = ibv_create_cq(g.ctx, 64, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = g.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {16, 16, 1, 1, 0};
  g.a = ibv_create_qp(g.pd, &ia);
  g.b = ibv_create_qp(g.pd, &ia);
  if (g.pd == nullptr || g.cq == nullptr || g.a == nullptr || g.b == nullptr) std::exit(2);
  ibv_gid gid;
  CHECKM(ibv_query_gid(g.ctx, 1, 3, &gid) == 0, "query_gid");
  connect_qp(g.a, g.b->qp_num, gid);
  connect_qp(g.b, g.a->qp_num, gid);
}

ibv_mr* reg(void* p, size_t n, int access = kAccess) {
  ibv_mr* mr = ibv_reg_mr(g.pd, p, n, access);
  CHECKM(mr != nullptr, "reg_mr(%p, %zu): %s", p, n, std::strerror(errno));
  if (mr == nullptr) std::exit(1);
  return mr;
}

// One RDMA operation from QP a, waited for.
bool rdma(ibv_wr_opcode op, void* local, ibv_mr* lmr, void* remote, ibv_mr* rmr, size_t n) {
  ibv_sge sge{reinterpret_cast<uint64_t>(local), uint32_t(n), lmr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(remote);
  wr.wr.rdma.rkey = rmr->rkey;
  if (ibv_post_send(g.a, &wr, &bad) != 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  ibv_wc wc;
  for (;;) {
    const int got = ibv_poll_cq(g.cq, 1, &wc);
    if (got < 0) return false;
    if (got == 1) return wc.status == IBV_WC_SUCCESS;
    if (std::chrono::steady_clock::now() > deadline) return false;
  }
}

// A buffer [base, base + size) of which [base + off, base + off + len) is
// registered; the rest is data the MR must never touch.
struct Area {
  uint8_t* base;
  size_t size, off, len;
  uint8_t* mr_start() const { return base + off; }
};

// The bytes of `a` outside its MR hold pattern(seed) shifted per part.
void fill_guard(const Area& a, uint64_t seed) {
  fill(a.base, a.off, seed);
  fill(a.base + a.off + a.len, a.size - a.off - a.len, seed + 1);
}
bool guard_ok(const Area& a, uint64_t seed) {
  return differs(a.base, a.off, seed) == a.off &&
         differs(a.base + a.off + a.len, a.size - a.off - a.len, seed + 1) == a.size - a.off - a.len;
}

// WRITE s's MR into d's, then READ d's back into s's; every byte of both
// checked. n bytes of each (at most the shorter MR).
void transfer(const Area& s, ibv_mr* smr, const Area& d, ibv_mr* dmr, uint64_t seed, const char* what) {
  const size_t n = std::min(s.len, d.len);
  fill(s.mr_start(), s.len, seed);
  fill(d.mr_start(), d.len, seed + 50);
  CHECKM(rdma(IBV_WR_RDMA_WRITE, s.mr_start(), smr, d.mr_start(), dmr, n), "%s: WRITE failed", what);
  size_t at = differs(d.mr_start(), n, seed);
  CHECKM(at == n, "%s: WRITE: byte %zu of %zu differs", what, at, n);
  for (at = n; at < d.len && d.mr_start()[at] == pattern(seed + 50, at); at++) {}  // past what was written
  CHECKM(at == d.len, "%s: WRITE went past its end (byte %zu)", what, at);
  at = differs(s.mr_start(), s.len, seed);
  CHECKM(at == s.len, "%s: WRITE changed its source at %zu", what, at);
  std::memset(s.mr_start(), 0, n);
  CHECKM(rdma(IBV_WR_RDMA_READ, s.mr_start(), smr, d.mr_start(), dmr, n), "%s: READ failed", what);
  at = differs(s.mr_start(), n, seed);
  CHECKM(at == n, "%s: READ: byte %zu of %zu differs", what, at, n);
  at = differs(d.mr_start(), n, seed);
  CHECKM(at == n, "%s: READ changed its source at %zu", what, at);
}

struct Tally {
  int moved = 0, mrs = 0;
  void count(const void* p) {
    mrs++;
    moved += on_memfd(p);
  }
};

// The whole life of two areas: guards set, registered, guards rewritten
// (the application writing next to its MRs), transfers, guards checked,
// deregistered, then data and guards checked again and the pages no
// longer moved.
void lifecycle(const Area& s, const Area& d, Tally& t, const char* what, bool expect_back = true) {
  fill_guard(s, 1);
  fill_guard(d, 3);
  ibv_mr* smr = reg(s.mr_start(), s.len);
  ibv_mr* dmr = reg(d.mr_start(), d.len);
  t.count(s.mr_start());
  t.count(d.mr_start());
  CHECKM(guard_ok(s, 1) && guard_ok(d, 3), "%s: registration changed data around the MRs", what);
  fill_guard(s, 11);
  fill_guard(d, 13);
  for (int i = 0; i < 3; i++) transfer(s, smr, d, dmr, 100 + uint64_t(i), what);
  CHECKM(guard_ok(s, 11) && guard_ok(d, 13), "%s: data around the MRs changed", what);
  CHECKM(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "%s: dereg", what);
  const size_t n = std::min(s.len, d.len);
  CHECKM(differs(s.mr_start(), n, 102) == n && differs(d.mr_start(), n, 102) == n, "%s: data lost at dereg", what);
  CHECKM(guard_ok(s, 11) && guard_ok(d, 13), "%s: dereg changed data around the MRs", what);
  if (expect_back) CHECKM(!on_memfd(s.mr_start()) && !on_memfd(d.mr_start()), "%s: pages still on a memfd", what);
}

uint8_t* map_anon(size_t n, int flags = 0) {
  void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

void report(const char* name, const Tally& t) {
  std::printf("case %s: %s, moved %d of %d\n", name, g_failures == 0 ? "ok" : "FAILED", t.moved, t.mrs);
  std::fflush(stdout);
}

// ---- the cases -----------------------------------------------------------

// Unaligned heap buffers sharing pages with other heap data.
void case_malloc() {
  Tally t;
  auto* a = static_cast<uint8_t*>(std::malloc(7000));
  auto* b = static_cast<uint8_t*>(std::malloc(7000));
  const Area s{a, 7000, 3, 6990}, d{b, 7000, 17, 6900};
  lifecycle(s, d, t, "malloc");
  std::free(a);
  std::free(b);
  report("malloc", t);
}

void case_memalign() {
  Tally t;
  void *a = nullptr, *b = nullptr;
  if (posix_memalign(&a, kPage, 65536) != 0 || posix_memalign(&b, kPage, 65536) != 0) std::exit(2);
  lifecycle({static_cast<uint8_t*>(a), 65536, 64, 65536 - 128}, {static_cast<uint8_t*>(b), 65536, 0, 65536}, t,
            "memalign");
  std::free(a);
  std::free(b);
  report("memalign", t);
}

void case_mmap() {
  Tally t;
  uint8_t* a = map_anon(6 * kPage);
  uint8_t* b = map_anon(6 * kPage);
  lifecycle({a, 6 * kPage, kPage + 100, 3 * kPage}, {b, 6 * kPage, 2 * kPage, 2 * kPage}, t, "mmap");
  // Transparent hugepages where the kernel gives them.
  const size_t huge = 4u << 20;
  uint8_t* c = map_anon(huge);
  madvise(c, huge, MADV_HUGEPAGE);
  lifecycle({c, huge, 4096 * 3, huge - 4096 * 6}, {a, 6 * kPage, 0, 6 * kPage}, t, "mmap (THP)");
  munmap(a, 6 * kPage);
  munmap(b, 6 * kPage);
  munmap(c, huge);
  report("mmap", t);
}

// hugetlbfs pages (perftest --use_hugepages): the fallback.
void case_hugepages() {
  const size_t huge = 2u << 20;
  uint8_t* a = map_anon(2 * huge, MAP_HUGETLB);
  if (a == nullptr) {
    std::printf("case hugepages: skipped (no two hugepages: %s)\n", std::strerror(errno));
    return;
  }
  Tally t;
  lifecycle({a, huge, 100, huge - 200}, {a + huge, huge, 0, huge}, t, "hugepages");
  munmap(a, 2 * huge);
  report("hugepages", t);
}

// File-backed memory (perftest --mmap): the fallback; the file holds what
// was written.
void case_file() {
  Tally t;
  char path[] = "/tmp/rocemu-memcheck-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0 || ftruncate(fd, 8 * kPage) != 0) std::exit(2);
  unlink(path);
  auto* shared = static_cast<uint8_t*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  auto* priv = static_cast<uint8_t*>(mmap(nullptr, 4 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 4 * kPage));
  if (shared == MAP_FAILED || priv == MAP_FAILED) std::exit(2);
  lifecycle({shared, 4 * kPage, 10, 3 * kPage}, {priv, 4 * kPage, kPage, 2 * kPage}, t, "file");
  std::vector<uint8_t> back(3 * kPage);
  CHECKM(pread(fd, back.data(), back.size(), 10) == ssize_t(back.size()) &&
             std::memcmp(back.data(), shared + 10, back.size()) == 0,
         "file: the file does not hold the MR's bytes");
  munmap(shared, 4 * kPage);
  munmap(priv, 4 * kPage);
  close(fd);
  report("file", t);
}

// MRs inside others, the same range twice, one overlapping in part.
void case_overlap() {
  Tally t;
  uint8_t* r = map_anon(8 * kPage);
  uint8_t* o = map_anon(8 * kPage);
  const Area whole{r, 8 * kPage, 100, 5 * kPage}, inner{r, 8 * kPage, kPage + 5, 2 * kPage},
      part{r, 8 * kPage, 4 * kPage + 10, 3 * kPage}, other{o, 8 * kPage, 0, 8 * kPage};
  fill(r, 8 * kPage, 7);
  ibv_mr* m1 = reg(whole.mr_start(), whole.len);
  ibv_mr* m2 = reg(inner.mr_start(), inner.len);
  ibv_mr* m3 = reg(whole.mr_start(), whole.len);
  ibv_mr* m4 = reg(part.mr_start(), part.len);
  ibv_mr* om = reg(o, 8 * kPage);
  t.count(whole.mr_start());
  t.count(inner.mr_start());
  t.count(whole.mr_start());
  t.count(o);
  CHECKM(differs(r, 8 * kPage, 7) == 8 * kPage, "overlap: registration changed the data");
  transfer(whole, m1, other, om, 20, "overlap m1");
  transfer(inner, m2, other, om, 21, "overlap m2");
  transfer(whole, m3, other, om, 22, "overlap m3");
  transfer(part, m4, other, om, 23, "overlap m4");
  CHECKM(ibv_dereg_mr(m1) == 0, "dereg m1");
  transfer(inner, m2, other, om, 24, "overlap m2 after m1's dereg");
  transfer(whole, m3, other, om, 25, "overlap m3 after m1's dereg");
  CHECKM(ibv_dereg_mr(m3) == 0 && ibv_dereg_mr(m2) == 0, "dereg m3, m2");
  // As the transfers left them; only m4's bytes change from here.
  std::vector<uint8_t> expect(r, r + 8 * kPage);
  CHECKM(differs(r, 100, 7) == 100, "overlap: bytes before the MRs changed");
  transfer(part, m4, other, om, 26, "overlap m4 alone");
  std::vector<uint8_t> now(r, r + 8 * kPage);
  fill(expect.data() + part.off, part.len, 26);
  CHECKM(now == expect, "overlap: bytes outside the last transfer changed");
  CHECKM(ibv_dereg_mr(m4) == 0 && ibv_dereg_mr(om) == 0, "dereg m4");
  CHECKM(!on_memfd(r) && !on_memfd(r + 7 * kPage), "overlap: pages still on a memfd after the last dereg");
  CHECKM(std::vector<uint8_t>(r, r + 8 * kPage) == now, "overlap: the last dereg changed the data");
  munmap(r, 8 * kPage);
  munmap(o, 8 * kPage);
  report("overlap", t);
}

// Deregistered memory freed or unmapped, the same addresses used again;
// memory unmapped while still registered, then deregistered.
void case_reuse() {
  Tally t;
  uint8_t* other = map_anon(4 * kPage);
  const Area od{other, 4 * kPage, 0, 4 * kPage};
  for (int round = 0; round < 2; round++) {
    uint8_t* a = map_anon(4 * kPage);
    lifecycle({a, 4 * kPage, 50, 3 * kPage}, od, t, "reuse mmap");
    munmap(a, 4 * kPage);
    auto* h = static_cast<uint8_t*>(std::malloc(9000));
    lifecycle({h, 9000, 1, 8000}, od, t, "reuse malloc");
    std::free(h);
  }
  // Unmapped while registered (the engine keeps its window: a real NIC's
  // pages stay pinned), then new memory at the same place registered.
  uint8_t* a = map_anon(4 * kPage);
  const Area aa{a, 4 * kPage, 0, 4 * kPage};
  ibv_mr* old = reg(a, 4 * kPage);
  ibv_mr* om = reg(other, 4 * kPage);
  transfer(aa, old, od, om, 40, "reuse before munmap");
  munmap(a, 4 * kPage);
  uint8_t* b = static_cast<uint8_t*>(mmap(a, 4 * kPage, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
  CHECKM(b == a, "reuse: could not map the same address again");
  ibv_mr* fresh = reg(b, 4 * kPage);
  transfer(aa, fresh, od, om, 41, "reuse: new memory where registered memory was");
  CHECKM(ibv_dereg_mr(old) == 0, "dereg of unmapped memory");
  transfer(aa, fresh, od, om, 42, "reuse: after the old MR's dereg");
  CHECKM(ibv_dereg_mr(fresh) == 0 && ibv_dereg_mr(om) == 0, "dereg");
  munmap(b, 4 * kPage);
  munmap(other, 4 * kPage);
  report("reuse", t);
}

// fork() after registration: the child gets a private copy of the
// registered pages (and of the heap data sharing them); the parent's MRs
// work on, and neither sees the other's writes.
void case_fork() {
  Tally t;
  auto* h = static_cast<uint8_t*>(std::malloc(10000));
  uint8_t* m = map_anon(4 * kPage);
  const Area s{h, 10000, 7, 9000}, d{m, 4 * kPage, 100, 3 * kPage};
  fill_guard(s, 1);
  fill_guard(d, 3);
  ibv_mr* smr = reg(s.mr_start(), s.len);
  ibv_mr* dmr = reg(d.mr_start(), d.len);
  t.count(s.mr_start());
  t.count(d.mr_start());
  transfer(s, smr, d, dmr, 60, "fork: before");
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) std::exit(2);
  const pid_t pid = fork();
  if (pid == 0) {
    // What the parent had at fork(), whatever it does meanwhile.
    char c;
    [[maybe_unused]] ssize_t r = read(go[0], &c, 1);
    int bad = 0;
    const size_t n = std::min(s.len, d.len);
    bad |= differs(s.mr_start(), n, 60) != n;
    bad |= differs(d.mr_start(), n, 60) != n;
    bad |= !guard_ok(s, 1) << 1;
    bad |= !guard_ok(d, 3) << 1;
    bad |= on_memfd(s.mr_start()) << 2;
    void* more = std::malloc(50000);  // the heap works
    std::free(more);
    fill(s.base, s.size, 90);  // the child's own writes
    fill(d.base, d.size, 91);
    r = write(ready[1], "x", 1);
    _exit(bad);
  }
  // The parent transfers before the child looks, and writes next to its MRs.
  transfer(s, smr, d, dmr, 61, "fork: parent after fork");
  fill_guard(s, 5);
  [[maybe_unused]] ssize_t r = write(go[1], "x", 1);
  char c;
  r = read(ready[0], &c, 1);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECKM(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork: the child saw wrong data (status %d)", st);
  const size_t n = std::min(s.len, d.len);
  CHECKM(differs(d.mr_start(), n, 61) == n && guard_ok(s, 5) && guard_ok(d, 3), "fork: the child's writes leaked");
  transfer(s, smr, d, dmr, 62, "fork: parent after the child");
  CHECKM(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "dereg");
  CHECKM(guard_ok(s, 5) && guard_ok(d, 3), "fork: data around the MRs changed");
  std::free(h);
  munmap(m, 4 * kPage);
  close(ready[0]);
  close(ready[1]);
  close(go[0]);
  close(go[1]);
  report("fork", t);
}

// mprotect on registered pages: the protection holds (also in a child),
// the NIC still reads them.
void case_mprotect() {
  Tally t;
  uint8_t* a = map_anon(4 * kPage);
  uint8_t* b = map_anon(4 * kPage);
  const Area s{a, 4 * kPage, kPage, 2 * kPage}, d{b, 4 * kPage, 0, 4 * kPage};
  fill_guard(s, 1);
  ibv_mr* smr = reg(s.mr_start(), s.len);
  ibv_mr* dmr = reg(d.mr_start(), d.len);
  t.count(s.mr_start());
  t.count(d.mr_start());
  transfer(s, smr, d, dmr, 70, "mprotect: before");
  fill(s.mr_start(), s.len, 71);
  CHECKM(mprotect(s.mr_start(), s.len, PROT_READ) == 0, "mprotect: %s", std::strerror(errno));
  CHECKM(vma_of(s.mr_start()).substr(vma_of(s.mr_start()).find(' ') + 1, 3) == "r--", "mprotect: %s",
         vma_of(s.mr_start()).c_str());
  CHECKM(rdma(IBV_WR_RDMA_WRITE, s.mr_start(), smr, d.mr_start(), dmr, s.len), "mprotect: WRITE from read-only");
  CHECKM(differs(d.mr_start(), s.len, 71) == s.len, "mprotect: WRITE from read-only pages");
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string v = vma_of(s.mr_start());
    _exit(differs(s.mr_start(), s.len, 71) != s.len ? 1 : v.substr(v.find(' ') + 1, 3) != "r--" ? 2 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECKM(WIFEXITED(st) && WEXITSTATUS(st) == 0, "mprotect: the child's copy (status %d)", st);
  CHECKM(mprotect(s.mr_start(), s.len, PROT_READ | PROT_WRITE) == 0, "mprotect back");
  transfer(s, smr, d, dmr, 72, "mprotect: after");
  CHECKM(guard_ok(s, 1), "mprotect: data around the MR changed");
  CHECKM(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "dereg");
  munmap(a, 4 * kPage);
  munmap(b, 4 * kPage);
  report("mprotect", t);
}

// Another thread writing next to the MR while it is registered and used:
// none of its writes is lost (such memory is not moved).
void case_threads() {
  Tally t;
  auto* h = static_cast<uint8_t*>(std::malloc(3 * kPage));
  uint8_t* m = map_anon(4 * kPage);
  const Area s{h, 3 * kPage, 512, 2 * kPage}, d{m, 4 * kPage, 0, 4 * kPage};
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> last{0};
  // 64 words in the same page as the MR's start, written in turn: word j
  // ends up holding the last i with i % 64 == j.
  auto* words = reinterpret_cast<volatile uint32_t*>(h + 64);
  for (int j = 0; j < 64; j++) words[j] = 0;
  std::thread writer([&] {
    for (uint32_t i = 1; !stop.load(); i++) {
      words[i % 64] = i;
      last.store(i);
    }
  });
  ibv_mr* smr = reg(s.mr_start(), s.len);
  ibv_mr* dmr = reg(d.mr_start(), d.len);
  t.count(s.mr_start());
  t.count(d.mr_start());
  for (int i = 0; i < 3; i++) transfer(s, smr, d, dmr, 80 + uint64_t(i), "threads");
  CHECKM(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "dereg");
  stop = true;
  writer.join();
  const uint32_t end = last.load();
  for (uint32_t j = 0; j < 64; j++) {
    const uint32_t want = end >= j ? end - (end - j) % 64 : 0;
    CHECKM(words[j] == want, "threads: a write next to the MR was lost (word %u is %u, want %u)", j, words[j], want);
  }
  std::free(h);
  munmap(m, 4 * kPage);
  report("threads", t);
}

// Deregistered while another thread is alive: the pages go back to
// private memory all the same. glibc's realloc grows an mmap'd chunk with
// mremap (a shared mapping of the sealed memfd would SIGBUS past its end),
// and MADV_DONTNEED must zero-fill again (calloc in some allocators
// counts on it).
void case_thread_dereg() {
  Tally t;
  const size_t n = 1 << 20;
  auto* h = static_cast<uint8_t*>(std::malloc(n));  // glibc: an mmap'd chunk
  uint8_t* m = map_anon(n);
  const Area s{h, n, 0, n}, d{m, n, 0, n};
  ibv_mr* smr = reg(h, n);
  ibv_mr* dmr = reg(m, n);
  t.count(h);
  t.count(m);
  transfer(s, smr, d, dmr, 110, "thread_dereg");
  int p[2];
  if (pipe(p) != 0) std::exit(2);
  std::thread idle([&] {
    char c;
    [[maybe_unused]] ssize_t r = read(p[0], &c, 1);
  });
  CHECKM(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "thread_dereg: dereg");
  CHECKM(!on_memfd(h) && !on_memfd(m), "thread_dereg: pages still on a memfd: %s", vma_of(h).c_str());
  CHECKM(differs(h, n, 110) == n && differs(m, n, 110) == n, "thread_dereg: data lost at dereg");
  auto* h2 = static_cast<uint8_t*>(std::realloc(h, 2 * n));
  CHECKM(h2 != nullptr, "thread_dereg: realloc");
  CHECKM(differs(h2, n, 110) == n, "thread_dereg: realloc lost data");
  std::memset(h2 + n, 0x5a, n);  // SIGBUS here if the chunk grew on the memfd
  size_t at = 0;
  while (at < n && h2[n + at] == 0x5a) at++;
  CHECKM(at == n, "thread_dereg: the grown part reads back wrong at %zu", at);
  CHECKM(madvise(m, n, MADV_DONTNEED) == 0, "thread_dereg: madvise");
  for (at = 0; at < n && m[at] == 0; at++) {}
  CHECKM(at == n, "thread_dereg: MADV_DONTNEED did not zero-fill (byte %zu)", at);
  auto* z = static_cast<uint8_t*>(std::calloc(1, n));
  for (at = 0; at < n && z[at] == 0; at++) {}
  CHECKM(at == n, "thread_dereg: calloc gave a non-zero byte at %zu", at);
  std::free(z);
  [[maybe_unused]] ssize_t r = write(p[1], "x", 1);
  idle.join();
  close(p[0]);
  close(p[1]);
  std::free(h2);
  munmap(m, n);
  report("thread_dereg", t);
}

// Another thread writing all over a moved MR's pages while it is
// deregistered: the pages go back to private memory and none of its
// writes is lost.
void case_thread_writes() {
  Tally t;
  const size_t n = 1 << 20;
  uint8_t* a = map_anon(n);
  uint8_t* b = map_anon(n);
  const Area s{a, n, 0, n}, d{b, n, 0, n};
  ibv_mr* smr = reg(a, n);
  ibv_mr* dmr = reg(b, n);
  t.count(a);
  t.count(b);
  transfer(s, smr, d, dmr, 120, "thread_writes");
  // Write i (from 1) goes to word idx(i), one word a page in turn, each
  // word once: a write lost in the move would not be made good by a later
  // one. The writer yields after each, so the pass outlasts the dereg.
  constexpr uint32_t kPerPage = uint32_t(kPage / 4), kPages = uint32_t(n / kPage), kWords = kPerPage * kPages;
  auto idx = [&](uint32_t i) { return ((i - 1) % kPages) * kPerPage + (i - 1) / kPages; };
  auto* words = reinterpret_cast<volatile uint32_t*>(a);
  std::atomic<bool> stop{false};
  std::atomic<uint32_t> last{0};
  std::thread writer([&] {
    for (uint32_t i = 1; i <= kWords && !stop.load(std::memory_order_relaxed); i++) {
      words[idx(i)] = i;
      last.store(i, std::memory_order_relaxed);
      sched_yield();
    }
  });
  while (last.load() < 1000) std::this_thread::yield();
  const uint32_t before = last.load();
  CHECKM(ibv_dereg_mr(smr) == 0 && ibv_dereg_mr(dmr) == 0, "thread_writes: dereg");
  const uint32_t after = last.load();
  stop = true;
  writer.join();
  std::printf("thread_writes: writes %u to %u during the dereg\n", before, after);
  CHECKM(!on_memfd(a) && !on_memfd(b), "thread_writes: pages still on a memfd: %s", vma_of(a).c_str());
  const uint32_t end = last.load();
  std::vector<uint32_t> want(kWords);
  int lost = 0;
  for (uint32_t j = 0; j < kWords; j++) {
    // The pattern transfer() left, unless the writer wrote the word.
    uint32_t orig = 0;
    for (int k = 0; k < 4; k++) orig |= uint32_t(pattern(120, 4 * uint64_t(j) + uint64_t(k))) << (8 * k);
    want[j] = orig;
  }
  for (uint32_t i = 1; i <= end; i++) want[idx(i)] = i;
  for (uint32_t j = 0; j < kWords; j++) {
    if (words[j] != want[j] && lost++ < 5)
      CHECKM(false, "thread_writes: a write was lost (word %u is %u, want %u)", j, words[j], want[j]);
  }
  CHECKM(lost == 0, "thread_writes: %d writes lost", lost);
  CHECKM(differs(b, n, 120) == n, "thread_writes: the other MR's data lost");
  munmap(a, n);
  munmap(b, n);
  report("thread_writes", t);
}

// ibv_close_device with MRs still registered (another thread alive): their
// pages are private memory again with their content.
void case_close_device() {
  Tally t;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) std::exit(2);
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  ibv_pd* pd = ctx != nullptr ? ibv_alloc_pd(ctx) : nullptr;
  if (pd == nullptr) std::exit(2);
  const size_t len = 64 * kPage;
  uint8_t* m = map_anon(len);
  fill(m, len, 130);
  ibv_mr* mr = ibv_reg_mr(pd, m, len, kAccess);
  CHECKM(mr != nullptr, "close_device: reg_mr");
  t.count(m);
  int p[2];
  if (pipe(p) != 0) std::exit(2);
  std::thread idle([&] {
    char c;
    [[maybe_unused]] ssize_t r = read(p[0], &c, 1);
  });
  CHECKM(ibv_close_device(ctx) == 0, "close_device: close");
  CHECKM(!on_memfd(m), "close_device: pages still on a memfd: %s", vma_of(m).c_str());
  CHECKM(differs(m, len, 130) == len, "close_device: data lost");
  CHECKM(madvise(m, len, MADV_DONTNEED) == 0 && m[0] == 0 && m[len - 1] == 0, "close_device: not private memory");
  [[maybe_unused]] ssize_t r = write(p[1], "x", 1);
  idle.join();
  close(p[0]);
  close(p[1]);
  munmap(m, len);
  report("close_device", t);
}

// Registration when the process is at vm.max_map_count: putting the memfd
// over the middle of a mapping needs two more areas, so it fails; the MR
// takes the fallback with its pages as they were.
void case_map_count() {
  Tally t;
  const size_t len = 16 * kPage;
  uint8_t* a = map_anon(len);
  uint8_t* b = map_anon(len);
  std::vector<void*> filler;
  filler.reserve(1 << 20);
  // One-page mappings that cannot merge (protections alternate).
  for (;;) {
    void* p = mmap(nullptr, kPage, filler.size() % 2 ? PROT_READ : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED || filler.size() == filler.capacity()) break;
    filler.push_back(p);
  }
  lifecycle({a, len, 4 * kPage + 10, 4 * kPage}, {b, len, 0, len}, t, "map_count");
  for (void* p : filler) munmap(p, kPage);
  std::printf("map_count: %zu mappings added\n", filler.size());
  munmap(a, len);
  munmap(b, len);
  report("map_count", t);
}

// No on-demand paging, as Soft-RoCE under Linux 6.1: odp_caps all zero,
// an ODP MR refused with EINVAL (explicit, or implicit: the whole address
// space, refused before any page is looked at), ibv_advise_mr EOPNOTSUPP.
// Nothing gets registered ("moved 0 of 0").
void case_odp() {
  Tally t;
  ibv_device_attr_ex ax{};
  CHECKM(ibv_query_device_ex(g.ctx, nullptr, &ax) == 0, "odp: query_device_ex");
  CHECKM(ax.odp_caps.general_caps == 0 && ax.odp_caps.per_transport_caps.rc_odp_caps == 0 &&
             ax.odp_caps.per_transport_caps.uc_odp_caps == 0 && ax.odp_caps.per_transport_caps.ud_odp_caps == 0 &&
             ax.xrc_odp_caps == 0,
         "odp: odp_caps not all zero");
  uint8_t* a = map_anon(4 * kPage);
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(g.pd, a, 4 * kPage, kAccess | IBV_ACCESS_ON_DEMAND);
  CHECKM(mr == nullptr && errno == EINVAL, "odp: explicit ODP MR: %p, %s", static_cast<void*>(mr), std::strerror(errno));
  errno = 0;
  mr = ibv_reg_mr(g.pd, nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
  CHECKM(mr == nullptr && errno == EINVAL, "odp: implicit ODP MR: %p, %s", static_cast<void*>(mr), std::strerror(errno));
  ibv_sge sge{reinterpret_cast<uint64_t>(a), uint32_t(kPage), 0};
  const int advised = ibv_advise_mr(g.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sge, 1);
  CHECKM(advised == EOPNOTSUPP, "odp: advise_mr: %d", advised);
  munmap(a, 4 * kPage);
  report("odp", t);
}

// ---- processes killed ------------------------------------------------------

int hold() {
  uint8_t* a = map_anon(1 << 20);
  uint8_t* b = map_anon(1 << 20);
  const Area s{a, 1 << 20, 0, 1 << 20}, d{b, 1 << 20, 0, 1 << 20};
  ibv_mr* smr = reg(a, 1 << 20);
  ibv_mr* dmr = reg(b, 1 << 20);
  for (uint64_t i = 0;; i++) {
    transfer(s, smr, d, dmr, i, "hold");
    if (g_failures != 0) return 1;
    if (i == 0) {
      std::printf("holding, moved %d of 2\n", int(on_memfd(a)) + int(on_memfd(b)));
      std::fflush(stdout);
    }
  }
}

int engine_dies() {
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  auto* h = static_cast<uint8_t*>(std::malloc(100000));
  uint8_t* m = map_anon(64 * kPage);
  const Area s{h, 100000, 5, 90000}, d{m, 64 * kPage, kPage, 32 * kPage};
  fill_guard(s, 1);
  fill_guard(d, 3);
  ibv_mr* smr = reg(s.mr_start(), s.len);
  ibv_mr* dmr = reg(d.mr_start(), d.len);
  transfer(s, smr, d, dmr, 30, "engine-dies");
  std::printf("ready, moved %d of 2\n", int(on_memfd(s.mr_start())) + int(on_memfd(d.mr_start())));
  std::fflush(stdout);
  int sig = 0;
  sigwait(&usr1, &sig);
  const size_t n = std::min(s.len, d.len);
  CHECKM(differs(s.mr_start(), n, 30) == n && differs(d.mr_start(), n, 30) == n, "engine-dies: data lost");
  CHECKM(guard_ok(s, 1) && guard_ok(d, 3), "engine-dies: data around the MRs lost");
  // Still ordinary memory: written and read back.
  fill(s.base, s.size, 31);
  fill(d.base, d.size, 32);
  CHECKM(differs(s.base, s.size, 31) == s.size && differs(d.base, d.size, 32) == d.size, "engine-dies: not writable");
  // Deregistered with the engine gone (another thread alive): the MRs go,
  // their pages are private memory again with their content.
  int p[2];
  if (pipe(p) != 0) std::exit(2);
  std::thread idle([&] {
    char c;
    [[maybe_unused]] ssize_t r = read(p[0], &c, 1);
  });
  const int e1 = ibv_dereg_mr(smr), e2 = ibv_dereg_mr(dmr);
  CHECKM(e1 == 0 && e2 == 0, "engine-dies: dereg: %s, %s", std::strerror(e1), std::strerror(e2));
  CHECKM(!on_memfd(s.mr_start()) && !on_memfd(d.mr_start()), "engine-dies: pages still on a memfd after dereg: %s",
         vma_of(s.mr_start()).c_str());
  CHECKM(differs(s.base, s.size, 31) == s.size && differs(d.base, d.size, 32) == d.size,
         "engine-dies: data lost at dereg");
  [[maybe_unused]] ssize_t r = write(p[1], "x", 1);
  idle.join();
  std::printf("%s\n", g_failures == 0 ? "intact" : "damaged");
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> cases(argv + 1, argv + argc);
  if (cases.empty()) {
    std::fprintf(stderr, "usage: rocemu-memcheck CASE... | all | --hold | --engine-dies\n");
    return 2;
  }
  open_verbs();
  if (cases[0] == "--hold") return hold();
  if (cases[0] == "--engine-dies") return engine_dies();
  if (cases[0] == "all")
    cases = {"malloc", "memalign", "mmap", "hugepages", "file", "overlap", "reuse", "fork", "mprotect", "threads",
             "thread_dereg", "thread_writes", "close_device", "map_count", "odp"};
  for (const std::string& c : cases) {
    if (c == "malloc") case_malloc();
    else if (c == "memalign") case_memalign();
    else if (c == "mmap") case_mmap();
    else if (c == "hugepages") case_hugepages();
    else if (c == "file") case_file();
    else if (c == "overlap") case_overlap();
    else if (c == "reuse") case_reuse();
    else if (c == "fork") case_fork();
    else if (c == "mprotect") case_mprotect();
    else if (c == "threads") case_threads();
    else if (c == "thread_dereg") case_thread_dereg();
    else if (c == "thread_writes") case_thread_writes();
    else if (c == "close_device") case_close_device();
    else if (c == "map_count") case_map_count();
    else if (c == "odp") case_odp();
    else {
      std::fprintf(stderr, "rocemu-memcheck: no case %s\n", c.c_str());
      return 2;
    }
  }
  return g_failures == 0 ? 0 : 1;
}
