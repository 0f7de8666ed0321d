// Debian's libfabric (libfabric-bin 1.17: fi_info, fi_pingpong) over its
// verbs provider on the emulated NICs, unmodified. The provider finds the
// RDMA devices it connects through by the host's interface addresses
// (getifaddrs, then rdma_bind_addr on each), as on a RoCE host where the
// NIC's netdev carries its IP: the test gives the NICs' addresses (h1
// 10.0.1.1, h2 10.0.2.1) to a veth interface in a network namespace of its
// own and runs the engine and the programs there. fi_pingpong's control
// connection (TCP) reaches the server through that namespace; the data
// crosses the fabric.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace libfabric_test {

// A network namespace whose veth interface holds both NICs' addresses,
// deleted with it.
constexpr const char* kNetnsPrefix = "rocemu-fi-";

// True if `pid` is an engine this test started in a namespace: the
// rocemu binary, run with an e2e runtime directory (Fabric's mkdtemp).
bool is_test_engine(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  char exe[4096];
  const ssize_t n = readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return false;
  const std::string path(exe, size_t(n));
  if (path.size() < 7 || path.compare(path.size() - 7, 7, "/rocemu") != 0) return false;
  std::ifstream env(proc + "/environ");
  const std::string text((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
  return text.find(std::string("ROCEMU_RUNTIME_DIR=/tmp/rocemu-e2e-")) != std::string::npos;
}

// Namespaces an earlier run of this test left (it was killed before its
// destructor ran): rocemu-fi-PID whose PID is gone. Their engines (only
// processes identified as such) are killed by pid, then the namespace
// is deleted.
void sweep_stale_namespaces() {
  const auto [st, out] = run({"ip", "netns", "list"});
  if (st != 0) return;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (name.rfind(kNetnsPrefix, 0) != 0) continue;
    const std::string digits = name.substr(std::strlen(kNetnsPrefix));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t owner = pid_t(std::stol(digits));
    if (owner == getpid() || kill(owner, 0) == 0 || errno != ESRCH) continue;  // its test still runs
    const auto [pst, pids] = run({"ip", "netns", "pids", name});
    std::istringstream pin(pids);
    for (pid_t pid; pst == 0 && pin >> pid;)
      if (is_test_engine(pid)) kill(pid, SIGKILL);
    WARN("removed network namespace " << name << " left by an earlier run (pid " << owner << " gone)");
    sh("ip netns del " + name);
  }
}

struct NicAddressNetns {
  std::string name = kNetnsPrefix + std::to_string(getpid());
  bool created = false;  // `ip netns add` worked (CAP_SYS_ADMIN and CAP_NET_ADMIN)
  bool ok = false;
  NicAddressNetns() {
    sh("ip netns del " + name + " 2>/dev/null");
    const std::string in = "ip netns exec " + name + " ";
    created = sh("ip netns add " + name + " 2>/dev/null");
    ok = created && sh(in + "ip link set lo up") && sh(in + "ip link add rdma0 type veth peer name rdma1") &&
         sh(in + "ip addr add 10.0.1.1/24 dev rdma0") && sh(in + "ip addr add 10.0.2.1/24 dev rdma0") &&
         sh(in + "ip link set rdma0 up") && sh(in + "ip link set rdma1 up");
  }
  ~NicAddressNetns() { sh("ip netns del " + name); }
  std::vector<std::string> wrapper() const { return {"ip", "netns", "exec", name}; }
};

// fi_pingpong's result rows ("64  100  =100  12k  0.03s  0.41  156.98  0.01"):
// size -> the whole line.
std::map<std::string, std::string> result_rows(const std::string& out) {
  static const std::regex row(R"(^(\S+)\s+(\d+)\s+=(\d+)\s+\S+\s+[\d.]+s\s+[\d.]+\s+[\d.]+\s+[\d.]+\s*$)");
  std::map<std::string, std::string> rows;
  std::istringstream in(out);
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_match(line, m, row) && m[2] == m[3]) rows[m[1]] = line;
  return rows;
}

}  // namespace libfabric_test
using namespace libfabric_test;

TEST_CASE("libfabric's verbs provider: fi_info lists rocemu0 (msg, rdm over ofi_rxm, dgram); fi_pingpong passes "
          "with its data checked over msg, rdm and dgram endpoints",
          "[e2e][libfabric][rdma_cm]") {
  if (geteuid() != 0) {
    WARN("SKIPPED: the NICs' addresses on an interface need a network namespace (root)");
    return;
  }
  if (!sh("command -v ip >/dev/null")) {
    WARN("SKIPPED: no 'ip' command (iproute2)");
    return;
  }
  if (!sh("command -v fi_pingpong >/dev/null")) {
    WARN("SKIPPED: no fi_pingpong (Debian's libfabric-bin; scripts/setup.sh installs it)");
    return;
  }
  sweep_stale_namespaces();
  NicAddressNetns ns;
  if (!ns.created) {  // uid 0 without the capabilities (a container)
    WARN("SKIPPED: 'ip netns add' failed: no network namespace for the NICs' addresses (CAP_SYS_ADMIN, "
         "CAP_NET_ADMIN)");
    return;
  }
  REQUIRE(ns.ok);
  Fabric f("", {}, ns.wrapper());

  SECTION("fi_info -p verbs") {
    Process p = f.exec("h1", {"fi_info", "-p", "verbs", "-v"});
    REQUIRE(finish(p, std::chrono::seconds(60)) == 0);
    INFO(p.output);
    CHECK_THAT(p.output, Catch::Contains("src_addr: fi_sockaddr_in://10.0.1.1:0"));
    CHECK_THAT(p.output, Catch::Contains("prov_name: verbs;ofi_rxm"));
    CHECK_THAT(p.output, Catch::Contains("name: rocemu0-dgram"));
  }

  // Endpoint type, extra environment, the largest size fi_pingpong sends
  // (a datagram is at most the MTU).
  struct Mode {
    const char* ep;
    std::vector<std::string> env;
    const char* largest;
  };
  // The dgram endpoint addresses its peer by the GID at FI_VERBS_GID_IDX
  // (0, mlx5's RoCE v1 link-local GID, by default): RoCEv2 only here, so
  // index 3, the IPv4 RoCEv2 GID.
  for (const Mode& m : {Mode{"msg", {}, "1m"}, Mode{"rdm", {}, "1m"}, Mode{"dgram", {"FI_VERBS_GID_IDX=3"}, "4k"}}) {
    DYNAMIC_SECTION("fi_pingpong -p verbs -e " << m.ep << " -c") {
      const std::string port = std::to_string(pick_port());
      std::vector<std::string> server = {"/usr/bin/env"};
      server.insert(server.end(), m.env.begin(), m.env.end());
      server.insert(server.end(), {"fi_pingpong", "-p", "verbs", "-e", m.ep, "-c", "-I", "100"});
      std::vector<std::string> client = server;
      server.insert(server.end(), {"-B", port});
      client.insert(client.end(), {"-P", port, "10.0.2.1"});
      const PairResult r = run_pair(f, "h2", "h1", server, client, std::stoi(port), 120);
      INFO("--- client ---\n" << r.client_out << "\n--- server ---\n" << r.server_out);
      REQUIRE(r.client == 0);
      REQUIRE(r.server == 0);
      CHECK_THAT(r.client_out + r.server_out, !Catch::Contains("Error at iteration"));
      const auto rows = result_rows(r.client_out);
      for (const char* size : {"64", "4k"}) CHECK(rows.contains(size));
      CHECK(rows.contains(m.largest));
      for (const auto& [size, line] : rows) WARN("-e " << m.ep << ": " << line);
    }
  }
}
