// Two emulated NICs joined by a link, in virtual time, with an in-process
// host on each: the fixture of the transport tests.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <vector>

#include "nic/nic.h"
#include "nic/sim_host.h"
#include "tests/support/eal.h"

namespace rocemu::test {

// MR access flags the NIC tests register memory with.
inline constexpr int kAccessRw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
inline constexpr int kAccessAll = kAccessRw | IBV_ACCESS_REMOTE_ATOMIC;

struct TwoNics {
  std::unique_ptr<Engine> engine;
  nic::Nic* n1 = nullptr;
  nic::Nic* n2 = nullptr;
  InternalLink* link = nullptr;
  std::unique_ptr<nic::SimHost> h1, h2;

  // Changes both NICs' configurations before they are built.
  using Tune = std::function<void(nic::NicConfig&)>;

  explicit TwoNics(uint64_t seed = 1, nic::LossRecovery mode = nic::LossRecovery::kGoBackN,
                   LinkParams lp = LinkParams{}, uint32_t mbufs = 16384, bool ipv6 = false,
                   bool batched_dma = false, const Tune& tune = {}) {
    engine = make_engine(seed, mbufs);
    nic::NicConfig c1, c2;
    c1.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
    c2.mac = *wire::MacAddr::parse("02:00:00:00:00:02");
    c1.ips = {*wire::IpAddr::parse(ipv6 ? "fd00::1" : "10.0.0.1")};
    c2.ips = {*wire::IpAddr::parse(ipv6 ? "fd00::2" : "10.0.0.2")};
    if (ipv6) {  // no neighbour discovery: static entries
      c1.neighbors[c2.ips[0]] = c2.mac;
      c2.neighbors[c1.ips[0]] = c1.mac;
    }
    c1.recovery = c2.recovery = mode;
    if (tune) {
      tune(c1);
      tune(c2);
    }
    n1 = &engine->add<nic::Nic>("h1", c1);
    n2 = &engine->add<nic::Nic>("h2", c2);
    auto l = engine->connect(*n1, 0, *n2, 0, lp);
    REQUIRE(l.ok());
    link = l.value();
    engine->start();
    h1 = std::make_unique<nic::SimHost>(*engine, *n1, batched_dma);
    h2 = std::make_unique<nic::SimHost>(*engine, *n2, batched_dma);
  }
  explicit TwoNics(const Tune& tune) : TwoNics(1, nic::LossRecovery::kGoBackN, LinkParams{}, 16384, false, false, tune) {}
  // Wraps a fabric built elsewhere (e.g. from a topology file).
  struct Adopt {};
  TwoNics(Adopt, std::unique_ptr<Engine> e, nic::Nic* a, nic::Nic* b) : engine(std::move(e)), n1(a), n2(b) {
    link = engine->links().empty() ? nullptr : engine->links()[0].get();
    h1 = std::make_unique<nic::SimHost>(*engine, *n1);
    h2 = std::make_unique<nic::SimHost>(*engine, *n2);
  }
  ~TwoNics() {
    h1.reset();
    h2.reset();
  }

  // Runs until `done` or the virtual deadline; returns done().
  bool run(const std::function<bool()>& done, Duration limit = ms(500)) {
    return engine->run_until(done, engine->now() + limit);
  }
};

// Polls a CQ until n completions arrived (driving virtual time).
inline std::vector<ibv_wc> wait_cqes(TwoNics& f, nic::SimHost& h, nic::SimHost::Cq* cq, size_t n,
                                     Duration limit = ms(500)) {
  std::vector<ibv_wc> out;
  f.run(
      [&] {
        ibv_wc wc[16];
        int got;
        while ((got = h.poll(cq, 16, wc)) > 0) out.insert(out.end(), wc, wc + got);
        return out.size() >= n;
      },
      limit);
  return out;
}

// An RC QP on each NIC, each with its own CQ, connected to each other.
struct RcPair {
  nic::SimHost::Cq *cq1, *cq2;
  nic::SimHost::Qp *q1, *q2;
};

inline RcPair connect_rc(TwoNics& f, nic::SimHost::ConnectOpts o = {}) {
  RcPair p{};
  p.cq1 = f.h1->create_cq(256);
  p.cq2 = f.h2->create_cq(256);
  const ibv_qp_cap cap{64, 64, 2, 2, 0};
  p.q1 = f.h1->create_qp(nic::QpType::kRc, p.cq1, p.cq1, cap);
  p.q2 = f.h2->create_qp(nic::QpType::kRc, p.cq2, p.cq2, cap);
  REQUIRE(nic::SimHost::connect(*f.h1, p.q1, *f.h2, p.q2, o) == 0);
  return p;
}

inline ibv_sge sge(const void* addr, uint32_t len, uint32_t lkey) {
  return ibv_sge{reinterpret_cast<uint64_t>(addr), len, lkey};
}

// A signalled RDMA WRITE (or READ) of one SGE to `addr` under `rkey`.
inline ibv_send_wr rdma_wr(ibv_sge* s, uint64_t addr, uint32_t rkey, uint64_t id,
                           ibv_wr_opcode op = IBV_WR_RDMA_WRITE) {
  ibv_send_wr wr{};
  wr.wr_id = id;
  wr.sg_list = s;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = addr;
  wr.wr.rdma.rkey = rkey;
  return wr;
}

}  // namespace rocemu::test
