// rocemu-verify: moves patterned data through a verbs device and checks
// every byte (perftest never looks at payload). Runs unmodified against
// libibverbs; under `rocemu exec` it exercises the emulated NIC.
//
//   rocemu-verify --loopback                   one process, two QPs on one NIC
//   rocemu-verify --server [--bind ADDR] [--port P]
//                                              the passive side; it listens on
//                                              ADDR (default 127.0.0.1; 0.0.0.0
//                                              or :: for every address)
//   rocemu-verify --connect HOST [--port P]    the active side
//   rocemu-verify --misuse                     verbs misuse gets the right errno/status
//   rocemu-verify --api                        ibv_rereg_mr, the GID queries, vendor IDs and
//                                              comp_masks answer as rdma-core's man pages say
//   rocemu-verify --mw                         memory windows: type 1 and 2 bound, reached,
//                                              refused outside, after invalidation and once
//                                              unbound by rereg/destroy_qp; dereg refused
//                                              under a bound window (README)
//   rocemu-verify --atomic-write               RDMA ATOMIC WRITE: the device cap, RC only,
//                                              ibv_wr_atomic_write and ibv_post_send, every
//                                              byte of the target; misaligned, no remote
//                                              write, past the MR refused as rxe refuses
//   rocemu-verify --xrc                        XRC: a domain, an XRC SRQ, an initiator and a target;
//                                              SENDs and a WRITE naming the SRQ, bytes checked,
//                                              and each misuse's errno
//   rocemu-verify --leave [--wait]             objects in every state, then exit
//                                              without freeing them (or wait to be killed)
//   rocemu-verify --import HOST                the active side of a pair split over two
//                                              processes: the owner makes the PD and MR, a
//                                              child imports them with the context's cmd_fd
//                                              and moves the owner's bytes (which the owner
//                                              checks); bad imports get the man pages' errno
//   rocemu-verify --parent-domain              a thread domain and parent domains with
//                                              allocators under loopback QPs, SRQs and MRs
//   options: --size BYTES --iters N --gid INDEX
//            --qp-timeout T (the QP's timeout attribute: 4.096 us * 2^T per try, default 14)
#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_failures = 0;
uint8_t g_qp_timeout = 14;  // 4.096 us * 2^14 = 67 ms per try
#define CHECKV(cond, ...)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      g_failures++;                                            \
      std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      std::fprintf(stderr, __VA_ARGS__);                       \
      std::fprintf(stderr, "\n");                              \
    }                                                          \
  } while (0)

struct Options {
  bool loopback = false, server = false, misuse = false;
  std::string host;
  std::string bind = "127.0.0.1";
  int port = 18777;
  size_t size = 1 << 20;
  int iters = 20;
  int gid = 3;
};

uint8_t pattern(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9e3779b97f4a7c15ull ^ (i * 0xbf58476d1ce4e5b9ull);
  x ^= x >> 31;
  return uint8_t(x ^ (x >> 17));
}

// Everything one side needs to know about the other.
struct Peer {
  uint32_t qpn, psn, rkey;
  uint64_t addr;
  uint8_t gid[16];
};

struct Side {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf;
  uint64_t base = 0;  // where local SGEs point, if not into buf (another process's memory, --import)
  int gid_index = 3;
  Peer local{};
};

ibv_context* open_device() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0) {
    std::fprintf(stderr, "rocemu-verify: no RDMA device\n");
    std::exit(2);
  }
  ibv_context* ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (ctx == nullptr) {
    std::fprintf(stderr, "rocemu-verify: cannot open the device: %s\n", std::strerror(errno));
    std::exit(2);
  }
  return ctx;
}

void setup(Side& s, ibv_context* ctx, ibv_pd* pd, size_t size, int gid_index, uint32_t psn, int extra_access = 0) {
  s.ctx = ctx;
  s.pd = pd;
  s.gid_index = gid_index;
  s.buf.assign(size, 0);
  s.cq = ibv_create_cq(ctx, 1024, nullptr, nullptr, 0);
  CHECKV(s.cq != nullptr, "create_cq: %s", std::strerror(errno));
  s.mr = ibv_reg_mr(pd, s.buf.data(), size,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                        extra_access);
  CHECKV(s.mr != nullptr, "reg_mr: %s", std::strerror(errno));
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = s.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {256, 256, 4, 4, 0};
  s.qp = ibv_create_qp(pd, &ia);
  CHECKV(s.qp != nullptr, "create_qp: %s", std::strerror(errno));
  ibv_gid gid;
  CHECKV(ibv_query_gid(ctx, 1, gid_index, &gid) == 0, "query_gid");
  s.local = {s.qp->qp_num, psn, s.mr->rkey, reinterpret_cast<uint64_t>(s.buf.data()), {}};
  std::memcpy(s.local.gid, gid.raw, 16);
}

// Takes the QP from RESET up to `upto` (INIT, RTR or RTS) towards `p`.
int connect_qp(Side& s, const Peer& p, ibv_qp_state upto = IBV_QPS_RTS) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  if (int e = ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return e;
  if (upto == IBV_QPS_INIT) return 0;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = p.qpn;
  a.rq_psn = p.psn;
  a.max_dest_rd_atomic = 16;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  std::memcpy(a.ah_attr.grh.dgid.raw, p.gid, 16);
  a.ah_attr.grh.sgid_index = uint8_t(s.gid_index);
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  if (int e = ibv_modify_qp(s.qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return e;
  if (upto == IBV_QPS_RTR) return 0;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = s.local.psn;
  a.timeout = g_qp_timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 16;
  return ibv_modify_qp(s.qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_MAX_QP_RD_ATOMIC);
}

// Waits for `n` completions; every one must succeed (unless `want` says
// otherwise). Returns the statuses.
std::vector<ibv_wc> wait(Side& s, int n, int seconds = 60) {
  std::vector<ibv_wc> out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (int(out.size()) < n) {
    ibv_wc wc[16];
    const int got = ibv_poll_cq(s.cq, 16, wc);
    if (got < 0) {
      std::fprintf(stderr, "rocemu-verify: ibv_poll_cq failed: %s\n", std::strerror(errno));
      std::exit(3);
    }
    for (int i = 0; i < got; i++)
      if (wc[i].status != IBV_WC_SUCCESS && s.cq != nullptr && std::getenv("ROCEMU_VERIFY_STRICT") != nullptr) {
        std::fprintf(stderr, "rocemu-verify: completion error: %s\n", ibv_wc_status_str(wc[i].status));
        std::exit(4);
      }
    out.insert(out.end(), wc, wc + got);
    if (got == 0 && std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "rocemu-verify: only %zu of %d completions after %d s\n", out.size(), n, seconds);
      std::exit(3);
    }
  }
  return out;
}

void post(Side& s, ibv_wr_opcode op, uint64_t local_off, uint32_t len, uint64_t remote, uint32_t rkey, uint64_t id,
          uint64_t add = 0) {
  const uint64_t base = s.base != 0 ? s.base : reinterpret_cast<uint64_t>(s.buf.data());
  ibv_sge sge{base + local_off, len, s.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = id;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op == IBV_WR_SEND_WITH_INV || op == IBV_WR_LOCAL_INV) {  // `rkey` is the key to invalidate
    wr.invalidate_rkey = rkey;
    if (op == IBV_WR_LOCAL_INV) wr.num_sge = 0;
  } else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = add;
  } else {
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
  }
  const int e = ibv_post_send(s.qp, &wr, &bad);
  CHECKV(e == 0, "post_send: %s", std::strerror(e));
}

// The active side's work against a peer buffer laid out as
// [0, size/4): WRITE target; [size/4, size/2): READ source (peer fills it);
// [size/2, 3size/4): SEND landing; last 8 bytes: atomic counter.
void drive(Side& s, const Peer& p, const Options& o) {
  const size_t q = o.size / 4;
  for (int it = 0; it < o.iters; it++) {
    // WRITE a fresh pattern, READ it back elsewhere, compare.
    for (size_t i = 0; i < q; i++) s.buf[i] = pattern(uint64_t(it), i);
    post(s, IBV_WR_RDMA_WRITE, 0, uint32_t(q), p.addr, p.rkey, 1);
    post(s, IBV_WR_RDMA_READ, q, uint32_t(q), p.addr, p.rkey, 2);
    auto wc = wait(s, 2);
    for (auto& w : wc) CHECKV(w.status == IBV_WC_SUCCESS, "iteration %d: %s", it, ibv_wc_status_str(w.status));
    CHECKV(std::memcmp(s.buf.data(), s.buf.data() + q, q) == 0, "iteration %d: WRITE then READ differ", it);
    // READ the peer's own pattern.
    post(s, IBV_WR_RDMA_READ, 2 * q, uint32_t(q), p.addr + q, p.rkey, 3);
    wait(s, 1);
    for (size_t i = 0; i < q; i++)
      if (s.buf[2 * q + i] != pattern(1000, i)) {
        CHECKV(false, "iteration %d: READ byte %zu is %u, want %u", it, i, s.buf[2 * q + i], pattern(1000, i));
        break;
      }
    // FETCH_ADD the counter: it returns how many ran before.
    post(s, IBV_WR_ATOMIC_FETCH_AND_ADD, o.size - 8, 8, p.addr + o.size - 8, p.rkey, 4, 1);
    wait(s, 1);
    uint64_t before;
    std::memcpy(&before, s.buf.data() + o.size - 8, 8);
    CHECKV(before == uint64_t(it), "iteration %d: FETCH_ADD returned %llu", it, static_cast<unsigned long long>(before));
    std::printf("rocemu-verify: iteration %d done\n", it);
    std::fflush(stdout);
  }
}

int tcp_listen(const std::string& addr, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST;
  if (const int rc = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    std::fprintf(stderr, "rocemu-verify: --bind %s: %s\n", addr.c_str(), gai_strerror(rc));
    std::exit(2);
  }
  const int fd = socket(res->ai_family, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1) != 0) {
    std::fprintf(stderr, "rocemu-verify: listen on %s port %d: %s\n", addr.c_str(), port, std::strerror(errno));
    std::exit(2);
  }
  freeaddrinfo(res);
  std::printf("rocemu-verify: waiting on %s port %d\n", addr.c_str(), port);
  std::fflush(stdout);
  const int c = accept(fd, nullptr, nullptr);
  close(fd);
  return c;
}

int tcp_connect(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) std::exit(2);
  const int fd = socket(res->ai_family, SOCK_STREAM, 0);
  if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    std::perror("rocemu-verify: connect");
    std::exit(2);
  }
  freeaddrinfo(res);
  return fd;
}

void xfer(int fd, const void* out, void* in, size_t n) {
  if (write(fd, out, n) != ssize_t(n) || read(fd, in, n) != ssize_t(n)) {
    std::fprintf(stderr, "rocemu-verify: exchange with the peer failed\n");
    std::exit(2);
  }
}

