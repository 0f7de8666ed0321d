// One fabric over two engines, as on two machines: the test makes two
// network namespaces joined by a veth pair (and removes them), and each runs
// `rocemu up --part` of the same topology file, h1 -- sw1 in rack1 and
// sw2 -- h2 in rack2, the trunk sw1 -- sw2 cut into net_af_packet ports on
// the veth ends. perftest and rocemu-verify run inside the namespaces on
// NICs of different engines, their out-of-band TCP over the veth addresses.
// With h2's link slower than the trunk, sw2's PFC crosses the veth and
// pauses sw1 (counted on both engines), and sw2's ECN marks come back to h1
// as CNPs.
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

// Two "machines": namespaces A and B, vea in A (192.168.77.1) and veb in B
// (192.168.77.2) joined by a veth pair at the trunk's MTU (the interface's
// MTU is the administrator's, as on a real host); deleted with the
// namespaces, also when a test fails. With `management`, a second pair,
// vma (192.168.78.1) and vmb (192.168.78.2), for the hosts' own traffic
// (perftest's out-of-band TCP): net_af_xdp takes every frame the data pair
// receives away from the kernel.
struct TwoMachines {
  std::string a = "rocemu-pa-" + std::to_string(getpid());
  std::string b = "rocemu-pb-" + std::to_string(getpid());
  bool ok = false;
  explicit TwoMachines(int mtu = 4200, bool management = false) {
    remove();
    auto in = [](const std::string& ns) { return "ip netns exec " + ns + " "; };
    const std::string quiet = "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1";
    ok = sh("ip netns add " + a) && sh("ip netns add " + b) && sh(in(a) + quiet) && sh(in(b) + quiet) &&
         sh("ip -n " + a + " link add vea type veth peer name veb netns " + b) &&
         sh("ip -n " + a + " addr add 192.168.77.1/24 dev vea") &&
         sh("ip -n " + b + " addr add 192.168.77.2/24 dev veb") && sh("ip -n " + a + " link set vea mtu " + std::to_string(mtu) + " up") &&
         sh("ip -n " + b + " link set veb mtu " + std::to_string(mtu) + " up") && sh("ip -n " + a + " link set lo up") &&
         sh("ip -n " + b + " link set lo up");
    if (ok && management)
      ok = sh("ip -n " + a + " link add vma type veth peer name vmb netns " + b) &&
           sh("ip -n " + a + " addr add 192.168.78.1/24 dev vma") &&
           sh("ip -n " + b + " addr add 192.168.78.2/24 dev vmb") && sh("ip -n " + a + " link set vma up") &&
           sh("ip -n " + b + " link set vmb up");
  }
  ~TwoMachines() { remove(); }
  void remove() {
    sh("ip netns del " + a + " 2>/dev/null");
    sh("ip netns del " + b + " 2>/dev/null");
  }
  std::vector<std::string> in_a() const { return {"ip", "netns", "exec", a}; }
  std::vector<std::string> in_b() const { return {"ip", "netns", "exec", b}; }
};

// The external port's device on the veth ends: net_af_packet (the file's
// `interface:`) or net_af_xdp.
enum class Trunk { kAfPacket, kAfXdp };

