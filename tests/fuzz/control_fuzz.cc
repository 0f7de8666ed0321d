#include "tests/fuzz/control_fuzz.h"

#include <netinet/in.h>
#include <rdma/rdma_user_cm.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/engine/dpdk.h"
#include "common/engine/engine.h"
#include "nic/nic.h"
#include "nic/verbs/server.h"
#include "tests/support/control_client.h"

namespace rocemu::test {

namespace {

using verbs::Op;
using verbs::Reply;
using verbs::Request;

constexpr int kReplyMs = 2000;
constexpr uint32_t kOps = uint32_t(Op::kLeave) + 1;  // every op, and one that is none

// The server, made once per process: an engine that is not running (the
// control requests run on the server's thread) with one NIC, h1.
struct World {
  std::unique_ptr<Engine> engine;
  verbs::HostAgent* agent = nullptr;
  std::unique_ptr<verbs::VerbsServer> server;
  std::string path;
  std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 16);  // what MRs may cover

  World() {
    if (!dpdk::init_eal({.hugepages = false, .memory_mb = 512, .extra_args = {}}).ok()) std::abort();
    auto e = Engine::create({.mode = TimeMode::kVirtual, .seed = 1, .mbufs = 4096});
    if (!e.ok()) std::abort();
    engine = std::move(e.value());
    nic::NicConfig cfg;
    cfg.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
    cfg.ips = {*wire::IpAddr::parse("10.0.0.1")};
    cfg.max_cqe = 1 << 14;  // rings stay small: many sessions, little memory
    cfg.max_qp_wr = 1 << 12;
    cfg.app_quota = {.qps = 32, .cqs = 32, .mrs = 64, .mws = 16, .srqs = 8, .queue_bytes = 32ull << 20};
    engine->add<nic::Nic>("h1", cfg);
    agent = &engine->add<verbs::HostAgent>();
    engine->start();
    char dir[] = "/tmp/rocemu-control-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    path = std::string(dir) + "/rocemu.sock";
    server = std::make_unique<verbs::VerbsServer>(*engine, *agent, path);
    server->engine_stopped();
    if (!server->start().ok()) std::abort();
  }
};

World& world() {
  static World w;
  return w;
}

// Reads bytes of the input in order; zeros once it runs out.
struct Input {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    n--;
    return *p++;
  }
  uint32_t u32() { return uint32_t(byte()) | uint32_t(byte()) << 8 | uint32_t(byte()) << 16 | uint32_t(byte()) << 24; }
  uint64_t u64() { return uint64_t(u32()) | uint64_t(u32()) << 32; }
};

// What the server handed out in this session, to be named again.
struct Known {
  std::vector<uint32_t> pds, cqs, qps, mrs, mws, srqs, ahs, channels, cm_ids, xrcds;
  static uint32_t pick(const std::vector<uint32_t>& v, Input& in) {
    const uint8_t b = in.byte();
    if (v.empty() || b < 64) return in.u32();  // anything at all
    return v[b % v.size()];
  }
};