int run_pair(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Side s;
  setup(s, ctx, pd, o.size, o.gid, o.server ? 0x100 : 0x200);
  if (o.server)
    for (size_t i = 0; i < o.size / 4; i++) s.buf[o.size / 4 + i] = pattern(1000, i);
  const int fd = o.server ? tcp_listen(o.bind, o.port) : tcp_connect(o.host, o.port);
  Peer peer{};
  xfer(fd, &s.local, &peer, sizeof peer);
  CHECKV(connect_qp(s, peer) == 0, "connect_qp");
  char done = 0, ack = 0;
  if (!o.server) {
    drive(s, peer, o);
    done = g_failures == 0 ? 'Y' : 'N';
  }
  xfer(fd, &done, &ack, 1);
  if (o.server) {
    // What the client wrote last is here, byte for byte; the counter ran once per iteration.
    for (size_t i = 0; i < o.size / 4; i++)
      if (s.buf[i] != pattern(uint64_t(o.iters - 1), i)) {
        CHECKV(false, "server: written byte %zu is %u, want %u", i, s.buf[i], pattern(uint64_t(o.iters - 1), i));
        break;
      }
    uint64_t counter;
    std::memcpy(&counter, s.buf.data() + o.size - 8, 8);
    CHECKV(counter == uint64_t(o.iters), "server: counter is %llu", static_cast<unsigned long long>(counter));
    CHECKV(ack == 'Y', "server: the client saw failures");
  }
  close(fd);
  ibv_destroy_qp(s.qp);
  ibv_dereg_mr(s.mr);
  ibv_destroy_cq(s.cq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return g_failures == 0 ? 0 : 1;
}

int run_loopback(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Side a, b;
  setup(a, ctx, pd, o.size, o.gid, 0x300);
  setup(b, ctx, pd, o.size, o.gid, 0x400);
  for (size_t i = 0; i < o.size / 4; i++) b.buf[o.size / 4 + i] = pattern(1000, i);
  CHECKV(connect_qp(a, b.local) == 0 && connect_qp(b, a.local) == 0, "connect");
  drive(a, b.local, o);
  uint64_t counter;
  std::memcpy(&counter, b.buf.data() + o.size - 8, 8);
  CHECKV(counter == uint64_t(o.iters), "loopback counter %llu", static_cast<unsigned long long>(counter));
  // SEND/RECV between the two QPs of this process.
  ibv_sge rs{reinterpret_cast<uint64_t>(b.buf.data()) + o.size / 2, uint32_t(o.size / 4), b.mr->lkey};
  ibv_recv_wr rw{}, *rbad = nullptr;
  rw.wr_id = 9;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  CHECKV(ibv_post_recv(b.qp, &rw, &rbad) == 0, "post_recv");
  for (size_t i = 0; i < 1000; i++) a.buf[i] = pattern(77, i);
  post(a, IBV_WR_SEND, 0, 1000, 0, 0, 10);
  auto rwc = wait(b, 1);
  CHECKV(rwc[0].status == IBV_WC_SUCCESS && rwc[0].byte_len == 1000, "loopback receive");
  CHECKV(std::memcmp(b.buf.data() + o.size / 2, a.buf.data(), 1000) == 0, "loopback SEND bytes differ");
  wait(a, 1);
  return g_failures == 0 ? 0 : 1;
}

// Verbs misuse gets what a real provider gives.
int run_misuse(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  Side a, b;
  setup(a, ctx, pd, 4096, o.gid, 1);
  setup(b, ctx, pd, 4096, o.gid, 2);
  // Posting on a QP in RESET.
  ibv_sge sge{reinterpret_cast<uint64_t>(a.buf.data()), 64, a.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  CHECKV(ibv_post_send(a.qp, &wr, &bad) == EINVAL, "post_send on a RESET QP must be EINVAL");
  // Bad transitions and attributes.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTS;
  CHECKV(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE) == EINVAL, "RESET -> RTS must be EINVAL");
  CHECKV(connect_qp(a, b.local) == 0 && connect_qp(b, a.local) == 0, "connect");
  // Too many SGEs.
  ibv_sge many[5] = {sge, sge, sge, sge, sge};
  wr.sg_list = many;
  wr.num_sge = 5;
  CHECKV(ibv_post_send(a.qp, &wr, &bad) == EINVAL && bad == &wr, "5 SGEs on a 4-SGE QP must be EINVAL");
  wr.send_flags = IBV_SEND_INLINE;
  CHECKV(ibv_post_send(a.qp, &wr, &bad) == EINVAL && bad == &wr, "5 inline SGEs on a 4-SGE QP must be EINVAL");
  // SGE lengths whose 32-bit sum wraps (0xFFFFFFF8 + 0x10 = 8): refused, not
  // copied (an inline SEND; an ATOMIC WRITE, which takes exactly 8 bytes).
  ibv_sge wrap[2] = {{sge.addr, 0xFFFFFFF8u, sge.lkey}, {sge.addr, 0x10u, sge.lkey}};
  wr.sg_list = wrap;
  wr.num_sge = 2;
  CHECKV(ibv_post_send(a.qp, &wr, &bad) == EINVAL && bad == &wr, "inline SGE lengths wrapping to 8 must be EINVAL");
  wr.send_flags = 0;
  wr.opcode = IBV_WR_ATOMIC_WRITE;
  wr.wr.rdma.remote_addr = b.local.addr;
  wr.wr.rdma.rkey = b.local.rkey;
  CHECKV(ibv_post_send(a.qp, &wr, &bad) == EINVAL && bad == &wr, "ATOMIC WRITE SGE lengths wrapping to 8 must be EINVAL");
  wr.opcode = IBV_WR_SEND;
  // A wrong rkey: remote access error, nothing written.
  std::memset(a.buf.data(), 0x5a, 64);
  post(a, IBV_WR_RDMA_WRITE, 0, 64, b.local.addr, b.local.rkey ^ 0x1000, 7);
  auto wc = wait(a, 1);
  CHECKV(wc[0].status == IBV_WC_REM_ACCESS_ERR, "bad rkey: status %s", ibv_wc_status_str(wc[0].status));
  bool untouched = true;
  for (int i = 0; i < 64; i++) untouched = untouched && b.buf[size_t(i)] == 0;
  CHECKV(untouched, "a WRITE with a bad rkey changed memory");
  // Registering memory the process does not have.
  // One flag is passed as int: the ibv_reg_mr macro ANDs it with another enum
  // type, which clang rejects in C++20 (-Wdeprecated-enum-enum-conversion).
  ibv_mr* bad_mr = ibv_reg_mr(pd, reinterpret_cast<void*>(0x10), 4096, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  CHECKV(bad_mr == nullptr && errno == EFAULT, "reg_mr of unmapped memory must be EFAULT");
  // Remote write access without local write.
  ibv_mr* ro = ibv_reg_mr(pd, a.buf.data(), 64, static_cast<int>(IBV_ACCESS_REMOTE_WRITE));
  CHECKV(ro == nullptr && errno == EINVAL, "REMOTE_WRITE without LOCAL_WRITE must be EINVAL");
  // A CQ too small: an overflow, reported, not silent.
  ibv_cq* tiny = ibv_create_cq(ctx, 2, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = tiny;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {16, 16, 1, 1, 0};
  Side t;
  t.ctx = ctx;
  t.pd = pd;
  t.gid_index = o.gid;
  t.cq = tiny;
  t.buf.assign(64, 0);
  t.mr = ibv_reg_mr(pd, t.buf.data(), 64, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  t.qp = ibv_create_qp(pd, &ia);
  ibv_gid g;
  ibv_query_gid(ctx, 1, o.gid, &g);
  t.local = {t.qp->qp_num, 5, t.mr->rkey, reinterpret_cast<uint64_t>(t.buf.data()), {}};
  std::memcpy(t.local.gid, g.raw, 16);
  Side u;
  setup(u, ctx, pd, 64, o.gid, 6);
  CHECKV(connect_qp(t, u.local) == 0 && connect_qp(u, t.local) == 0, "connect tiny");
  for (int i = 0; i < 8; i++) post(t, IBV_WR_RDMA_WRITE, 0, 8, u.local.addr, u.local.rkey, uint64_t(i));
  int polled = 0, rc = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc w;
    rc = ibv_poll_cq(tiny, 1, &w);
    if (rc < 0) break;
    polled += rc;
  }
  CHECKV(rc < 0 && errno == EOVERFLOW, "overflowing a 2-entry CQ must show as a CQ error (rc %d, %d polled)", rc, polled);
  return g_failures == 0 ? 0 : 1;
}

// A WRITE of `len` bytes from `from` into `to` at `remote` with `rkey`;
// its completion status.
ibv_wc_status write_status(Side& from, uint64_t remote, uint32_t rkey, uint32_t len) {
  post(from, IBV_WR_RDMA_WRITE, 0, len, remote, rkey, 1);
  return wait(from, 1)[0].status;
}

// ibv_rereg_mr (ibv_rereg_mr.3): each flag takes effect for the NIC, the
// input errors leave the MR as it was, and a failed command says so.
void check_rereg(const Options& o, ibv_context* ctx, ibv_pd* pd) {
  Side a, b;
  setup(a, ctx, pd, 4096, o.gid, 11);
  setup(b, ctx, pd, 4096, o.gid, 12);
  CHECKV(connect_qp(a, b.local) == 0 && connect_qp(b, a.local) == 0, "connect");
  std::memset(a.buf.data(), 0x33, 256);
  ibv_mr* mr = b.mr;
  // Input errors: IBV_REREG_MR_ERR_INPUT with errno EINVAL.
  errno = 0;
  CHECKV(ibv_rereg_mr(mr, 1 << 5, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL,
         "an unknown flag must be IBV_REREG_MR_ERR_INPUT/EINVAL");
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr, 64, 0) == IBV_REREG_MR_ERR_INPUT,
         "CHANGE_TRANSLATION without an address must be IBV_REREG_MR_ERR_INPUT");
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b.buf.data(), 0, 0) == IBV_REREG_MR_ERR_INPUT,
         "CHANGE_TRANSLATION without a length must be IBV_REREG_MR_ERR_INPUT");
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == IBV_REREG_MR_ERR_INPUT,
         "access without CHANGE_ACCESS must be IBV_REREG_MR_ERR_INPUT");
  // The MR still works after them.
  CHECKV(write_status(a, b.local.addr, mr->rkey, 64) == IBV_WC_SUCCESS, "the MR works after input errors");
  // Command errors: IBV_REREG_MR_ERR_CMD.
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_REMOTE_WRITE) ==
             IBV_REREG_MR_ERR_CMD,
         "REMOTE_WRITE without LOCAL_WRITE must be IBV_REREG_MR_ERR_CMD");
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, reinterpret_cast<void*>(0x10), 4096, 0) ==
             IBV_REREG_MR_ERR_CMD,
         "a translation to unmapped memory must be IBV_REREG_MR_ERR_CMD");
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, nullptr, nullptr, 0, 0) == IBV_REREG_MR_ERR_CMD,
         "CHANGE_PD to no PD must be IBV_REREG_MR_ERR_CMD");
  // CHANGE_TRANSLATION: the WRITE lands in the new buffer, not the old one.
  // More pages than the MR had: a new key, as mlx5 makes a new mkey then.
  std::vector<uint8_t> moved(65536, 0);
  std::memset(b.buf.data(), 0, b.buf.size());
  const uint32_t key_before = mr->rkey;
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, moved.data(), moved.size(), 0) == 0,
         "CHANGE_TRANSLATION: %s", std::strerror(errno));
  CHECKV(mr->addr == moved.data() && mr->length == moved.size(), "ibv_mr.addr and length follow the translation");
  CHECKV(mr->rkey != key_before && mr->lkey == mr->rkey, "a translation to more pages: key 0x%x (was 0x%x)", mr->rkey,
         key_before);
  CHECKV(write_status(a, reinterpret_cast<uint64_t>(moved.data()) + 4096, mr->rkey, 256) == IBV_WC_SUCCESS,
         "a WRITE into the new range");
  bool landed = true, old_untouched = true;
  for (size_t i = 0; i < 256; i++) landed = landed && moved[4096 + i] == 0x33;
  for (uint8_t v : b.buf) old_untouched = old_untouched && v == 0;
  CHECKV(landed && old_untouched, "the WRITE went to the new range only (landed %d, old untouched %d)", landed,
         old_untouched);
  // CHANGE_PD: an MR in another PD than the responder's QP refuses it.
  ibv_pd* other = ibv_alloc_pd(ctx);
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0) == 0 && mr->pd == other,
         "CHANGE_PD: %s", std::strerror(errno));
  CHECKV(ibv_dealloc_pd(other) == EBUSY, "the new PD holds the MR");
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, nullptr, 0, 0) == 0, "CHANGE_PD back");
  CHECKV(ibv_dealloc_pd(other) == 0, "the other PD is free again");
  // CHANGE_ACCESS: without REMOTE_WRITE a WRITE is refused (the last
  // case: the QPs go to error with it).
  CHECKV(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE) == 0,
         "CHANGE_ACCESS: %s", std::strerror(errno));
  const ibv_wc_status st = write_status(a, reinterpret_cast<uint64_t>(moved.data()), mr->rkey, 64);
  CHECKV(st == IBV_WC_REM_ACCESS_ERR, "a WRITE into an MR without REMOTE_WRITE: %s", ibv_wc_status_str(st));
}

