// Registered memory the engine maps (nic/verbs/provider/mr_pages.cc) and
// its fallback, process_vm_readv/writev: the application's memory behaves
// as before whatever it is and whatever happens to it (rocemu-memcheck
// checks every byte), and neither side's death leaves the other damaged
// or holding anything.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "tests/e2e/fabric.h"

using namespace rocemu::test;

namespace {

// True when this test run forces the fallback on every application
// (ctest's e2e-process-vm entry).
bool forced_fallback() {
  const char* v = std::getenv("ROCEMU_DMA");
  return v != nullptr && std::string(v) == "process_vm";
}

// `rocemu-memcheck ARGS` on h1, with more environment if given.
Process memcheck(const Fabric& f, const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {bin("rocemu"), "exec", "h1", "--", bin("rocemu-memcheck")};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> e = f.env();
  e.insert(e.end(), env.begin(), env.end());
  return spawn(argv, e);
}

// "case NAME: ok, moved M of N" -> M (-1: no such line, -2: skipped).
int moved_in(const std::string& out, const std::string& name) {
  if (out.find("case " + name + ": skipped") != std::string::npos) return -2;
  std::smatch m;
  if (!std::regex_search(out, m, std::regex("case " + name + ": ok, moved (\\d+) of (\\d+)"))) return -1;
  return std::atoi(m[1].str().c_str());
}

// The engine's mappings of MR pages, and its descriptors.
size_t mr_maps(int pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  size_t n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find("/memfd:rocemu-mr") != std::string::npos;
  return n;
}
size_t fds(int pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) n++;
  return n;
}

}  // namespace

TEST_CASE("Registered memory of every kind keeps every byte, on the mapped path and on the fallback",
          "[e2e][memory]") {
  Fabric f;
  for (const bool fallback : {false, true}) {
    INFO((fallback ? "ROCEMU_DMA=process_vm" : "default"));
    std::vector<std::string> env;
    if (fallback) env.push_back("ROCEMU_DMA=process_vm");
    Process p = memcheck(f, {"all"}, env);
    const int st = finish(p, std::chrono::seconds(120));
    INFO(p.output);
    REQUIRE(st == 0);
    const bool mapped = !fallback && !forced_fallback();
    // Movable memory moves (unless the fallback is forced)...
    for (const char* c : {"malloc", "memalign", "mmap", "overlap", "reuse", "fork", "mprotect", "thread_dereg",
                          "thread_writes", "close_device"}) {
      INFO(c);
      const int m = moved_in(p.output, c);
      REQUIRE(m >= 0);
      if (mapped) CHECK(m > 0);
      else CHECK(m == 0);
    }
    // ...the rest never does, and is still reached; ODP MRs are refused
    // (rocemu-memcheck checks how), none registered.
    for (const char* c : {"file", "threads", "odp"}) {
      INFO(c);
      CHECK(moved_in(p.output, c) == 0);
    }
    const int huge = moved_in(p.output, "hugepages");
    CHECK((huge == 0 || huge == -2));
    if (huge == -2) WARN("no hugepages here: the hugetlbfs case was skipped");
  }
  // Nothing of it is left in the engine.
  CHECK(wait_until([&] { return f.attached() == 0; }, std::chrono::seconds(10)));
  CHECK(mr_maps(f.engine_pid()) == 0);
}

TEST_CASE("An application killed mid-transfer with mapped MRs: the engine unmaps and closes everything",
          "[e2e][memory]") {
  Fabric f;
  // The baseline, once the engine has served one application.
  {
    Process warm = memcheck(f, {"malloc"});
    REQUIRE(finish(warm, std::chrono::seconds(60)) == 0);
  }
  REQUIRE(wait_until([&] { return f.attached() == 0; }, std::chrono::seconds(10)));
  size_t before = fds(f.engine_pid());
  for (int i = 0; i < 3; i++) {
    f.attached();
    before = std::min(before, fds(f.engine_pid()));
  }
  REQUIRE(mr_maps(f.engine_pid()) == 0);
  Process app = memcheck(f, {"--hold"});
  REQUIRE(wait_until([&] { return app.output.find("holding") != std::string::npos; }, std::chrono::seconds(60),
                     {&app}));
  INFO(app.output);
  if (!forced_fallback()) {
    CHECK_THAT(app.output, Catch::Contains("holding, moved 2 of 2"));
    CHECK(mr_maps(f.engine_pid()) >= 2);
  }
  kill(app.pid, SIGKILL);
  CHECK(finish(app, std::chrono::seconds(10)) == 128 + SIGKILL);
  CHECK(wait_until([&] { return f.attached() == 0; }, std::chrono::seconds(10)));
  CHECK(wait_until([&] { return mr_maps(f.engine_pid()) == 0 && fds(f.engine_pid()) <= before; },
                   std::chrono::seconds(10)));
  CHECK(mr_maps(f.engine_pid()) == 0);
  CHECK(fds(f.engine_pid()) <= before);
  // And the engine serves the next one.
  Process next = memcheck(f, {"mmap"});
  CHECK(finish(next, std::chrono::seconds(60)) == 0);
}