// One request from the input: mostly well formed, with fields that are
// either what the server handed out or anything.
Request make_request(Input& in, Known& k, World& w) {
  Request r;
  r.op = Op(1 + in.byte() % kOps);
  std::memset(&r.u, 0, sizeof r.u);
  switch (r.op) {
    case Op::kDeallocPd: r.u.handle.handle = k.pick(k.pds, in); break;
    case Op::kRegMr: {
      r.u.reg_mr.pd = k.pick(k.pds, in);
      r.u.reg_mr.access = in.byte() & 1 ? in.u32() : uint32_t(in.byte() & 0x1f);
      const bool inside = in.byte() & 1;
      r.u.reg_mr.addr = inside ? uint64_t(w.memory.data()) + in.byte() * 64 : in.u64();
      r.u.reg_mr.length = inside ? in.u32() % w.memory.size() : in.u64();
      r.u.reg_mr.iova = in.byte() & 1 ? r.u.reg_mr.addr : in.u64();
      break;
    }
    case Op::kDeregMr:
    case Op::kImportMr: r.u.handle.handle = k.pick(k.mrs, in); break;
    case Op::kImportPd: r.u.handle.handle = k.pick(k.pds, in); break;
    case Op::kAllocMw: r.u.alloc_mw = {k.pick(k.pds, in), in.byte() & 1 ? in.u32() : uint32_t(in.byte() % 4)}; break;
    case Op::kDeallocMw: r.u.handle.handle = k.pick(k.mws, in); break;
    case Op::kDestroyChannel: r.u.handle.handle = k.pick(k.channels, in); break;
    case Op::kCreateCq:
      r.u.create_cq.entries = in.byte() & 1 ? in.u32() : in.byte();
      r.u.create_cq.channel = in.byte() & 1 ? k.pick(k.channels, in) : 0;
      break;
    case Op::kDestroyCq: r.u.handle.handle = k.pick(k.cqs, in); break;
    case Op::kCreateSrq:
      r.u.create_srq = {k.pick(k.pds, in), in.byte() & 1 ? in.u32() : in.byte(), uint32_t(in.byte() % 20),
                        in.byte(), 0, 0};
      if (in.byte() & 1) {  // an XRC SRQ, or half of one
        r.u.create_srq.xrcd = k.pick(k.xrcds, in);
        r.u.create_srq.cq = in.byte() & 1 ? k.pick(k.cqs, in) : 0;
      }
      break;
    case Op::kOpenXrcd:
      r.u.open_xrcd = {in.byte() & 1 ? 0 : uint64_t(in.byte() % 3), in.byte() & 1 ? 0 : uint64_t(in.byte() % 3),
                       int32_t(in.byte() & 1 ? in.u32() : uint32_t(in.byte()) << 6)};  // O_CREAT 0100, O_EXCL 0200
      break;
    case Op::kCloseXrcd: r.u.handle.handle = k.pick(k.xrcds, in); break;
    case Op::kGetSrqNum: r.u.handle.handle = k.pick(k.srqs, in); break;
    case Op::kOpenQp: r.u.open_qp = {k.pick(k.xrcds, in), k.pick(k.qps, in)}; break;
    case Op::kModifySrq: r.u.modify_srq = {k.pick(k.srqs, in), in.u32()}; break;
    case Op::kDestroySrq: r.u.handle.handle = k.pick(k.srqs, in); break;
    case Op::kCreateQp: {
      auto& q = r.u.create_qp;
      q.type = in.byte() % 12;  // RC 2, UC 3, UD 4, XRC_SEND 9, XRC_RECV 10, and others
      q.xrcd = in.byte() & 1 ? k.pick(k.xrcds, in) : 0;
      q.pd = k.pick(k.pds, in);
      q.send_cq = k.pick(k.cqs, in);
      q.recv_cq = k.pick(k.cqs, in);
      q.srq = in.byte() & 1 ? k.pick(k.srqs, in) : 0;
      const bool big = in.byte() & 1;
      q.cap = {big ? in.u32() : in.byte(), big ? in.u32() : in.byte(), uint32_t(in.byte() % 40),
               uint32_t(in.byte() % 40), big ? in.u32() : in.byte()};
      q.sq_sig_all = in.byte();
      break;
    }
    case Op::kModifyQp: {
      auto& m = r.u.modify_qp;
      m.qpn = k.pick(k.qps, in);
      m.mask = int32_t(in.u32());
      std::vector<uint8_t> attr(sizeof m.attr);
      for (auto& b : attr) b = in.byte();
      std::memcpy(&m.attr, attr.data(), sizeof m.attr);
      if (in.byte() & 1) {  // a plausible state change
        m.mask = IBV_QP_STATE;
        m.attr.qp_state = ibv_qp_state(in.byte() % 7);
      }
      break;
    }
    case Op::kQueryQp:
    case Op::kDestroyQp: r.u.handle.handle = k.pick(k.qps, in); break;
    case Op::kCreateAh: {
      r.u.create_ah.pd = k.pick(k.pds, in);
      std::vector<uint8_t> attr(sizeof r.u.create_ah.attr);
      for (auto& b : attr) b = in.byte();
      std::memcpy(&r.u.create_ah.attr, attr.data(), sizeof r.u.create_ah.attr);
      break;
    }
    case Op::kDestroyAh: r.u.handle.handle = k.pick(k.ahs, in); break;
    case Op::kCli: {
      r.u.cli.length = in.byte() & 1 ? in.u32() : in.byte();
      for (size_t i = 0; i < 64; i++) r.u.cli.text[i] = char(in.byte());
      break;
    }
    case Op::kReregMr: {
      auto& m = r.u.rereg_mr;
      m.key = k.pick(k.mrs, in);
      m.flags = in.byte() & 1 ? in.u32() : uint32_t(in.byte() & 7);
      m.pd = k.pick(k.pds, in);
      m.access = in.byte() & 1 ? in.u32() : uint32_t(in.byte() & 0x1f);
      const bool inside = in.byte() & 1;
      m.addr = inside ? uint64_t(w.memory.data()) + in.byte() * 64 : in.u64();
      m.length = inside ? in.u32() % w.memory.size() : in.u64();
      break;
    }
    case Op::kServeSysfs: std::snprintf(r.u.serve_sysfs.node, sizeof r.u.serve_sysfs.node, "h1"); break;
    case Op::kCmOpen:
      std::snprintf(r.u.cm_open.node, sizeof r.u.cm_open.node, "%s", in.byte() & 1 ? "h1" : "nope");
      break;
    case Op::kCmCommand: {
      // A ucma command: header, then the command's words (ids the engine
      // gave or anything), sometimes a length that lies.
      auto& u = r.u.ucma;
      u.length = in.byte() & 1 ? in.u32() % (verbs::kUcmaMax + 64) : 8 + in.byte() % 300;
      rdma_ucm_cmd_hdr hdr{};
      hdr.cmd = in.byte() % 24;
      hdr.in = uint16_t(in.byte() & 1 ? in.u32() : std::min<uint32_t>(u.length, verbs::kUcmaMax) - 8);
      hdr.out = uint16_t(in.byte() & 1 ? in.u32() : 512);
      std::memcpy(u.bytes, &hdr, sizeof hdr);
      for (size_t i = sizeof hdr; i + 4 <= verbs::kUcmaMax; i += 4) {
        const uint32_t word = (in.byte() & 3) == 0 ? k.pick(k.cm_ids, in) : in.u32();
        std::memcpy(u.bytes + i, &word, 4);
      }
      break;
    }
    case Op::kHello: std::snprintf(r.u.hello.node, sizeof r.u.hello.node, "%s", in.byte() & 1 ? "h1" : "nope"); break;
    default: break;
  }
  if (in.byte() == 0xff) r.version = in.u32();  // now and then a wrong version
  return r;
}

