// rocemu up: an engine in real time with the verbs provider's control
// socket; rocemu down / status: ask it.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/fabric.h"
#include "apps/runtime.h"
#include "common/config/topology.h"
#include "common/engine/engine.h"
#include "common/log.h"
#include "common/private_files.h"
#include "nic/nic.h"
#include "nic/verbs/server.h"
#include "switch/switch.h"

namespace rocemu::app {
namespace {

std::atomic<bool> g_stop{false};
int g_wake_fd = -1;

void on_signal(int) {
  g_stop.store(true);
  if (g_wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(g_wake_fd, &one, sizeof one);
  }
}

struct Lines final : CounterSink {
  std::ostringstream os;
  std::string only;
  bool all = false;
  void counter(std::string_view scope, std::string_view name, uint64_t value) override {
    if (!only.empty() && scope.substr(0, only.size()) != only) return;
    if (value == 0 && !all) return;
    os << scope << " " << name << " " << value << "\n";
  }
};

// fault NODE[:PORT] [out|in|both] clear | KEY VALUE ...: the fault stage
// of the link at that port (out: what the port sends; in: what it gets).
int handle_fault(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  if (w.size() < 3) {
    out = "usage: rocemu fault NODE[:PORT] [out|in|both] clear | KEY VALUE ... "
          "(loss, corrupt, duplicate, reorder: 0..1; delay, jitter, reorder_delay: 5us; rate: 10G; link_down: true)";
    return EINVAL;
  }
  const auto colon = w[1].rfind(':');
  const std::string node = w[1].substr(0, colon);
  const uint16_t port = colon == std::string::npos ? 0 : uint16_t(std::atoi(w[1].c_str() + colon + 1));
  InternalLink* link = nullptr;
  int side = 0;
  for (const auto& l : engine.links())
    for (int s = 0; s < 2; s++)
      if (l->end(s).owner()->name() == node && l->end(s).index() == port) {
        link = l.get();
        side = s;
      }
  if (link == nullptr) {
    out = "no internal link at " + node + ":" + std::to_string(port) + " (switch ports: rocemu nv set interface swpN fault ...)";
    return ENODEV;
  }
  size_t i = 2;
  std::string dir = "both";
  if (w[i] == "out" || w[i] == "in" || w[i] == "both") dir = w[i++];
  FaultConfig fc;
  if (!(i < w.size() && w[i] == "clear")) {
    std::string yaml = "{";
    for (; i + 1 < w.size(); i += 2) yaml += (yaml.size() > 1 ? ", " : "") + w[i] + ": \"" + w[i + 1] + "\"";
    yaml += "}";
    if (i != w.size()) {
      out = "'" + w[i] + "' needs a value";
      return EINVAL;
    }
    config::Context ctx("rocemu fault");
    YAML::Node n;
    try {
      n = YAML::Load(yaml);
    } catch (const YAML::Exception& e) {
      out = e.what();
      return EINVAL;
    }
    fc = parse_faults(n, "fault", ctx);
    if (!ctx.ok()) {
      out = ctx.status().message();
      return EINVAL;
    }
  }
  if (dir != "in") link->set_faults(side, fc);
  if (dir != "out") link->set_faults(1 - side, fc);
  out = "link " + link->name() + " (" + dir + "): " + (fc.any() ? "faults set" : "no faults");
  return 0;
}

// CLI commands, on the engine thread.
int handle_cli(Engine& engine, verbs::VerbsServer& server, const std::vector<std::string>& w, std::string& out) {
  if (w.empty()) {
    out = "empty command";
    return EINVAL;
  }
  if (w[0] == "ping") {
    out = "pong";
    return 0;
  }
  if (w[0] == "down") {
    g_stop.store(true);
    out = "stopping";
    return 0;
  }
  if (w[0] == "nodes") {
    for (const auto& n : engine.nodes())
      if (n->kind() != "host-agent") out += n->name() + " " + std::string(n->kind()) + "\n";
    return 0;
  }
  if (w[0] == "status") {
    std::ostringstream os;
    os << "engine pid " << getpid() << ", " << server.sessions() << " application(s) attached\n";
    for (const auto& n : engine.nodes()) {
      if (n->kind() == "host-agent") continue;
      os << "  " << n->name() << " (" << n->kind() << ")";
      if (auto* nic = dynamic_cast<nic::Nic*>(n.get())) {
        const auto& c = nic->counters();
        os << " " << (nic->config().ips.empty() ? "" : nic->config().ips[0].str()) << ", link "
           << (nic->link_up() ? "up" : "down") << ", tx " << c[nic::NicCounters::tx_roce_packets] << " rx "
           << c[nic::NicCounters::rx_roce_packets] << " RoCE packets";
      }
      os << "\n";
    }
    for (const auto& l : engine.links()) os << "  link " << l->name() << "\n";
    out = os.str();
    return 0;
  }
  if (w[0] == "counters") {
    Lines lines;
    for (size_t i = 1; i < w.size(); i++) {
      if (w[i] == "--all") lines.all = true;
      else lines.only = w[i];
    }
    engine.report_counters(lines);
    out = lines.os.str();
    return 0;
  }
  if (w[0] == "nv") {
    // nv [--switch NAME] set|unset|show|action ...
    std::vector<std::string> words(w.begin() + 1, w.end());
    std::string name;
    if (words.size() >= 2 && words[0] == "--switch") {
      name = words[1];
      words.erase(words.begin(), words.begin() + 2);
    }
    sw::Switch* target = nullptr;
    for (const auto& n : engine.nodes()) {
      auto* s = dynamic_cast<sw::Switch*>(n.get());
      if (s == nullptr || (!name.empty() && s->name() != name)) continue;
      if (target != nullptr && name.empty()) {
        out = "several switches: say which with `rocemu nv --switch NAME ...`";
        return EINVAL;
      }
      target = s;
    }
    if (target == nullptr) {
      out = name.empty() ? "this fabric has no switch" : "no switch named '" + name + "'";
      return ENODEV;
    }
    nlohmann::json j;
    const Status s = target->nv(words, &j);
    if (!s.ok()) {
      out = s.message();
      return EINVAL;
    }
    out = j.is_null() ? "" : j.dump(2);
    return 0;
  }
  if (w[0] == "fault") return handle_fault(engine, w, out);
  if (w[0] == "capture") {
    // capture NODE[:PORT] FILE
    if (w.size() != 3) {
      out = "usage: rocemu capture NODE[:PORT] FILE.pcapng";
      return EINVAL;
    }
    const auto colon = w[1].rfind(':');
    const std::string node = w[1].substr(0, colon);
    const uint16_t port = colon == std::string::npos ? 0 : uint16_t(std::atoi(w[1].c_str() + colon + 1));
    Node* n = engine.find_node(node);
    if (n == nullptr) {
      out = "no node named '" + node + "'";
      return ENODEV;
    }
    if (Status s = engine.capture_port(*n, port, w[2]); !s.ok()) {
      out = s.message();
      return EINVAL;
    }
    out = "capturing " + node + ":" + std::to_string(port) + " to " + w[2] + " (flushed when the engine stops)";
    return 0;
  }
  out = "unknown command '" + w[0] + "'";
  return EINVAL;
}

}  // namespace

int cmd_up(const UpOptions& o) {
  const RuntimePaths paths = runtime_paths();
  std::string err;
  if (Status s = ensure_runtime_dir(paths); !s.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
    return 1;
  }
  if (auto pid = running_engine(paths)) {
    std::fprintf(stderr, "rocemu up: an engine is already running (pid %d, socket %s); stop it with `rocemu down`\n",
                 int(*pid), paths.socket.c_str());
    return 1;
  }
  auto topo = load(o.topology);
  if (!topo.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", topo.status().message().c_str());
    return 2;
  }
  if (topo->raw["engine"] && topo->raw["engine"]["time"] && topo->engine.mode == TimeMode::kVirtual) {
    std::fprintf(stderr, "rocemu up: %s asks for virtual time; `rocemu up` runs real time (use `rocemu sim`)\n",
                 topo->file.c_str());
    return 2;
  }
  topo->engine.mode = TimeMode::kReal;

  int ready[2] = {-1, -1};
  if (o.daemon) {
    if (pipe2(ready, O_CLOEXEC) != 0) return 1;
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child > 0) {
      close(ready[1]);
      char b = 0;
      const bool ok = read(ready[0], &b, 1) == 1 && b == 'R';
      if (!ok) {
        std::fprintf(stderr, "rocemu up: the engine did not start; see %s\n", paths.log.c_str());
        waitpid(child, nullptr, WNOHANG);
        return 1;
      }
      std::printf("rocemu: engine running (pid %d); socket %s; log %s\n", int(child), paths.socket.c_str(),
                  paths.log.c_str());
      return 0;
    }
    close(ready[0]);
    setsid();
    auto logfd = open_private_file(paths.log, true);
    if (!logfd.ok()) {
      std::fprintf(stderr, "rocemu up: %s\n", logfd.status().message().c_str());
      return 1;
    }
    dup2(*logfd, STDOUT_FILENO);
    dup2(*logfd, STDERR_FILENO);
    close(*logfd);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  }
  if (o.verbose > 0) set_log_level(o.verbose > 1 ? spdlog::level::debug : spdlog::level::info);

