// Two engines on an external link, as rocemu meets a real peer: each runs
// one NIC on a net_af_packet port at one end of a veth pair in a network
// namespace the test makes (and removes). Engine A's port is paced at 5
// Mbit/s; engine B's NIC reaches its port through a forwarder whose link
// delays everything it sends (ACKs, READ responses) by 30 ms: a slow link
// and a peer that answers late. rocemu-verify moves WRITE, READ, SEND and atomic
// data across and checks every byte, with go-back-N and selective repeat.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

// A network namespace with one veth pair (both ends up), deleted with it.
struct VethNetns {
  std::string name = "rocemu-ext-" + std::to_string(getpid());
  bool ok = false;
  VethNetns() {
    sh("ip netns del " + name + " 2>/dev/null");
    const std::string in = "ip netns exec " + name + " ";
    ok = sh("ip netns add " + name) &&
         sh(in + "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1") &&
         sh(in + "ip link add vea type veth peer name veb") && sh(in + "ip link set vea up") &&
         sh(in + "ip link set veb up");
  }
  ~VethNetns() { sh("ip netns del " + name); }
};

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

constexpr const char* kAfPacketTuning = ",blocksz=4096,framesz=2048,framecnt=512,qpairs=1";

// Engine A: h1 on vea, paced at 5 Mbit/s.
std::string topology_a(const std::string& dir, const std::string& ns, const std::string& mode) {
  return write_file(dir + "/a.yaml", R"(engine: {time: real}
nodes:
  h1: {kind: nic, mac: "02:00:00:00:0e:01", ip: 10.14.0.1, neighbors: {10.14.0.2: "02:00:00:00:0e:02"},
       loss_recovery: )" + mode + R"(}
ports:
  - {node: h1, device: "net_af_packet_ea,iface=vea)" + kAfPacketTuning + R"(", netns: )" + ns + R"(, mtu: 1500, rate: 5M}
)");
}

// Engine B: h2 -- (what h2 sends delayed 30 ms) -- fw -- port on veb.
std::string topology_b(const std::string& dir, const std::string& ns, const std::string& mode) {
  return write_file(dir + "/b.yaml", R"(engine: {time: real}
nodes:
  h2: {kind: nic, mac: "02:00:00:00:0e:02", ip: 10.14.0.2, neighbors: {10.14.0.1: "02:00:00:00:0e:01"},
       loss_recovery: )" + mode + R"(}
  fw: {kind: forwarder}
links:
  - {a: h2, b: "fw:0", rate: 100G, delay: 1us, faults_ab: {delay: 30ms}}
ports:
  - {node: "fw:1", device: "net_af_packet_eb,iface=veb)" + kAfPacketTuning + R"(", netns: )" + ns + R"(, mtu: 1500}
)");
}

}  // namespace

TEST_CASE("Two engines over veth, a slow link and late ACKs: every byte arrives, go-back-N and selective repeat",
          "[e2e][external]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: net_af_packet over veth needs root (ip netns add, ip link add, setns)");
    return;
  }
  if (!sh("command -v ip >/dev/null")) {
    WARN("SKIPPED: no 'ip' command (iproute2)");
    return;
  }
  for (const std::string mode : {"go-back-n", "selective-repeat"}) {
    DYNAMIC_SECTION(mode) {
      VethNetns ns;
      REQUIRE(ns.ok);
      char tmpl[] = "/tmp/rocemu-ext-XXXXXX";
      REQUIRE(mkdtemp(tmpl) != nullptr);
      const std::string dir = tmpl;
      Fabric a(topology_a(dir, ns.name, mode));
      Fabric b(topology_b(dir, ns.name, mode));
      const int port = pick_port();
      const std::vector<std::string> opts = {"--port", std::to_string(port), "--size", "262144", "--iters", "2"};
      std::vector<std::string> srv = {bin("rocemu-verify"), "--server"};
      srv.insert(srv.end(), opts.begin(), opts.end());
      std::vector<std::string> cli = {bin("rocemu-verify"), "--connect", "127.0.0.1"};
      cli.insert(cli.end(), opts.begin(), opts.end());
      Process server = b.exec("h2", srv);
      REQUIRE(wait_until([&] { return tcp_listening(port); }, std::chrono::seconds(30), {&server}));
      const auto start = std::chrono::steady_clock::now();
      Process client = a.exec("h1", cli);
      const int client_rc = finish(client, std::chrono::seconds(60));
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const int server_rc = finish(server, std::chrono::seconds(10));
      const auto [st_a, counters_a] = a.rocemu({"counters", "--all"});
      const auto [st_b, counters_b] = b.rocemu({"counters"});
      INFO(mode << ": the transfer took " << seconds << " s\n--- client ---\n"
                << client.output << "\n--- server ---\n" << server.output << "\n--- engine A counters ---\n"
                << counters_a << "\n--- engine B counters ---\n" << counters_b);
      WARN(mode << ": rocemu-verify, 2 iterations of 64 KiB WRITE, 2 x 64 KiB READ and an atomic over 5 Mbit/s "
                   "with 30 ms late answers, took "
                << seconds << " s");
      CHECK(client_rc == 0);
      CHECK(server_rc == 0);
      CHECK_THAT(server.output, Catch::Contains("every byte checked, all good"));
      CHECK_THAT(client.output, Catch::Contains("every byte checked, all good"));
      // The device's counters are there beside the port's.
      CHECK_THAT(counters_a, Catch::Contains("device.imissed"));
      sh("rm -rf '" + dir + "'");
    }
  }
}
