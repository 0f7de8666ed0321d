// The device files libraries look for (/dev/infiniband, /sys/class/
// infiniband, /sys/class/infiniband_verbs), read by real programs: the
// shell's stat and cat, rdma-core's ibstat and ibstatus, perftest's -W
// counters, UCX's ucx_info; and the verbs whose bad flows rdma-core's man
// pages state (rocemu-verify --api).
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

std::set<std::string> words(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.insert(w);
  return out;
}

// The lines of `out` between "== NAME" and the next "==".
std::string section(const std::string& out, const std::string& name) {
  const size_t at = out.find("== " + name + "\n");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 4;
  const size_t to = out.find("== ", from);
  return out.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

}  // namespace

TEST_CASE("rocemu exec shows the NIC's device files, and nothing else changes", "[e2e][device-files]") {
  Fabric f;
  namespace fs = std::filesystem;
  // What the host has before (a host with rxe or a real NIC has these).
  const bool had_ib = fs::exists("/sys/class/infiniband"), had_dev_ib = fs::exists("/dev/infiniband");
  const std::string script =
      "echo '== uverbs'; stat -c '%F %t:%T %a' /dev/infiniband/uverbs0; test -r /dev/infiniband/uverbs0 -a -w "
      "/dev/infiniband/uverbs0 && echo accessible;"
      "echo '== ibdev'; cat /sys/class/infiniband_verbs/uverbs0/ibdev;"
      "echo '== devices'; ls /sys/class/infiniband;"
      "cd /sys/class/infiniband/rocemu0;"
      "echo '== node_guid'; cat node_guid; echo '== node_type'; cat node_type; echo '== fw_ver'; cat fw_ver;"
      "echo '== numa'; cat device/numa_node;"
      "echo '== state'; cat ports/1/state ports/1/phys_state ports/1/rate ports/1/link_layer;"
      "echo '== gid3'; cat ports/1/gids/3 ports/1/gid_attrs/types/3 ports/1/gid_attrs/ndevs/3;"
      "echo '== gid0type'; cat ports/1/gid_attrs/types/0;"
      "echo '== hw_counters'; ls ports/1/hw_counters;"
      "echo '== counters'; ls ports/1/counters;"
      "echo '== write'; (echo 1 > ports/1/hw_counters/np_cnp_sent) 2>/dev/null && echo writable || echo refused;"
      "echo '== sys_class'; ls /sys/class; echo '== dev'; ls -A /dev; echo '== end'";
  Process p = f.exec("h1", {"/bin/sh", "-c", script});
  REQUIRE(finish(p, std::chrono::seconds(30)) == 0);
  const std::string& out = p.output;
  INFO(out);
  CHECK(section(out, "uverbs") == "character special file e7:c0 666\naccessible\n");
  CHECK(section(out, "ibdev") == "rocemu0\n");
  CHECK(section(out, "devices") == "rocemu0\n");
  CHECK(section(out, "node_guid") == "0200:00ff:fe00:0101\n");
  CHECK(section(out, "node_type") == "1: CA\n");
  CHECK(section(out, "fw_ver") == "rocemu-0.1\n");
  CHECK(section(out, "numa") == "-1\n");
  CHECK(section(out, "state") == "4: ACTIVE\n5: LinkUp\n100 Gb/sec (4X EDR)\nEthernet\n");
  CHECK(section(out, "gid3") == "0000:0000:0000:0000:0000:ffff:0a00:0101\nRoCE v2\nrocemu-h1\n");
  CHECK(section(out, "gid0type") == "IB/RoCE v1\n");
  for (const char* c : {"np_cnp_sent", "rp_cnp_handled", "out_of_sequence", "tx_roce_packets", "rx_roce_bytes"})
    CHECK(words(section(out, "hw_counters")).count(c) == 1);
  for (const char* c : {"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"})
    CHECK(words(section(out, "counters")).count(c) == 1);
  CHECK(section(out, "write") == "refused\n");
  // Everything else is as outside: /sys/class has the same classes plus
  // the two, /dev the same entries plus infiniband.
  std::set<std::string> sys_class = names_in("/sys/class"), dev = names_in("/dev");
  sys_class.insert({"infiniband", "infiniband_verbs"});
  dev.insert("infiniband");
  CHECK(words(section(out, "sys_class")) == sys_class);
  const std::set<std::string> dev_inside = words(section(out, "dev"));
  for (const auto& name : dev)  // devices that come and go meanwhile aside, the same names
    CHECK((dev_inside.count(name) == 1 || !std::filesystem::exists("/dev/" + name)));
  // And nothing outside changed.
  CHECK(fs::exists("/sys/class/infiniband") == had_ib);
  CHECK(fs::exists("/dev/infiniband") == had_dev_ib);
}

