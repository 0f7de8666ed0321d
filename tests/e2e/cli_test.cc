// The rocemu command as a user meets it: help everywhere, exit statuses,
// ports by the names the user sees, fault values in tc's forms.
#include <fcntl.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

const std::vector<std::string> kCommands = {"up",    "down",    "status", "exec",   "demo", "nv",  "nic",
                                            "counters", "fault", "capture", "sim", "doctor", "top", "completion"};

std::pair<int, std::string> rocemu_cmd(const std::vector<std::string>& args) {
  // A runtime directory with no engine in it.
  static const std::string dir = [] {
    char tmpl[] = "/tmp/rocemu-cli-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    return std::string(tmpl);
  }();
  std::vector<std::string> argv = {bin("rocemu")};
  argv.insert(argv.end(), args.begin(), args.end());
  return run(argv, {"ROCEMU_RUNTIME_DIR=" + dir}, std::chrono::seconds(30));
}

// What bash completes for the words typed so far (the last one partial).
std::string complete(const std::string& words) {
  const std::string script = "source <(" + bin("rocemu") + " completion bash); COMP_WORDS=(" + words +
                             "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _rocemu; echo \"${COMPREPLY[*]}\"";
  return run({"/bin/bash", "-c", script}, {}, std::chrono::seconds(30)).second;
}

}  // namespace

TEST_CASE("Every command answers --help itself, with exit status 0", "[e2e][cli]") {
  for (const std::string& c : kCommands) {
    const auto [st, out] = rocemu_cmd({c, "--help"});
    INFO(c << ": " << out);
    CHECK(st == 0);
    CHECK_THAT(out, Catch::Contains("rocemu " + c));
  }
  // Help after other words, as users type it.
  CHECK(rocemu_cmd({"fault", "h1", "--help"}).first == 0);
  CHECK(rocemu_cmd({"nv", "show", "--help"}).first == 0);
  const auto [vst, version] = rocemu_cmd({"--version"});
  CHECK(vst == 0);
  CHECK_THAT(version, Catch::StartsWith("rocemu 0."));
}

TEST_CASE("Usage errors exit 2, failures 1", "[e2e][cli]") {
  CHECK(rocemu_cmd({}).first == 2);
  CHECK(rocemu_cmd({"bogus"}).first == 2);
  CHECK(rocemu_cmd({"up", "--bogus"}).first == 2);
  CHECK(rocemu_cmd({"sim"}).first == 2);
  CHECK(rocemu_cmd({"status", "extra"}).first == 2);
  CHECK(rocemu_cmd({"exec", "h1"}).first == 2);
  // No engine running: a failure, in one line.
  const auto [st, out] = rocemu_cmd({"status"});
  CHECK(st == 1);
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);
}

TEST_CASE("--help never reaches the engine: `down --help` leaves it running", "[e2e][cli]") {
  Fabric f;
  for (const std::string c : {"down", "status", "counters", "nv", "fault", "capture"}) {
    const auto [st, out] = f.rocemu({c, "--help"});
    INFO(c << ": " << out);
    CHECK(st == 0);
    CHECK_THAT(out, Catch::StartsWith("usage: rocemu " + c));
  }
  CHECK(f.rocemu({"status"}).first == 0);
  // exec's words after the node belong to the program, its --help too.
  Process p = f.exec("h1", {"/usr/bin/printf", "%s", "--help"});
  CHECK(finish(p, std::chrono::seconds(30)) == 0);
  CHECK_THAT(p.output, Catch::StartsWith("--help"));
}