// Writes ring indices from the input into a QP's queues, as an
// application may.
void scribble_rings(int fd, const verbs::QpCreated& q, Input& in) {
  void* mem = mmap(nullptr, q.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return;
  auto* sq = static_cast<nic::RingHeader*>(mem);
  sq->producer.v.store(in.u32());
  if (q.rq_offset + sizeof(nic::RingHeader) <= q.map_bytes && q.rq_entries > 0) {
    auto* rq = reinterpret_cast<nic::RingHeader*>(static_cast<uint8_t*>(mem) + q.rq_offset);
    rq->producer.v.store(in.u32());
  }
  const size_t body = std::min<size_t>(q.map_bytes - sizeof(nic::RingHeader), 256);
  for (size_t i = 0; i < body; i++) reinterpret_cast<uint8_t*>(sq + 1)[i] = in.byte();
  munmap(mem, q.map_bytes);
}

void remember(const Request& r, const Reply& rep, Known& k) {
  if (rep.err != 0) return;
  switch (r.op) {
    case Op::kAllocPd: k.pds.push_back(rep.u.handle.handle); break;
    case Op::kRegMr: k.mrs.push_back(rep.u.mr.key); break;
    case Op::kAllocMw: k.mws.push_back(rep.u.mw.handle); break;
    case Op::kCreateChannel: k.channels.push_back(rep.u.handle.handle); break;
    case Op::kCreateCq: k.cqs.push_back(rep.u.ring.handle); break;
    case Op::kCreateSrq: k.srqs.push_back(rep.u.ring.handle); break;
    case Op::kCreateQp:
    case Op::kOpenQp: k.qps.push_back(r.op == Op::kOpenQp ? r.u.open_qp.qpn : rep.u.qp.qpn); break;
    case Op::kCreateAh: k.ahs.push_back(rep.u.handle.handle); break;
    case Op::kOpenXrcd: k.xrcds.push_back(rep.u.handle.handle); break;
    case Op::kCmCommand:
      if (rep.u.ucma.length >= 4) {
        uint32_t id;
        std::memcpy(&id, rep.u.ucma.bytes, 4);
        k.cm_ids.push_back(id);
      }
      break;
    default: break;
  }
}

}  // namespace