  const uint32_t memory_mb = uint32_t(uint64_t(topo->engine.mbufs) * 4800 / (1 << 20)) + 256;
  if (Status s = dpdk::init_eal({.hugepages = o.hugepages, .memory_mb = memory_mb, .extra_args = {}}); !s.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
    return 1;
  }
  auto created = Engine::create(topo->engine);
  if (!created.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", created.status().message().c_str());
    return 1;
  }
  Engine& engine = *created.value();
  if (Status s = build_fabric(*topo, engine); !s.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
    return 1;
  }
  if (!o.capture_dir.empty()) {
    ensure_dir(o.capture_dir, err);
    for (const auto& l : engine.links()) {
      std::string name = l->name();
      for (char& c : name)
        if (c == ':') c = '_';
      if (Status s = engine.capture_link(*l, o.capture_dir + "/" + name + ".pcapng"); !s.ok())
        std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
    }
  }
  auto& agent = engine.add<verbs::HostAgent>();
  verbs::VerbsServer server(engine, agent, paths.socket);
  server.set_cli_handler([&](const std::vector<std::string>& w, std::string& out) {
    return handle_cli(engine, server, w, out);
  });
  if (Status s = server.start(); !s.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
    return 1;
  }
  if (Status s = write_private_file(paths.pid, std::to_string(getpid()) + "\n"); !s.ok()) {
    std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
    return 1;
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  g_wake_fd = agent.wake_fd();

  std::string names;
  for (const auto& n : engine.nodes())
    if (n->kind() == "nic") names += (names.empty() ? "" : ", ") + n->name();
  std::printf("rocemu: engine up (pid %d) on %s; NICs %s; socket %s\n", int(getpid()), topo->file.c_str(),
              names.c_str(), paths.socket.c_str());
  if (!o.daemon) std::printf("rocemu: run programs with `rocemu exec NODE -- PROGRAM`; Ctrl-C stops\n");
  std::fflush(stdout);
  if (o.daemon) {
    const char r = 'R';
    [[maybe_unused]] ssize_t n = write(ready[1], &r, 1);
    close(ready[1]);
  }
  if (o.realtime) {
    // On a machine with few cores the applications busy-poll too; a
    // real-time engine thread is scheduled the moment it has work. It
    // sleeps when idle, and RT throttling keeps 5 % for everyone else.
    sched_param sp{};
    sp.sched_priority = 1;
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
      std::fprintf(stderr, "rocemu: engine thread stays at normal priority (SCHED_FIFO: %s)\n", std::strerror(errno));
  }
  engine.run(g_stop);
  server.engine_stopped();
  server.stop();
  unlink(paths.pid.c_str());
  std::printf("rocemu: engine stopped\n");
  return 0;
}

int cmd_down() {
  const RuntimePaths paths = runtime_paths();
  auto pid = running_engine(paths);
  if (!pid) {
    std::fprintf(stderr, "rocemu down: no engine is running (socket %s)\n", paths.socket.c_str());
    return 1;
  }
  std::string out;
  engine_command(paths, {"down"}, out);
  // Wait for it to go (it frees every application's resources first).
  for (int i = 0; i < 200; i++) {
    if (kill(*pid, 0) != 0) {
      std::printf("rocemu: engine %d stopped\n", int(*pid));
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::fprintf(stderr, "rocemu down: engine %d did not stop within 10 s; sending SIGTERM\n", int(*pid));
  kill(*pid, SIGTERM);
  return 1;
}

int cmd_status() {
  std::string out;
  const int e = engine_command(runtime_paths(), {"status"}, out);
  std::fprintf(e == 0 ? stdout : stderr, "%s%s", out.c_str(), out.empty() || out.back() == '\n' ? "" : "\n");
  return e == 0 ? 0 : 1;
}

int cmd_engine(const std::vector<std::string>& words) {
  std::string out;
  const int e = engine_command(runtime_paths(), words, out);
  if (e != 0) {
    std::fprintf(stderr, "rocemu %s: %s\n", words.empty() ? "" : words[0].c_str(), out.c_str());
    return 1;
  }
  std::printf("%s%s", out.c_str(), out.empty() || out.back() == '\n' ? "" : "\n");
  return 0;
}

}  // namespace rocemu::app
