// Debian's unmodified rdma_cm programs (rdmacm-utils, perftest -R) under
// `rocemu exec`: librdmacm talks to /dev/infiniband/rdma_cm as to the
// kernel, the connection is made with CM MADs across the fabric. The
// built-in topology: h1 10.0.1.1 and h2 10.0.2.1, each behind sw1.
#include <signal.h>
#include <sys/syscall.h>

#include <fstream>

#include <regex>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace rdma_cm_test {

constexpr const char* kServerIp = "10.0.2.1";  // h2

// perftest -R connects twice to the server's port: a control connection,
// then, after the server destroyed that listener and listened anew, the
// test's. A client whose second REQ comes before the new listener gets
// REJECTED 8 (on Linux too), and perftest 4.5-0.17's retry then reuses the
// ids it destroyed and crashes. Such a run (the client's output says so,
// the server waits for ever) is repeated, up to 3 runs in all, nothing else.
bool perftest_relisten_race(const std::string& client_out) {
  return client_out.find("Event: RDMA_CM_EVENT_REJECTED; error: 8.") != std::string::npos ||
         client_out.find("Event: RDMA_CM_EVENT_UNREACHABLE; error: 1.") != std::string::npos;
}

// The previous pair's ids are gone (its programs' channels closed), so a
// listener counted is the next server's.
void wait_no_ids(const Fabric& f) {
  REQUIRE(wait_until(
      [&] {
        const auto c = f.counters();
        return counter_at(c, "h1/cm ids") == 0 && counter_at(c, "h2/cm ids") == 0;
      },
      std::chrono::seconds(30)));
}

// Starts `argv` on h2 and waits until its rdma_cm id listens (the engine
// counts listening ids under h2/cm); false if it never does.
bool start_server(const Fabric& f, Process& s, const std::vector<std::string>& argv) {
  wait_no_ids(f);
  s = f.exec("h2", argv);
  return wait_until([&] { return counter_at(f.counters(), "h2/cm listening") > 0; }, std::chrono::seconds(30), {&s});
}

PairResult cm_pair_once(const Fabric& f, const std::vector<std::string>& server_argv,
                        const std::vector<std::string>& client_argv, int seconds) {
  PairResult r;
  Process s;
  if (!start_server(f, s, server_argv)) {
    r.server = finish(s, std::chrono::seconds(5));
    r.server_out = s.output + "\n[test: the server never listened]";
    return r;
  }
  Process c = f.exec("h1", client_argv);
  r.client = finish(c, std::chrono::seconds(seconds));
  if (r.client != 0 && perftest_relisten_race(c.output)) kill(s.pid, SIGTERM);
  r.server = finish(s, std::chrono::seconds(seconds));
  r.client_out = c.output;
  r.server_out = s.output;
  if (r.client != 0 || r.server != 0) {  // what the managers saw, for the failure's message
    for (const auto& [k, v] : f.counters())
      if (k.find("/cm ") != std::string::npos) r.client_out += "\n[test: " + k + " " + std::to_string(v) + "]";
  }
  return r;
}

// The server on h2, then the client on h1; both must end.
PairResult cm_pair(const Fabric& f, const std::vector<std::string>& server_argv,
                   const std::vector<std::string>& client_argv, int seconds = 90) {
  std::string earlier;
  for (int attempt = 1;; attempt++) {
    PairResult r = cm_pair_once(f, server_argv, client_argv, seconds);
    if (attempt == 3 || r.client == 0 || !perftest_relisten_race(r.client_out)) {
      r.client_out = earlier + r.client_out;
      return r;
    }
    WARN("[test: attempt " << attempt << " met perftest's re-listen race, run again]\n" << r.client_out);
    earlier += "[test: attempt " + std::to_string(attempt) + " met perftest's re-listen race]\n";
  }
}

void require_both_ok(const PairResult& r) {
  INFO("--- client ---\n" << r.client_out << "\n--- server ---\n" << r.server_out);
  REQUIRE(r.client == 0);
  REQUIRE(r.server == 0);
}

// The perftest result rows ("  65536  5000  9316.06  868.12  0.013890").
bool has_result_row(const std::string& out) {
  static const std::regex row(R"(^\s*\d+\s+\d+\s+[\d.]+\s+[\d.]+.*)");
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (std::regex_match(line, row)) return true;
  return false;
}

}  // namespace rdma_cm_test
using namespace rdma_cm_test;

