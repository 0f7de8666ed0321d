// The Prometheus exposition of a real fabric, read back by the reference
// parser (python3-prometheus-client), and its HTTP server under hostile
// clients. The server is fed by a stand-in engine thread here; e2e runs
// it inside `rocemu up`.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <thread>

#include "apps/metrics.h"
#include "switch/bridge.h"
#include "apps/metrics_server.h"
#include "tests/integration/incast.h"

using namespace rocemu;
using namespace rocemu::test;

namespace {

// The parser's view of `text` (apps' families as it names them).
nlohmann::json parse_exposition(const std::string& text) {
  char path[] = "/tmp/rocemu-metrics-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, text.data(), text.size()) == ssize_t(text.size()));
  close(fd);
  const std::string cmd = std::string("/usr/bin/python3 ") + ROCEMU_SOURCE_DIR +
                          "/tests/integration/prometheus_parse.py " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  std::string out;
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  unlink(path);
  INFO(out.substr(0, 2000));
  REQUIRE(status == 0);
  return nlohmann::json::parse(out);
}

const nlohmann::json* sample(const nlohmann::json& fams, const std::string& family, const nlohmann::json& labels) {
  if (!fams.contains(family)) return nullptr;
  for (const auto& s : fams[family]["samples"])
    if (s[1] == labels) return &s;
  return nullptr;
}

}  // namespace

TEST_CASE("metrics: every counter of a fabric after an incast, as the Prometheus parser reads it",
          "[sim][integration][metrics]") {
  StarSpec sp;
  sp.seed = 51;
  sp.roce_mode = "lossless";
  auto star = make_star(sp);
  IncastSpec is;
  is.messages = 4;
  is.message_len = 1 << 20;
  REQUIRE(run_incast(*star, is).finished);
  const auto samples = app::collect_counters(*star->engine);
  const std::string text = app::prometheus_text(samples);
  const nlohmann::json fams = parse_exposition(text);

  // Every counter is there once: the parser's samples add up to ours.
  size_t parsed = 0;
  for (const auto& [name, f] : fams.items()) {
    parsed += f["samples"].size();
    INFO(name);
    CHECK(name.rfind("rocemu_", 0) == 0);
    CHECK(!f["help"].get<std::string>().empty());
    // Counters keep their _total samples; gauges are the few levels.
    if (f["type"] == "counter")
      for (const auto& s : f["samples"]) CHECK(s[0].get<std::string>() == name + "_total");
  }
  CHECK(parsed == samples.size());

  // The switch's PFC per port and priority, ECN marks per TC, in the
  // counters' own numbers and help text; port names as the switch names them.
  const sw::Switch& s = *star->sw;
  const std::string bottleneck = s.config().interfaces[4].name;
  uint64_t pfc_sent = 0;
  for (uint16_t p = 0; p < 4; p++) {
    const std::string port = s.config().interfaces[p].name;
    const auto* x = sample(fams, "rocemu_switch_pfc_tx_pause_packets",
                           {{"node", "sw1"}, {"port", port}, {"priority", "3"}});
    REQUIRE(x != nullptr);
    CHECK((*x)[2].get<double>() == double(s.pfc_tx_frames(p, 3)));
    pfc_sent += s.pfc_tx_frames(p, 3);
  }
  CHECK(pfc_sent > 0);
  const auto* marks = sample(fams, "rocemu_switch_queue_ecn_marked_packets",
                             {{"node", "sw1"}, {"port", bottleneck}, {"tc", "3"}});
  REQUIRE(marks != nullptr);
  CHECK((*marks)[2].get<double>() == double(s.queue_counters(4, 3)[sw::QueueCounters::ecn_marked_packets]));
  CHECK(fams["rocemu_switch_queue_ecn_marked_packets"]["help"] ==
        std::string(sw::QueueCounters::kHelp[sw::QueueCounters::ecn_marked_packets]));
  // NVUE's ingress-buffer-stats: per priority group of the port the
  // senders come in on.
  const auto* pg_rx = sample(fams, "rocemu_switch_pg_rx_frames", {{"node", "sw1"}, {"port", "swp1"}, {"pg", "3"}});
  REQUIRE(pg_rx != nullptr);
  CHECK((*pg_rx)[2].get<double>() == double(s.pg_counters(0, 3)[sw::PgCounters::rx_frames]));
  CHECK((*pg_rx)[2].get<double>() > 0);
  CHECK(fams["rocemu_switch_pg_rx_frames"]["help"] == std::string(sw::PgCounters::kHelp[sw::PgCounters::rx_frames]));
  CHECK(fams["rocemu_switch_rx_roce_stats_roce_bytes"]["help"] ==
        std::string(sw::PortCounters::kHelp[sw::PortCounters::rx_roce_bytes]));
  // A NIC's counter, and base units: PFC pause time in seconds.
  const auto* cnps = sample(fams, "rocemu_nic_np_cnp_sent", {{"node", "h4"}});
  REQUIRE(cnps != nullptr);
  CHECK((*cnps)[2].get<double>() == double(star->nic_counter(4, nic::NicCounters::np_cnp_sent)));
  const auto* paused = sample(fams, "rocemu_nic_tx_pfc_paused_seconds", {{"node", "h0"}});
  REQUIRE(paused != nullptr);
  CHECK((*paused)[2].get<double>() ==
        Approx(double(star->nic_counter(0, nic::NicCounters::tx_pfc_paused_time_ps)) * 1e-12));
  CHECK((*paused)[2].get<double>() > 0);
  // ethtool's per-priority counters, labelled by priority, the duration in seconds.
  const auto* prio3 = sample(fams, "rocemu_nic_prio_rx_pause_duration_seconds", {{"node", "h0"}, {"priority", "3"}});
  REQUIRE(prio3 != nullptr);
  CHECK((*prio3)[2].get<double>() ==
        Approx(double(star->nics[0]->prio_counter(nic::NicPrioCounters::rx_pause_duration, 3, star->now())) * 1e-6));
  CHECK(fams["rocemu_nic_prio_rx_pause"]["help"] ==
        std::string(nic::NicPrioCounters::kHelp[nic::NicPrioCounters::rx_pause]));
  // A level is a gauge, in bytes.
  REQUIRE(fams.contains("rocemu_switch_queue_watermark_bytes"));
  CHECK(fams["rocemu_switch_queue_watermark_bytes"]["type"] == "gauge");
  const auto* mark = sample(fams, "rocemu_switch_queue_watermark_bytes",
                            {{"node", "sw1"}, {"port", bottleneck}, {"tc", "3"}});
  REQUIRE(mark != nullptr);
  CHECK((*mark)[2].get<double>() == double(s.mmu().queue(4, 3).watermark));
  // Per QP, labelled by QPN.
  REQUIRE(fams.contains("rocemu_qp_retransmitted_packets"));
  CHECK(fams["rocemu_qp_retransmitted_packets"]["samples"][0][1].contains("qp"));
}