TEST_CASE("Ports are named as on the switch; unknown ones are errors naming the valid ones", "[e2e][cli]") {
  Fabric f;
  // The built-in fabric: h1 on sw1's swp1, h2 on swp2.
  auto [st, out] = f.rocemu({"fault", "add", "sw1:swp2", "loss", "1%"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("sw1:swp2") && Catch::Contains("h2:0-sw1:1"));
  std::tie(st, out) = f.rocemu({"fault", "clear", "sw1:1"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("h2:0-sw1:1"));
  // swp1 is port 0, h1's link (on the old numbering it was h2's); there is no swp0.
  std::tie(st, out) = f.rocemu({"fault", "clear", "sw1:swp1"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("sw1:swp1") && Catch::Contains("h1:0-sw1:0"));
  std::tie(st, out) = f.rocemu({"fault", "clear", "sw1:swp0"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no port 'swp0' on sw1 (ports: swp1, swp2)"));
  std::tie(st, out) = f.rocemu({"fault", "add", "sw1:swp8", "loss", "1%"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no port 'swp8' on sw1 (ports: swp1, swp2)"));
  std::tie(st, out) = f.rocemu({"fault", "add", "h9", "loss", "1%"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no node named 'h9' (nodes: h1, h2, sw1)"));
  const std::string pcap = f.dir() + "/swp2.pcapng";
  std::tie(st, out) = f.rocemu({"capture", "sw1:swp2", "-w", pcap});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("capture 1: sw1:swp2"));
  std::tie(st, out) = f.rocemu({"capture", "sw1:bogus", "-w", pcap});
  CHECK(st == 2);
}

TEST_CASE("Fault values in tc's forms; a value without its unit is refused in one line", "[e2e][cli]") {
  Fabric f;
  auto [st, out] = f.rocemu({"fault", "add", "h1", "delay", "5"});
  CHECK(st == 2);
  CHECK(out == "rocemu fault: delay: '5' needs a unit (e.g. 5us, 5ms, 5ns)\n");
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "rate", "10"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("needs a unit"));
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "loss", "2"});
  CHECK(st == 2);
  CHECK(out == "rocemu fault: loss: '2' needs a unit (2%)\n");
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "loss", "1%", "rate", "10gbit", "delay", "5us"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("loss 1% delay 5us rate 10gbit"));
  // netem's correlations and its reordering, read back as written.
  std::tie(st, out) = f.rocemu({"fault", "add", "h2", "delay", "100us", "10us", "25%", "reorder", "25%", "50%", "gap",
                                "5", "loss", "1%", "25%"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::EndsWith("loss 1% 25% delay 100us 10us 25% reorder 25% 50% gap 5\n"));
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "bogus", "1"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::StartsWith("rocemu fault: unknown fault 'bogus' (faults: loss,"));
  // The old form `rocemu fault NODE KEY VALUE` is gone; it says what to type.
  std::tie(st, out) = f.rocemu({"fault", "h1", "loss", "1%"});
  CHECK(st == 2);
  CHECK(out == "rocemu fault: 'h1' is not add, list, del or clear (e.g. rocemu fault add h1 loss 1%)\n");
}

namespace {

// The counters of fault `id` in `rocemu fault list`: dropped, delayed,
// duplicated, corrupted (the last four columns of its row).
std::vector<uint64_t> fault_counters(const std::string& list, int id) {
  std::istringstream in(list);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (tok.size() < 5 || tok[0] != std::to_string(id)) continue;
    std::vector<uint64_t> c;
    for (size_t i = tok.size() - 4; i < tok.size(); i++) c.push_back(std::stoull(tok[i]));
    return c;
  }
  return {};
}

}  // namespace

TEST_CASE("rocemu fault add, list, del, clear: faults add up, each counts what it did", "[e2e][cli]") {
  Fabric f;
  auto [st, out] = f.rocemu({"fault", "add", "h1", "out", "loss", "1%"});
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::StartsWith("fault 1: h1:0 (link h1:0-sw1:0, out): loss 1%"));
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "out", "delay", "20us", "2us"});
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::StartsWith("fault 2: h1:0 (link h1:0-sw1:0, out): delay 20us 2us"));
  std::tie(st, out) = f.rocemu({"fault", "add", "h2", "duplicate", "1%"});
  REQUIRE(st == 0);

  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-n",
                                        "300", "-s", "8192"};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  INFO(r.client_out << r.server_out);
  REQUIRE(r.client == 0);
  REQUIRE(r.server == 0);

  std::tie(st, out) = f.rocemu({"fault", "list"});
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::StartsWith("id   target") && Catch::Contains("loss 1%") &&
                      Catch::Contains("delay 20us 2us") && Catch::Contains("duplicate 1%"));
  const auto loss = fault_counters(out, 1), delay = fault_counters(out, 2), dup = fault_counters(out, 3);
  REQUIRE(loss.size() == 4);
  REQUIRE(delay.size() == 4);
  REQUIRE(dup.size() == 4);
  CHECK(loss[0] > 0);  // the loss dropped, and only dropped
  CHECK(loss[1] + loss[2] + loss[3] == 0);
  CHECK(dup[2] > 0);
  // ... and matches the link's own counters: every frame h1 sent that the
  // loss did not drop, the delay (added after it, still in force) delayed.
  std::tie(st, out) = f.rocemu({"counters", "h1:0"});
  CHECK_THAT(out, Catch::Contains("h1:0 tx_drop_fault " + std::to_string(loss[0]) + "\n"));
  const size_t at = out.find("h1:0 tx_packets ");
  REQUIRE(at != std::string::npos);
  const uint64_t sent = std::stoull(out.substr(at + 16));
  CHECK(delay[0] == 0);
  // (but for the odd frame, an ARP, h1 sent before the delay was added)
  CHECK(delay[1] <= sent - loss[0]);
  CHECK(delay[1] + 3 >= sent - loss[0]);
  CHECK(delay[1] > 600);  // 300 WRITEs of two packets at least

  std::tie(st, out) = f.rocemu({"fault", "del", "1"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("fault 1 removed"));
  std::tie(st, out) = f.rocemu({"fault", "del", "1"});
  CHECK(st == 2);
  CHECK(out == "rocemu fault: no fault 1 (faults: 2, 3)\n");
  std::tie(st, out) = f.rocemu({"fault", "list"});
  CHECK_THAT(out, !Catch::Contains("loss 1%") && Catch::Contains("delay 20us"));
  std::tie(st, out) = f.rocemu({"fault", "add", "sw1:swp2", "pfc-storm", "prio", "3"});
  INFO(out);
  CHECK(st == 0);
  std::tie(st, out) = f.rocemu({"fault", "list"});
  CHECK_THAT(out, Catch::Contains("pfc-storm prio 3"));
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "pfc-storm", "prio", "3"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("not a switch port"));
  std::tie(st, out) = f.rocemu({"fault", "clear"});
  CHECK(st == 0);
  std::tie(st, out) = f.rocemu({"fault", "list"});
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);  // the header alone
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "link", "down"});
  CHECK(st == 0);
  std::tie(st, out) = f.rocemu({"fault", "add", "h1", "link", "up"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("1 link-down fault(s) removed"));
}