// The queries' bad flows as rdma-core's man pages and the kernel answer
// them, and the vendor as Soft-RoCE reports it.
void check_queries(ibv_context* ctx) {
  ibv_device_attr da{};
  CHECKV(ibv_query_device(ctx, &da) == 0, "query_device");
  CHECKV(da.vendor_id == 0xffffff && da.vendor_part_id == 0, "vendor %#x part %u (Soft-RoCE reports 0xffffff, 0)",
         da.vendor_id, da.vendor_part_id);
  ibv_port_attr pa{};
  CHECKV(ibv_query_port(ctx, 1, &pa) == 0 && pa.gid_tbl_len > 0, "query_port");
  const int n = pa.gid_tbl_len;
  std::vector<ibv_gid_entry> table(size_t(n) + 2);
  CHECKV(ibv_query_gid_table(ctx, table.data(), table.size(), 0) == n, "the table has gid_tbl_len entries");
  CHECKV(ibv_query_gid_table(ctx, table.data(), size_t(n) - 1, 0) == -EINVAL,
         "a buffer one entry short must fail with -EINVAL");
  CHECKV(ibv_query_gid_table(ctx, table.data(), 0, 0) == -EINVAL, "max_entries 0 must fail with -EINVAL");
  CHECKV(ibv_query_gid_table(ctx, table.data(), table.size(), 1) == -EINVAL, "flags must be 0 (-EINVAL)");
  ibv_gid_entry e{};
  CHECKV(ibv_query_gid_ex(ctx, 1, 3, &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 && e.gid_index == 3,
         "query_gid_ex 3 is RoCE v2");
  CHECKV(std::memcmp(e.gid.raw, table[3].gid.raw, 16) == 0, "query_gid_ex and the table agree");
  CHECKV(ibv_query_gid_ex(ctx, 1, uint32_t(n), &e, 0) == EINVAL, "an index past the table must be EINVAL");
  CHECKV(ibv_query_gid_ex(ctx, 2, 0, &e, 0) == EINVAL, "port 2 must be EINVAL");
  CHECKV(ibv_query_gid_ex(ctx, 1, 0, &e, 1) == EINVAL, "flags must be 0 (EINVAL)");
  ibv_gid g;
  CHECKV(ibv_query_gid(ctx, 1, n, &g) == -1, "ibv_query_gid past the table must fail");
  // Unsupported comp_masks.
  ibv_query_device_ex_input in{};
  in.comp_mask = 1;
  ibv_device_attr_ex dx{};
  CHECKV(ibv_query_device_ex(ctx, &in, &dx) == EINVAL, "query_device_ex with a comp_mask must be EINVAL");
  CHECKV(ibv_query_device_ex(ctx, nullptr, &dx) == 0 && dx.orig_attr.vendor_id == da.vendor_id,
         "query_device_ex agrees with query_device");
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr_ex qx{};
  qx.qp_type = IBV_QPT_RC;
  qx.send_cq = qx.recv_cq = cq;
  qx.cap = {16, 16, 1, 1, 0};
  qx.pd = pd;
  qx.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_IND_TABLE;  // RSS: not provided
  errno = 0;
  CHECKV(ibv_create_qp_ex(ctx, &qx) == nullptr && errno == EOPNOTSUPP,
         "create_qp_ex with an unsupported comp_mask must fail EOPNOTSUPP (errno %d)", errno);
  ibv_cq_init_attr_ex cx{};
  cx.cqe = 16;
  errno = 0;
  CHECKV(ibv_create_cq_ex(ctx, &cx) == nullptr && errno == EOPNOTSUPP, "create_cq_ex is not provided: EOPNOTSUPP");
  ibv_destroy_cq(cq);
  ibv_dealloc_pd(pd);
}

int run_api(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  check_queries(ctx);
  check_rereg(o, ctx, pd);
  return g_failures == 0 ? 0 : 1;
}

// Memory windows (ibv_alloc_mw.3, ibv_bind_mw.3, ibv_post_send.3): an
// owner QP binds windows over its MR, a peer QP of the same process (on the
// same NIC) writes and reads through them, every byte checked on both
// sides; outside a window, after its invalidation and through a type 2
// window's other QPs nothing lands. A refused access takes both QPs to the
// error state, so each such check has a fresh pair.
struct MwPair {
  Side own, peer;
};
void mw_pair(MwPair& m, ibv_context* ctx, ibv_pd* pd, const Options& o, uint32_t psn) {
  setup(m.own, ctx, pd, 65536, o.gid, psn, IBV_ACCESS_MW_BIND);
  setup(m.peer, ctx, pd, 65536, o.gid, psn + 1);
  CHECKV(connect_qp(m.own, m.peer.local) == 0 && connect_qp(m.peer, m.own.local) == 0, "connect");
  std::memset(m.own.buf.data(), 0xee, m.own.buf.size());
  for (size_t i = 0; i < m.peer.buf.size(); i++) m.peer.buf[i] = pattern(psn, i);
}
// The owner's bytes are 0xee outside [from, to).
bool untouched_outside(const Side& s, size_t from, size_t to) {
  for (size_t i = 0; i < s.buf.size(); i++)
    if ((i < from || i >= to) && s.buf[i] != 0xee) return false;
  return true;
}
// Posts an IBV_WR_BIND_MW of a type 2 window (the new key: ibv_inc_rkey)
// and returns the completion; the window has the new key if it succeeded.
ibv_wc bind_type2(Side& s, ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access) {
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 0xb2;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = {mr, addr, len, access};
  const int e = ibv_post_send(s.qp, &wr, &bad);
  CHECKV(e == 0, "post_send(BIND_MW): %s", std::strerror(e));
  const ibv_wc wc = wait(s, 1)[0];
  if (wc.status == IBV_WC_SUCCESS) mw->rkey = wr.bind_mw.rkey;
  return wc;
}

// A WRITE of 64 bytes from `s` through `rkey` to `addr`, refused with
// IBV_WC_REM_ACCESS_ERR and the owner's memory unchanged.
void check_refused(Side& s, const Side& owner, uint64_t addr, uint32_t rkey, const char* what) {
  const std::vector<uint8_t> before = owner.buf;
  post(s, IBV_WR_RDMA_WRITE, 0, 64, addr, rkey, 0xdead);
  const ibv_wc wc = wait(s, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE through %s: %s", what, ibv_wc_status_str(wc.status));
  CHECKV(owner.buf == before, "WRITE through %s changed memory", what);
}

// ibv_dereg_mr of an MR with a bound window fails with EINVAL (ibv_reg_mr(3):
// "ibv_dereg_mr() fails if any memory window is still bound to this MR";
// rxe), the MR and window working on; once the window is invalidated it
// succeeds, the old key is refused (with the same memory registered again
// under a new MR too) and the window may be bound to the new MR. A bound
// window stops working when its MR is reregistered to other memory, and a
// type 2 one is free to be bound again once its QP is destroyed. Each
// check has pairs of its own (a refusal takes a pair to the error state).
constexpr unsigned kMwRw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

void check_dereg_refused(ibv_context* ctx, ibv_pd* pd, const Options& o) {
  MwPair u, v;
  mw_pair(u, ctx, pd, o, 0x800);
  mw_pair(v, ctx, pd, o, 0x900);
  const uint64_t ubase = reinterpret_cast<uint64_t>(u.own.buf.data());
  ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw != nullptr, "alloc_mw(TYPE_2)");
  if (mw == nullptr) return;
  CHECKV(bind_type2(u.own, mw, u.own.mr, ubase, 4096, kMwRw).status == IBV_WC_SUCCESS, "bind before ibv_dereg_mr");
  const int e = ibv_dereg_mr(u.own.mr);
  CHECKV(e == EINVAL, "ibv_dereg_mr of an MR with a bound window: %s, not EINVAL", std::strerror(e));
  if (e == 0) return;
  post(u.peer, IBV_WR_RDMA_WRITE, 0, 64, ubase, mw->rkey, 0x90);
  CHECKV(wait(u.peer, 1)[0].status == IBV_WC_SUCCESS && std::memcmp(u.own.buf.data(), u.peer.buf.data(), 64) == 0,
         "WRITE through the window after the refused ibv_dereg_mr");
  const uint32_t old = mw->rkey;
  post(u.own, IBV_WR_LOCAL_INV, 0, 0, 0, old, 0x1f);
  CHECKV(wait(u.own, 1)[0].status == IBV_WC_SUCCESS, "local invalidate before ibv_dereg_mr");
  CHECKV(ibv_dereg_mr(u.own.mr) == 0, "ibv_dereg_mr once the window is invalidated");
  std::memset(u.own.buf.data(), 0xee, u.own.buf.size());
  u.own.mr = ibv_reg_mr(pd, u.own.buf.data(), u.own.buf.size(),
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
  CHECKV(u.own.mr != nullptr, "reg_mr again: %s", std::strerror(errno));
  if (u.own.mr == nullptr) return;
  check_refused(u.peer, u.own, ubase, old, "a window invalidated before its MR was deregistered");
  CHECKV(bind_type2(v.own, mw, u.own.mr, ubase + 4096, 4096, kMwRw).status == IBV_WC_SUCCESS,
         "the window bound again after ibv_dereg_mr");
  post(v.peer, IBV_WR_RDMA_WRITE, 0, 4096, ubase + 4096, mw->rkey, 0x91);
  CHECKV(wait(v.peer, 1)[0].status == IBV_WC_SUCCESS &&
             std::memcmp(u.own.buf.data() + 4096, v.peer.buf.data(), 4096) == 0,
         "WRITE through the window bound again after ibv_dereg_mr");
  CHECKV(ibv_dealloc_mw(mw) == 0, "dealloc_mw");
}

void check_unbound_by_destroy_qp(ibv_context* ctx, ibv_pd* pd, const Options& o) {
  MwPair v, w;
  mw_pair(v, ctx, pd, o, 0xa00);
  mw_pair(w, ctx, pd, o, 0xb00);
  const uint64_t vbase = reinterpret_cast<uint64_t>(v.own.buf.data());
  ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw != nullptr, "alloc_mw(TYPE_2)");
  if (mw == nullptr) return;
  CHECKV(bind_type2(v.own, mw, v.own.mr, vbase, 4096, kMwRw).status == IBV_WC_SUCCESS, "bind before ibv_destroy_qp");
  // Bound, it cannot be bound again (o10-37.2.30) until its QP goes.
  CHECKV(bind_type2(v.own, mw, v.own.mr, vbase, 64, kMwRw).status == IBV_WC_MW_BIND_ERR,
         "a second bind of a bound type 2 window");
  CHECKV(ibv_destroy_qp(v.own.qp) == 0, "ibv_destroy_qp with a bound window");
  CHECKV(bind_type2(w.own, mw, v.own.mr, vbase + 8192, 64, kMwRw).status == IBV_WC_SUCCESS,
         "the window bound again after ibv_destroy_qp");
  CHECKV(ibv_dealloc_mw(mw) == 0, "dealloc_mw");
}

void check_unbound_by_rereg(ibv_context* ctx, ibv_pd* pd, const Options& o) {
  MwPair w;
  mw_pair(w, ctx, pd, o, 0xc00);
  const uint64_t wbase = reinterpret_cast<uint64_t>(w.own.buf.data());
  ibv_mw* mw = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  CHECKV(mw != nullptr, "alloc_mw(TYPE_1)");
  if (mw == nullptr) return;
  ibv_mw_bind b{};
  b.wr_id = 0xb7;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info = {w.own.mr, wbase, 4096, kMwRw};
  CHECKV(ibv_bind_mw(w.own.qp, mw, &b) == 0 && wait(w.own, 1)[0].status == IBV_WC_SUCCESS, "bind before ibv_rereg_mr");
  post(w.peer, IBV_WR_RDMA_WRITE, 0, 64, wbase, mw->rkey, 0x92);
  CHECKV(wait(w.peer, 1)[0].status == IBV_WC_SUCCESS, "WRITE through the window before ibv_rereg_mr");
  // A new translation of the same memory, as after a munmap and mmap there.
  CHECKV(ibv_rereg_mr(w.own.mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, w.own.buf.data(), w.own.buf.size(), 0) == 0,
         "ibv_rereg_mr(CHANGE_TRANSLATION): %s", std::strerror(errno));
  check_refused(w.peer, w.own, wbase, mw->rkey, "a window whose MR was reregistered");
  CHECKV(ibv_dealloc_mw(mw) == 0, "dealloc_mw");
}

int run_mw(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_device_attr da{};
  CHECKV(ibv_query_device(ctx, &da) == 0, "query_device");
  CHECKV((da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) && (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B),
         "device_cap_flags 0x%x: no memory windows", da.device_cap_flags);
  CHECKV(da.max_mw > 0, "max_mw %d", da.max_mw);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  errno = 0;
  CHECKV(ibv_alloc_mw(pd, ibv_mw_type(3)) == nullptr && errno == EINVAL, "alloc_mw of type 3: errno %d", errno);
  const unsigned rw = kMwRw;

  MwPair a;
  mw_pair(a, ctx, pd, o, 0x100);
  const uint64_t base = reinterpret_cast<uint64_t>(a.own.buf.data());
  // Type 1: ibv_bind_mw, the new key in mw->rkey.
  ibv_mw* mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
  CHECKV(mw1 != nullptr && mw1->type == IBV_MW_TYPE_1, "alloc_mw(TYPE_1): %s", std::strerror(errno));
  if (mw1 == nullptr) return 1;
  const uint32_t key0 = mw1->rkey;
  ibv_mw_bind b1{};
  b1.wr_id = 0xb1;
  b1.send_flags = IBV_SEND_SIGNALED;
  // Zero-based rights (which rocemu's windows do not have): EINVAL from
  // the provider, as mlx5_bind_mw gives, nothing posted, the key as it
  // was; the same bind without them is the one that then succeeds.
  b1.bind_info = {a.own.mr, base + 4096, 8192, rw | IBV_ACCESS_ZERO_BASED};
  CHECKV(ibv_bind_mw(a.own.qp, mw1, &b1) == EINVAL && mw1->rkey == key0,
         "ibv_bind_mw with zero-based rights: not EINVAL, or the key changed");
  b1.bind_info.mw_access_flags = rw;
  CHECKV(ibv_bind_mw(a.own.qp, mw1, &b1) == 0, "ibv_bind_mw");
  ibv_wc wc = wait(a.own, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 0xb1, "bind type 1: %s, opcode %d",
         ibv_wc_status_str(wc.status), wc.opcode);
  CHECKV(mw1->rkey == ibv_inc_rkey(key0), "type 1 key 0x%x after the bind (was 0x%x)", mw1->rkey, key0);
  b1.bind_info.addr = 4096;  // addr without an MR: refused before anything is posted
  b1.bind_info.mr = nullptr;
  CHECKV(ibv_bind_mw(a.own.qp, mw1, &b1) == EINVAL, "ibv_bind_mw without an MR but with an address");
  // The peer writes through it, then reads it back: bytes checked on both sides.
  post(a.peer, IBV_WR_RDMA_WRITE, 0, 8192, base + 4096, mw1->rkey, 1);
  wc = wait(a.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS, "WRITE through the type 1 window: %s", ibv_wc_status_str(wc.status));
  CHECKV(std::memcmp(a.own.buf.data() + 4096, a.peer.buf.data(), 8192) == 0, "type 1: the owner's bytes differ");
  CHECKV(untouched_outside(a.own, 4096, 4096 + 8192), "type 1: bytes outside the window changed");
  post(a.peer, IBV_WR_RDMA_READ, 32768, 4096, base + 4096 + 1024, mw1->rkey, 2);
  wc = wait(a.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS, "READ through the type 1 window: %s", ibv_wc_status_str(wc.status));
  CHECKV(std::memcmp(a.peer.buf.data() + 32768, a.own.buf.data() + 4096 + 1024, 4096) == 0,
         "type 1: the bytes read differ");

  // Type 2: IBV_WR_BIND_MW on the owner's QP; ibv_bind_mw refuses it.
  ibv_mw* mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw2 != nullptr && mw2->type == IBV_MW_TYPE_2, "alloc_mw(TYPE_2): %s", std::strerror(errno));
  if (mw2 == nullptr) return 1;
  b1.bind_info = {a.own.mr, base, 64, rw};
  CHECKV(ibv_bind_mw(a.own.qp, mw2, &b1) == EINVAL, "ibv_bind_mw of a type 2 window");
  wc = bind_type2(a.own, mw2, a.own.mr, base + 16384, 4096, rw);
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW, "bind type 2: %s", ibv_wc_status_str(wc.status));
  post(a.peer, IBV_WR_RDMA_WRITE, 8192, 4096, base + 16384, mw2->rkey, 3);
  post(a.peer, IBV_WR_RDMA_READ, 40960, 4096, base + 16384, mw2->rkey, 4);
  for (const ibv_wc& w : wait(a.peer, 2))
    CHECKV(w.status == IBV_WC_SUCCESS, "through the type 2 window: %s", ibv_wc_status_str(w.status));
  CHECKV(std::memcmp(a.own.buf.data() + 16384, a.peer.buf.data() + 8192, 4096) == 0, "type 2: the owner's bytes differ");
  CHECKV(std::memcmp(a.peer.buf.data() + 40960, a.peer.buf.data() + 8192, 4096) == 0, "type 2: the bytes read differ");
  // SEND with invalidate frees it: the owner's receive names the key.
  ibv_sge rs{reinterpret_cast<uint64_t>(a.own.buf.data()) + 49152, 256, a.own.mr->lkey};
  ibv_recv_wr rwr{}, *rbad = nullptr;
  rwr.wr_id = 0x5e;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  CHECKV(ibv_post_recv(a.own.qp, &rwr, &rbad) == 0, "post_recv");
  post(a.peer, IBV_WR_SEND_WITH_INV, 0, 100, 0, mw2->rkey, 5);
  wc = wait(a.own, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && (wc.wc_flags & IBV_WC_WITH_INV) &&
             wc.invalidated_rkey == mw2->rkey && wc.byte_len == 100,
         "receive of the SEND with invalidate: %s flags 0x%x key 0x%x (want 0x%x)", ibv_wc_status_str(wc.status),
         wc.wc_flags, wc.invalidated_rkey, mw2->rkey);
  CHECKV(wait(a.peer, 1)[0].status == IBV_WC_SUCCESS, "SEND with invalidate");
  std::vector<uint8_t> before = a.own.buf;
  post(a.peer, IBV_WR_RDMA_WRITE, 0, 64, base + 16384, mw2->rkey, 6);
  wc = wait(a.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE after the invalidation: %s", ibv_wc_status_str(wc.status));
  CHECKV(a.own.buf == before, "WRITE after the invalidation changed memory");

  // Outside the type 1 window (which any QP of the PD reaches): one byte past its end.
  MwPair c;
  mw_pair(c, ctx, pd, o, 0x200);
  post(c.peer, IBV_WR_RDMA_WRITE, 0, 8192, base + 4096, mw1->rkey, 0x70);  // all of it: lands
  wc = wait(c.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS, "WRITE of the whole type 1 window from another QP: %s",
         ibv_wc_status_str(wc.status));
  CHECKV(std::memcmp(a.own.buf.data() + 4096, c.peer.buf.data(), 8192) == 0, "type 1 from another QP: bytes differ");
  before = a.own.buf;
  post(c.peer, IBV_WR_RDMA_WRITE, 0, 8192, base + 4096 + 1, mw1->rkey, 7);
  wc = wait(c.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE one byte past the window: %s", ibv_wc_status_str(wc.status));
  CHECKV(a.own.buf == before, "WRITE past the window changed memory");

  // A type 2 window bound to one QP: refused through another; then a
  // local invalidate, and refused on its own QP too.
  MwPair d, e;
  mw_pair(d, ctx, pd, o, 0x300);
  mw_pair(e, ctx, pd, o, 0x400);
  const uint64_t dbase = reinterpret_cast<uint64_t>(d.own.buf.data());
  ibv_mw* mw3 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw3 != nullptr, "alloc_mw(TYPE_2)");
  if (mw3 == nullptr) return 1;
  CHECKV(bind_type2(d.own, mw3, d.own.mr, dbase, 4096, rw).status == IBV_WC_SUCCESS, "bind type 2 to d");
  post(d.peer, IBV_WR_RDMA_WRITE, 0, 64, dbase, mw3->rkey, 0x80);  // through the QP it is bound to: lands
  wc = wait(d.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && std::memcmp(d.own.buf.data(), d.peer.buf.data(), 64) == 0,
         "WRITE through the type 2 window's own QP: %s", ibv_wc_status_str(wc.status));
  before = d.own.buf;
  post(e.peer, IBV_WR_RDMA_WRITE, 0, 64, dbase, mw3->rkey, 8);  // e's QPs are not the one it is bound to
  wc = wait(e.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_ACCESS_ERR, "through another QP: %s", ibv_wc_status_str(wc.status));
  CHECKV(d.own.buf == before, "through another QP: memory changed");
  post(d.own, IBV_WR_LOCAL_INV, 0, 0, 0, mw3->rkey, 0x1e);
  wc = wait(d.own, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV, "local invalidate: %s",
         ibv_wc_status_str(wc.status));
  post(d.peer, IBV_WR_RDMA_READ, 0, 64, dbase, mw3->rkey, 9);
  wc = wait(d.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_ACCESS_ERR, "READ after the local invalidate: %s", ibv_wc_status_str(wc.status));

  // A bind over an MR without IBV_ACCESS_MW_BIND: IBV_WC_MW_BIND_ERR.
  // First the same bind over an MR with it, on the same QP: bound.
  MwPair g;
  mw_pair(g, ctx, pd, o, 0x500);
  ibv_mw* mw4 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw4 != nullptr, "alloc_mw(TYPE_2)");
  if (mw4 == nullptr) return 1;
  wc = bind_type2(g.own, mw4, g.own.mr, reinterpret_cast<uint64_t>(g.own.buf.data()), 64, rw);
  CHECKV(wc.status == IBV_WC_SUCCESS, "bind over an MR with MW_BIND: %s", ibv_wc_status_str(wc.status));
  ibv_mw* mw4b = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw4b != nullptr, "alloc_mw(TYPE_2)");
  if (mw4b == nullptr) return 1;
  wc = bind_type2(g.own, mw4b, g.peer.mr, reinterpret_cast<uint64_t>(g.peer.buf.data()), 64, rw);
  CHECKV(wc.status == IBV_WC_MW_BIND_ERR, "bind over an MR without MW_BIND: %s", ibv_wc_status_str(wc.status));

  // A bind that ends at the MR's last byte: bound, and a WRITE to that
  // byte lands; one byte longer: IBV_WC_MW_BIND_ERR.
  MwPair m;
  mw_pair(m, ctx, pd, o, 0x700);
  const uint64_t mend = reinterpret_cast<uint64_t>(m.own.buf.data()) + m.own.buf.size();
  ibv_mw* mw6 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  ibv_mw* mw7 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw6 != nullptr && mw7 != nullptr, "alloc_mw(TYPE_2)");
  if (mw6 == nullptr || mw7 == nullptr) return 1;
  wc = bind_type2(m.own, mw6, m.own.mr, mend - 4096, 4096, rw);
  CHECKV(wc.status == IBV_WC_SUCCESS, "bind to the MR's end: %s", ibv_wc_status_str(wc.status));
  post(m.peer, IBV_WR_RDMA_WRITE, 0, 4096, mend - 4096, mw6->rkey, 0x60);
  wc = wait(m.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && std::memcmp(m.own.buf.data() + m.own.buf.size() - 4096, m.peer.buf.data(), 4096) == 0,
         "WRITE to the MR's last bytes through the window: %s", ibv_wc_status_str(wc.status));
  wc = bind_type2(m.own, mw7, m.own.mr, mend - 4096, 4097, rw);
  CHECKV(wc.status == IBV_WC_MW_BIND_ERR, "bind one byte past the MR's end: %s", ibv_wc_status_str(wc.status));

  // The same through ibv_qp_ex: ibv_wr_bind_mw, then ibv_wr_local_inv.
  MwPair h;
  mw_pair(h, ctx, pd, o, 0x600);
  ibv_destroy_qp(h.own.qp);
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_RC;
  ia.send_cq = ia.recv_cq = h.own.cq;
  ia.cap = {256, 256, 4, 4, 0};
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = pd;
  ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_RDMA_WRITE;
  h.own.qp = ibv_create_qp_ex(ctx, &ia);
  CHECKV(h.own.qp != nullptr, "create_qp_ex: %s", std::strerror(errno));
  if (h.own.qp == nullptr) return 1;
  h.own.local.qpn = h.own.qp->qp_num;
  ibv_destroy_qp(h.peer.qp);
  ibv_qp_init_attr pa{};
  pa.send_cq = pa.recv_cq = h.peer.cq;
  pa.qp_type = IBV_QPT_RC;
  pa.cap = {256, 256, 4, 4, 0};
  h.peer.qp = ibv_create_qp(pd, &pa);
  h.peer.local.qpn = h.peer.qp->qp_num;
  CHECKV(connect_qp(h.own, h.peer.local) == 0 && connect_qp(h.peer, h.own.local) == 0, "connect the ibv_qp_ex pair");
  const uint64_t hbase = reinterpret_cast<uint64_t>(h.own.buf.data());
  ibv_mw* mw5 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  CHECKV(mw5 != nullptr, "alloc_mw(TYPE_2)");
  if (mw5 == nullptr) return 1;
  ibv_qp_ex* qpx = ibv_qp_to_qp_ex(h.own.qp);
  const ibv_mw_bind_info info{h.own.mr, hbase + 1024, 2048, IBV_ACCESS_REMOTE_WRITE};
  const uint32_t key5 = ibv_inc_rkey(mw5->rkey);
  ibv_wr_start(qpx);
  qpx->wr_id = 0xb5;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(qpx, mw5, key5, &info);
  CHECKV(ibv_wr_complete(qpx) == 0, "ibv_wr_complete(bind)");
  wc = wait(h.own, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_BIND_MW && wc.wr_id == 0xb5, "ibv_wr_bind_mw: %s",
         ibv_wc_status_str(wc.status));
  mw5->rkey = key5;
  post(h.peer, IBV_WR_RDMA_WRITE, 0, 2048, hbase + 1024, mw5->rkey, 10);
  CHECKV(wait(h.peer, 1)[0].status == IBV_WC_SUCCESS, "WRITE through the ibv_wr_bind_mw window");
  CHECKV(std::memcmp(h.own.buf.data() + 1024, h.peer.buf.data(), 2048) == 0 && untouched_outside(h.own, 1024, 3072),
         "ibv_wr_bind_mw window: bytes");
  ibv_wr_start(qpx);
  qpx->wr_id = 0x1f5;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_local_inv(qpx, mw5->rkey);
  CHECKV(ibv_wr_complete(qpx) == 0, "ibv_wr_complete(local_inv)");
  wc = wait(h.own, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_LOCAL_INV, "ibv_wr_local_inv: %s",
         ibv_wc_status_str(wc.status));
  before = h.own.buf;
  post(h.peer, IBV_WR_RDMA_WRITE, 0, 64, hbase + 1024, mw5->rkey, 11);
  wc = wait(h.peer, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_ACCESS_ERR, "WRITE after ibv_wr_local_inv: %s", ibv_wc_status_str(wc.status));
  CHECKV(h.own.buf == before, "WRITE after ibv_wr_local_inv changed memory");

  check_dereg_refused(ctx, pd, o);
  check_unbound_by_destroy_qp(ctx, pd, o);
  check_unbound_by_rereg(ctx, pd, o);
  for (ibv_mw* mw : {mw1, mw2, mw3, mw4, mw4b, mw5, mw6, mw7}) CHECKV(ibv_dealloc_mw(mw) == 0, "dealloc_mw");
  std::printf("rocemu-verify: memory windows checked\n");
  return g_failures == 0 ? 0 : 1;
}