namespace {

// A stand-in engine thread: runs posted jobs in order, as Engine::post does.
class FakeEngine {
 public:
  FakeEngine() : thread_([this] { run(); }) {}
  ~FakeEngine() {
    {
      std::lock_guard<std::mutex> l(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> l(m_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_all();
  }
  int renders = 0;  // on the engine thread only

 private:
  void run() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      l.unlock();
      job();
      l.lock();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

int connect_to(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Everything the server sends until it closes (bounded by a deadline).
std::string read_all(int fd, int deadline_ms = 10000) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, deadline_ms) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

std::string get(uint16_t port, const std::string& request) {
  const int fd = connect_to(port);
  REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size()));
  std::string r = read_all(fd);
  close(fd);
  return r;
}

constexpr const char* kGet = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";

}  // namespace

TEST_CASE("metrics: a VTEP's per-VNI counters carry a vni label; the bridge's counters their help text",
          "[sim][integration][metrics]") {
  const std::vector<app::CounterSample> samples = {
      {"switch", "leaf1", "vxlan.vni10.encap-packets", 7},
      {"switch", "leaf1", "vxlan.vni4001.encap-packets", 3},
      {"switch", "leaf1", "vxlan.vni10.head-end-replication-copies", 2},
      {"switch", "leaf1", "bridge.mac-learned", 4},
  };
  const nlohmann::json fams = parse_exposition(app::prometheus_text(samples));
  const auto* a = sample(fams, "rocemu_switch_vxlan_vni_encap_packets", {{"node", "leaf1"}, {"vni", "10"}});
  const auto* b = sample(fams, "rocemu_switch_vxlan_vni_encap_packets", {{"node", "leaf1"}, {"vni", "4001"}});
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK((*a)[2].get<double>() == 7);
  CHECK((*b)[2].get<double>() == 3);
  CHECK(fams["rocemu_switch_vxlan_vni_encap_packets"]["help"] ==
        std::string(sw::VniCounters::kHelp[sw::VniCounters::encap_packets]));
  CHECK(sample(fams, "rocemu_switch_vxlan_vni_head_end_replication_copies", {{"node", "leaf1"}, {"vni", "10"}}) !=
        nullptr);
  CHECK(fams["rocemu_switch_bridge_mac_learned"]["help"] ==
        std::string(sw::BridgeCounters::kHelp[sw::BridgeCounters::mac_learned]));
}

TEST_CASE("metrics server: loopback only, renders on the engine thread, survives hostile clients",
          "[sim][integration][metrics]") {
  FakeEngine engine;
  std::atomic<std::thread::id> render_thread{};
  app::MetricsServer server([&](std::function<void()> job) { engine.post(std::move(job)); },
                            [&] {
                              render_thread.store(std::this_thread::get_id());
                              return std::string("# HELP rocemu_x_total x\n# TYPE rocemu_x_total counter\n"
                                                 "rocemu_x_total{node=\"h1\"} ") +
                                     std::to_string(++engine.renders) + "\n";
                            });
  REQUIRE(server.start(0).ok());
  const uint16_t port = server.port();
  REQUIRE(port != 0);

  SECTION("GET /metrics: 200, the exposition content type, a fresh render each time") {
    const std::string r1 = get(port, kGet);
    CHECK(r1.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(r1.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
    CHECK(r1.find("rocemu_x_total{node=\"h1\"} 1\n") != std::string::npos);
    CHECK(get(port, kGet).find("rocemu_x_total{node=\"h1\"} 2\n") != std::string::npos);
    CHECK(render_thread.load() != std::this_thread::get_id());
    CHECK(render_thread.load() != std::thread::id());
    CHECK(get(port, "GET /nothing HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404", 0) == 0);
    CHECK(get(port, "POST /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405", 0) == 0);
  }
  SECTION("bound to 127.0.0.1 only") {
    // Another local address of the machine (127.0.0.2 is loopback too, but
    // not the address bound): refused.
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = inet_addr("127.0.0.2");
    CHECK(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0);
    close(fd);
  }
  SECTION("a slow client (half a request, then nothing) does not hold up the others") {
    const int slow = connect_to(port);
    REQUIRE(send(slow, "GET /metr", 9, MSG_NOSIGNAL) == 9);
    CHECK(get(port, kGet).rfind("HTTP/1.1 200 OK", 0) == 0);
    // ... and is closed at its deadline.
    CHECK(read_all(slow, int(app::MetricsServer::kClientDeadline.count()) + 2000).empty());
    close(slow);
  }
  SECTION("a huge request: 431 and closed, nothing read beyond the limit") {
    const int fd = connect_to(port);
    const std::string junk(app::MetricsServer::kMaxRequest * 4, 'a');
    send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
    CHECK(read_all(fd).rfind("HTTP/1.1 431", 0) == 0);
    close(fd);
    CHECK(get(port, kGet).rfind("HTTP/1.1 200 OK", 0) == 0);
  }
  SECTION("more connections than it serves: the extra ones are closed, service goes on once they go") {
    std::vector<int> idle;
    for (size_t i = 0; i < app::MetricsServer::kMaxClients + 16; i++) idle.push_back(connect_to(port));
    // The last ones were over the limit: closed at once.
    CHECK(read_all(idle.back()).empty());
    for (int fd : idle) close(fd);
    // Slots free as the server sees the closes; a client then gets served.
    bool served = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!served && std::chrono::steady_clock::now() < deadline)
      served = get(port, kGet).rfind("HTTP/1.1 200 OK", 0) == 0;
    CHECK(served);
  }
  server.stop();
}