namespace {

// tshark over a capture: one line per frame, the fields asked for, comma-separated.
std::vector<std::vector<std::string>> tshark_fields(const std::string& file, const std::vector<std::string>& fields) {
  std::vector<std::string> argv = {"/usr/bin/tshark", "-n", "-r", file, "-T", "fields", "-E", "separator=,"};
  for (const auto& x : fields) {
    argv.push_back("-e");
    argv.push_back(x);
  }
  const auto [st, out] = run(argv, {}, std::chrono::seconds(60));
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> v;
    std::istringstream ls(line);
    for (std::string x; std::getline(ls, x, ',');) v.push_back(x);
    if (v.size() == fields.size() && !v[0].empty() && std::isdigit(static_cast<unsigned char>(v[0][0]))) rows.push_back(v);
  }
  return rows;
}

}  // namespace

TEST_CASE("rocemu capture: readable while it runs, every header, directions, a time per frame", "[e2e][cli]") {
  Fabric f;
  const std::string file = f.dir() + "/h2.pcapng";
  auto [st, out] = f.rocemu({"capture", "h2", "-w", file});
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("(snaplen 128)"));
  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-n",
                                        "500", "-s", "65536"};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  REQUIRE(r.client == 0);
  // The capture is still running, the engine too: tshark reads the file.
  const auto rows = tshark_fields(file, {"frame.interface_id", "frame.packet_flags_direction", "frame.time_epoch",
                                         "frame.cap_len", "frame.len", "infiniband.bth.opcode"});
  REQUIRE(rows.size() > 8000);  // 500 x 64 KiB at RoCE MTU 4096: 8000 WRITE packets, and the ACKs
  std::map<std::string, std::vector<long double>> times;
  size_t roce = 0;
  for (const auto& v : rows) {
    // interface 0: what h2 sends (outbound, 2), 1: what it receives (inbound, 1)
    CHECK(std::stoul(v[1], nullptr, 0) == (v[0] == "0" ? 2u : 1u));
    CHECK(std::stoi(v[3]) <= 128);
    if (!v[5].empty()) roce++;
    times[v[0]].push_back(std::stold(v[2]));
  }
  CHECK(roce + 10 > rows.size());  // all RoCE, but for ARP
  REQUIRE(times.size() == 2);
  for (auto& [iface, t] : times) {
    INFO("interface " << iface);
    CHECK(std::is_sorted(t.begin(), t.end()));
    CHECK(std::adjacent_find(t.begin(), t.end()) == t.end());  // a time of its own for each frame
  }
  struct stat sb{};
  REQUIRE(stat(file.c_str(), &sb) == 0);
  CHECK(sb.st_size < 200 * int64_t(rows.size()));  // headers, not the 4 KiB payloads
  std::tie(st, out) = f.rocemu({"capture", "stop"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("capture 1: h2:0 to " + file) && Catch::Contains("stopped"));
  std::tie(st, out) = f.rocemu({"capture", "stop", "7"});
  CHECK(st == 2);
  // --duration ends a capture on its own; a bare time is refused.
  std::tie(st, out) = f.rocemu({"capture", "h1", "-w", file + ".2", "--duration", "200"});
  CHECK(st == 2);
  CHECK(out == "rocemu capture: --duration: '200' needs a unit (e.g. 200s, 200ms)\n");
  std::tie(st, out) = f.rocemu({"capture", "h1", "-w", file + ".2", "--duration", "200ms"});
  REQUIRE(st == 0);
  CHECK(wait_until([&] { return f.rocemu({"capture", "list"}).second.find("no capture is running") == 0; },
                   std::chrono::seconds(20)));
}