// RDMA ATOMIC WRITE (ibv_wr_atomic_write; IBV_WR_ATOMIC_WRITE through
// ibv_post_send): the device says it has it (device_cap_flags_ex bit 40,
// IB_UVERBS_DEVICE_ATOMIC_WRITE), QPs ask for it at creation (RC only),
// the 8 bytes are taken at the call and land whole behind what was posted
// before; every byte of the target checked. Misaligned (at the address
// or, through an iova 4 off, in memory), no remote write access, past the
// MR: the completion status rxe gives.
constexpr uint64_t kAtomicWriteCap = 1ull << 40;
constexpr size_t kAwBytes = 4096;

// An RC QP made by ibv_create_qp_ex with these send ops, in place of the
// one setup() made.
void use_qp_ex(Side& s, uint64_t send_ops) {
  CHECKV(ibv_destroy_qp(s.qp) == 0, "destroy_qp");
  ibv_qp_init_attr_ex ix{};
  ix.send_cq = ix.recv_cq = s.cq;
  ix.qp_type = IBV_QPT_RC;
  ix.cap = {256, 256, 4, 4, 0};
  ix.pd = s.pd;
  ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ix.send_ops_flags = send_ops;
  s.qp = ibv_create_qp_ex(s.ctx, &ix);
  CHECKV(s.qp != nullptr, "create_qp_ex: %s", std::strerror(errno));
  if (s.qp == nullptr) std::exit(1);
  s.local.qpn = s.qp->qp_num;
}

// Two connected sides of one process: `from` with ATOMIC WRITE, `to` the
// target (its memory 0xee, an MR with `to_access`).
struct AwPair {
  Side from, to;
};
void aw_pair(AwPair& a, ibv_context* ctx, ibv_pd* pd, const Options& o, uint32_t psn, int to_access) {
  setup(a.from, ctx, pd, kAwBytes, o.gid, psn);
  setup(a.to, ctx, pd, kAwBytes, o.gid, psn + 1);
  use_qp_ex(a.from, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE);
  std::memset(a.to.buf.data(), 0xee, kAwBytes);
  if (to_access != -1) {
    CHECKV(ibv_dereg_mr(a.to.mr) == 0, "dereg_mr");
    a.to.mr = ibv_reg_mr(pd, a.to.buf.data(), kAwBytes, to_access);
    CHECKV(a.to.mr != nullptr, "reg_mr: %s", std::strerror(errno));
    a.to.local.rkey = a.to.mr->rkey;
  }
  CHECKV(connect_qp(a.from, a.to.local) == 0 && connect_qp(a.to, a.from.local) == 0, "connect");
}

// ibv_wr_atomic_write of `value` to offset `off` of the target; the caller's
// copy is clobbered right after the call (the provider took it then).
int atomic_write_ex(AwPair& a, size_t off, uint64_t value, uint64_t id) {
  ibv_qp_ex* x = ibv_qp_to_qp_ex(a.from.qp);
  ibv_wr_start(x);
  x->wr_id = id;
  x->wr_flags = IBV_SEND_SIGNALED;
  uint64_t v = value;
  ibv_wr_atomic_write(x, a.to.local.rkey, a.to.local.addr + off, &v);
  v = ~value;
  return ibv_wr_complete(x);
}

// Every byte of the target: `want` where it was written, 0xee elsewhere.
void check_target(const AwPair& a, const std::vector<uint8_t>& want, const char* what) {
  for (size_t i = 0; i < kAwBytes; i++)
    if (a.to.buf[i] != want[i]) {
      CHECKV(false, "%s: byte %zu is 0x%02x, want 0x%02x", what, i, a.to.buf[i], want[i]);
      return;
    }
}

void check_atomic_write_refused(ibv_context* ctx, ibv_pd* pd, const Options& o, uint32_t psn, int to_access,
                                size_t off, ibv_wc_status want, const char* what) {
  AwPair a;
  aw_pair(a, ctx, pd, o, psn, to_access);
  CHECKV(atomic_write_ex(a, off, 0x1122334455667788ull, 0xbad) == 0, "%s: wr_complete", what);
  const ibv_wc wc = wait(a.from, 1)[0];
  CHECKV(wc.status == want && wc.wr_id == 0xbad, "%s: %s, want %s", what, ibv_wc_status_str(wc.status),
         ibv_wc_status_str(want));
  check_target(a, std::vector<uint8_t>(kAwBytes, 0xee), what);
}

