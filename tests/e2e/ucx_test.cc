// Debian's UCX (ucx_info, ucx_perftest), unmodified, on the emulated NICs:
// it finds rocemu0 through /dev/infiniband and /sys/class/infiniband
// (tests/e2e/device_files_test.cc) and runs its verbs transports,
// rc_verbs and ud_verbs, between h1 and h2.
#include <signal.h>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

// ucx_perftest's server on h2 and its client on h1 with the same
// environment; the client's output (its "Final:" line says it finished).
std::string ucx_perftest(const Fabric& f, const std::vector<std::string>& env, const std::vector<std::string>& args) {
  const int port = pick_port();
  std::vector<std::string> server = {"/usr/bin/env"};
  server.insert(server.end(), env.begin(), env.end());
  server.insert(server.end(), {"/usr/bin/ucx_perftest", "-p", std::to_string(port)});
  std::vector<std::string> client = server;
  client.insert(client.end(), {"127.0.0.1"});
  client.insert(client.end(), args.begin(), args.end());
  const PairResult r = run_pair(f, "h2", "h1", server, client, port, 60);
  std::string what = "ucx_perftest";
  for (const auto& a : args) what += " " + a;
  INFO(what << "\n--- client ---\n" << r.client_out << "\n--- server ---\n" << r.server_out);
  CHECK(r.client == 0);
  CHECK(r.server == 0);
  CHECK_THAT(r.client_out, Catch::Contains("Final:"));
  return r.client_out;
}

}  // namespace

TEST_CASE("ucx_info -d lists rocemu0:1 with rc_verbs and ud_verbs", "[e2e][ucx]") {
  Fabric f;
  Process p = f.exec("h1", {"ucx_info", "-d"});
  REQUIRE(finish(p, std::chrono::seconds(60)) == 0);
  INFO(p.output);
  const size_t md = p.output.find("# Memory domain: rocemu0");
  REQUIRE(md != std::string::npos);
  const std::string dom = p.output.substr(md, p.output.find("# Memory domain:", md + 10) - md);
  CHECK_THAT(dom, Catch::Contains("Transport: rc_verbs"));
  CHECK_THAT(dom, Catch::Contains("Transport: ud_verbs"));
  CHECK_THAT(dom, Catch::Contains("Device: rocemu0:1"));
  CHECK_THAT(dom, Catch::Contains("atomic_fadd: 64 bit"));
  CHECK_THAT(p.output, Catch::Contains("# Connection manager: rdmacm"));  // UCX's client/server over rdma_cm
}

TEST_CASE("ucx_perftest's UCT tests run over rc_verbs and ud_verbs", "[e2e][ucx]") {
  Fabric f;
  const std::vector<std::string> rc = {"-x", "rc_verbs", "-d", "rocemu0:1", "-n", "300", "-w", "20"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  ucx_perftest(f, {}, with(rc, {"-t", "put_bw", "-D", "zcopy", "-s", "65536"}));
  ucx_perftest(f, {}, with(rc, {"-t", "get", "-D", "zcopy", "-s", "65536"}));
  ucx_perftest(f, {}, with(rc, {"-t", "am_bw", "-D", "bcopy", "-s", "4096"}));
  ucx_perftest(f, {}, with(rc, {"-t", "fadd", "-s", "8"}));
  ucx_perftest(f, {}, with(rc, {"-t", "cswap", "-s", "8"}));
  const std::vector<std::string> ud = {"-x", "ud_verbs", "-d", "rocemu0:1", "-n", "300", "-w", "20"};
  ucx_perftest(f, {}, with(ud, {"-t", "am_bw", "-D", "bcopy", "-s", "2048"}));
  ucx_perftest(f, {}, with(ud, {"-t", "am_lat", "-s", "8"}));
}

// UCP connects RC through an auxiliary transport (ud_verbs), as on real
// hardware: UCX_TLS=rc_verbs alone fails "no auxiliary transport".
TEST_CASE("ucx_perftest's UCP tests run with UCX_TLS=rc_verbs,ud_verbs and with ud_verbs", "[e2e][ucx]") {
  Fabric f;
  for (const char* tls : {"rc_verbs,ud_verbs", "ud_verbs"}) {
    const std::vector<std::string> env = {std::string("UCX_TLS=") + tls, "UCX_NET_DEVICES=rocemu0:1"};
    ucx_perftest(f, env, {"-t", "tag_bw", "-s", "65536", "-n", "300", "-w", "20"});
    ucx_perftest(f, env, {"-t", "tag_lat", "-s", "8", "-n", "300", "-w", "20"});
    ucx_perftest(f, env, {"-t", "stream_bw", "-s", "65536", "-n", "300", "-w", "20"});
  }
}

// UCX's client/server connection (ucp_listener, ucp_ep_create by socket
// address) through its rdmacm connection manager: io_demo (ucx-utils) moves
// READ and WRITE I/O of 1 KiB to 256 KiB with its data integrity check (-q).
// The server listens only on rdma_cm (UCX_SOCKADDR_TLS_PRIORITY=rdmacm) and
// the client connects to h2's NIC address, which no Linux interface has:
// nothing but rdma_cm can make that connection.
TEST_CASE("UCX connects client to server over rdma_cm (io_demo, sockaddr, rdmacm), data checked", "[e2e][ucx][rdma_cm]") {
  Fabric f;
  const std::string port = std::to_string(pick_port());
  const std::vector<std::string> io = {"/usr/bin/env", "UCX_SOCKADDR_TLS_PRIORITY=rdmacm", "UCX_TLS=rc_verbs,ud_verbs",
                                       "UCX_NET_DEVICES=rocemu0:1", "/usr/bin/io_demo", "-p", port, "-q", "-o",
                                       "read,write", "-d", "1024:262144"};
  Process s = f.exec("h2", io);
  const bool listening =
      wait_until([&] { return counter_at(f.counters(), "h2/cm listening") > 0; }, std::chrono::seconds(30), {&s});
  std::vector<std::string> client = io;
  client.insert(client.end(), {"-c", "3", "-i", "1000", "10.0.2.1"});
  Process c;
  if (listening) {
    c = f.exec("h1", client);
    finish(c, std::chrono::seconds(90));
  }
  if (!s.done) kill(s.pid, SIGTERM);  // io_demo's server serves until stopped (a reaped pid is never signalled)
  finish(s, std::chrono::seconds(10));
  INFO("--- client ---\n" << c.output << "\n--- server ---\n" << s.output);
  REQUIRE(listening);
  CHECK(c.status == 0);
  CHECK_THAT(c.output, Catch::Contains("Client exit with status 'OK'"));
  CHECK_THAT(c.output, Catch::Contains("remote address 10.0.2.1:" + port));
  CHECK_THAT(s.output, !Catch::Contains("Assertion"));
  CHECK(counter_at(f.counters(), "h2/cm mads_received") >= 3);  // REQ, RTU, DREQ or DREP
}