TEST_CASE("rping -s / rping -c -C 100 -V: 100 pings, each checked, over rdma_cm", "[e2e][rdma_cm]") {
  Fabric f;
  const auto r = cm_pair(f, {"rping", "-s", "-a", kServerIp, "-V", "-C", "100"},
                         {"rping", "-c", "-a", kServerIp, "-V", "-v", "-C", "100"});
  require_both_ok(r);
  size_t pings = 0;
  for (size_t at = r.client_out.find("ping data: rdma-ping-"); at != std::string::npos;
       at = r.client_out.find("ping data: rdma-ping-", at + 1))
    pings++;
  CHECK(pings == 100);
  CHECK_THAT(r.client_out, Catch::Contains("rdma-ping-99: "));
  // The connection was made with CM MADs on the wire, and torn down.
  const auto c = f.counters();
  CHECK(counter_at(c, "h1/cm mads_sent") >= 3);  // REQ, RTU, DREQ or DREP
  CHECK(counter_at(c, "h2/cm mads_received") >= 3);
  // The programs are gone: their channels closed, so did their ids.
  CHECK(wait_until(
      [&] {
        const auto now = f.counters();
        return counter_at(now, "h1/cm ids") == 0 && counter_at(now, "h2/cm ids") == 0;
      },
      std::chrono::seconds(30)));
}

TEST_CASE("perftest over rdma_cm: ib_write_bw -R, ib_read_lat -R and ib_send_bw -R -c UD", "[e2e][rdma_cm][perftest]") {
  Fabric f;
  for (const auto& tool :
       {std::vector<std::string>{"ib_write_bw"}, {"ib_read_lat"}, {"ib_send_bw", "-c", "UD"}}) {
    const std::string port = std::to_string(pick_port());
    std::vector<std::string> server = tool;
    for (const std::string a : {"-R", "-d", "rocemu0", "-p"}) server.push_back(a);
    server.push_back(port);
    std::vector<std::string> client = server;
    client.push_back(kServerIp);
    const auto r = cm_pair(f, server, client, 120);
    INFO(tool[0]);
    require_both_ok(r);
    CHECK(has_result_row(r.client_out));
  }
}

TEST_CASE("ucmatose, rdma_server/rdma_client and udaddy (UD, SIDR) connect and exchange data", "[e2e][rdma_cm]") {
  Fabric f;
  SECTION("ucmatose") {
    const auto r = cm_pair(f, {"ucmatose", "-b", kServerIp, "-c", "2"}, {"ucmatose", "-s", kServerIp, "-c", "2"});
    require_both_ok(r);
    CHECK_THAT(r.client_out, Catch::Contains("test complete"));
    CHECK_THAT(r.server_out, Catch::Contains("test complete"));
  }
  SECTION("rdma_server / rdma_client") {
    const auto r = cm_pair(f, {"rdma_server", "-s", kServerIp}, {"rdma_client", "-s", kServerIp});
    require_both_ok(r);
    CHECK_THAT(r.client_out, Catch::Contains("rdma_client: end 0"));
    CHECK_THAT(r.server_out, Catch::Contains("rdma_server: end 0"));
  }
  SECTION("udaddy") {
    const auto r = cm_pair(f, {"udaddy", "-b", kServerIp}, {"udaddy", "-s", kServerIp});
    require_both_ok(r);
    CHECK_THAT(r.client_out, Catch::Contains("data transfers complete"));
  }
}