TEST_CASE("rocemu capture -w - streams pcapng into a pipe: tshark -r - reads it live", "[e2e][cli]") {
  Fabric f;
  std::string env;
  for (const auto& e : f.env()) env += e + " ";
  Process tshark = spawn({"/bin/sh", "-c",
                          env + bin("rocemu") + " capture sw1:swp2 -w - -c 200 | /usr/bin/tshark -n -r - -T fields "
                                                "-e frame.packet_flags_direction -e infiniband.bth.opcode"});
  REQUIRE(wait_until([&] { return f.rocemu({"capture", "list"}).second.find("capture 1:") != std::string::npos; },
                     std::chrono::seconds(30), {&tshark}));
  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-n",
                                        "200", "-s", "65536"};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  REQUIRE(r.client == 0);
  REQUIRE(finish(tshark, std::chrono::seconds(60)) == 0);
  INFO(tshark.output.substr(0, 2000));
  std::istringstream in(tshark.output);
  int frames = 0, out_dir = 0, in_dir = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0x", 0) != 0 || line.find('\t') == std::string::npos) continue;  // tshark's rows only
    const unsigned long dir = std::stoul(line.substr(0, line.find('\t')), nullptr, 16);
    frames++;
    (dir == 2 ? out_dir : in_dir)++;
    CHECK((dir == 1 || dir == 2));
  }
  CHECK(frames == 200);  // -c 200, and the capture ended the stream
  CHECK(out_dir > 0);    // sw1:swp2 sends h2 the WRITEs
  CHECK(in_dir > 0);     // and gets its ACKs
  CHECK_THAT(f.rocemu({"capture", "list"}).second, Catch::Contains("no capture is running"));
}

TEST_CASE("A capture into a FIFO that -c ends while its reader lags: the reader still gets every block whole",
          "[e2e][cli]") {
  Fabric f;
  const std::string fifo = f.dir() + "/lagging.fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const int reader = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader >= 0);
  constexpr int kCount = 3000;  // some 500 KB of blocks: far more than the pipe holds (64 KiB)
  auto [st, out] = f.rocemu({"capture", "h2", "-w", fifo, "-c", std::to_string(kCount)});
  INFO(out);
  REQUIRE(st == 0);
  const int port = pick_port();
  const std::vector<std::string> srv = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-n",
                                        "300", "-s", "65536"};
  std::vector<std::string> cli = srv;
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", srv, cli, port);
  REQUIRE(r.client == 0);
  // The count is reached while nobody reads: the pipe is full, part of a
  // block in it. Only now does the reader read, to the end of the stream.
  REQUIRE(wait_until([&] { return f.rocemu({"capture", "list"}).second.find("no capture is running") == 0; },
                     std::chrono::seconds(20)));
  std::string bytes;
  const bool ended = wait_until(
      [&] {
        char buf[65536];
        for (;;) {
          const ssize_t n = read(reader, buf, sizeof buf);
          if (n == 0) return true;  // the engine closed it
          if (n < 0) return false;  // EAGAIN: more to come
          bytes.append(buf, size_t(n));
        }
      },
      std::chrono::seconds(20));
  close(reader);
  REQUIRE(ended);
  const std::string file = f.dir() + "/lagging.pcapng";
  {
    std::ofstream o(file, std::ios::binary);
    o << bytes;
  }
  const auto [tst, tout] = run({"/usr/bin/tshark", "-n", "-r", file, "-T", "fields", "-e", "frame.number"});
  INFO(tout.substr(tout.size() > 2000 ? tout.size() - 2000 : 0));
  CHECK_THAT(tout, !Catch::Contains("cut short"));
  CHECK(tst == 0);
  // One line per frame: its number (tshark's own notes, such as the one
  // about running as root, are not frames).
  std::istringstream lines(tout);
  int frames = 0;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && std::all_of(line.begin(), line.end(), [](char c) { return c >= '0' && c <= '9'; })) frames++;
  CHECK(frames == kCount);  // every frame the count let in
}