// tests/e2e/data/two-racks.yaml (h1 -- sw1 | trunk | sw2 -- h2, 25 Gbit/s)
// with h2's link at `h2_rate`, written to `path`. With net_af_xdp the trunk
// is `device: net_af_xdp0,iface=...` at MTU 3310 (its receive buffers fit
// a 4 KiB page: frames up to 3328 bytes, README).
std::string two_racks(const std::string& path, const std::string& h2_rate, Trunk trunk = Trunk::kAfPacket) {
  std::ifstream in(std::string(ROCEMU_SOURCE_DIR) + "/tests/e2e/data/two-racks.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  replace(R"({a: h2, b: "sw2:0", rate: 25G)", R"({a: h2, b: "sw2:0", rate: )" + h2_rate);
  if (trunk == Trunk::kAfXdp) {
    replace("trunk: {interface: vea}", "trunk: {device: \"net_af_xdp0,iface=vea\"}");
    replace("trunk: {interface: veb}", "trunk: {device: \"net_af_xdp0,iface=veb\"}");
    replace(R"(b: "sw2:1", rate: 25G, delay: 1us, mtu: 4200})", R"(b: "sw2:1", rate: 25G, delay: 1us, mtu: 3310})");
  }
  std::ofstream(path) << text;
  return path;
}

struct TmpDir {
  std::string path;
  TmpDir() {
    char tmpl[] = "/tmp/rocemu-parts-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TmpDir() { sh("rm -rf '" + path + "'"); }
};

std::string dump(const std::map<std::string, uint64_t>& m) {
  std::string s;
  for (const auto& [k, v] : m) s += k + " " + std::to_string(v) + "\n";
  return s;
}

// ib_write_bw's BW average (Gbit/s with --report_gbits), from its result row.
double bw_average(const std::string& out) {
  std::istringstream in(out);
  std::string line;
  double bw = -1;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    double bytes, iters, peak, avg;
    if (ls >> bytes >> iters >> peak >> avg) bw = avg;
  }
  return bw;
}

// two-racks.yaml on two engines, one per namespace: rack1 in A, rack2 in B.
struct TwoEngines {
  TwoMachines m;
  std::string oob;  // B's address for the out-of-band TCP (the data veth's, or the management one's)
  TmpDir dir;
  std::optional<Fabric> a, b;
  // With net_af_xdp the veth's MTU stays below what veth lets a (single
  // buffer) XDP program attach at (about 3500 on 4 KiB pages) and what the
  // port receives (frames up to 3328 bytes: MTU 3310).
  explicit TwoEngines(const std::string& h2_rate, Trunk trunk = Trunk::kAfPacket)
      : m(trunk == Trunk::kAfXdp ? 3310 : 4200, trunk == Trunk::kAfXdp),
        oob(trunk == Trunk::kAfXdp ? "192.168.78.2" : "192.168.77.2") {
    REQUIRE(m.ok);
    const std::string topo = two_racks(dir.path + "/racks.yaml", h2_rate, trunk);
    a.emplace(topo, std::vector<std::string>{"--part", "rack1"}, m.in_a());
    b.emplace(topo, std::vector<std::string>{"--part", "rack2"}, m.in_b());
  }
  ~TwoEngines() {  // the engines before their namespaces
    b.reset();
    a.reset();
  }

  // A server on rack2's h2, then a client on rack1's h1 connecting to B's
  // `oob` address (the client's argv gets it last, or after `connect_flag`).
  PairResult pair(const std::vector<std::string>& server_argv, std::vector<std::string> client_argv, int port,
                  const std::string& connect_flag = "") const {
    if (connect_flag.empty()) {
      client_argv.push_back(oob);
    } else {
      client_argv.insert(client_argv.begin() + 1, {connect_flag, oob});
    }
    return run_pair(*b, "h2", *a, "h1", server_argv, client_argv, port, 60);
  }

  // ib_write_bw -s 65536 -D 2 from h1 to h2; both engines' counters after.
  struct Bw {
    PairResult r;
    std::map<std::string, uint64_t> a, b;
    std::string what() const {
      return "--- client (h1, engine A) ---\n" + r.client_out + "\n--- server (h2, engine B) ---\n" + r.server_out +
             "\n--- engine A ---\n" + dump(a) + "--- engine B ---\n" + dump(b);
    }
  };
  // rocemu-verify from h1 to h2: every byte checked, both directions of each verb.
  void check_verify() const {
    const int port = pick_port();
    const std::vector<std::string> opts = {"--port", std::to_string(port), "--size", "262144", "--iters", "4"};
    std::vector<std::string> srv = {bin("rocemu-verify"), "--server", "--bind", oob};
    srv.insert(srv.end(), opts.begin(), opts.end());
    std::vector<std::string> cli = {bin("rocemu-verify")};
    cli.insert(cli.end(), opts.begin(), opts.end());
    const PairResult v = pair(srv, cli, port, "--connect");
    INFO("--- verify client ---\n" << v.client_out << "\n--- verify server ---\n" << v.server_out);
    CHECK(v.client == 0);
    CHECK(v.server == 0);
    CHECK_THAT(v.client_out, Catch::Contains("every byte checked, all good"));
    CHECK_THAT(v.server_out, Catch::Contains("every byte checked, all good"));
  }

  // `mtu`: perftest's -m (0: the port's own).
  Bw write_bw(int mtu = 0) const {
    const int port = pick_port();
    std::vector<std::string> bw = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-F", "--report_gbits",
                                   "-p", std::to_string(port), "-s", "65536", "-D", "2"};
    if (mtu != 0) bw.insert(bw.end(), {"-m", std::to_string(mtu)});
    Bw out;
    out.r = pair(bw, bw, port);
    out.a = a->counters();
    out.b = b->counters();
    return out;
  }
};

bool can_run() {
  if (geteuid() != 0) {
    WARN("SKIPPED: two engines in network namespaces need root (ip netns add, ip link add)");
    return false;
  }
  if (!sh("command -v ip >/dev/null")) {
    WARN("SKIPPED: no 'ip' command (iproute2)");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("One fabric over two engines in two network namespaces: ib_write_bw and rocemu-verify between them",
          "[e2e][external]") {
  if (!can_run()) return;
  TwoEngines e("25G");
  // Each engine runs its own part only.
  const std::string status_a = e.a->rocemu({"status"}).second, status_b = e.b->rocemu({"status"}).second;
  INFO("--- engine A ---\n" << status_a << "--- engine B ---\n" << status_b);
  CHECK_THAT(status_a, Catch::Contains("h1 (nic)") && Catch::Contains("sw1 (switch)") &&
                           !Catch::Contains("h2 (") && !Catch::Contains("sw2 ("));
  CHECK_THAT(status_b, Catch::Contains("h2 (nic)") && Catch::Contains("sw2 (switch)") &&
                           !Catch::Contains("h1 (") && !Catch::Contains("sw1 ("));

  const auto bw = e.write_bw();
  INFO(bw.what());
  REQUIRE(bw.r.client == 0);
  REQUIRE(bw.r.server == 0);
  const double gbps = bw_average(bw.r.client_out);
  WARN("ib_write_bw -s 65536 -D 2 from engine A's h1 to engine B's h2 over the veth pair: " << gbps << " Gbit/s");
  CHECK(gbps > 0);
  // The data crossed the veth: sw1 sent it out of swp2 (the external port),
  // sw2 took it in on its own, and h2 received it.
  CHECK(counter_at(bw.a, "sw1/swp2 tx-roce-stats.roce-bytes") > 2 * 65536);
  CHECK(counter_at(bw.b, "sw2/swp2 rx-roce-stats.roce-bytes") > 2 * 65536);
  CHECK(counter_at(bw.b, "h2 rx_roce_packets") > 0);
  // sw1's swp2 is an external port here (its device counters exist; the
  // one-engine case below checks they do not).
  CHECK(counter_at(bw.a, "sw1/swp2 device.xstats.tx_good_packets") > 0);

  e.check_verify();
}

TEST_CASE("One fabric over two engines joined by net_af_xdp on the veth pair: ib_write_bw and rocemu-verify; "
          "ib_write_bw against net_af_packet at the same RoCE MTU",
          "[e2e][external]") {
  if (!can_run()) return;
  if (const int fd = socket(AF_XDP, SOCK_RAW, 0); fd < 0) {
    WARN("SKIPPED: this kernel has no AF_XDP sockets (socket(AF_XDP): " << std::strerror(errno) << ")");
    return;
  } else {
    close(fd);
  }
  double gbps[2] = {0, 0};
  for (const Trunk trunk : {Trunk::kAfPacket, Trunk::kAfXdp}) {
    const char* what = trunk == Trunk::kAfXdp ? "net_af_xdp" : "net_af_packet";
    TwoEngines e("25G", trunk);
    const auto bw = e.write_bw(2048);  // RoCE MTU 2048: the frames fit net_af_xdp's buffers
    INFO(what << "\n" << bw.what());
    REQUIRE(bw.r.client == 0);
    REQUIRE(bw.r.server == 0);
    gbps[trunk == Trunk::kAfXdp] = bw_average(bw.r.client_out);
    CHECK(counter_at(bw.a, "sw1/swp2 tx-roce-stats.roce-bytes") > 2 * 65536);
    CHECK(counter_at(bw.b, "sw2/swp2 rx-roce-stats.roce-bytes") > 2 * 65536);
    CHECK(counter_at(bw.a, "sw1/swp2 device.xstats.tx_good_packets") > 0);
    if (trunk == Trunk::kAfPacket) continue;
    e.check_verify();  // every byte checked over net_af_xdp (rocemu-verify's path MTU is 1024)
  }
  WARN("ib_write_bw -s 65536 -D 2 -m 2048 between the engines over the veth pair: net_af_packet "
       << gbps[0] << " Gbit/s, net_af_xdp " << gbps[1] << " Gbit/s");
  CHECK(gbps[0] > 0);
  CHECK(gbps[1] > 0);
}

TEST_CASE("One fabric over two engines: PFC and ECN cross the external link", "[e2e][external]") {
  if (!can_run()) return;
  // h2's link at 500 Mbit/s: sw2's port to h2 is congested at any speed the
  // engines reach.
  TwoEngines e("500M");
  const auto bw = e.write_bw();
  INFO(bw.what());
  REQUIRE(bw.r.client == 0);
  REQUIRE(bw.r.server == 0);
  const auto& ca = bw.a;
  const auto& cb = bw.b;
  WARN("PFC across the veth: sw2/swp2 sent " << counter_at(cb, "sw2/swp2 tx-pfc-frames") << ", sw1/swp2 received "
                                              << counter_at(ca, "sw1/swp2 rx-pfc-frames") << " (TC3 paused "
                                              << counter_at(ca, "sw1/swp2 pfc3.rx-pause-duration-us") << " us); ECN: h2 saw "
                                              << counter_at(cb, "h2 np_ecn_marked_roce_packets") << " CE, sent "
                                              << counter_at(cb, "h2 np_cnp_sent") << " CNPs, h1 handled "
                                              << counter_at(ca, "h1 rp_cnp_handled") << "; lossless PG discards: sw2/swp2 "
                                              << counter_at(cb, "sw2/swp2 pg3.rx-buffer-discards") << ", sw1/swp1 "
                                              << counter_at(ca, "sw1/swp1 pg3.rx-buffer-discards") << "; h1 resent "
                                              << counter_at(ca, "h1 retransmitted_packets") << " packets; sw1 paused h1 "
                                              << counter_at(ca, "h1 rx_prio3_pause") << " times");
  // sw2's congested port to h2 backs up into its trunk port's lossless PG,
  // which sends PFC out of the external port ...
  CHECK(counter_at(cb, "sw2/swp2 tx-pfc-frames") > 0);
  // ... which engine A's sw1 receives on its external port and honours: its
  // RoCE queue to sw2 is paused. Whether that is in time for sw2's headroom
  // (the trunk's cable-length covers the PFC round trip through both
  // engines and the veth) depends on how promptly engine B reads its
  // af_packet ring: frames waiting there are invisible to sw2's buffer, so
  // a stalled engine on a loaded machine takes them in past XOFF. The
  // discards are reported above, not checked; so is whether sw1 then
  // pauses h1 in turn (it depends on how far DCQCN has slowed h1 already).
  CHECK(counter_at(ca, "sw1/swp2 rx-pfc-frames") > 0);
  CHECK(counter_at(ca, "sw1/swp2 pfc3.rx-pause-packets") > 0);
  CHECK(counter_at(ca, "sw1/swp2 pfc3.rx-pause-duration-us") > 0);
  // ECN: sw2 marks, h2 answers with CNPs that cross back to h1.
  CHECK(counter_at(cb, "h2 np_ecn_marked_roce_packets") > 0);
  CHECK(counter_at(cb, "h2 np_cnp_sent") > 0);
  CHECK(counter_at(ca, "h1 rp_cnp_handled") > 0);
}

TEST_CASE("Without --part one engine runs every part of the file, the cut link internal", "[e2e][external]") {
  const std::string racks = std::string(ROCEMU_SOURCE_DIR) + "/tests/e2e/data/two-racks.yaml";
  Fabric f(racks);
  std::ifstream log(f.dir() + "/rocemu.log");
  const std::string said((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  CHECK_THAT(said, Catch::Contains("this engine runs every part (rack1, rack2), the links between them internal"));
  const std::string status = f.rocemu({"status"}).second;
  INFO(status);
  for (const char* n : {"h1 (nic)", "h2 (nic)", "sw1 (switch)", "sw2 (switch)"}) CHECK_THAT(status, Catch::Contains(n));
  CHECK_THAT(status, Catch::Contains("link sw1:1-sw2:1"));  // the trunk, an internal link
  const int port = pick_port();
  const std::vector<std::string> bw = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-F",
                                       "-p", std::to_string(port), "-s", "65536", "-n", "200"};
  std::vector<std::string> cli = bw;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", bw, cli, port);
  INFO("--- client ---\n" << r.client_out << "\n--- server ---\n" << r.server_out);
  CHECK(r.client == 0);
  CHECK(r.server == 0);
  const auto c = f.counters();
  CHECK(counter_at(c, "sw2/swp2 rx-roce-stats.roce-bytes") > 200 * 65536);  // over the (internal) trunk
  CHECK(c.count("sw1/swp2 device.xstats.tx_good_packets") == 0);  // no external port
}