// An MR registered with ibv_reg_mr_iova whose iova differs from its
// address by 4 modulo 8: an aligned address of it is misaligned in memory,
// refused as rxe refuses it (it checks the host address).
void check_atomic_write_iova_refused(ibv_context* ctx, ibv_pd* pd, const Options& o, uint32_t psn) {
  AwPair a;
  aw_pair(a, ctx, pd, o, psn, -1);
  CHECKV(ibv_dereg_mr(a.to.mr) == 0, "dereg_mr");
  const uint64_t addr = reinterpret_cast<uint64_t>(a.to.buf.data());
  const uint64_t iova = 0x10000000 + ((addr + 4) & 0xfff);
  a.to.mr = ibv_reg_mr_iova(pd, a.to.buf.data(), kAwBytes, iova,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  CHECKV(a.to.mr != nullptr, "reg_mr_iova: %s", std::strerror(errno));
  a.to.local.rkey = a.to.mr->rkey;
  a.to.local.addr = iova;
  const size_t off = size_t(((iova + 7) & ~7ull) - iova);  // aligned in the iova, 4 off in memory
  CHECKV(atomic_write_ex(a, off, 0x1122334455667788ull, 0xbad) == 0, "iova 4 off: wr_complete");
  const ibv_wc wc = wait(a.from, 1)[0];
  CHECKV(wc.status == IBV_WC_REM_INV_REQ_ERR && wc.wr_id == 0xbad, "iova 4 off: %s, want %s",
         ibv_wc_status_str(wc.status), ibv_wc_status_str(IBV_WC_REM_INV_REQ_ERR));
  check_target(a, std::vector<uint8_t>(kAwBytes, 0xee), "iova 4 off");
}

int run_atomic_write(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_device_attr_ex dx{};
  CHECKV(ibv_query_device_ex(ctx, nullptr, &dx) == 0, "query_device_ex");
  CHECKV(dx.device_cap_flags_ex & kAtomicWriteCap, "device_cap_flags_ex 0x%llx: no ATOMIC WRITE",
         static_cast<unsigned long long>(dx.device_cap_flags_ex));
  CHECKV((dx.device_cap_flags_ex & 0xffffffffull) == uint32_t(dx.orig_attr.device_cap_flags),
         "device_cap_flags_ex does not hold device_cap_flags");
  ibv_pd* pd = ibv_alloc_pd(ctx);

  // RC only: a UC QP asking for it is not made.
  {
    ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    ibv_qp_init_attr_ex ix{};
    ix.send_cq = ix.recv_cq = cq;
    ix.qp_type = IBV_QPT_UC;
    ix.cap = {16, 16, 1, 1, 0};
    ix.pd = pd;
    ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ix.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE;
    errno = 0;
    ibv_qp* uc = ibv_create_qp_ex(ctx, &ix);
    CHECKV(uc == nullptr && errno == EOPNOTSUPP, "UC QP with ATOMIC WRITE: %p, errno %d", static_cast<void*>(uc),
           errno);
    ibv_destroy_cq(cq);
  }

  AwPair a;
  aw_pair(a, ctx, pd, o, 0x200, -1);
  std::vector<uint8_t> want(kAwBytes, 0xee);
  auto expect_value = [&](size_t off, uint64_t v) { std::memcpy(want.data() + off, &v, 8); };
  // One, alone.
  CHECKV(atomic_write_ex(a, 64, 0x0123456789abcdefull, 1) == 0, "wr_complete");
  ibv_wc wc = wait(a.from, 1)[0];
  CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE && wc.byte_len == 8 && wc.wr_id == 1,
         "ATOMIC WRITE: %s, opcode %d, byte_len %u", ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len);
  expect_value(64, 0x0123456789abcdefull);
  check_target(a, want, "one ATOMIC WRITE");

  // A batch: a WRITE of 256 bytes, then ATOMIC WRITEs over its words and
  // past it; each store lands behind the WRITE.
  {
    for (size_t i = 0; i < 256; i++) a.from.buf[i] = pattern(7, i);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(a.from.qp);
    ibv_wr_start(x);
    x->wr_id = 10;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, a.to.local.rkey, a.to.local.addr + 1024);
    ibv_wr_set_sge(x, a.from.mr->lkey, reinterpret_cast<uint64_t>(a.from.buf.data()), 256);
    std::memcpy(want.data() + 1024, a.from.buf.data(), 256);
    for (uint64_t k = 0; k < 40; k++) {
      x->wr_id = 11 + k;
      const uint64_t v = 0xa5a5000000000000ull | (k * 0x10001);
      ibv_wr_atomic_write(x, a.to.local.rkey, a.to.local.addr + 1024 + k * 8, &v);
      expect_value(1024 + k * 8, v);
    }
    CHECKV(ibv_wr_complete(x) == 0, "wr_complete of the batch");
    auto wcs = wait(a.from, 41);
    for (size_t i = 0; i < wcs.size(); i++)
      CHECKV(wcs[i].status == IBV_WC_SUCCESS && wcs[i].wr_id == 10 + i &&
                 wcs[i].opcode == (i == 0 ? IBV_WC_RDMA_WRITE : IBV_WC_ATOMIC_WRITE),
             "batch completion %zu: %s, wr_id %llu, opcode %d", i, ibv_wc_status_str(wcs[i].status),
             static_cast<unsigned long long>(wcs[i].wr_id), wcs[i].opcode);
    check_target(a, want, "WRITE then ATOMIC WRITEs");
  }

  // ibv_post_send with IBV_WR_ATOMIC_WRITE: the 8 bytes from the SGE list,
  // taken at the post; not 8 bytes is EINVAL.
  {
    uint64_t v = 0xfeedfacecafebeefull;
    ibv_sge sge{reinterpret_cast<uint64_t>(&v), 8, 0};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 99;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
    wr.wr.rdma.remote_addr = a.to.local.addr + 2048;
    wr.wr.rdma.rkey = a.to.local.rkey;
    sge.length = 4;
    CHECKV(ibv_post_send(a.from.qp, &wr, &bad) == EINVAL && bad == &wr, "post_send of a 4-byte ATOMIC WRITE");
    sge.length = 8;
    CHECKV(ibv_post_send(a.from.qp, &wr, &bad) == 0, "post_send(ATOMIC_WRITE)");
    v = 0;
    wc = wait(a.from, 1)[0];
    CHECKV(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_ATOMIC_WRITE && wc.wr_id == 99,
           "post_send ATOMIC WRITE: %s, opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
    expect_value(2048, 0xfeedfacecafebeefull);
    check_target(a, want, "ibv_post_send ATOMIC WRITE");
  }

  // A QP created without it: ibv_wr_atomic_write fails the batch.
  {
    AwPair b;
    aw_pair(b, ctx, pd, o, 0x300, -1);
    use_qp_ex(b.from, IBV_QP_EX_WITH_RDMA_WRITE);
    ibv_qp_ex* x = ibv_qp_to_qp_ex(b.from.qp);
    ibv_wr_start(x);
    uint64_t v = 1;
    ibv_wr_atomic_write(x, b.to.local.rkey, b.to.local.addr, &v);
    CHECKV(ibv_wr_complete(x) == EOPNOTSUPP, "ibv_wr_atomic_write on a QP created without it");
  }

  // Refusals, each on a fresh pair (a refusal takes both QPs to ERR).
  check_atomic_write_refused(ctx, pd, o, 0x400, -1, 68, IBV_WC_REM_INV_REQ_ERR, "misaligned");
  check_atomic_write_refused(ctx, pd, o, 0x500,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 64,
                             IBV_WC_REM_ACCESS_ERR, "an MR without remote write access");
  check_atomic_write_refused(ctx, pd, o, 0x600, -1, kAwBytes, IBV_WC_REM_ACCESS_ERR, "past the MR");
  check_atomic_write_iova_refused(ctx, pd, o, 0x700);
  if (g_failures == 0) std::printf("rocemu-verify: ATOMIC WRITE checked\n");
  return g_failures == 0 ? 0 : 1;
}

// Takes every kind of object into every state and then leaves without
// freeing anything (or, with --wait, waits to be killed): what the engine
// must clean up after an application that dies.
int run_leave(const Options& o, bool wait_to_be_killed) {
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  CHECKV(pd != nullptr, "alloc_pd");
  Side reset, init, rtr, sender, receiver, error;
  uint32_t psn = 1;
  for (Side* s : {&reset, &init, &rtr, &sender, &receiver, &error}) setup(*s, ctx, pd, 65536, o.gid, psn++);
  CHECKV(connect_qp(init, rtr.local, IBV_QPS_INIT) == 0, "to INIT");
  CHECKV(connect_qp(rtr, init.local, IBV_QPS_RTR) == 0, "to RTR");
  // A pair in RTS with WRITEs in flight towards a QP that then fails.
  CHECKV(connect_qp(sender, receiver.local) == 0 && connect_qp(receiver, sender.local) == 0, "connect");
  CHECKV(connect_qp(error, receiver.local) == 0, "connect the one to fail");
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  CHECKV(ibv_modify_qp(error.qp, &a, IBV_QP_STATE) == 0, "to ERR");
  for (int i = 0; i < 16; i++) post(sender, IBV_WR_RDMA_WRITE, 0, 65536, receiver.local.addr, receiver.local.rkey, uint64_t(i));
  // A completion channel with an armed CQ, an SRQ with receives, and a
  // second context of the same process with an MR of its own.
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx);
  ibv_cq* armed = ch != nullptr ? ibv_create_cq(ctx, 16, nullptr, ch, 0) : nullptr;
  CHECKV(armed != nullptr && ibv_req_notify_cq(armed, 0) == 0, "an armed CQ on a channel");
  ibv_srq_init_attr sa{};
  sa.attr = {64, 1, 0};
  ibv_srq* srq = ibv_create_srq(pd, &sa);
  CHECKV(srq != nullptr, "create_srq");
  if (srq != nullptr) {
    ibv_sge sge{reinterpret_cast<uint64_t>(reset.buf.data()), 64, reset.mr->lkey};
    ibv_recv_wr rw{}, *bad = nullptr;
    rw.sg_list = &sge;
    rw.num_sge = 1;
    for (int i = 0; i < 8; i++) CHECKV(ibv_post_srq_recv(srq, &rw, &bad) == 0, "post_srq_recv");
  }
  ibv_context* second = open_device();
  ibv_pd* pd2 = second != nullptr ? ibv_alloc_pd(second) : nullptr;
  std::vector<uint8_t> other(4096);
  CHECKV(pd2 != nullptr && ibv_reg_mr(pd2, other.data(), other.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE)) != nullptr,
         "a second context");
  std::printf("rocemu-verify: left QPs in RESET, INIT, RTR, RTS and ERR with work in flight\n");
  std::fflush(stdout);
  if (wait_to_be_killed)
    for (;;) pause();
  return g_failures == 0 ? 0 : 1;  // and exit, freeing nothing
}

// XRC (ibv_open_xrcd.3, ibv_create_srq_ex.3, ibv_create_qp_ex.3,
// ibv_get_srq_num.3): a domain, an XRC SRQ with its own CQ, an initiator
// and a target on this NIC (loopback); SENDs and a WRITE name the SRQ by
// number through ibv_post_send and the ibv_wr_* interface, every byte
// checked; the errors the man pages and the kernel give for each misuse.
struct XrcSide {
  ibv_qp* ini = nullptr;
  ibv_qp* tgt = nullptr;
};

int xrc_connect(ibv_qp* qp, uint32_t dest, const ibv_gid& gid, int gid_index, bool target, int extra_mask = 0) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = target ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ : 0;
  if (int e = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return e;
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = dest;
  a.rq_psn = 0x77;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = uint8_t(gid_index);
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.port_num = 1;
  int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  if (target) mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  if (int e = ibv_modify_qp(qp, &a, mask)) return e;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0x77;
  a.timeout = g_qp_timeout;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT;
  if (!target) mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  return ibv_modify_qp(qp, &a, mask | extra_mask);
}

void check_xrcd_open_flags(ibv_context* ctx) {
  ibv_xrcd_init_attr xa{};
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD;  // no oflags
  xa.fd = -1;
  errno = 0;
  CHECKV(ibv_open_xrcd(ctx, &xa) == nullptr && errno == EINVAL, "open_xrcd without OFLAGS: EINVAL (errno %d)", errno);
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS | IBV_XRCD_INIT_ATTR_RESERVED;
  errno = 0;
  CHECKV(ibv_open_xrcd(ctx, &xa) == nullptr && errno == EOPNOTSUPP, "open_xrcd with an unknown bit: EOPNOTSUPP (%d)",
         errno);
  // A domain shared through a file: none until O_CREAT, O_EXCL refused
  // once it exists, any other open finds it.
  char path[] = "/tmp/rocemu-verify-xrcd-XXXXXX";
  const int fd = mkstemp(path);
  CHECKV(fd >= 0, "mkstemp");
  unlink(path);
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = fd;
  xa.oflags = 0;
  errno = 0;
  CHECKV(ibv_open_xrcd(ctx, &xa) == nullptr && errno == EAGAIN, "open_xrcd of a new file without O_CREAT: EAGAIN (%d)",
         errno);
  xa.oflags = O_CREAT;
  ibv_xrcd* x1 = ibv_open_xrcd(ctx, &xa);
  CHECKV(x1 != nullptr, "open_xrcd O_CREAT: %s", std::strerror(errno));
  xa.oflags = O_CREAT | O_EXCL;
  errno = 0;
  CHECKV(ibv_open_xrcd(ctx, &xa) == nullptr && errno == EINVAL, "open_xrcd O_EXCL of an open domain: EINVAL (%d)",
         errno);
  xa.oflags = 0;
  ibv_xrcd* x2 = ibv_open_xrcd(ctx, &xa);
  CHECKV(x2 != nullptr, "open_xrcd of an open domain: %s", std::strerror(errno));
  CHECKV(x1 != nullptr && ibv_close_xrcd(x1) == 0, "close_xrcd");
  CHECKV(x2 != nullptr && ibv_close_xrcd(x2) == 0, "close_xrcd of the last open");
  xa.oflags = 0;
  errno = 0;
  CHECKV(ibv_open_xrcd(ctx, &xa) == nullptr && errno == EAGAIN, "the domain went with its last close (%d)", errno);
  close(fd);
}

