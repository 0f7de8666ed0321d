#include <catch2/catch.hpp>
#include <rte_memory.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "common/engine/basic_nodes.h"
#include "common/engine/dpdk.h"
#include "common/engine/fault.h"
#include "common/wire/build.h"
#include "tests/support/eal.h"
#include "tests/support/pcap_file.h"

using namespace rocemu;

namespace {

// An Ethernet frame of exactly `len` bytes (the engine does not look inside).
std::vector<uint8_t> udp_frame(uint32_t len) {
  std::vector<uint8_t> f(len, 0xab);
  auto* eth = reinterpret_cast<wire::EthHdr*>(f.data());
  eth->dst = *wire::MacAddr::parse("02:00:00:00:00:02");
  eth->src = *wire::MacAddr::parse("02:00:00:00:00:01");
  eth->ether_type.set(0x88b5);  // local experimental
  return f;
}

// Sends one RoCE frame the way a NIC does: the ICRC left for whoever looks
// at the bytes (dpdk::kMetaIcrcPending).
class LazyIcrcSource final : public Node {
 public:
  explicit LazyIcrcSource(std::vector<uint8_t> frame) : Node("src", 1), frame_(std::move(frame)) {}
  std::string_view kind() const override { return "lazy-icrc-source"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) override { dpdk::free_burst(pkts, n); }
  void on_start(Time now) override {
    rte_mbuf* m = pool().alloc_copy(frame_);
    REQUIRE(m != nullptr);
    dpdk::meta(m).flags |= dpdk::kMetaCrossNode;
    REQUIRE(port(0)->tx_burst(&m, 1, now) == 1);
  }

 private:
  std::vector<uint8_t> frame_;
};

// Notes when each frame (numbered by the generator) arrives.
class ArrivalLog final : public Node {
 public:
  ArrivalLog() : Node("log", 1) {}
  std::string_view kind() const override { return "arrival-log"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time now) override {
    for (uint16_t i = 0; i < n; i++) {
      uint64_t seq;
      std::memcpy(&seq, rte_pktmbuf_mtod(pkts[i], const uint8_t*) + 14, sizeof seq);
      log.emplace_back(now, seq);
      rte_pktmbuf_free(pkts[i]);
    }
  }
  std::vector<std::pair<Time, uint64_t>> log;
};

}  // namespace

TEST_CASE("In flight, frames leave a link in arrival order, also when faults delay some", "[unit][engine]") {
  auto engine = test::make_engine();
  auto& gen = engine->add<Generator>("gen", udp_frame(200), 3000);
  gen.stamp = [](std::span<uint8_t> f, uint64_t seq) { std::memcpy(f.data() + 14, &seq, sizeof seq); };
  auto& log = engine->add<ArrivalLog>();
  auto link = engine->connect(gen, 0, log, 0, LinkParams{.rate_bps = 10'000'000'000ull, .delay = us(1)});
  REQUIRE(link.ok());
  FaultConfig f;
  f.reorder = 0.05;  // one in twenty held back 5 us: overtaken by the next ones
  link.value()->set_faults(0, f);
  engine->run_to_idle();
  REQUIRE(log.log.size() == 3000);
  std::vector<bool> seen(3000, false);
  uint64_t overtaken = 0, max_seq = 0;
  for (size_t i = 0; i < log.log.size(); i++) {
    const auto [t, seq] = log.log[i];
    REQUIRE(seq < 3000);
    CHECK_FALSE(seen[seq]);
    seen[seq] = true;
    if (i > 0) CHECK(t >= log.log[i - 1].first);
    if (seq < max_seq) overtaken++;
    max_seq = std::max(max_seq, seq);
  }
  CHECK(overtaken > 50);
  // A frame held back 5 us arrives after those sent up to 5 us after it:
  // at 10 Gbit/s about 27 frames of 224 wire bytes.
  CHECK(overtaken < 3000 / 4);
  CHECK(link.value()->in_flight(0) == 0);
}

TEST_CASE("A pending ICRC is written before anyone sees or copies the bytes", "[unit][engine]") {
  wire::PathHeaders path;
  path.src_mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  path.dst_mac = *wire::MacAddr::parse("02:00:00:00:00:02");
  path.src_ip = *wire::IpAddr::parse("10.0.0.1");
  path.dst_ip = *wire::IpAddr::parse("10.0.0.2");
  const wire::RoceFields f{.opcode = wire::op::kWriteOnly, .dest_qp = 9, .psn = 5, .reth_len = 256};
  std::vector<uint8_t> payload(256, 0x3c);
  std::vector<uint8_t> sealed(1024);
  sealed.resize(wire::encode_roce(sealed, path, f, payload));
  std::vector<uint8_t> lazy = sealed;
  std::fill(lazy.end() - 4, lazy.end(), 0);  // the ICRC not written yet

  auto engine = test::make_engine();
  auto& src = engine->add<LazyIcrcSource>(lazy);
  auto& sink = engine->add<Sink>("sink", 1, true);
  auto link = engine->connect(src, 0, sink, 0, LinkParams{});
  REQUIRE(link.ok());
  const std::string cap = std::string(ROCEMU_BINARY_DIR) + "/lazy-icrc.pcapng";
  SECTION("captured on the link") {
    REQUIRE(engine->capture_link(*link.value(), cap).ok());
    engine->run_to_idle();
    engine->flush_captures();
    const auto frames = test::read_capture(cap);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].bytes == sealed);
  }
  SECTION("copied by a fault stage that duplicates it") {
    FaultConfig dup;
    dup.duplicate = 1.0;
    link.value()->set_faults(0, dup);
    engine->run_to_idle();
    REQUIRE(sink.kept().size() == 2);
    CHECK(sink.kept()[0] == sealed);
    CHECK(sink.kept()[1] == sealed);
  }
  SECTION("kept by the node it reaches") {
    engine->run_to_idle();
    REQUIRE(sink.kept().size() == 1);
    CHECK(sink.kept()[0] == sealed);
  }
}