std::string fuzz_control_session(const uint8_t* data, size_t size) {
  World& w = world();
  Input in{data, size};
  Known k;
  auto c = std::make_unique<ControlClient>(w.path);
  if (in.byte() & 1) c->hello("h1");  // most sessions attach first
  for (int i = 0; in.n > 0 && i < 64; i++) {
    const Request r = make_request(in, k, w);
    int efd = -1;  // only kImportContext takes an fd (a command file): any other is refused and closed
    if ((r.op == Op::kCreateChannel || r.op == Op::kImportContext) && (in.byte() & 3) == 0)
      efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    const bool sent = in.byte() == 0xfe ? c->send_raw(&r, in.byte() % sizeof r, efd) : c->send(r, efd);
    if (efd >= 0) close(efd);  // the server holds its own copy
    if (!sent) {  // dropped by the server: a new session
      c = std::make_unique<ControlClient>(w.path);
      c->hello("h1");
      k = Known{};
      continue;
    }
    std::vector<int> fds;
    auto rep = c->reply(kReplyMs, &fds);
    if (!rep) {
      pollfd p{c->fd(), POLLIN, 0};
      const int ready = poll(&p, 1, 0);
      const bool hung_up = ready == 1 && (p.revents & (POLLHUP | POLLERR));
      for (int f : fds) close(f);
      if (!hung_up)
        return "no reply to op " + std::to_string(uint32_t(r.op)) + " within 2 s (poll " + std::to_string(ready) +
               ", revents " + std::to_string(p.revents) + ")";
      c = std::make_unique<ControlClient>(w.path);
      c->hello("h1");
      k = Known{};
      continue;
    }
    if (r.op == Op::kCli && rep->u.cli.length > 0) {  // its text comes in a second message
      std::vector<char> text(rep->u.cli.length);
      pollfd p{c->fd(), POLLIN, 0};
      if (poll(&p, 1, kReplyMs) != 1 || recv(c->fd(), text.data(), text.size(), 0) < 0)
        return "the CLI reply's text did not come";
    }
    remember(r, *rep, k);
    if (r.op == Op::kCreateQp && rep->err == 0 && fds.size() == 1) scribble_rings(fds[0], rep->u.qp, in);
    for (int f : fds) close(f);
  }
  c.reset();  // the session ends: the server frees what it holds
  // A new client is served.
  ControlClient probe(w.path);
  auto rep = probe.call(ControlClient::request(Op::kAllocPd));  // before hello: EPROTO
  if (!rep) return "a new client got no answer after the session";
  if (rep->err != EPROTO) return "alloc_pd before hello answered " + std::to_string(rep->err);
  return "";
}

}  // namespace rocemu::test
