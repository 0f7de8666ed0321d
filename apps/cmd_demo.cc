// rocemu demo: start a fabric, run Debian's ib_write_bw and ib_write_lat
// between h1 and h2 through the switch, print perftest's own tables, stop.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "apps/commands.h"
#include "apps/runtime.h"
#include "common/tcp_listen.h"

namespace rocemu::app {
namespace {

pid_t spawn(const std::vector<std::string>& argv) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::perror(args[0]);
    _exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int run_pair(const std::string& self, const std::string& tool, int port, const std::vector<std::string>& extra) {
  std::printf("\n==== %s: server on h2, client on h1 (through sw1) ====\n", tool.c_str());
  std::fflush(stdout);
  std::vector<std::string> server = {self, "exec", "h2", "--", "/usr/bin/" + tool, "-d", "rocemu0", "-x", "3",
                                     "-p", std::to_string(port)};
  server.insert(server.end(), extra.begin(), extra.end());
  const pid_t s = spawn(server);
  for (int i = 0; i < 400 && !tcp_listening(port); i++) {
    if (waitpid(s, nullptr, WNOHANG) == s) {
      std::fprintf(stderr, "rocemu demo: %s server exited early\n", tool.c_str());
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  std::vector<std::string> client = {self, "exec", "h1", "--", "/usr/bin/" + tool, "-d", "rocemu0", "-x", "3",
                                     "-p", std::to_string(port)};
  client.insert(client.end(), extra.begin(), extra.end());
  client.push_back("127.0.0.1");
  const int rc = wait_for(spawn(client));
  const int rs = wait_for(s);
  if (rc != 0 || rs != 0) {
    std::fprintf(stderr, "rocemu demo: %s failed (client %d, server %d)\n", tool.c_str(), rc, rs);
    return 1;
  }
  return 0;
}

}  // namespace

int cmd_demo(const DemoOptions& o) {
  // A private engine, so the demo never touches one the user runs.
  char dir[] = "/tmp/rocemu-demo-XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    std::perror("rocemu demo: mkdtemp");
    return 1;
  }
  setenv("ROCEMU_RUNTIME_DIR", dir, 1);
  const std::string self = self_path();
  std::vector<std::string> up = {self, "up", "--daemon"};
  if (!o.topology.empty()) up.push_back(o.topology);
  std::printf("rocemu demo: starting a fabric (h1 -- sw1 -- h2, 100 Gbit/s, NVUE lossless RoCE profile)\n");
  std::fflush(stdout);
  if (wait_for(spawn(up)) != 0) return 1;
  const int port = 20000 + int(getpid() % 10000);
  int failed = run_pair(self, "ib_write_bw", port, {"--report_gbits"});
  if (!failed) failed = run_pair(self, "ib_write_lat", port + 1, {});
  std::printf("\n==== what the fabric counted ====\n");
  std::fflush(stdout);
  {
    const pid_t c = spawn({self, "nv", "show", "interface", "swp2", "qos", "roce", "counters"});
    wait_for(c);
  }
  wait_for(spawn({self, "down"}));
  const std::string rm = std::string("rm -rf '") + dir + "'";
  [[maybe_unused]] int r = std::system(rm.c_str());
  std::printf("rocemu demo: %s\n", failed ? "FAILED" : "done");
  return failed;
}

}  // namespace rocemu::app
