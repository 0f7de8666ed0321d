// Real-time engine tests over DPDK ethdev ports: net_ring, net_null,
// net_memif and net_af_packet (on veth pairs in a private network
// namespace). The engine runs on the test's thread; a probe node stands for
// the world outside the fabric and stops the loop when what it waits for
// has happened or its deadline (engine time) has passed. Nothing sleeps.
#include <rte_bus_vdev.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "common/engine/basic_nodes.h"
#include "common/wire/build.h"
#include "nic/nic.h"
#include "tests/support/eal.h"

using namespace rocemu;

namespace {

constexpr uint16_t kProbeEtherType = 0x88b5;  // local experimental
constexpr Duration kTimeout = ms(20000);       // generous: CI machines are loaded

std::unique_ptr<Engine> make_realtime_engine(uint32_t mbufs = 8192) {
  test::require_eal();
  EngineOptions opts;
  opts.mode = TimeMode::kReal;
  opts.mbufs = mbufs;
  auto e = Engine::create(opts);
  INFO(e.status().message());
  REQUIRE(e.ok());
  return std::move(e.value());
}

// A frame of `len` bytes: Ethernet header, direction (the port it left
// from), sequence number, then a pattern derived from both.
std::vector<uint8_t> probe_frame(uint32_t len, uint8_t direction, uint64_t seq) {
  std::vector<uint8_t> f(len);
  const uint8_t hdr[14] = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, kProbeEtherType >> 8, kProbeEtherType & 0xff};
  std::memcpy(f.data(), hdr, sizeof hdr);
  f[14] = direction;
  std::memcpy(&f[15], &seq, sizeof seq);
  for (uint32_t i = 23; i < len; i++) f[i] = uint8_t(i * 7 + seq + direction);
  return f;
}

// The outside world of a test fabric. Once every port in `must_be_up` is
// up it sends `count` frames from each connected port (at most `window`
// unanswered per direction), expects each on the other port, in order and
// intact, and stops the engine when all have arrived.
class Probe final : public Node {
 public:
  struct Direction {
    uint64_t sent = 0, received = 0, out_of_order = 0, corrupt = 0;
  };

  Probe(std::string name, uint32_t frame_len, uint64_t count, std::atomic<bool>& stop)
      : Node(std::move(name), 2), frame_len_(frame_len), count_(count), stop_(stop) {}
  std::string_view kind() const override { return "probe"; }

  std::vector<Port*> must_be_up;
  uint32_t window = 256;
  Direction dir[2];  // by the port the frames leave from
  uint64_t foreign = 0;
  bool timed_out = false;
  Time links_up_at{0}, done_at{0};

  void on_rx(uint16_t port, rte_mbuf** pkts, uint16_t n, Time now) override {
    for (uint16_t i = 0; i < n; i++) {
      auto b = dpdk::bytes(pkts[i]);
      if (b.size() < 23 || b[12] != (kProbeEtherType >> 8) || b[13] != (kProbeEtherType & 0xff)) {
        foreign++;
      } else {
        const uint8_t from = b[14];
        uint64_t seq;
        std::memcpy(&seq, &b[15], sizeof seq);
        Direction& d = dir[from & 1];
        if (from != 1 - port || b.size() != frame_len_ ||
            !std::equal(b.begin(), b.end(), probe_frame(frame_len_, from, seq).begin()))
          d.corrupt++;
        else if (seq != d.received + d.out_of_order)
          d.out_of_order++;
        d.received++;
      }
      rte_pktmbuf_free(pkts[i]);
    }
    check_done(now);
  }

  bool poll(Time now) override {
    if (deadline_ == kTimeNever) deadline_ = now + kTimeout;
    if (now >= deadline_) {
      timed_out = true;
      stop_ = true;
      return false;
    }
    if (!sending_) {
      for (Port* p : must_be_up)
        if (!p->link_up()) return false;
      sending_ = true;
      links_up_at = now;
    }
    bool did = false;
    for (uint16_t p = 0; p < 2; p++) did |= send(p, now);
    check_done(now);
    return did;
  }

 private:
  bool send(uint16_t from, Time now) {
    Port* p = port(from);
    Direction& d = dir[from];
    if (p == nullptr || d.sent >= count_ || !p->tx_ready(now)) return false;
    rte_mbuf* burst[32];
    uint16_t n = 0;
    while (n < 32 && d.sent + n < count_ && d.sent + n < d.received + window) {
      rte_mbuf* m = pool().alloc_copy(probe_frame(frame_len_, uint8_t(from), d.sent + n));
      if (m == nullptr) break;
      burst[n++] = m;
    }
    const uint16_t took = p->tx_burst(burst, n, now);
    dpdk::free_burst(burst + took, n - took);
    d.sent += took;
    return took > 0;
  }
  void check_done(Time now) {
    for (uint16_t p = 0; p < 2; p++)
      if (port(p) != nullptr && dir[p].received < count_) return;
    if (done_at == Time{0}) done_at = now;
    stop_ = true;
  }