TEST_CASE("rocemu up --part: an unknown part, or a file without parts, is a usage error naming the parts",
          "[e2e][cli]") {
  const std::string racks = std::string(ROCEMU_SOURCE_DIR) + "/tests/e2e/data/two-racks.yaml";
  auto [st, out] = rocemu_cmd({"up", racks, "--part", "rack9"});
  CHECK(st == 2);
  CHECK(out == "rocemu up: " + racks + ": no part named 'rack9' (parts: rack1, rack2)\n");
  std::tie(st, out) = rocemu_cmd({"up", "--part", "rack1"});  // the built-in topology has no parts
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("<built-in topology>: has no parts: section, so there is no part 'rack1'"));
  CHECK(complete("rocemu up --pa") == "--part\n");
}

TEST_CASE("Bash completion from the same table of commands", "[e2e][cli]") {
  CHECK(complete("rocemu si") == "sim\n");
  CHECK(complete("rocemu fault add h1 dela") == "delay\n");
  CHECK_THAT(complete("rocemu ''"), Catch::Contains("capture") && Catch::Contains("--version"));
}

TEST_CASE("rocemu nic: the device, its counters, DCQCN knobs read and set live by mlx5 name", "[e2e][cli]") {
  Fabric f;
  auto [st, out] = f.rocemu({"nic", "show", "h1"});
  INFO(out);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("device rocemu0") && Catch::Contains("3      RoCE v2  10.0.1.1") &&
                      Catch::Contains("congestion control: dcqcn (profile mlx5"));
  std::tie(st, out) = f.rocemu({"nic", "show", "h1", "counters"});
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("np_cnp_sent 0") && Catch::Contains("rp_cnp_handled 0"));
  // and ethtool's per-priority PFC counters, by mlx5's names
  CHECK_THAT(out, Catch::Contains("\nrx_prio3_pause 0\n") && Catch::Contains("\nrx_prio3_pause_duration 0\n") &&
                      Catch::Contains("\nrx_prio3_pause_transition 0\n") && Catch::Contains("\ntx_prio3_pause 0\n") &&
                      Catch::Contains("\nrx_prio7_pause 0\n"));
  std::tie(st, out) = f.rocemu({"nic", "show", "h1", "cc"});
  CHECK_THAT(out, Catch::Contains("rpg_ai_rate 5\n") && Catch::Contains("roce_rp_enable [0,1,2,3,4,5,6,7]\n"));
  std::tie(st, out) = f.rocemu({"nic", "set", "h1", "cc", "rpg_ai_rate", "10", "roce_rp_enable", "3"});
  CHECK(st == 0);
  std::tie(st, out) = f.rocemu({"nic", "show", "h1", "cc"});
  CHECK_THAT(out, Catch::Contains("rpg_ai_rate 10\n") && Catch::Contains("roce_rp_enable [3]\n"));
  std::tie(st, out) = f.rocemu({"nic", "set", "h1", "cc", "rpg_min_rate", "0"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("cc.rpg_min_rate: must be above 0"));
  std::tie(st, out) = f.rocemu({"nic", "show", "sw1"});
  CHECK(st == 2);
  CHECK_THAT(out, Catch::Contains("no NIC named 'sw1' (NICs: h1, h2)"));
}