TEST_CASE("rdma_cm errors: a port nobody listens on is REJECTED (8), an address nobody has ADDR_ERROR", "[e2e][rdma_cm]") {
  Fabric f;
  Process rej = f.exec("h1", {"rping", "-c", "-a", kServerIp, "-p", "9999", "-C", "1"});
  finish(rej, std::chrono::seconds(30));
  CHECK_THAT(rej.output, Catch::Contains("RDMA_CM_EVENT_REJECTED, error 8"));
  Process tose = f.exec("h1", {"ucmatose", "-s", kServerIp, "-p", "9999"});
  finish(tose, std::chrono::seconds(30));
  CHECK_THAT(tose.output, Catch::Contains("RDMA_CM_EVENT_REJECTED, error: 8"));
  // On h1's subnet, but nobody answers ARP: rping's 2 s resolve timeout.
  const auto t0 = std::chrono::steady_clock::now();
  Process addr = f.exec("h1", {"rping", "-c", "-a", "10.0.1.99", "-C", "1"});
  finish(addr, std::chrono::seconds(30));
  CHECK_THAT(addr.output, Catch::Contains("RDMA_CM_EVENT_ADDR_ERROR, error -110"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  // Loopback: RDMA does not run on lo.
  Process lo = f.exec("h1", {"rping", "-c", "-a", "127.0.0.1", "-C", "1"});
  finish(lo, std::chrono::seconds(30));
  CHECK_THAT(lo.output, Catch::Contains("RDMA_CM_EVENT_ADDR_ERROR, error -19"));
}

TEST_CASE("rdma_cm over a lossy link: a lost REQ is sent again 4.6 s later; rping -V under 1% loss", "[e2e][rdma_cm]") {
  Fabric f;
  // The first MAD h1 sends (the REQ: QP1) never arrives.
  auto [rc, out] = f.rocemu({"fault", "add", "h1", "out", "drop", "match", "qpn=1", "times=1"});
  REQUIRE(rc == 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = cm_pair(f, {"rping", "-s", "-a", kServerIp, "-V", "-C", "10"},
                   {"rping", "-c", "-a", kServerIp, "-V", "-C", "10"});
  require_both_ok(r);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(4608));
  CHECK(counter_at(f.counters(), "h1/cm mads_resent") >= 1);

  std::tie(rc, out) = f.rocemu({"fault", "add", "h1", "loss", "1%"});
  REQUIRE(rc == 0);
  r = cm_pair(f, {"rping", "-s", "-a", kServerIp, "-V", "-C", "100"},
              {"rping", "-c", "-a", kServerIp, "-V", "-v", "-C", "100"}, 120);
  require_both_ok(r);
  CHECK_THAT(r.client_out, Catch::Contains("rdma-ping-99: "));
}

TEST_CASE("rdma_cm with the link going down mid-connection: the client gets its error and ends; after link up a new "
          "connection works",
          "[e2e][rdma_cm]") {
  Fabric f;
  // ib_write_bw always has WRITEs outstanding, so the sender learns of the
  // link at once (rping's client may be waiting for a receive then, and
  // waits on as it would on Linux).
  Process s, c;
  bool running = false;
  for (int attempt = 1; attempt <= 3 && !running; attempt++) {
    const std::string port = std::to_string(pick_port());
    REQUIRE(start_server(f, s, {"ib_write_bw", "-R", "-d", "rocemu0", "-p", port, "-D", "20"}));
    c = f.exec("h1", {"ib_write_bw", "-R", "-d", "rocemu0", "-p", port, "-D", "20", kServerIp});
    const uint64_t sent = counter_at(f.counters(), "h1 tx_roce_packets");
    running = wait_until([&] { return counter_at(f.counters(), "h1 tx_roce_packets") > sent + 20000; },
                         std::chrono::seconds(30), {&c, &s});
    if (running) break;
    INFO(c.output);
    REQUIRE((c.done && perftest_relisten_race(c.output)));
    kill(s.pid, SIGTERM);
    finish(s, std::chrono::seconds(10));
    finish(c, std::chrono::seconds(10));
  }
  REQUIRE(running);
  auto [rc, out] = f.rocemu({"fault", "add", "h1", "link", "down"});
  REQUIRE(rc == 0);
  // RC retries run out (timeout 14, 7 retries: about half a second), the
  // completion fails and ib_write_bw ends with an error: no hang.
  const auto t0 = std::chrono::steady_clock::now();
  const int client_rc = finish(c, std::chrono::seconds(60));
  INFO(c.output);
  CHECK(client_rc != 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));  // well before its 20 s
  CHECK_THAT(c.output, Catch::Contains("Completion with error"));
  // The server heard nothing (the DREQ was lost with the link, as on
  // Linux): it is ended here.
  kill(s.pid, SIGTERM);
  finish(s, std::chrono::seconds(10));
  std::tie(rc, out) = f.rocemu({"fault", "add", "h1", "link", "up"});
  REQUIRE(rc == 0);
  const auto r = cm_pair(f, {"rping", "-s", "-a", kServerIp, "-V", "-C", "10"},
                         {"rping", "-c", "-a", kServerIp, "-V", "-C", "10"});
  require_both_ok(r);
}

namespace rdma_cm_test {

// tests/e2e/data/ucma_raw.py: raw ucma commands on /dev/infiniband/rdma_cm.
std::vector<std::string> ucma_raw(std::initializer_list<std::string> checks) {
  std::vector<std::string> argv = {"/usr/bin/python3", std::string(ROCEMU_SOURCE_DIR) + "/tests/e2e/data/ucma_raw.py"};
  argv.insert(argv.end(), checks);
  return argv;
}

}  // namespace rdma_cm_test

TEST_CASE("rdma_cm's file as the kernel's: ENOSPC for a short response; dup, dup2, dup3, close_range and closefrom "
          "on the channel's descriptor",
          "[e2e][rdma_cm]") {
  Fabric f;
  Process p = f.exec("h1", ucma_raw({"enospc", "dup", "close_range", "closefrom"}));
  const int status = finish(p, std::chrono::seconds(60));
  INFO(p.output);
  CHECK(status == 0);
  CHECK_THAT(p.output, !Catch::Contains("FAIL"));
  size_t oks = 0;
  for (size_t at = p.output.find("ok "); at != std::string::npos; at = p.output.find("ok ", at + 1))
    oks += at == 0 || p.output[at - 1] == '\n';
  CHECK(oks == 15);
}

TEST_CASE("rdma_cm's channel outlives a subprocess (vfork, close_range and dup2 in the child)", "[e2e][rdma_cm]") {
  Fabric f;
  Process p = f.exec("h1", ucma_raw({"subprocess"}));
  const int status = finish(p, std::chrono::seconds(60));
  INFO(p.output);
  CHECK(status == 0);
  CHECK_THAT(p.output, !Catch::Contains("FAIL"));
  CHECK_THAT(p.output, Catch::Contains("ok CREATE_ID after a subprocess"));
}

TEST_CASE("Fork children dup2 and close while another thread reads and writes: none deadlocks on the provider",
          "[e2e][rdma_cm]") {
  Fabric f;
  Process p = f.exec("h1", ucma_raw({"fork_threads"}));
  const int status = finish(p, std::chrono::seconds(120));  // a deadlocked child hangs it: killed, not 0
  INFO(p.output);
  CHECK(status == 0);
  CHECK_THAT(p.output, Catch::Contains("ok 2000 fork children"));
}

TEST_CASE("close_range over a channel and its engine connection: the channel's release closes nothing of the program's",
          "[e2e][rdma_cm]") {
  Fabric f;
  Process p = f.exec("h1", ucma_raw({"close_range_socket"}));
  const int status = finish(p, std::chrono::seconds(60));
  INFO(p.output);
  CHECK(status == 0);
  CHECK_THAT(p.output, Catch::Contains("ok close_range: releasing the channel closes nothing"));
}

namespace rdma_cm_test {

// True once process `pid` sleeps in poll (GET_EVENT's wait): its state is
// S and, where /proc lets us read it, its system call is poll or ppoll.
bool asleep_in_poll(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] != 'S') return false;
  std::ifstream sys("/proc/" + std::to_string(pid) + "/syscall");
  long nr = -1;
  if (!(sys >> nr)) return true;  // not ours to read: the state alone
  return nr == SYS_poll || nr == SYS_ppoll;
}

}  // namespace rdma_cm_test

TEST_CASE("A blocking rdma_get_cm_event fails with EIO when the engine dies, instead of waiting for ever",
          "[e2e][rdma_cm]") {
  Fabric f;
  Process p = f.exec("h1", ucma_raw({"block"}));
  static const std::regex waiting(R"(waiting (\d+))");
  pid_t pid = -1;
  REQUIRE(wait_until(
      [&] {
        std::smatch m;
        if (std::regex_search(p.output, m, waiting)) pid = std::stoi(m[1].str());
        return pid > 0;
      },
      std::chrono::seconds(30), {&p}));
  // Killed only once the call blocks: an engine gone before would fail
  // CREATE_ID's neighbour, not the wait this checks.
  REQUIRE(wait_until([&] { return asleep_in_poll(pid); }, std::chrono::seconds(30), {&p}));
  kill(f.engine_pid(), SIGKILL);  // ours, by pid
  f.forget_engine();
  const int status = finish(p, std::chrono::seconds(30));
  INFO(p.output);
  CHECK(status == 0);
  CHECK_THAT(p.output, Catch::Contains("ok a blocking GET_EVENT whose engine died fails with EIO"));
}