TEST_CASE("A 100G link carries 100 Gbit/s of virtual time, with delay", "[unit][engine]") {
  auto engine = test::make_engine();
  const auto frame = udp_frame(1000);
  auto& gen = engine->add<Generator>("gen", frame, 1000);
  auto& sink = engine->add<Sink>("sink");
  LinkParams lp{.rate_bps = 100'000'000'000ull, .delay = us(2), .mtu = 9000, .tx_slack = {}};
  REQUIRE(engine->connect(gen, 0, sink, 0, lp).ok());
  engine->run_to_idle();
  CHECK(gen.sent() == 1000);
  CHECK(sink.packets() == 1000);
  // 1000 frames of (1000 + 24 overhead) bytes at 100 Gbit/s = 81.92 us, + 2 us.
  CHECK(sink.last_arrival() == ps(1000 * 1024 * 80) + us(2));
  const double gbps = double(sink.bytes() + 24 * 1000) * 8 / to_seconds(sink.last_arrival() - us(2)) / 1e9;
  CHECK(gbps == Approx(100.0).epsilon(1e-9));
}

TEST_CASE("Serialisation time is exact far beyond a frame", "[unit][engine]") {
  CHECK(serialization_time(1, 100'000'000'000ull) == ps(80));
  // 65535 PFC quanta of 512 bit times at 100G: 335.5392 us.
  CHECK(serialization_time(65535ull * 512 / 8, 100'000'000'000ull) == ps(335539200));
  CHECK(serialization_time(1ull << 40, 400'000'000'000ull) == Duration(int64_t(21990232555520)));
}

TEST_CASE("Link MTU, link down and Bernoulli loss are counted", "[unit][engine]") {
  auto engine = test::make_engine(7);
  auto& gen = engine->add<Generator>("gen", udp_frame(1500), 10000);
  auto& sink = engine->add<Sink>("sink");
  auto link = engine->connect(gen, 0, sink, 0, LinkParams{.mtu = 1400});
  REQUIRE(link.ok());
  engine->run_to_idle();
  CHECK(sink.packets() == 0);
  CHECK(gen.port(0)->counters()[PortCounters::tx_drop_oversize] == 10000);

  auto engine2 = test::make_engine(7);
  auto& gen2 = engine2->add<Generator>("gen", udp_frame(1000), 20000);
  auto& sink2 = engine2->add<Sink>("sink");
  auto link2 = engine2->connect(gen2, 0, sink2, 0, LinkParams{});
  REQUIRE(link2.ok());
  FaultConfig fc;
  fc.loss = 0.05;
  link2.value()->set_faults(0, fc);
  engine2->run_to_idle();
  const uint64_t lost = gen2.port(0)->counters()[PortCounters::tx_drop_fault];
  CHECK(lost + sink2.packets() == 20000);
  // 5 % of 20000 = 1000, sd ~31: a 5-sigma band.
  CHECK(lost > 845);
  CHECK(lost < 1155);
}

TEST_CASE("Fault config validation names the field", "[unit][engine]") {
  FaultConfig fc;
  fc.loss = 1.5;
  CHECK(fc.validate().message().find("loss") != std::string::npos);
  fc.loss = 0;
  fc.burst = GilbertElliott{.p_good_to_bad = -1};
  CHECK(fc.validate().message().find("burst.p_good_to_bad") != std::string::npos);
  fc.burst.reset();
  fc.drop.push_back(DropRule{.every_nth = 0});
  CHECK(fc.validate().message().find("every_nth") != std::string::npos);
}

TEST_CASE("Captures share a link only where their taps differ: the two ends yes, the link and an end no",
          "[unit][engine]") {
  auto engine = test::make_engine();
  auto& a = engine->add<Sink>("a", 1, true);
  auto& b = engine->add<Sink>("b", 1, true);
  auto link = engine->connect(a, 0, b, 0, LinkParams{});
  REQUIRE(link.ok());
  const std::string dir = std::string(ROCEMU_BINARY_DIR) + "/taps-";
  auto at_a = engine->capture_port(a, 0, dir + "a.pcapng", CaptureOptions{});
  REQUIRE(at_a.ok());
  CHECK(engine->capture_port(b, 0, dir + "b.pcapng").ok());     // the other end's taps
  CHECK_FALSE(engine->capture_port(a, 0, dir + "a2.pcapng").ok());  // a's again
  const auto whole = engine->capture_link(*link.value(), dir + "link.pcapng");
  REQUIRE_FALSE(whole.ok());
  CHECK_THAT(whole.message(), Catch::Contains("already captures there"));
  REQUIRE(engine->stop_capture(*at_a));
  CHECK(engine->capture_port(a, 0, dir + "a3.pcapng").ok());  // free again
}

// The engine's pool makes its buffers as they are first needed; every one
// of them can still be had, each its own memory, ready as
// rte_pktmbuf_pool_create() would make it.
TEST_CASE("packet pool: buffers are made when first needed, and all of them can be had", "[engine][pool]") {
  test::require_eal();
  constexpr uint32_t kCount = 20000;
  auto made = dpdk::PacketPool::create("lazy-pool-test", kCount);
  INFO(made.status().message());
  REQUIRE(made.ok());
  std::unique_ptr<dpdk::PacketPool> pool(made.value());
  CHECK(pool->capacity() == kCount);
  CHECK(pool->populated() > 0);
  CHECK(pool->populated() < kCount);  // not made up front
  CHECK(pool->in_use() == 0);
  CHECK(pool->available() == kCount);

  std::vector<rte_mbuf*> held;
  std::vector<uint8_t> frame(dpdk::PacketPool::kMaxFrame);
  for (uint32_t i = 0; i < kCount; i++) {
    std::memset(frame.data(), int(i % 251), frame.size());
    rte_mbuf* m = pool->alloc_copy(frame);
    REQUIRE(m != nullptr);
    REQUIRE(m->pool == pool->mempool());
    REQUIRE(rte_mbuf_refcnt_read(m) == 1);
    REQUIRE(m->nb_segs == 1);
    REQUIRE(m->buf_len == RTE_PKTMBUF_HEADROOM + dpdk::PacketPool::kMaxFrame);
    REQUIRE(m->priv_size >= sizeof(dpdk::PktMeta));
    REQUIRE(m->buf_iova == rte_mem_virt2iova(m->buf_addr));
    held.push_back(m);
  }
  CHECK(pool->populated() == kCount);
  CHECK(pool->in_use() == kCount);
  CHECK(pool->available() == 0);
  // No two buffers share memory: each still holds what was written to it.
  uint32_t intact = 0;
  for (uint32_t i = 0; i < kCount; i++) {
    const auto b = dpdk::bytes(held[i]);
    intact += b.size() == frame.size() && b.front() == uint8_t(i % 251) && b.back() == uint8_t(i % 251) &&
              b[b.size() / 2] == uint8_t(i % 251);
  }
  CHECK(intact == kCount);
  CHECK(pool->alloc() == nullptr);  // all of them out
  CHECK(pool->alloc_failures() == 1);
  dpdk::free_burst(held.data(), uint32_t(held.size()));
  CHECK(pool->in_use() == 0);
  CHECK(pool->available() == kCount);
}

TEST_CASE("packet pool: populate_all makes every buffer (for a PMD that allocates from it)", "[engine][pool]") {
  test::require_eal();
  auto made = dpdk::PacketPool::create("full-pool-test", 10000);
  REQUIRE(made.ok());
  std::unique_ptr<dpdk::PacketPool> pool(made.value());
  REQUIRE(pool->populated() < 10000);
  REQUIRE(pool->populate_all().ok());
  CHECK(pool->populated() == 10000);
  CHECK(pool->available() == 10000);
  // A PMD's bulk allocation sees them all, initialised.
  std::vector<rte_mbuf*> bulk(10000);
  REQUIRE(rte_pktmbuf_alloc_bulk(pool->mempool(), bulk.data(), 10000) == 0);
  CHECK(bulk.back()->buf_len == RTE_PKTMBUF_HEADROOM + dpdk::PacketPool::kMaxFrame);
  dpdk::free_burst(bulk.data(), 10000);
  CHECK(pool->in_use() == 0);
}

// The pool's zone holds every buffer however it is cut into chunks, with
// DPDK's placement (rte_mempool_op_populate_helper, 22.11) modelled here:
// from the chunk's start, one after the other, each aligned to a cache
// line, none across a page boundary where a buffer fits in a page.
TEST_CASE("packet pool: the zone holds every buffer, chunk by chunk, in 4 KiB pages and in hugepages", "[engine][pool]") {
  const auto placed = [](size_t len, size_t elt, size_t page, uint32_t most) {
    uint32_t count = 0;
    size_t off = 0;
    while (count < most) {
      if (elt <= page && off / page != (off + elt - 1) / page) off = (off / page + 1) * page;
      if (off + elt > len) break;
      off += elt;
      count++;
    }
    return count;
  };
  const size_t elt = 4800;  // the engine's buffer: 64 + 4672 + 64
  for (const size_t page : {size_t(4096), size_t(2) << 20, size_t(1) << 30}) {
    for (const uint32_t n : {1024u, 4096u, 16384u, 20000u, 65536u, 1u << 22}) {
      INFO("page " << page << ", " << n << " buffers");
      const size_t zone = dpdk::PacketPool::zone_bytes(n, elt, page);
      CHECK(zone % page == 0);
      CHECK(zone < size_t(n) * elt * 11 / 10 + (size_t(dpdk::PacketPool::kMaxChunks) + 1) * page);
      size_t used = 0;
      uint32_t made = 0, chunks = 0;
      while (made < n) {
        const size_t len = std::min(dpdk::PacketPool::chunk_bytes(made, n, elt, page), zone - used);
        const uint32_t got = placed(len, elt, page, n - made);
        REQUIRE(got > 0);
        made += got;
        used += len;
        chunks++;
      }
      CHECK(made == n);
      CHECK(chunks <= dpdk::PacketPool::kMaxChunks);
    }
  }
}

namespace {

// Sends one frame at start and has nothing more (Port::tx_idle); may ask
// the port again at `ask_at`, and logs each on_tx_ready.
class IdleSender final : public Node {
 public:
  IdleSender(std::vector<uint8_t> frame, Time ask_at) : Node("idle", 1), frame_(std::move(frame)), ask_at_(ask_at) {}
  std::string_view kind() const override { return "idle-sender"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) override { dpdk::free_burst(pkts, n); }
  void on_start(Time now) override {
    rte_mbuf* m = pool().alloc_copy(frame_);
    REQUIRE(m != nullptr);
    REQUIRE(port(0)->tx_burst(&m, 1, now) == 1);
    port(0)->tx_idle(now);
    ask_.bind<&IdleSender::ask>(this);
    if (ask_at_ != kTimeNever) timers().schedule(ask_, ask_at_);
  }
  void on_tx_ready(uint16_t, Time now) override { ready_at.push_back(now); }
  void ask(Time now) { asked_ready = port(0)->tx_ready(now); }
  std::vector<Time> ready_at;
  bool asked_ready = true;

 private:
  std::vector<uint8_t> frame_;
  Time ask_at_;
  Timer ask_;
};

}  // namespace

TEST_CASE("A port with nothing to send gets no tx-ready event unless it asks again in time", "[unit][engine]") {
  auto engine = test::make_engine();
  const auto frame = udp_frame(1000);
  // 1000 + 24 bytes at 100 Gbit/s: the wire is busy until 81.92 ns.
  const Time busy_until = ps(1024 * 80);
  Time ask_at = kTimeNever;
  SECTION("idle: no event") {}
  SECTION("asks while the wire is busy: the event at its time") { ask_at = ns(40); }
  SECTION("asks once the wire is free: ready, no event") { ask_at = ns(100); }
  auto& src = engine->add<IdleSender>(frame, ask_at);
  auto& sink = engine->add<Sink>("sink");
  REQUIRE(engine->connect(src, 0, sink, 0, LinkParams{.delay = us(1)}).ok());
  engine->run_to_idle();
  CHECK(sink.packets() == 1);
  if (ask_at == ns(40)) {
    CHECK_FALSE(src.asked_ready);
    CHECK(src.ready_at == std::vector<Time>{busy_until});
  } else {
    CHECK(src.asked_ready);
    CHECK(src.ready_at.empty());
  }
}