  uint32_t frame_len_;
  uint64_t count_;
  std::atomic<bool>& stop_;
  bool sending_ = false;
  Time deadline_ = kTimeNever;
};

// Stops the engine once `done()` holds or at the deadline.
class Watch final : public Node {
 public:
  Watch(std::function<bool()> done, std::atomic<bool>& stop) : Node("watch", 0), done_(std::move(done)), stop_(stop) {}
  std::string_view kind() const override { return "watch"; }
  void on_rx(uint16_t, rte_mbuf** pkts, uint16_t n, Time) override { dpdk::free_burst(pkts, n); }
  bool poll(Time now) override {
    if (deadline_ == kTimeNever) deadline_ = now + kTimeout;
    if (done_()) {
      stop_ = true;
    } else if (now >= deadline_) {
      timed_out = true;
      stop_ = true;
    }
    return false;
  }
  bool timed_out = false;

 private:
  std::function<bool()> done_;
  std::atomic<bool>& stop_;
  Time deadline_ = kTimeNever;
};

// Two rings crossed into two ethdevs: what one sends the other receives.
struct RingPair {
  std::string a, b;
  rte_ring* r[2] = {nullptr, nullptr};
  explicit RingPair(const std::string& name) : a(name + "a"), b(name + "b") {
    test::require_eal();
    for (int i = 0; i < 2; i++) {
      r[i] = rte_ring_create((name + std::to_string(i)).c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
      REQUIRE(r[i] != nullptr);
    }
    // The ethdev gets the ring PMD's prefix ("net_ring_" + name).
    auto make = [&](const std::string& n, rte_ring* rx, rte_ring* tx) {
      const int id = rte_eth_from_rings(n.c_str(), &rx, 1, &tx, 1, SOCKET_ID_ANY);
      REQUIRE(id >= 0);
      char dev_name[RTE_ETH_NAME_MAX_LEN];
      REQUIRE(rte_eth_dev_get_name_by_port(uint16_t(id), dev_name) == 0);
      return std::string(dev_name);
    };
    a = make(a, r[0], r[1]);
    b = make(b, r[1], r[0]);
  }
  // Frees what is left in the rings. Call it after the engine stopped and
  // before it is destroyed (the mbufs belong to the engine's pool); the
  // destructor closes the ports, so declare the pair before the engine.
  void drain() {
    for (rte_ring* ring : r) {
      void* obj;
      while (rte_ring_dequeue(ring, &obj) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(obj));
    }
  }
  ~RingPair() {
    for (const std::string& n : {a, b}) {
      uint16_t id;
      if (rte_eth_dev_get_port_by_name(n.c_str(), &id) == 0) rte_eth_dev_close(id);
      rte_vdev_uninit(n.c_str());
    }
    for (rte_ring* ring : r) rte_ring_free(ring);
  }
};

EthdevPort* attach(Engine& e, Node& n, uint16_t port, const std::string& device, const std::string& netns = "") {
  EthdevParams p;
  p.device = device;
  p.netns = netns;
  auto r = e.attach_ethdev(n, port, p);
  INFO(r.status().message());
  REQUIRE(r.ok());
  return r.value();
}

void check_probe(const Probe& probe, uint64_t count) {
  CHECK_FALSE(probe.timed_out);
  for (int d = 0; d < 2; d++) {
    INFO("direction " << d);
    CHECK(probe.dir[d].sent == count);
    CHECK(probe.dir[d].received == count);
    CHECK(probe.dir[d].out_of_order == 0);
    CHECK(probe.dir[d].corrupt == 0);
  }
}

uint64_t counter(const Port* p, PortCounters::Id id) { return p->counters()[id]; }

// Runs a shell command; true if it exited 0.
bool sh(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

// A private directory for memif sockets, removed at the end.
struct TempDir {
  std::string path = (std::filesystem::temp_directory_path() / "rocemu-ethdev-XXXXXX").string();
  TempDir() { REQUIRE(mkdtemp(path.data()) != nullptr); }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

// A network namespace with veth pairs, deleted (with its links) at the end.
struct Netns {
  std::string name = "rocemu-e2e-" + std::to_string(getpid());
  bool ok = false;
  explicit Netns(const std::vector<std::pair<std::string, std::string>>& veths) {
    sh("ip netns del " + name + " 2>/dev/null");
    ok = sh("ip netns add " + name);
    const std::string in = "ip netns exec " + name + " ";
    // No IPv6 neighbour discovery or other chatter on the test links.
    ok = ok && sh(in + "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1");
    for (const auto& [a, b] : veths) {
      ok = ok && sh(in + "ip link add " + a + " type veth peer name " + b);
      ok = ok && sh(in + "ip link set " + a + " up") && sh(in + "ip link set " + b + " up");
    }
  }
  ~Netns() { sh("ip netns del " + name); }
};

// What a host tool (tcpdump) on `iface` in network namespace `ns` sees: a
// packet socket bound there, opened from this thread inside the namespace.
struct HostTap {
  int fd = -1;
  HostTap(const std::string& ns, const std::string& iface) {
    const int self = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int target = ::open(("/var/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(self >= 0);
    REQUIRE(target >= 0);
    REQUIRE(setns(target, CLONE_NEWNET) == 0);
    fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
    sockaddr_ll a{};
    a.sll_family = AF_PACKET;
    a.sll_protocol = htons(ETH_P_ALL);
    a.sll_ifindex = int(if_nametoindex(iface.c_str()));
    const bool bound = fd >= 0 && a.sll_ifindex > 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    const int big = 64 << 20;
    if (bound) setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    REQUIRE(setns(self, CLONE_NEWNET) == 0);
    close(self);
    close(target);
    REQUIRE(bound);
  }
  ~HostTap() {
    if (fd >= 0) close(fd);
  }
  // Probe frames seen so far: [0] going out of the interface, [1] coming in.
  std::array<uint64_t, 2> count() const {
    std::array<uint64_t, 2> n{0, 0};
    uint8_t buf[2048];
    for (;;) {
      sockaddr_ll from{};
      socklen_t len = sizeof from;
      const ssize_t r = recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
      if (r < 0) break;
      if (r < 14 || buf[12] != (kProbeEtherType >> 8) || buf[13] != (kProbeEtherType & 0xff)) continue;
      n[from.sll_pkttype == PACKET_OUTGOING ? 0 : 1]++;
    }
    return n;
  }
};

}  // namespace

TEST_CASE("Real time: a Forwarder between two net_ring ports moves frames both ways", "[e2e][ethdev]") {
  RingPair ab("rt_ab"), cd("rt_cd");
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& probe = engine->add<Probe>("probe", 1000, 20000, stop);
  auto& fw = engine->add<Forwarder>("fw");
  EthdevPort* pa = attach(*engine, probe, 0, ab.a);
  EthdevPort* pb = attach(*engine, fw, 0, ab.b);
  EthdevPort* pc = attach(*engine, fw, 1, cd.a);
  EthdevPort* pd = attach(*engine, probe, 1, cd.b);
  probe.must_be_up = {pa, pb, pc, pd};
  engine->run(stop);
  check_probe(probe, 20000);
  CHECK(fw.forwarded() == 40000);
  CHECK(fw.dropped() == 0);
  CHECK(counter(pb, PortCounters::rx_packets) == 20000);
  CHECK(counter(pb, PortCounters::rx_bytes) == 20000 * 1000);
  CHECK(counter(pc, PortCounters::tx_packets) == 20000);
  CHECK(counter(pa, PortCounters::tx_bytes) == 20000 * 1000);
  CHECK(pb->link_up());
  ab.drain();
  cd.drain();
}

TEST_CASE("Real time: a frame leaves through an ethdev port with its ICRC written", "[e2e][ethdev]") {
  wire::PathHeaders path;
  path.src_mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  path.dst_mac = *wire::MacAddr::parse("02:00:00:00:00:02");
  path.src_ip = *wire::IpAddr::parse("10.0.0.1");
  path.dst_ip = *wire::IpAddr::parse("10.0.0.2");
  const wire::RoceFields f{.opcode = wire::op::kSendOnly, .dest_qp = 9, .psn = 5};
  std::vector<uint8_t> payload(300, 0x5a);
  std::vector<uint8_t> sealed(1024);
  sealed.resize(wire::encode_roce(sealed, path, f, payload));
  std::vector<uint8_t> lazy = sealed;
  std::fill(lazy.end() - 4, lazy.end(), 0);  // as a NIC leaves it (dpdk::kMetaIcrcPending)

  RingPair ab("rt_icrc");
  auto engine = make_realtime_engine();
  auto& sink = engine->add<Sink>("n");
  EthdevPort* pa = attach(*engine, sink, 0, ab.a);
  const bool with_tap = GENERATE(false, true);  // the fast path, and the one-by-one path of a capture
  INFO("captured: " << with_tap);
  if (with_tap) {
    REQUIRE(engine->capture_port(sink, 0, std::string(ROCEMU_BINARY_DIR) + "/ethdev-icrc.pcapng").ok());
  }
  std::atomic<bool> stop{false};
  auto& watch = engine->add<Watch>([&] { return pa->link_up(); }, stop);
  engine->run(stop);
  REQUIRE_FALSE(watch.timed_out);
  rte_mbuf* m = engine->pool().alloc_copy(lazy);
  REQUIRE(m != nullptr);
  dpdk::meta(m).flags |= dpdk::kMetaCrossNode;
  REQUIRE(pa->tx_burst(&m, 1, engine->now()) == 1);
  void* obj = nullptr;
  REQUIRE(rte_ring_dequeue(ab.r[1], &obj) == 0);
  rte_mbuf* out = static_cast<rte_mbuf*>(obj);
  const auto b = dpdk::bytes(out);
  CHECK(std::vector<uint8_t>(b.begin(), b.end()) == sealed);
  rte_pktmbuf_free(out);
  ab.drain();
}

TEST_CASE("Real time: ethdev ports and internal links in one fabric", "[e2e][ethdev]") {
  RingPair ab("rt_mix");
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& probe = engine->add<Probe>("probe", 200, 5000, stop);
  auto& fw = engine->add<Forwarder>("fw");
  attach(*engine, probe, 0, ab.a);
  attach(*engine, fw, 0, ab.b);
  auto link = engine->connect(fw, 1, probe, 1, LinkParams{.rate_bps = 10'000'000'000ull, .delay = us(5)});
  REQUIRE(link.ok());
  engine->run(stop);
  check_probe(probe, 5000);
  // 5000 frames of 224 wire bytes each way at 10 Gbit/s cannot cross in
  // less than 0.9 ms of real time: the link paced them.
  CHECK(probe.done_at - probe.links_up_at >= serialization_time(5000 * 224, 10'000'000'000ull));
  ab.drain();
}

TEST_CASE("Real time: chained and foreign mbufs from a device are joined into one buffer", "[e2e][ethdev]") {
  RingPair ring("rt_seg");
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& sink = engine->add<Sink>("sink", 1, true);
  EthdevPort* port = attach(*engine, sink, 0, ring.b);
  auto& watch = engine->add<Watch>(
      [&] {
        return sink.packets() + counter(port, PortCounters::rx_drop_multisegment) >= 4;
      },
      stop);

  // A pool of small buffers, as another PMD or process might use.
  rte_mempool* small = rte_pktmbuf_pool_create("rt_small", 64, 0, 0, RTE_PKTMBUF_HEADROOM + 1600, SOCKET_ID_ANY);
  REQUIRE(small != nullptr);
  const auto frame = probe_frame(3000, 0, 7);
  auto chain = [&](rte_mempool* mp, std::span<const uint8_t> data, uint32_t seg_len) {
    rte_mbuf* head = nullptr;
    for (size_t off = 0; off < data.size(); off += seg_len) {
      rte_mbuf* m = rte_pktmbuf_alloc(mp);
      REQUIRE(m != nullptr);
      const size_t len = std::min<size_t>(seg_len, data.size() - off);
      std::memcpy(rte_pktmbuf_append(m, uint16_t(len)), data.data() + off, len);
      if (head == nullptr)
        head = m;
      else
        REQUIRE(rte_pktmbuf_chain(head, m) == 0);
    }
    return head;
  };
  std::vector<uint8_t> big(6000, 0x5a);
  rte_mbuf* in[4] = {
      chain(engine->pool().mempool(), frame, 1000),  // joined in place
      chain(small, frame, 1500),                     // copied into a new buffer
      chain(small, std::span(frame).first(1200), 1500),  // single, but from a foreign pool
      chain(small, big, 1500),                       // longer than any buffer: dropped
  };
  REQUIRE(rte_ring_enqueue_bulk(ring.r[1], reinterpret_cast<void**>(in), 4, nullptr) == 4);
  engine->run(stop);
  CHECK_FALSE(watch.timed_out);
  REQUIRE(sink.kept().size() == 3);
  CHECK(sink.kept()[0] == frame);
  CHECK(sink.kept()[1] == frame);
  CHECK(sink.kept()[2] == std::vector<uint8_t>(frame.begin(), frame.begin() + 1200));
  CHECK(counter(port, PortCounters::rx_drop_multisegment) == 1);
  CHECK(counter(port, PortCounters::rx_packets) == 3);
  CHECK(rte_mempool_in_use_count(small) == 0);  // every foreign buffer went home
  ring.drain();
  rte_mempool_free(small);
}

TEST_CASE("Real time: a Forwarder between two net_null ports", "[e2e][ethdev]") {
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& fw = engine->add<Forwarder>("fw");
  auto& watch = engine->add<Watch>([&] { return fw.forwarded() >= 1'000'000; }, stop);
  REQUIRE(engine->pool().populated() < engine->pool().capacity());  // made as needed...
  EthdevPort* p0 = attach(*engine, fw, 0, "net_null_rt0,size=128");
  // ... but a PMD takes buffers from the pool itself: all of them are made.
  CHECK(engine->pool().populated() == engine->pool().capacity());
  EthdevPort* p1 = attach(*engine, fw, 1, "net_null_rt1,size=128");
  engine->run(stop);
  CHECK_FALSE(watch.timed_out);
  CHECK(fw.forwarded() >= 1'000'000);
  CHECK(fw.dropped() == 0);
  // net_null takes every frame: all that came in went out the other side.
  CHECK(counter(p0, PortCounters::rx_packets) == counter(p1, PortCounters::tx_packets));
  CHECK(counter(p1, PortCounters::rx_packets) == counter(p0, PortCounters::tx_packets));
  CHECK(counter(p0, PortCounters::rx_bytes) == 128 * counter(p0, PortCounters::rx_packets));
  CHECK(engine->pool().in_use() < 1024);  // nothing leaks
}

TEST_CASE("Real time: net_memif server and client in one process, chained across two sockets", "[e2e][ethdev]") {
  // memif keys its sockets by path and will not let one process be both
  // the listener and a client of the same path; "dir/./x.sock" names the
  // same socket file as "dir/x.sock", so one engine can hold both ends.
  const TempDir tmp;
  const std::string& dir = tmp.path;
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  // 3000-byte frames span two memif buffers (2048 bytes by default).
  auto& probe = engine->add<Probe>("probe", 3000, 20000, stop);
  auto& fw = engine->add<Forwarder>("fw");
  const std::string memif = ",socket-abstract=no,socket=" + dir;
  EthdevPort* pa = attach(*engine, probe, 0, "net_memif_rt0,role=server" + memif + "/ab.sock");
  EthdevPort* pb = attach(*engine, fw, 0, "net_memif_rt1,role=client" + memif + "/./ab.sock");
  EthdevPort* pc = attach(*engine, fw, 1, "net_memif_rt2,role=server" + memif + "/cd.sock");
  EthdevPort* pd = attach(*engine, probe, 1, "net_memif_rt3,role=client" + memif + "/./cd.sock");
  probe.must_be_up = {pa, pb, pc, pd};
  engine->run(stop);
  check_probe(probe, 20000);
  CHECK(fw.dropped() == 0);
  CHECK(counter(pb, PortCounters::rx_packets) == 20000);
  CHECK(counter(pb, PortCounters::tx_packets) == 20000);
  CHECK(counter(pc, PortCounters::rx_bytes) == 20000 * 3000);
}

// Issue 14: against a slow peer an external port sent at its nominal 100
// Gbit/s whatever the interface took, and the frames died further on. The
// configured rate now paces what the port hands its device; the device's
// own counters are reported beside the port's.
TEST_CASE("An ethdev port paces what it sends at its configured line rate and reports the device's counters",
          "[e2e][ethdev]") {
  RingPair rings("rt_pace");
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& probe = engine->add<Probe>("probe", 1000, 0, stop);
  EthdevParams params;
  params.device = rings.a;
  params.rate_bps = 1'000'000'000ull;
  auto r = engine->attach_ethdev(probe, 0, params);
  INFO(r.status().message());
  REQUIRE(r.ok());
  EthdevPort* port = r.value();
  REQUIRE(port->link_up());

  // 1000-byte frames take (1000 + 24) * 8 ns = 8.192 us on a 1 Gbit/s wire.
  const Duration slot = serialization_time(1000 + kEthWireOverhead, params.rate_bps);
  const Time t0 = engine->now() + ms(1);
  uint64_t sent = 0;
  auto offer = [&](Time now) {
    rte_mbuf* burst[32];
    uint16_t n = 0;
    for (; n < 32; n++) burst[n] = engine->pool().alloc_copy(probe_frame(1000, 0, sent + n));
    const uint16_t took = port->tx_burst(burst, n, now);
    dpdk::free_burst(burst + took, n - took);
    sent += took;
    return took;
  };
  // A burst at t0 goes only as far as the line is free within the slack.
  const uint16_t first = offer(t0);
  CHECK(first >= 1);
  CHECK(first < 32);
  CHECK_FALSE(port->tx_ready(t0));
  const Time resume = port->tx_resume_time();
  CHECK(resume > t0);
  CHECK(resume <= t0 + slot * first);
  // Offered all the time for 2 ms, it sends what 2 ms of line rate carry.
  for (Time t = t0 + us(1); t < t0 + ms(2); t += us(1)) {
    if (port->tx_blocked() && port->tx_resume_time() <= t) port->retry_tx(t);  // as the engine's poll does
    if (port->tx_ready(t)) offer(t);
  }
  const double line = double(ms(2).count()) / double(slot.count());
  INFO(sent << " frames sent in 2 ms, the line carries " << line);
  CHECK(double(sent) >= line - 1);
  CHECK(double(sent) <= line + 3);
  CHECK(rte_ring_count(rings.r[1]) == sent);
  CHECK(port->counters()[PortCounters::tx_packets] == sent);

  // The device's counters appear with the port's.
  struct Sink final : CounterSink {
    std::map<std::string, uint64_t> seen;
    void counter(std::string_view scope, std::string_view name, uint64_t v) override {
      seen[std::string(scope) + " " + std::string(name)] = v;
    }
  } sink;
  engine->report_counters(sink);
  const std::string scope = port->name();
  CHECK(sink.seen.count(scope + " tx_packets") == 1);
  for (const char* c : {"device.imissed", "device.ierrors", "device.oerrors", "device.rx_nombuf"})
    CHECK(sink.seen.count(scope + " " + c) == 1);
  rings.drain();
}

// A burst the line rate takes only in part: the rest waits in its owner
// (a Forwarder's queue, a Switch's hold) for on_tx_ready(), which only the
// engine's retry at the next slot gives. The ports are polled as the
// engine's loop polls them, at synthetic times 1 us apart.
TEST_CASE("A Forwarder onto a paced ethdev port sends a burst at its line rate with only the engine's polling",
          "[e2e][ethdev]") {
  RingPair in("rt_fwin"), out("rt_fwout");
  auto engine = make_realtime_engine();
  auto& fw = engine->add<Forwarder>("fw");
  EthdevPort* pin = attach(*engine, fw, 0, in.a);
  EthdevParams params;
  params.device = out.a;
  params.rate_bps = 1'000'000'000ull;
  auto r = engine->attach_ethdev(fw, 1, params);
  INFO(r.status().message());
  REQUIRE(r.ok());
  EthdevPort* pout = r.value();
  REQUIRE(pin->link_up());
  REQUIRE(pout->link_up());

  // 20 frames of 1000 bytes arrive at once; each takes 8.192 us at 1 Gbit/s.
  constexpr uint32_t kFrames = 20;
  for (uint32_t i = 0; i < kFrames; i++) {
    rte_mbuf* m = engine->pool().alloc_copy(probe_frame(1000, 0, i));
    REQUIRE(m != nullptr);
    REQUIRE(rte_ring_enqueue(in.r[0], m) == 0);
  }
  const Duration slot = serialization_time(1000 + kEthWireOverhead, params.rate_bps);
  const Duration step = us(1);
  const Time t0 = engine->now() + ms(1);
  std::vector<Time> left;  // when each frame reached the device
  for (Time t = t0; t < t0 + slot * kFrames + ms(1) && left.size() < kFrames; t += step) {
    pin->poll(t);
    pout->poll(t);
    for (size_t k = left.size(); k < rte_ring_count(out.r[1]); k++) left.push_back(t);
  }
  REQUIRE(left.size() == kFrames);
  // Frame k may go once the line is free within the slack of its slot,
  // and goes at the first poll from then.
  for (uint32_t k = 0; k < kFrames; k++) {
    INFO("frame " << k);
    const Time earliest = std::max(t0, t0 + slot * k - EthdevPort::kPaceSlack);
    CHECK(left[k] >= earliest);
    CHECK(left[k] < earliest + step);
  }
  CHECK(fw.forwarded() == kFrames);
  CHECK(fw.dropped() == 0);
  in.drain();
  out.drain();
}

// PFC from the peer of an external port reaches the NIC behind it, which
// pauses the priority for the frame's quanta at the port's line rate.
TEST_CASE("A NIC on an ethdev port paused by the peer's PFC for quanta at the port's configured rate",
          "[e2e][ethdev]") {
  RingPair rings("rt_pfc");
  auto engine = make_realtime_engine();
  nic::NicConfig cfg;
  cfg.mac = *wire::MacAddr::parse("02:00:00:00:00:01");
  cfg.ips = {*wire::IpAddr::parse("10.0.0.1")};
  auto& h1 = engine->add<nic::Nic>("h1", cfg);
  EthdevParams params;
  params.device = rings.a;
  params.rate_bps = 1'000'000'000ull;
  auto r = engine->attach_ethdev(h1, 0, params);
  INFO(r.status().message());
  REQUIRE(r.ok());
  EthdevPort* port = r.value();
  engine->start();
  // The peer pauses priority 3 for 1000 quanta: 512,000 bit times, 512 us at 1 Gbit/s.
  uint16_t quanta[wire::kNumPriorities] = {};
  quanta[3] = 1000;
  std::vector<uint8_t> frame(64);
  frame.resize(wire::encode_pfc(frame, *wire::MacAddr::parse("02:00:00:00:00:09"), 1u << 3, quanta));
  rte_mbuf* m = engine->pool().alloc_copy(frame);
  REQUIRE(m != nullptr);
  REQUIRE(rte_ring_enqueue(rings.r[0], m) == 0);  // what the peer sends: port a receives it
  const Time now = engine->now();
  REQUIRE(port->poll_rx(now) == 1);
  CHECK(h1.counters()[nic::NicCounters::rx_pfc_frames] == 1);
  const Duration pause = serialization_time(1000ull * wire::kBitsPerQuantum / 8, params.rate_bps);
  CHECK(pause == us(512));
  CHECK(Duration(int64_t(h1.counters()[nic::NicCounters::tx_pfc_paused_time_ps])) == pause);
  rings.drain();
}

TEST_CASE("Real time: a port whose link is down drops what it is given, and counts it", "[e2e][ethdev]") {
  const TempDir tmp;
  const std::string& dir = tmp.path;
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& probe = engine->add<Probe>("probe", 100, 10, stop);
  // A memif server nobody connects to: its link stays down.
  EthdevPort* p = attach(*engine, probe, 0, "net_memif_rt9,role=server,socket-abstract=no,socket=" + dir + "/lonely.sock");
  auto& watch = engine->add<Watch>([&] { return probe.dir[0].sent >= 10; }, stop);
  engine->run(stop);
  CHECK_FALSE(watch.timed_out);
  CHECK_FALSE(p->link_up());
  CHECK(counter(p, PortCounters::tx_drop_link_down) == 10);
  CHECK(counter(p, PortCounters::tx_packets) == 0);
}

TEST_CASE("Real time: net_af_packet ports on veth pairs in a private network namespace", "[e2e][ethdev]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: net_af_packet over veth needs root (ip netns add, ip link add, setns)");
    return;
  }
  if (!sh("command -v ip >/dev/null")) {
    WARN("SKIPPED: no 'ip' command (iproute2)");
    return;
  }
  Netns ns({{"rta1", "rtb1"}, {"rta2", "rtb2"}});
  REQUIRE(ns.ok);
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  auto& probe = engine->add<Probe>("probe", 1000, 5000, stop);
  auto& fw = engine->add<Forwarder>("fw");
  // blocksz must be a multiple of framesz, or the TX ring stalls after a block.
  const std::string opts = ",blocksz=4096,framesz=2048,framecnt=512,qpairs=1";
  EthdevPort* pa = attach(*engine, probe, 0, "net_af_packet_rt0,iface=rta1" + opts, ns.name);
  EthdevPort* pb = attach(*engine, fw, 0, "net_af_packet_rt1,iface=rtb1" + opts, ns.name);
  EthdevPort* pc = attach(*engine, fw, 1, "net_af_packet_rt2,iface=rta2" + opts, ns.name);
  EthdevPort* pd = attach(*engine, probe, 1, "net_af_packet_rt3,iface=rtb2" + opts, "/var/run/netns/" + ns.name);
  probe.must_be_up = {pa, pb, pc, pd};
  probe.window = 128;  // well inside the 512-frame kernel rings
  engine->run(stop);
  check_probe(probe, 5000);
  CHECK(probe.foreign == 0);
  CHECK(fw.dropped() == 0);
  CHECK(counter(pb, PortCounters::rx_packets) == 5000);
  CHECK(counter(pc, PortCounters::tx_packets) == 5000);
  engine.reset();
}

// Issue 14: DPDK's net_af_packet bypasses the qdisc layer unless told not
// to, so tcpdump on the interface saw what came in and nothing of what the
// engine sent. An external port leaves the bypass off unless asked.
TEST_CASE("Real time: host tools on a net_af_packet port's interface see both directions", "[e2e][ethdev]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: net_af_packet over veth needs root (ip netns add, ip link add, setns)");
    return;
  }
  if (!sh("command -v ip >/dev/null")) {
    WARN("SKIPPED: no 'ip' command (iproute2)");
    return;
  }
  Netns ns(std::vector<std::pair<std::string, std::string>>{{"rtq1", "rtq2"}});
  REQUIRE(ns.ok);
  HostTap tap(ns.name, "rtq1");
  auto engine = make_realtime_engine();
  std::atomic<bool> stop{false};
  constexpr uint64_t kFrames = 500;
  auto& probe = engine->add<Probe>("probe", 1000, kFrames, stop);
  const std::string opts = ",blocksz=4096,framesz=2048,framecnt=512,qpairs=1";
  EthdevPort* pa = attach(*engine, probe, 0, "net_af_packet_q0,iface=rtq1" + opts, ns.name);
  EthdevPort* pb = attach(*engine, probe, 1, "net_af_packet_q1,iface=rtq2" + opts, ns.name);
  probe.must_be_up = {pa, pb};
  probe.window = 128;
  engine->run(stop);
  check_probe(probe, kFrames);
  const auto seen = tap.count();
  INFO("on rtq1: " << seen[0] << " frames out (sent by the engine), " << seen[1] << " in");
  CHECK(seen[0] == kFrames);
  CHECK(seen[1] == kFrames);
  engine.reset();
}

TEST_CASE("Real time: a bad external port is refused with the device named", "[e2e][ethdev]") {
  auto engine = make_realtime_engine();
  auto& fw = engine->add<Forwarder>("fw");
  EthdevParams p;
  p.device = "net_nosuchpmd0,x=1";
  auto r = engine->attach_ethdev(fw, 0, p);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("net_nosuchpmd0") != std::string::npos);
  p.device = "net_af_packet_rtx,iface=rta1";
  p.netns = "rocemu-no-such-netns";
  r = engine->attach_ethdev(fw, 0, p);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("rocemu-no-such-netns") != std::string::npos);
  CHECK(fw.port(0) == nullptr);
}

TEST_CASE("Real time: an idle engine sleeps and backs off; post() wakes it", "[e2e][ethdev]") {
  SECTION("with external ports: back-off sleeps") {
    RingPair ring("rt_idle");
    auto engine = make_realtime_engine();
    std::atomic<bool> stop{false};
    auto& fw = engine->add<Forwarder>("fw");
    attach(*engine, fw, 0, ring.a);
    attach(*engine, fw, 1, ring.b);
    // 30 ms of engine time without traffic: 100 us of spinning, then
    // sleeps of 10, 20, ... 500 us.
    Time start = kTimeNever;
    auto& watch = engine->add<Watch>(
        [&] {
          if (start == kTimeNever) start = engine->now();
          return engine->now() - start >= ms(30);
        },
        stop);
    engine->run(stop);
    CHECK_FALSE(watch.timed_out);
    CHECK(engine->sleeps() >= 10);
    // Busy polling 30 ms would take hundreds of thousands of iterations.
    CHECK(engine->iterations() < 30000);
  }
  SECTION("without external ports: a post() from another thread ends the sleep") {
    auto engine = make_realtime_engine();
    auto& gen = engine->add<Generator>("gen", probe_frame(100, 0, 0), 0);
    auto& sink = engine->add<Sink>("sink");
    REQUIRE(engine->connect(gen, 0, sink, 0, LinkParams{}).ok());
    std::atomic<bool> stop{false};
    std::atomic<int> ran{0};
    std::thread loop([&] { engine->run(stop); });
    // Without timers or ports a sleeping loop would stay asleep for 500 ms.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    auto wait_for = [&](auto cond) {
      while (!cond() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      return cond();
    };
    std::atomic<uint64_t> sleeps{0};
    engine->post([&](Engine& e) {
      sleeps = e.sleeps();
      ran = 1;
    });
    CHECK(wait_for([&] { return ran.load() == 1; }));
    // The post was work; wait until the loop has gone back to sleep.
    CHECK(wait_for([&] { return engine->sleeps() > sleeps; }));
    const auto t0 = std::chrono::steady_clock::now();
    engine->post([&](Engine&) { ran = 2; });
    CHECK(wait_for([&] { return ran.load() == 2; }));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(400));
    stop = true;
    engine->wake();
    loop.join();
    CHECK(engine->sleeps() >= 1);
  }
}

TEST_CASE("net_af_xdp's largest receivable frame is reckoned from its pool: the UMEM chunk less the PMD's frame "
          "headroom and the kernel's XDP_PACKET_HEADROOM",
          "[e2e][ethdev]") {
  test::require_eal();
  // The port's receive pool: 3584 bytes of data room (3904-byte objects, under a 4 KiB page).
  rte_mempool* mp = rte_pktmbuf_pool_create("xdp-room-test", 64, 0, 0, RTE_PKTMBUF_HEADROOM + 3584, SOCKET_ID_ANY);
  REQUIRE(mp != nullptr);
  const uint32_t chunk = rte_mempool_calc_obj_size(mp->elt_size, mp->flags, nullptr);
  CHECK(chunk == 3904);
  CHECK(chunk <= 4096);
  // 3904 - (64 mempool header + 128 rte_mbuf + 0 private + 128 RTE_PKTMBUF_HEADROOM) - 256.
  CHECK(af_xdp_rx_room(*mp) == 3328);
  CHECK(af_xdp_rx_room(*mp) < uint32_t(rte_pktmbuf_data_room_size(mp) - RTE_PKTMBUF_HEADROOM));  // not the data room
  rte_mempool_free(mp);
}