TEST_CASE("The engine killed with mapped MRs: the application's memory keeps its data and stays usable",
          "[e2e][memory]") {
  Fabric f;
  Process app = memcheck(f, {"--engine-dies"});
  REQUIRE(wait_until([&] { return app.output.find("ready") != std::string::npos; }, std::chrono::seconds(60),
                     {&app}));
  if (!forced_fallback()) CHECK_THAT(app.output, Catch::Contains("ready, moved 2 of 2"));
  const int engine = f.engine_pid();
  kill(engine, SIGKILL);
  f.forget_engine();
  // Gone, or a zombie waiting for whoever reaps it.
  CHECK(wait_until(
      [&] {
        std::ifstream in("/proc/" + std::to_string(engine) + "/stat");
        std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const size_t p = stat.rfind(") ");
        return p == std::string::npos || stat[p + 2] == 'Z';
      },
      std::chrono::seconds(20)));
  kill(app.pid, SIGUSR1);
  const int st = finish(app, std::chrono::seconds(20));
  INFO(app.output);
  CHECK(st == 0);
  CHECK_THAT(app.output, Catch::Contains("intact"));
  f.rocemu({"down"});
}

TEST_CASE("perftest on file-backed buffers (--mmap) and hugepages (--use_hugepages): the fallback reaches them",
          "[e2e][memory]") {
  Fabric f;
  // perftest maps the file itself (MAP_SHARED): pages the provider leaves
  // where they are.
  std::vector<std::string> files;
  for (const char* side : {"server", "client"}) {
    const std::string path = f.dir() + "/perftest-" + side + ".buf";
    const int fd = open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(ftruncate(fd, 4 << 20) == 0);
    close(fd);
    files.push_back(path);
  }
  const int port = pick_port();
  auto args = [&](const std::string& file) {
    return std::vector<std::string>{"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-s", "65536",
                                    "-n", "2000", "--mmap=" + file};
  };
  std::vector<std::string> cli = args(files[1]);
  cli.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", args(files[0]), cli, port);
  INFO(r.client_out << r.server_out);
  CHECK(r.client == 0);
  CHECK(r.server == 0);
  // Hugepages where the machine has them (two perftest buffers' worth).
  std::ifstream meminfo("/proc/meminfo");
  long free_huge = 0;
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("HugePages_Free:", 0) == 0) free_huge = std::atol(line.c_str() + 15);
  if (free_huge < 8) {
    WARN("fewer than 8 free hugepages: perftest --use_hugepages not run");
    return;
  }
  const int port2 = pick_port();
  std::vector<std::string> h = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port2), "-s", "65536",
                                "-n", "2000", "--use_hugepages"};
  std::vector<std::string> hc = h;
  hc.push_back("127.0.0.1");
  const PairResult rh = run_pair(f, "h2", "h1", h, hc, port2);
  INFO(rh.client_out << rh.server_out);
  CHECK(rh.client == 0);
  CHECK(rh.server == 0);
}

TEST_CASE("An application killed while its WRITE's frames are on a delayed link: the engine lives on",
          "[e2e][memory]") {
  // On the mapped path a WRITE's frames point at the sender's MR instead
  // of holding a copy (common/engine/lazy_payload.h). Here they sit in a
  // 40 ms delay on what h1 sends when the sender dies: the engine unmaps
  // its MRs, filling those frames in first (tests/nic/lazy_payload_test.cc
  // checks the bytes), and must not touch the unmapped pages afterwards.
  Fabric f;
  auto [fst, fout] = f.rocemu({"fault", "add", "h1", "out", "delay", "40ms"});
  REQUIRE(fst == 0);
  const int port = pick_port();
  auto args = [&] {
    return std::vector<std::string>{"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port), "-s",
                                    "65536", "-D", "30"};
  };
  Process server = f.exec("h2", args());
  REQUIRE(wait_until([&] { return tcp_listening(port); }, std::chrono::seconds(30), {&server}));
  std::vector<std::string> cli = args();
  cli.push_back("127.0.0.1");
  Process client = f.exec("h1", cli);
  // Transferring: frames are on the delayed link.
  REQUIRE(wait_until([&] { return f.counters()["h2 rx_write_requests"] > 200; }, std::chrono::seconds(60),
                     {&server, &client}));
  if (!forced_fallback()) CHECK(mr_maps(f.engine_pid()) >= 2);
  const int engine = f.engine_pid();
  kill(client.pid, SIGKILL);
  CHECK(finish(client, std::chrono::seconds(10)) == 128 + SIGKILL);
  CHECK(wait_until([&] { return mr_maps(engine) <= 1; }, std::chrono::seconds(10)));
  kill(server.pid, SIGKILL);
  finish(server, std::chrono::seconds(10));
  // The engine lived through it and serves the next pair.
  REQUIRE(kill(engine, 0) == 0);
  f.rocemu({"fault", "clear", "h1"});
  const int port2 = pick_port();
  std::vector<std::string> s2 = {"/usr/bin/ib_write_bw", "-d", "rocemu0", "-p", std::to_string(port2), "-s", "65536",
                                 "-n", "2000"};
  std::vector<std::string> c2 = s2;
  c2.push_back("127.0.0.1");
  const PairResult r = run_pair(f, "h2", "h1", s2, c2, port2);
  INFO(r.client_out << r.server_out);
  CHECK(r.client == 0);
  CHECK(r.server == 0);
}