TEST_CASE("rocemu exec runs the program without device files when a step of the namespace fails",
          "[e2e][device-files]") {
  Fabric f;
  const std::string script = "echo '== sys_class'; ls /sys/class; echo '== dev'; ls -A /dev; echo '== end'";
  for (const char* step : {"unshare", "private", "shadow-sys", "shadow-dev", "serve", "lay-out"}) {
    INFO("ROCEMU_DEVICE_FILES_FAIL_AT=" << step);
    std::vector<std::string> env = f.env();
    env.push_back(std::string("ROCEMU_DEVICE_FILES_FAIL_AT=") + step);
    const std::set<std::string> sys_class = names_in("/sys/class"), dev = names_in("/dev");
    Process p = spawn({bin("rocemu"), "exec", "h1", "--", "/bin/sh", "-c", script}, env);
    REQUIRE(finish(p, std::chrono::seconds(30)) == 0);
    INFO(p.output);
    CHECK_THAT(p.output, Catch::Contains("Input/output error"));
    if (std::string(step) == "serve") {
      // The engine did not take the mount: the snapshot, with a warning.
      CHECK_THAT(p.output, Catch::Contains("as it was at start"));
      continue;
    }
    CHECK_THAT(p.output, Catch::Contains("no /dev/infiniband or /sys/class/infiniband for h1"));
    // The host's own trees, unchanged.
    CHECK(words(section(p.output, "sys_class")) == sys_class);
    const std::set<std::string> dev_inside = words(section(p.output, "dev"));
    for (const auto& name : dev)
      CHECK((dev_inside.count(name) == 1 || !std::filesystem::exists("/dev/" + name)));
    for (const auto& name : dev_inside)
      CHECK((dev.count(name) == 1 || std::filesystem::exists("/dev/" + name)));
  }
}

TEST_CASE("ibstat, ibstatus and ibv_devinfo read the device from sysfs", "[e2e][device-files]") {
  Fabric f;
  Process s = f.exec("h1", {"ibstat"});
  REQUIRE(finish(s, std::chrono::seconds(30)) == 0);
  INFO(s.output);
  for (const char* want : {"CA 'rocemu0'", "Firmware version: rocemu-0.1", "Node GUID: 0x020000fffe000101",
                           "State: Active", "Physical state: LinkUp", "Rate: 100", "Link layer: Ethernet"})
    CHECK_THAT(s.output, Catch::Contains(want));
  Process st = f.exec("h2", {"ibstatus"});
  REQUIRE(finish(st, std::chrono::seconds(30)) == 0);
  INFO(st.output);
  for (const char* want : {"Infiniband device 'rocemu0' port 1 status:", "state:\t\t 4: ACTIVE",
                           "phys state:\t 5: LinkUp", "rate:\t\t 100 Gb/sec (4X EDR)", "link_layer:\t Ethernet"})
    CHECK_THAT(st.output, Catch::Contains(want));
  Process d = f.exec("h1", {"ibv_devinfo", "-v"});
  REQUIRE(finish(d, std::chrono::seconds(30)) == 0);
  CHECK_THAT(d.output, Catch::Contains("board_id:\t\t\tROCEMU_0001"));
  CHECK_THAT(d.output, Catch::Contains("vendor_id:\t\t\t0xffffff"));
}

TEST_CASE("ib_write_bw -W reads the NIC's live counters from sysfs", "[e2e][device-files]") {
  Fabric f;
  const int port = pick_port();
  // 300 WRITEs of 64 KiB at MTU 4096: 16 packets each on the client's NIC.
  std::vector<std::string> server = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-x", "3", "-p", std::to_string(port),
                                     "-s", "65536", "-n", "300"};
  std::vector<std::string> client = server;
  client.insert(client.end(), {"-W", "hw_counters/tx_roce_packets,counters/port_xmit_data", "127.0.0.1"});
  const PairResult r = run_pair(f, "h2", "h1", server, client, port);
  INFO("--- client ---\n" << r.client_out << "\n--- server ---\n" << r.server_out);
  REQUIRE(r.client == 0);
  REQUIRE(r.server == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.client_out, m, std::regex(R"(hw_counters/tx_roce_packets=(\d+))")));
  const long packets = std::stol(m[1]);
  REQUIRE(std::regex_search(r.client_out, m, std::regex(R"(counters/port_xmit_data=(\d+))")));
  const long words4 = std::stol(m[1]);
  // What perftest counted over its run (a few more if it resent some).
  CHECK(packets >= 300 * 16);
  CHECK(packets <= 300 * 16 * 11 / 10);
  CHECK(words4 * 4 >= 300L * 65536);
}

TEST_CASE("ibv_rereg_mr, GID queries, vendor IDs and comp_masks answer as rdma-core's man pages say",
          "[e2e][verify]") {
  Fabric f;
  Process p = f.exec("h1", {bin("rocemu-verify"), "--api"});
  const int st = finish(p, std::chrono::seconds(60));
  INFO(p.output);
  CHECK(st == 0);
  CHECK_THAT(p.output, Catch::Contains("all good"));
}