int run_xrc(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_device_attr da{};
  CHECKV(ibv_query_device(ctx, &da) == 0 && (da.device_cap_flags & IBV_DEVICE_XRC), "IBV_DEVICE_XRC");
  check_xrcd_open_flags(ctx);
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_cq* scq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  ibv_cq* rcq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  ibv_xrcd_init_attr xa{};
  xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  xa.fd = -1;
  ibv_xrcd* xrcd = ibv_open_xrcd(ctx, &xa);
  CHECKV(xrcd != nullptr, "open_xrcd(fd -1): %s", std::strerror(errno));
  if (pd == nullptr || scq == nullptr || rcq == nullptr || xrcd == nullptr) return 1;
  // SRQs: an XRC one needs its CQ; a basic one has no number.
  ibv_srq_init_attr_ex sa{};
  sa.attr = {16, 1, 0};
  sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_PD;
  sa.srq_type = IBV_SRQT_XRC;
  sa.xrcd = xrcd;
  sa.pd = pd;
  errno = 0;
  CHECKV(ibv_create_srq_ex(ctx, &sa) == nullptr && errno == EINVAL, "XRC SRQ without a CQ: EINVAL (%d)", errno);
  sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
  sa.cq = rcq;
  ibv_srq* srq = ibv_create_srq_ex(ctx, &sa);
  CHECKV(srq != nullptr, "create_srq_ex(XRC): %s", std::strerror(errno));
  ibv_srq_init_attr ba{};
  ba.attr = {4, 1, 0};
  ibv_srq* basic = ibv_create_srq(pd, &ba);
  uint32_t srqn = 0, none = 0;
  CHECKV(basic != nullptr && ibv_get_srq_num(basic, &none) == EINVAL, "get_srq_num of a basic SRQ: EINVAL");
  CHECKV(srq != nullptr && ibv_get_srq_num(srq, &srqn) == 0 && srqn != 0 && srqn <= 0xffffff, "get_srq_num");
  if (srq == nullptr) return 1;
  // QPs: a target needs its domain; an initiator with the ibv_wr_* interface.
  ibv_qp_init_attr_ex qa{};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD;
  qa.pd = pd;
  errno = 0;
  CHECKV(ibv_create_qp_ex(ctx, &qa) == nullptr && errno == EINVAL, "XRC_RECV without an XRCD: EINVAL (%d)", errno);
  qa = {};
  qa.qp_type = IBV_QPT_XRC_RECV;
  qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  qa.xrcd = xrcd;
  XrcSide x;
  x.tgt = ibv_create_qp_ex(ctx, &qa);
  CHECKV(x.tgt != nullptr, "create XRC_RECV: %s", std::strerror(errno));
  qa = {};
  qa.qp_type = IBV_QPT_XRC_SEND;
  qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  qa.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
  qa.pd = pd;
  qa.send_cq = scq;
  qa.cap = {16, 0, 1, 0, 0};
  x.ini = ibv_create_qp_ex(ctx, &qa);
  CHECKV(x.ini != nullptr, "create XRC_SEND: %s", std::strerror(errno));
  if (x.tgt == nullptr || x.ini == nullptr) return 1;
  ibv_gid gid;
  CHECKV(ibv_query_gid(ctx, 1, o.gid, &gid) == 0, "query_gid");
  // A target's RTS takes no send-side attribute.
  CHECKV(xrc_connect(x.tgt, x.ini->qp_num, gid, o.gid, true, IBV_QP_RETRY_CNT) == EINVAL,
         "XRC_RECV RTR->RTS with a retry count: EINVAL");
  ibv_qp_attr reset{};
  reset.qp_state = IBV_QPS_RESET;
  CHECKV(ibv_modify_qp(x.tgt, &reset, IBV_QP_STATE) == 0, "target to RESET");
  CHECKV(xrc_connect(x.tgt, x.ini->qp_num, gid, o.gid, true) == 0, "connect the target");
  // ibv_open_qp(3): the target opened again through the domain; the
  // creator's ibv_destroy_qp then leaves it to the opened one.
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD;
  oa.qp_num = x.tgt->qp_num;
  oa.xrcd = xrcd;
  oa.qp_type = IBV_QPT_XRC_RECV;
  errno = 0;
  CHECKV(ibv_open_qp(ctx, &oa) == nullptr && errno == EINVAL, "open_qp without a type: EINVAL (%d)", errno);
  oa.comp_mask |= IBV_QP_OPEN_ATTR_TYPE;
  oa.qp_num = 0xabcdef;
  errno = 0;
  CHECKV(ibv_open_qp(ctx, &oa) == nullptr && errno == EINVAL, "open_qp of no target: EINVAL (%d)", errno);
  oa.qp_num = x.tgt->qp_num;
  ibv_qp* opened = ibv_open_qp(ctx, &oa);
  CHECKV(opened != nullptr && opened->qp_num == x.tgt->qp_num, "open_qp: %s", std::strerror(errno));
  if (opened == nullptr) return 1;
  CHECKV(ibv_destroy_qp(x.tgt) == 0, "the creator lets go of the target");
  x.tgt = opened;
  ibv_qp_attr qa_now{};
  ibv_qp_init_attr qi_now{};
  CHECKV(ibv_query_qp(x.tgt, &qa_now, IBV_QP_STATE, &qi_now) == 0 && qa_now.qp_state == IBV_QPS_RTS,
         "the opened target is the same, in RTS");
  CHECKV(xrc_connect(x.ini, x.tgt->qp_num, gid, o.gid, false) == 0, "connect the initiator");

  std::vector<uint8_t> buf(65536);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (mr == nullptr) return 1;
  // Neither XRC QP has a receive queue; a target has no send queue.
  ibv_sge rs{reinterpret_cast<uint64_t>(buf.data()) + 32768, 8192, mr->lkey};
  ibv_recv_wr rw{}, *rbad = nullptr;
  rw.sg_list = &rs;
  rw.num_sge = 1;
  CHECKV(ibv_post_recv(x.ini, &rw, &rbad) != 0, "post_recv on XRC_SEND must fail");
  CHECKV(ibv_post_recv(x.tgt, &rw, &rbad) != 0, "post_recv on XRC_RECV must fail");
  ibv_sge ss{reinterpret_cast<uint64_t>(buf.data()), 3000, mr->lkey};
  ibv_send_wr sw{}, *sbad = nullptr;
  sw.sg_list = &ss;
  sw.num_sge = 1;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  sw.qp_type.xrc.remote_srqn = srqn;
  CHECKV(ibv_post_send(x.tgt, &sw, &sbad) != 0, "post_send on XRC_RECV must fail");
  for (int i = 0; i < 2; i++) {
    rw.wr_id = uint64_t(50 + i);
    rs.addr = reinterpret_cast<uint64_t>(buf.data()) + 32768 + uint64_t(i) * 8192;
    CHECKV(ibv_post_srq_recv(srq, &rw, &rbad) == 0, "post_srq_recv");
  }
  for (size_t i = 0; i < 3000; i++) buf[i] = pattern(31, i);
  for (size_t i = 3000; i < 6000; i++) buf[i] = pattern(32, i);
  // One SEND by ibv_post_send, one by ibv_wr_* with ibv_wr_set_xrc_srqn.
  CHECKV(ibv_post_send(x.ini, &sw, &sbad) == 0, "post_send XRC");
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(x.ini);
  ibv_wr_start(qx);
  qx->wr_id = 2;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_sge(qx, mr->lkey, reinterpret_cast<uint64_t>(buf.data()) + 3000, 3000);
  ibv_wr_set_xrc_srqn(qx, srqn);
  qx->wr_id = 3;
  ibv_wr_rdma_write(qx, mr->rkey, reinterpret_cast<uint64_t>(buf.data()) + 49152);
  ibv_wr_set_sge(qx, mr->lkey, reinterpret_cast<uint64_t>(buf.data()), 6000);
  ibv_wr_set_xrc_srqn(qx, srqn);
  CHECKV(ibv_wr_complete(qx) == 0, "wr_complete");
  Side ss_side, rs_side;
  ss_side.cq = scq;
  rs_side.cq = rcq;
  const auto swc = wait(ss_side, 3);
  for (const auto& c : swc) CHECKV(c.status == IBV_WC_SUCCESS, "XRC send %llu: %s", static_cast<unsigned long long>(c.wr_id), ibv_wc_status_str(c.status));
  const auto rwc = wait(rs_side, 2);
  for (const auto& c : rwc) {
    CHECKV(c.status == IBV_WC_SUCCESS && c.byte_len == 3000, "XRC receive: %s, %u bytes", ibv_wc_status_str(c.status),
           c.byte_len);
    CHECKV(c.qp_num == x.tgt->qp_num, "XRC receive on QP %u, not the target %u", c.qp_num, x.tgt->qp_num);
  }
  CHECKV(std::memcmp(buf.data() + 32768, buf.data(), 3000) == 0, "first XRC SEND bytes differ");
  CHECKV(std::memcmp(buf.data() + 32768 + 8192, buf.data() + 3000, 3000) == 0, "second XRC SEND bytes differ");
  CHECKV(std::memcmp(buf.data() + 49152, buf.data(), 6000) == 0, "XRC WRITE bytes differ");
  // In use: the domain (its SRQ and target), the SRQ's CQ.
  CHECKV(ibv_close_xrcd(xrcd) == EBUSY, "close_xrcd with an SRQ and a target: EBUSY");
  CHECKV(ibv_destroy_cq(rcq) == EBUSY, "destroy_cq of an XRC SRQ's CQ: EBUSY");
  // remote_srqn left 0: no SRQ has that number; the target NAKs.
  sw.qp_type.xrc.remote_srqn = 0;
  CHECKV(ibv_post_send(x.ini, &sw, &sbad) == 0, "post_send");
  const auto bad = wait(ss_side, 1);
  CHECKV(bad[0].status == IBV_WC_REM_ACCESS_ERR, "remote_srqn 0: %s", ibv_wc_status_str(bad[0].status));
  CHECKV(ibv_destroy_qp(x.ini) == 0 && ibv_destroy_qp(x.tgt) == 0, "destroy XRC QPs");
  CHECKV(ibv_destroy_srq(srq) == 0 && ibv_destroy_srq(basic) == 0, "destroy SRQs");
  CHECKV(ibv_close_xrcd(xrcd) == 0, "close_xrcd once unused");
  ibv_dereg_mr(mr);
  ibv_destroy_cq(scq);
  ibv_destroy_cq(rcq);
  ibv_dealloc_pd(pd);
  ibv_close_device(ctx);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

// ---- one context in two processes (ibv_import_device) --------------------

// What the owner hands the importer along with the context's cmd_fd.
struct Handed {
  uint32_t pd, mr, stale_mr, lkey, rkey;
  uint64_t addr, stale_addr, length;
  // ROCEMU_DMA=process_vm: the MR is on the fallback, which the engine
  // stops reaching once the owner has closed its device.
  uint32_t fallback;
};

void hand_over(int sock, int fd, const Handed& h) {
  iovec iov{const_cast<Handed*>(&h), sizeof h};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  char cbuf[CMSG_SPACE(sizeof(int))];
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  CHECKV(sendmsg(sock, &m, 0) == ssize_t(sizeof h), "sendmsg: %s", std::strerror(errno));
}

int take_over(int sock, Handed& h) {
  iovec iov{&h, sizeof h};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  char cbuf[CMSG_SPACE(sizeof(int))];
  m.msg_control = cbuf;
  m.msg_controllen = sizeof cbuf;
  if (recvmsg(sock, &m, MSG_CMSG_CLOEXEC) != ssize_t(sizeof h)) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return -1;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

// One step of the owner/importer dialogue.
void say(int sock, char c) { CHECKV(write(sock, &c, 1) == 1, "say %c", c); }
void hear(int sock, char want) {
  char c = 0;
  if (read(sock, &c, 1) != 1 || c != want) {
    std::fprintf(stderr, "rocemu-verify: expected '%c' from the other process, got '%c'\n", want, c);
    std::exit(3);
  }
}

// A bad import gets NULL and `want` in errno.
template <typename T>
void check_null_errno(T* got, int want, const char* what) {
  const int e = errno;
  CHECKV(got == nullptr && e == want, "%s: %p, errno %s (want %s)", what, static_cast<void*>(got), std::strerror(e),
         std::strerror(want));
}

// The importer (child): the context, PD and MR the owner made, a CQ and a
// QP of its own on that PD, and the owner's bytes moved to and from the
// peer under the imported MR's keys.
int run_importer(const Options& o, int sock) {
  Handed h{};
  const int cmd_fd = take_over(sock, h);
  CHECKV(cmd_fd >= 0, "no cmd_fd from the owner");
  // Bad flows of ibv_import_device (libibverbs' own answers).
  check_null_errno(ibv_import_device(-1), EINVAL, "import_device(-1)");
  int fds[2];
  CHECKV(pipe(fds) == 0, "pipe");
  check_null_errno(ibv_import_device(fds[0]), EINVAL, "import_device(a pipe)");
  close(fds[0]);
  close(fds[1]);
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  check_null_errno(ibv_import_device(null_fd), ENODEV, "import_device(/dev/null)");
  close(null_fd);
  ibv_context* ctx = ibv_import_device(cmd_fd);
  CHECKV(ctx != nullptr, "import_device: %s", std::strerror(errno));
  if (ctx == nullptr) return 1;
  CHECKV(ctx->cmd_fd == cmd_fd, "the imported context's cmd_fd is %d, not %d", ctx->cmd_fd, cmd_fd);
  // Unknown handles: ENOENT, as the kernel's lookup of a handle not there.
  check_null_errno(ibv_import_pd(ctx, h.pd + 0x1000), ENOENT, "import_pd(unknown)");
  ibv_pd* pd = ibv_import_pd(ctx, h.pd);
  CHECKV(pd != nullptr && pd->handle == h.pd, "import_pd: %s", std::strerror(errno));
  if (pd == nullptr) return 1;
  check_null_errno(ibv_import_mr(pd, 0xdeadbeef), ENOENT, "import_mr(unknown)");
  ibv_mr* mr = ibv_import_mr(pd, h.mr);
  CHECKV(mr != nullptr, "import_mr: %s", std::strerror(errno));
  if (mr == nullptr) return 1;
  CHECKV(mr->addr == nullptr && mr->length == h.length && mr->lkey == h.lkey && mr->rkey == h.rkey &&
             mr->handle == h.mr && mr->pd == pd,
         "imported MR: addr %p length %zu lkey %#x rkey %#x", mr->addr, mr->length, mr->lkey, mr->rkey);
  // A second import of the same MR, unimported: the MR stays (used below).
  // Unimports mlx5 refuses do nothing: of a parent domain (ibv_dealloc_pd
  // frees it) and of a PD a parent domain stands on.
  ibv_parent_domain_init_attr pa{};
  pa.pd = pd;
  ibv_pd* parent = ibv_alloc_parent_domain(ctx, &pa);
  CHECKV(parent != nullptr, "alloc_parent_domain on the imported PD: %s", std::strerror(errno));
  if (parent != nullptr) {
    ibv_unimport_pd(parent);
    ibv_unimport_pd(pd);
    CHECKV(ibv_dealloc_pd(parent) == 0, "dealloc_pd of the parent domain after its unimport");
  }
  ibv_mr* again = ibv_import_mr(pd, h.mr);
  CHECKV(again != nullptr && again->lkey == h.lkey, "import_mr again: %s", std::strerror(errno));
  if (again != nullptr) ibv_unimport_mr(again);
  ibv_mr* stale = ibv_import_mr(pd, h.stale_mr);
  CHECKV(stale != nullptr, "import_mr(second MR): %s", std::strerror(errno));
  // This emulator's limit (README): an importer registers no memory.
  std::vector<uint8_t> mine(4096);
  check_null_errno(ibv_reg_mr(pd, mine.data(), mine.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE)), EOPNOTSUPP, "reg_mr by the importer");
  Side s;
  s.ctx = ctx;
  s.pd = pd;
  s.mr = mr;
  s.base = h.addr;
  s.gid_index = o.gid;
  s.cq = ibv_create_cq(ctx, 64, nullptr, nullptr, 0);
  CHECKV(s.cq != nullptr, "create_cq: %s", std::strerror(errno));
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = s.cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {64, 64, 1, 1, 0};
  s.qp = ibv_create_qp(pd, &ia);
  CHECKV(s.qp != nullptr, "create_qp on the imported PD: %s", std::strerror(errno));
  if (s.cq == nullptr || s.qp == nullptr) return 1;
  say(sock, 'Q');  // the owner's PD now has this process's QP on it
  hear(sock, 'k');  // and the owner has deregistered the second MR: gone here too
  check_null_errno(ibv_import_mr(pd, h.stale_mr), ENOENT, "import_mr(deregistered by the owner)");
  ibv_gid gid;
  CHECKV(ibv_query_gid(ctx, 1, o.gid, &gid) == 0, "query_gid");
  s.local = {s.qp->qp_num, 0x500, h.rkey, h.addr, {}};
  std::memcpy(s.local.gid, gid.raw, 16);
  const int fd = tcp_connect(o.host, o.port);
  Peer peer{};
  xfer(fd, &s.local, &peer, sizeof peer);
  CHECKV(connect_qp(s, peer) == 0, "connect_qp");
  // The owner lays out each iteration's bytes and checks what lands.
  const size_t q = o.size / 4;
  for (int it = 0; it < o.iters; it++) {
    hear(sock, 'g');
    post(s, IBV_WR_RDMA_WRITE, 0, uint32_t(q), peer.addr, peer.rkey, 1);
    post(s, IBV_WR_RDMA_READ, q, uint32_t(q), peer.addr, peer.rkey, 2);
    post(s, IBV_WR_RDMA_READ, 2 * q, uint32_t(q), peer.addr + q, peer.rkey, 3);
    post(s, IBV_WR_ATOMIC_FETCH_AND_ADD, o.size - 8, 8, peer.addr + o.size - 8, peer.rkey, 4, 1);
    const auto wcs = wait(s, 4);
    if (h.fallback != 0 && it == o.iters - 1) {
      // The owner has closed its device: its memory off the memfds is
      // reached no more (it may map anything there now).
      CHECKV(wcs[0].status == IBV_WC_LOC_PROT_ERR, "WRITE from the fallback MR of an owner gone: %s",
             ibv_wc_status_str(wcs[0].status));
    } else {
      for (auto& w : wcs)
        CHECKV(w.status == IBV_WC_SUCCESS, "iteration %d, wr %llu: %s", it, static_cast<unsigned long long>(w.wr_id),
               ibv_wc_status_str(w.status));
    }
    say(sock, 'd');
  }
  // The owner has closed its device, unmapped its buffer and mapped new
  // memory at the same address: a READ into the imported MR lands in the
  // MR's own pages (pinned, as by the kernel), never in that new memory
  // (on the fallback the QP is in the error state by now).
  hear(sock, 'u');
  if (h.fallback == 0) {
    post(s, IBV_WR_RDMA_READ, 2 * q, uint32_t(q), peer.addr + q, peer.rkey, 5);
    for (auto& w : wait(s, 1))
      CHECKV(w.status == IBV_WC_SUCCESS, "READ into the MR of an owner gone: %s", ibv_wc_status_str(w.status));
  }
  say(sock, 'r');
  // The second MR, deregistered by the owner while imported here: a
  // WRITE from it fails locally (its QP goes to the error state).
  if (stale != nullptr && h.fallback == 0) {
    ibv_sge sge{h.stale_addr, 64, stale->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 9;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    CHECKV(ibv_post_send(s.qp, &wr, &bad) == 0, "post_send");
    auto wc = wait(s, 1);
    CHECKV(wc[0].status == IBV_WC_LOC_PROT_ERR, "WRITE from a deregistered MR: %s", ibv_wc_status_str(wc[0].status));
    ibv_unimport_mr(stale);
  }
  char done = g_failures == 0 ? 'Y' : 'N', ack = 0;
  xfer(fd, &done, &ack, 1);
  close(fd);
  // The owner has closed its device: its MR and PD are the context's, and
  // the importer's to destroy (the QP on the PD first).
  CHECKV(ibv_dealloc_pd(pd) == EBUSY, "dealloc_pd under the importer's own QP is not EBUSY");
  CHECKV(ibv_destroy_qp(s.qp) == 0 && ibv_destroy_cq(s.cq) == 0, "destroy");
  CHECKV(ibv_dereg_mr(mr) == 0, "dereg_mr of the owner's MR by the importer");
  CHECKV(ibv_dealloc_pd(pd) == 0, "dealloc_pd of the owner's PD by the importer");
  CHECKV(ibv_close_device(ctx) == 0, "close_device");
  say(sock, 'E');
  return g_failures == 0 ? 0 : 1;
}

// The owner (parent): opens the device, registers its buffer, hands the
// context to the importer and checks every byte the importer moved.
int run_import(const Options& o) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return 2;
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    close(sv[0]);
    const int rc = run_importer(o, sv[1]);
    std::printf("rocemu-verify: importer %s (%d failure(s))\n", rc == 0 ? "all good" : "FAILED", g_failures);
    std::fflush(stdout);
    _exit(rc);
  }
  close(sv[1]);
  const int sock = sv[0];
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  auto* buf = static_cast<uint8_t*>(
      mmap(nullptr, o.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::vector<uint8_t> stale_buf(4096, 0x5a);
  constexpr int kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ibv_mr* mr = ibv_reg_mr(pd, buf, o.size, kAll);
  ibv_mr* stale = ibv_reg_mr(pd, stale_buf.data(), stale_buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  CHECKV(pd != nullptr && mr != nullptr && stale != nullptr, "owner: pd/reg_mr: %s", std::strerror(errno));
  if (mr == nullptr || stale == nullptr) return 1;
  const char* dma = std::getenv("ROCEMU_DMA");
  const bool fallback = dma != nullptr && std::string_view(dma) == "process_vm";
  const Handed h{pd->handle, mr->handle, stale->handle, mr->lkey, mr->rkey,
                 reinterpret_cast<uint64_t>(buf), reinterpret_cast<uint64_t>(stale_buf.data()), o.size,
                 fallback ? 1u : 0u};
  hand_over(sock, ctx->cmd_fd, h);
  hear(sock, 'Q');
  // The importer's QP is on the PD: it is busy for the owner too.
  CHECKV(ibv_dealloc_pd(pd) == EBUSY, "owner: dealloc_pd under the importer's QP is not EBUSY");
  CHECKV(ibv_dereg_mr(stale) == 0, "owner: dereg of the imported second MR");
  say(sock, 'k');
  const size_t q = o.size / 4;
  for (int it = 0; it < o.iters; it++) {
    // Before the last, the owner closes its device: the context, its PD
    // and MR stay the importer's, and reach this process's memory still.
    if (it == o.iters - 1 && ctx != nullptr) {
      ibv_unimport_mr(mr);  // registered, not imported: nothing (the close frees it once)
      CHECKV(ibv_close_device(ctx) == 0, "owner: close_device");
      ctx = nullptr;
    }
    for (size_t i = 0; i < q; i++) buf[i] = pattern(uint64_t(it), i);
    std::memset(buf + q, 0, 2 * q);
    say(sock, 'g');
    hear(sock, 'd');
    if (fallback && it == o.iters - 1) break;  // refused (the importer checks)
    // In this process's memory: what the importer wrote out and read back,
    // the peer's pattern, the counter as it was.
    CHECKV(std::memcmp(buf, buf + q, q) == 0, "owner: iteration %d: WRITE then READ differ", it);
    for (size_t i = 0; i < q; i++)
      if (buf[2 * q + i] != pattern(1000, i)) {
        CHECKV(false, "owner: iteration %d: READ byte %zu is %u, want %u", it, i, buf[2 * q + i], pattern(1000, i));
        break;
      }
    uint64_t before;
    std::memcpy(&before, buf + o.size - 8, 8);
    CHECKV(before == uint64_t(it), "owner: iteration %d: FETCH_ADD returned %llu", it,
           static_cast<unsigned long long>(before));
    std::printf("rocemu-verify: iteration %d checked by the owner\n", it);
    std::fflush(stdout);
  }
  // A child forked now has the MR's pages, pinned on their memfd for the
  // importer, as private memory of its own (they are MADV_DONTFORK).
  {
    uint64_t sum = 0;
    for (size_t i = 0; i < o.size; i++) sum = sum * 31 + buf[i];
    const pid_t kid = fork();
    if (kid == 0) {
      uint64_t mine = 0;
      for (size_t i = 0; i < o.size; i++) mine = mine * 31 + buf[i];
      _exit(mine == sum ? 0 : 1);
    }
    int kst = 0;
    CHECKV(kid > 0 && waitpid(kid, &kst, 0) == kid && WIFEXITED(kst) && WEXITSTATUS(kst) == 0,
           "owner: a child forked after the close does not see the MR's pages (status %#x)", kst);
  }
  // New memory where the MR was: the importer's READ must not touch it.
  CHECKV(munmap(buf, o.size) == 0 &&
             mmap(buf, o.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == buf,
         "owner: new memory at the MR's address: %s", std::strerror(errno));
  std::memset(buf, 0xee, o.size);
  say(sock, 'u');
  hear(sock, 'r');
  for (size_t i = 0; i < o.size; i++)
    if (buf[i] != 0xee) {
      CHECKV(false, "owner: the importer's READ wrote byte %zu of the new memory at the MR's address", i);
      break;
    }
  hear(sock, 'E');
  if (ctx != nullptr) CHECKV(ibv_close_device(ctx) == 0, "owner: close_device");
  munmap(buf, o.size);
  int st = 0;
  waitpid(child, &st, 0);
  CHECKV(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the importer failed (status %d)", st);
  return g_failures == 0 ? 0 : 1;
}

// ---- thread and parent domains ---------------------------------------------

// A parent domain's allocator that counts, hands out fresh zeroed pages
// (or asks for the default, or fails) and remembers what it gave.
struct Allocations {
  enum Mode { kPages, kDefault, kFail } mode = kPages;
  int allocs = 0, frees = 0;
  std::vector<uint64_t> types;
  std::map<void*, size_t> live;
};

void* count_alloc(ibv_pd*, void* pd_context, size_t size, size_t alignment, uint64_t type) {
  auto& a = *static_cast<Allocations*>(pd_context);
  a.allocs++;
  a.types.push_back(type);
  if (a.mode == Allocations::kDefault) return IBV_ALLOCATOR_USE_DEFAULT;
  if (a.mode == Allocations::kFail) return nullptr;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || reinterpret_cast<uintptr_t>(p) % alignment != 0) return nullptr;
  madvise(p, size, MADV_DONTFORK);
  a.live[p] = size;
  return p;
}

void count_free(ibv_pd*, void* pd_context, void* ptr, uint64_t) {
  auto& a = *static_cast<Allocations*>(pd_context);
  a.frees++;
  auto it = a.live.find(ptr);
  CHECKV(it != a.live.end(), "free of %p, never allocated", ptr);
  if (it == a.live.end()) return;
  // What comes back is plain memory again, zeroed.
  const auto* b = static_cast<const uint8_t*>(ptr);
  bool zero = true;
  for (size_t i = 0; i < it->second && zero; i++) zero = b[i] == 0;
  CHECKV(zero, "a queue's memory came back to the allocator not zeroed");
  munmap(ptr, it->second);
  a.live.erase(it);
}

// The /proc/self/maps line of the mapping at `p`.
std::string mapping_at(const void* p) {
  std::ifstream maps("/proc/self/maps");
  char want[32];
  std::snprintf(want, sizeof want, "%lx-", static_cast<unsigned long>(reinterpret_cast<uintptr_t>(p)));
  for (std::string line; std::getline(maps, line);)
    if (line.rfind(want, 0) == 0) return line;
  return "";
}

ibv_pd* parent_domain(ibv_context* ctx, ibv_pd* pd, ibv_td* td, Allocations* a) {
  ibv_parent_domain_init_attr attr{};
  attr.pd = pd;
  attr.td = td;
  attr.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  attr.alloc = count_alloc;
  attr.free = count_free;
  attr.pd_context = a;
  return ibv_alloc_parent_domain(ctx, &attr);
}

int run_parent_domain(const Options& o) {
  ibv_context* ctx = open_device();
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_td_init_attr td_attr{};
  td_attr.comp_mask = 1;
  check_null_errno(ibv_alloc_td(ctx, &td_attr), EINVAL, "alloc_td(unknown comp_mask)");
  td_attr.comp_mask = 0;
  ibv_td* td = ibv_alloc_td(ctx, &td_attr);
  CHECKV(td != nullptr, "alloc_td: %s", std::strerror(errno));
  // Bad parent domains.
  Allocations a;
  ibv_parent_domain_init_attr bad{};
  bad.pd = nullptr;
  check_null_errno(ibv_alloc_parent_domain(ctx, &bad), EINVAL, "parent domain without a PD");
  bad.pd = pd;
  bad.comp_mask = 1u << 7;
  check_null_errno(ibv_alloc_parent_domain(ctx, &bad), EINVAL, "parent domain with an unknown comp_mask bit");
  bad.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
  bad.alloc = count_alloc;
  check_null_errno(ibv_alloc_parent_domain(ctx, &bad), EINVAL, "parent domain with alloc but no free");
  ibv_pd* dom = parent_domain(ctx, pd, td, &a);
  CHECKV(dom != nullptr && dom->context == ctx, "alloc_parent_domain: %s", std::strerror(errno));
  if (dom == nullptr) return 1;
  check_null_errno(parent_domain(ctx, dom, nullptr, &a), EINVAL, "a parent domain of a parent domain");
  // Two QPs with their MRs through the domain: one allocation each, of the
  // QP resource type, and the rings live there.
  Side x, y;
  setup(x, ctx, dom, o.size, o.gid, 0x600);
  setup(y, ctx, dom, o.size, o.gid, 0x700);
  const uint64_t qp_type = uint64_t(RDMA_DRIVER_RXE) << 32 | 1, srq_type = uint64_t(RDMA_DRIVER_RXE) << 32 | 2;
  CHECKV(a.allocs == 2 && a.types == std::vector<uint64_t>({qp_type, qp_type}), "allocations for two QPs: %d", a.allocs);
  for (const auto& [p, n] : a.live) {
    const std::string m = mapping_at(p);
    CHECKV(m.find("rocemu-qp") != std::string::npos, "the allocated range at %p is not the QP's rings: '%s'", p,
           m.c_str());
  }
  for (size_t i = 0; i < o.size / 4; i++) y.buf[o.size / 4 + i] = pattern(1000, i);
  CHECKV(connect_qp(x, y.local) == 0 && connect_qp(y, x.local) == 0, "connect");
  drive(x, y.local, o);
  // An SRQ through it too.
  ibv_srq_init_attr si{};
  si.attr.max_wr = 16;
  si.attr.max_sge = 1;
  ibv_srq* srq = ibv_create_srq(dom, &si);
  CHECKV(srq != nullptr && a.allocs == 3 && a.types.back() == srq_type, "create_srq through the domain: %s",
         std::strerror(errno));
  // Busy while in use: the domain, its TD, its PD.
  CHECKV(ibv_dealloc_pd(dom) == EBUSY, "dealloc of a parent domain in use is not EBUSY");
  CHECKV(ibv_dealloc_td(td) == EBUSY, "dealloc of a TD under a parent domain is not EBUSY");
  CHECKV(ibv_dealloc_pd(pd) == EBUSY, "dealloc of the PD under a parent domain is not EBUSY");
  if (srq != nullptr) CHECKV(ibv_destroy_srq(srq) == 0, "destroy_srq");
  for (Side* s : {&x, &y})
    CHECKV(ibv_destroy_qp(s->qp) == 0 && ibv_dereg_mr(s->mr) == 0 && ibv_destroy_cq(s->cq) == 0, "destroy");
  CHECKV(a.frees == 3 && a.live.empty(), "frees: %d of 3", a.frees);
  CHECKV(ibv_dealloc_pd(dom) == 0, "dealloc of the parent domain");
  CHECKV(ibv_dealloc_td(td) == 0, "dealloc_td");
  // IBV_ALLOCATOR_USE_DEFAULT: asked, then the provider's own; an
  // allocator's NULL fails the QP with ENOMEM.
  Allocations d;
  d.mode = Allocations::kDefault;
  ibv_pd* dom2 = parent_domain(ctx, pd, nullptr, &d);
  CHECKV(dom2 != nullptr, "second parent domain: %s", std::strerror(errno));
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr ia{};
  ia.send_cq = ia.recv_cq = cq;
  ia.qp_type = IBV_QPT_RC;
  ia.cap = {16, 16, 1, 1, 0};
  ibv_qp* qp = ibv_create_qp(dom2, &ia);
  CHECKV(qp != nullptr && d.allocs == 1, "QP with the default allocator: %s", std::strerror(errno));
  if (qp != nullptr) CHECKV(ibv_destroy_qp(qp) == 0 && d.frees == 0, "the default's memory went to free()");
  d.mode = Allocations::kFail;
  check_null_errno(ibv_create_qp(dom2, &ia), ENOMEM, "QP whose allocator fails");
  CHECKV(ibv_destroy_cq(cq) == 0 && ibv_dealloc_pd(dom2) == 0 && ibv_dealloc_pd(pd) == 0, "teardown");
  CHECKV(ibv_close_device(ctx) == 0, "close_device");
  return g_failures == 0 ? 0 : 1;
}

// Completion events (ibv_get_cq_event, its channel's fd) with two CQs on
// one channel: a QP on each, both in ERR, so that a posted send completes
// at once (flushed) and raises its CQ's event. ibv_get_cq_event polls the
// CQs a while before it sleeps, and the engine raises events without
// writing the fd meanwhile; whatever the interleaving, an event raised and
// not taken must leave the fd readable, and every thread waiting in
// ibv_get_cq_event must get one.
struct EventRig {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq[2] = {};
  ibv_qp* qp[2] = {};
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(4096);

  bool open() {
    ctx = open_device();
    pd = ctx != nullptr ? ibv_alloc_pd(ctx) : nullptr;
    ch = pd != nullptr ? ibv_create_comp_channel(ctx) : nullptr;
    if (ch == nullptr) return false;
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
    for (int i = 0; i < 2; i++) {
      cq[i] = ibv_create_cq(ctx, 64, nullptr, ch, 0);
      ibv_qp_init_attr ia{};
      ia.qp_type = IBV_QPT_RC;
      ia.cap = {64, 64, 1, 1, 0};
      ia.send_cq = ia.recv_cq = cq[i];
      qp[i] = cq[i] != nullptr ? ibv_create_qp(pd, &ia) : nullptr;
      ibv_qp_attr a{};
      a.qp_state = IBV_QPS_ERR;
      if (qp[i] == nullptr || ibv_modify_qp(qp[i], &a, IBV_QP_STATE) != 0) return false;
    }
    return mr != nullptr;
  }
  void arm() {
    for (ibv_cq* c : cq) ibv_req_notify_cq(c, 0);
  }
  void fire(int i) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf.data()), 64, mr->lkey};
    ibv_send_wr w{}, *bad = nullptr;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_SIGNALED;
    ibv_post_send(qp[i], &w, &bad);
  }
  void drain() {
    ibv_wc wc[16];
    for (ibv_cq* c : cq)
      while (ibv_poll_cq(c, 16, wc) > 0) {
      }
  }
  void set_nonblocking(bool on) {
    const int f = fcntl(ch->fd, F_GETFL);
    fcntl(ch->fd, F_SETFL, on ? f | O_NONBLOCK : f & ~O_NONBLOCK);
  }
  // Takes one event, waiting up to 2 s for it (non-blocking calls).
  bool take_one() {
    set_nonblocking(true);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    ibv_cq* c;
    void* cc;
    bool got = false;
    while (!(got = ibv_get_cq_event(ch, &c, &cc) == 0) && std::chrono::steady_clock::now() < deadline) sched_yield();
    if (got) ibv_ack_cq_events(c, 1);
    set_nonblocking(false);
    return got;
  }
  // Takes every event left (non-blocking), and with them the wake-ups
  // waiting in the fd; how many.
  int take_all() {
    set_nonblocking(true);
    int n = 0;
    ibv_cq* c;
    void* cc;
    while (ibv_get_cq_event(ch, &c, &cc) == 0) {
      ibv_ack_cq_events(c, 1);
      n++;
    }
    set_nonblocking(false);
    return n;
  }
};

// Spins (yielding) until `flag` is set: the other thread is inside
// ibv_get_cq_event, polling or about to sleep.
void until_set(const std::atomic<bool>& flag) {
  while (!flag.load()) sched_yield();
}

int run_events(int rounds) {
  EventRig r;
  CHECKV(r.open(), "a channel with two CQs, a QP in ERR on each: %s", std::strerror(errno));
  if (g_failures != 0) return 1;
  // 1. One event taken with ibv_get_cq_event (blocking); the other CQ's
  //    event raised while it polled: the application then waits on the fd
  //    itself, as a poll loop does.
  int lost = 0;
  for (int i = 0; i < rounds; i++) {
    r.take_all();  // no old wake-up left to make the fd readable
    r.arm();
    std::atomic<bool> inside{false};
    std::thread t([&] {
      until_set(inside);
      r.fire(0);
      r.fire(1);
    });
    inside = true;
    ibv_cq* c;
    void* cc;
    CHECKV(ibv_get_cq_event(r.ch, &c, &cc) == 0, "ibv_get_cq_event: %s", std::strerror(errno));
    ibv_ack_cq_events(c, 1);
    t.join();
    pollfd p{r.ch->fd, POLLIN, 0};
    if (poll(&p, 1, 2000) != 1) lost++;
    CHECKV(r.take_one(), "round %d: the second event", i);
    r.drain();
  }
  CHECKV(lost == 0, "poll loop: %d of %d rounds had an event raised and the fd not readable", lost, rounds);
  // 2. Two threads waiting in ibv_get_cq_event, both CQs firing: each
  //    thread gets an event.
  int stuck = 0;
  for (int i = 0; i < rounds; i++) {
    r.arm();
    std::atomic<int> got{0};
    std::atomic<bool> in[2] = {false, false};
    auto waiter = [&](int k) {
      in[k] = true;
      ibv_cq* c;
      void* cc;
      if (ibv_get_cq_event(r.ch, &c, &cc) == 0) {
        ibv_ack_cq_events(c, 1);
        got++;
      }
    };
    std::thread w0(waiter, 0), w1(waiter, 1);
    until_set(in[0]);
    until_set(in[1]);
    r.fire(0);
    r.fire(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (got.load() < 2 && std::chrono::steady_clock::now() < deadline) sched_yield();
    if (got.load() < 2) {
      stuck++;
      r.arm();  // release the one left: another event
      r.fire(0);
      r.fire(1);
    }
    w0.join();
    w1.join();
    r.take_all();
    r.drain();
  }
  CHECKV(stuck == 0, "two waiters: %d of %d rounds left one asleep with an event raised", stuck, rounds);
  // 3. Many events taken without sleeping leave the fd written many times
  //    (up to a full pipe); a later wait does not poll once per old
  //    wake-up (it did: 128 polls of 50 us, 6-7 ms of CPU).
  for (int i = 0; i < 9000; i++) {
    r.arm();
    r.fire(i % 2);
    ibv_cq* c;
    void* cc;
    if (ibv_get_cq_event(r.ch, &c, &cc) == 0) ibv_ack_cq_events(c, 1);
    r.drain();
  }
  r.arm();
  std::atomic<bool> inside{false};
  std::thread t([&] {
    until_set(inside);
    // Let the waiter go through the old wake-ups (a deadline, not a
    // sleep: the check is the CPU it used meanwhile).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (std::chrono::steady_clock::now() < until) sched_yield();
    r.fire(0);
  });
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  inside = true;
  ibv_cq* c;
  void* cc;
  CHECKV(ibv_get_cq_event(r.ch, &c, &cc) == 0, "ibv_get_cq_event after many: %s", std::strerror(errno));
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  ibv_ack_cq_events(c, 1);
  t.join();
  const double ms = double(c1.tv_sec - c0.tv_sec) * 1e3 + double(c1.tv_nsec - c0.tv_nsec) / 1e6;
  std::printf("rocemu-verify: a wait behind old wake-ups used %.2f ms of CPU\n", ms);
  CHECKV(ms < 3, "a wait behind old wake-ups used %.2f ms of CPU (polled once per old wake-up?)", ms);
  if (g_failures == 0) std::printf("rocemu-verify: completion events checked\n");
  return g_failures == 0 ? 0 : 1;
}

// An application waiting on the channel's fd itself (poll/epoll, as UCX
// does) when the engine goes: the fd hangs up (only the engine holds a
// write end unless the provider polls). Prints "waiting"; the caller
// kills the engine.
int run_events_hup() {
  EventRig r;
  CHECKV(r.open(), "a channel with two CQs: %s", std::strerror(errno));
  if (g_failures != 0) return 1;
  r.arm();
  std::printf("rocemu-verify: waiting\n");
  std::fflush(stdout);
  pollfd p{r.ch->fd, POLLIN, 0};
  const int n = poll(&p, 1, 20000);
  CHECKV(n == 1 && (p.revents & POLLHUP), "poll on the channel's fd: %d, revents 0x%x (want POLLHUP)", n, p.revents);
  std::printf("rocemu-verify: %s\n", g_failures == 0 ? "the fd hung up" : "FAILED");
  std::fflush(stdout);
  _exit(g_failures == 0 ? 0 : 1);
}

// A thread asleep in ibv_get_cq_event while the engine hangs: when another
// thread's control call times out (the context is then dead), the sleeper
// returns with EIO. Prints "waiting" once the sleeper is in; the caller
// stops the engine.
int run_events_hung() {
  EventRig r;
  CHECKV(r.open(), "a channel with two CQs: %s", std::strerror(errno));
  if (g_failures != 0) return 1;
  r.arm();
  std::atomic<int> ret{1}, err{0};
  std::atomic<bool> inside{false};
  std::thread t([&] {
    inside = true;
    ibv_cq* c;
    void* cc;
    const int v = ibv_get_cq_event(r.ch, &c, &cc);
    err = errno;
    ret = v;
  });
  until_set(inside);
  std::printf("rocemu-verify: waiting\n");
  std::fflush(stdout);
  // The caller stops the engine after "waiting"; a control call then
  // times out (ROCEMU_RPC_TIMEOUT_MS) and takes the context down. Until
  // the engine is stopped calls succeed: retry.
  for (;;) {
    ibv_pd* p = ibv_alloc_pd(r.ctx);
    if (p == nullptr) break;
    ibv_dealloc_pd(p);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ret.load() == 1 && std::chrono::steady_clock::now() < deadline) sched_yield();
  CHECKV(ret.load() == -1 && err.load() == EIO, "the sleeper: returned %d, errno %d (want -1, EIO)", ret.load(),
         err.load());
  std::printf("rocemu-verify: %s\n", g_failures == 0 ? "the sleeper got EIO" : "FAILED");
  std::fflush(stdout);
  _exit(g_failures == 0 ? 0 : 1);  // the sleeper may still be inside
}

int main(int argc, char** argv) {
  Options o;
  bool leave = false, leave_wait = false, api = false, mw = false, import = false, parent = false,
       atomic_write = false, xrc = false, events = false, events_hung = false, events_hup = false;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) std::exit(2);
      return argv[++i];
    };
    if (a == "--loopback") o.loopback = true;
    else if (a == "--server") o.server = true;
    else if (a == "--misuse") o.misuse = true;
    else if (a == "--api") api = true;
    else if (a == "--mw") mw = true;
    else if (a == "--atomic-write") atomic_write = true;
    else if (a == "--xrc") xrc = true;
    else if (a == "--events") events = true;
    else if (a == "--events-hung") events_hung = true;
    else if (a == "--events-hup") events_hup = true;
    else if (a == "--leave") leave = true;
    else if (a == "--wait") leave_wait = true;
    else if (a == "--connect") o.host = next();
    else if (a == "--import") {
      import = true;
      o.host = next();
    } else if (a == "--parent-domain") parent = true;
    else if (a == "--bind") o.bind = next();
    else if (a == "--port") o.port = std::stoi(next());
    else if (a == "--size") o.size = std::stoul(next());
    else if (a == "--iters") o.iters = std::stoi(next());
    else if (a == "--gid") o.gid = std::stoi(next());
    else if (a == "--qp-timeout") g_qp_timeout = uint8_t(std::stoi(next()));
    else {
      std::fprintf(stderr,
                   "usage: rocemu-verify --loopback | --server [--bind ADDR] | --connect HOST | --import HOST | --misuse | "
                   "--api | --mw | --parent-domain | --atomic-write | --xrc | --events | --events-hung | --events-hup | "
                   "--leave [--wait] "
                   "[options]\n");
      return 2;
    }
  }
  o.size &= ~size_t(7);
  int rc;
  if (leave) return run_leave(o, leave_wait);
  if (events) return run_events(o.iters);
  if (events_hung) return run_events_hung();
  if (events_hup) return run_events_hup();
  if (api) rc = run_api(o);
  else if (mw) rc = run_mw(o);
  else if (import) rc = run_import(o);
  else if (parent) rc = run_parent_domain(o);
  else if (atomic_write) rc = run_atomic_write(o);
  else if (xrc) rc = run_xrc(o);
  else if (o.misuse) rc = run_misuse(o);
  else if (o.loopback) rc = run_loopback(o);
  else rc = run_pair(o);
  std::printf("rocemu-verify: %s (%d failure(s))\n", rc == 0 ? "every byte checked, all good" : "FAILED", g_failures);
  return rc;
}
