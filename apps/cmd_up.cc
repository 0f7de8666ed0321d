// rocemu up: an engine in real time with the verbs provider's control
// socket; rocemu down / status: ask it.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "apps/cmd_nv.h"
#include "apps/commands.h"
#include "apps/fabric.h"
#include "apps/engine_handlers.h"
#include "apps/metrics.h"
#include "apps/metrics_server.h"
#include "apps/ports.h"
#include "apps/runtime.h"
#include "apps/snapshot.h"
#include "apps/telemetry.h"
#include "common/config/parts.h"
#include "common/config/topology.h"
#include "common/engine/engine.h"
#include "common/log.h"
#include "common/private_files.h"
#include "nic/cc/cc_config.h"
#include "nic/nic.h"
#include "nic/verbs/server.h"
#include "nic/verbs/sysfs.h"
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

}  // namespace

namespace {

const char* qp_type_label(nic::QpType t) {
  switch (t) {
    case nic::QpType::kRc: return "RC";
    case nic::QpType::kUc: return "UC";
    case nic::QpType::kUd: return "UD";
    case nic::QpType::kXrcSend: return "XRC_SEND";
    case nic::QpType::kXrcRecv: return "XRC_RECV";
  }
  return "?";
}

// `nic show NODE`: the device as ibv_devinfo, show_gids and a QP list would
// show it.
std::string show_nic(const nic::Nic& n) {
  std::ostringstream os;
  const auto& c = n.config();
  os << n.name() << ": device rocemu0, MAC " << c.mac.str() << ", link " << (n.link_up() ? "up" : "down") << ", "
     << double(n.link_rate_bps()) / 1e9 << " Gbit/s, MTU " << n.link_mtu() << " (active RoCE MTU "
     << (256 << (int(n.active_mtu()) - 1)) << ")\n";
  os << "congestion control: " << c.cc.algorithm;
  if (c.cc.algorithm == "dcqcn") os << " (profile " << c.cc.profile << "; knobs: rocemu nic show " << n.name() << " cc)";
  os << "\nGID table:\n  index  type     gid\n";
  const auto& gids = n.gid_table();
  for (size_t i = 0; i < gids.size(); i++)
    os << "  " << i << (i < 10 ? "      " : "     ") << (gids[i].type == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2  " : "RoCE v1  ")
       << gids[i].gid.str() << "\n";
  std::ostringstream qps;
  size_t count = 0;
  n.for_each_qp([&](const nic::Qp& q) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-7u %-4s %-5s %-9u %-4u %-9u %-9u %-9u %.3f\n", q.qpn, qp_type_label(q.type),
                  nic::qp_state_name(q.state), q.dest_qpn, unsigned(q.priority), q.sq_psn, q.req.una_psn, q.resp.epsn,
                  q.cc ? q.cc->rate_bps() / 1e9 : double(n.link_rate_bps()) / 1e9);
    qps << line;
    count++;
  });
  os << "QPs: " << count << "\n";
  if (count > 0) os << "  qpn     type state dest_qpn  prio sq_psn    una_psn   epsn      rate_gbps\n" << qps.str();
  return os.str();
}

// nic show NODE [counters|cc] | nic set NODE cc KNOB VALUE [KNOB VALUE ...]
int handle_nic(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  const std::string usage = "usage: rocemu nic show NODE [counters|cc] | rocemu nic set NODE cc KNOB VALUE ...";
  if (w.size() < 3 || (w[1] != "show" && w[1] != "set")) {
    out = usage;
    return EINVAL;
  }
  Node* node = engine.find_node(w[2]);
  auto* n = dynamic_cast<nic::Nic*>(node);
  if (n == nullptr) {
    std::vector<std::string> nics;
    for (const auto& x : engine.nodes())
      if (dynamic_cast<nic::Nic*>(x.get()) != nullptr) nics.push_back(x->name());
    out = "no NIC named '" + w[2] + "' (NICs: " + joined(nics) + ")";
    return ENODEV;
  }
  if (w[1] == "show") {
    const std::string what = w.size() > 3 ? w[3] : "";
    if (w.size() > 4 || (what != "" && what != "counters" && what != "cc")) {
      out = usage;
      return EINVAL;
    }
    if (what.empty()) {
      out = show_nic(*n);
    } else if (what == "counters") {
      // The NIC's own counters, zeros included (per-QP ones are under
      // NODE/qpN: rocemu counters NODE/qp).
      struct Own final : CounterSink {
        std::string_view scope;
        std::string& out;
        Own(std::string_view sc, std::string& o) : scope(sc), out(o) {}
        void counter(std::string_view sc, std::string_view name, uint64_t value) override {
          if (sc == scope) out += std::string(name) + " " + std::to_string(value) + "\n";
        }
      } own(n->name(), out);
      n->report_counters(own);
    } else {
      if (n->config().cc.algorithm != "dcqcn") {
        out = n->name() + ": congestion control is " + n->config().cc.algorithm + " (no knobs)";
        return 0;
      }
      for (const auto& [knob, value] : nic::cc::show_knobs(n->config().cc.dcqcn)) out += knob + " " + value + "\n";
    }
    return 0;
  }
  if (w.size() < 6 || w[3] != "cc" || (w.size() - 4) % 2 != 0) {
    out = usage;
    return EINVAL;
  }
  YAML::Node knobs(YAML::NodeType::Map);
  for (size_t i = 4; i + 1 < w.size(); i += 2) {
    if (w[i] != "roce_rp_enable" && w[i] != "roce_np_enable") {
      knobs[w[i]] = w[i + 1];
      continue;
    }
    // A priority list: 3, 0,3 or [0,3].
    YAML::Node seq(YAML::NodeType::Sequence);
    std::string list = w[i + 1];
    std::erase_if(list, [](char ch) { return ch == '[' || ch == ']'; });
    std::istringstream in(list);
    for (std::string item; std::getline(in, item, ',');) seq.push_back(item);
    knobs[w[i]] = seq;
  }
  if (Status st = n->set_cc_knobs(knobs); !st.ok()) {
    out = st.message();
    return EINVAL;
  }
  out = n->name() + ": " + std::to_string((w.size() - 4) / 2) + " knob(s) set";
  return 0;
}

// Where DPDK telemetry listens, and the command that reads it.
std::string telemetry_line() {
  const std::string sock = dpdk::telemetry_socket();
  if (sock.empty()) return "";
  std::string env;
  if (const char* rd = std::getenv("RUNTIME_DIRECTORY")) env = std::string("RUNTIME_DIRECTORY=") + rd + " ";
  return "telemetry: " + sock + " (" + env + "dpdk-telemetry.py -f " + dpdk::file_prefix() + ")";
}

// sysfs NODE: the device files of NODE's NIC (nic/verbs/sysfs.h), for
// `rocemu exec` to lay out.
int handle_sysfs(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  auto* n = w.size() >= 2 ? dynamic_cast<nic::Nic*>(engine.find_node(w[1])) : nullptr;
  if (w.size() != 2) {
    out = "usage: sysfs NODE";
    return EINVAL;
  }
  if (n == nullptr) {
    out = "no NIC named '" + w[1] + "'";
    return ENODEV;
  }
  out = verbs::serialize(verbs::nic_sysfs(*n));
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
    if (const std::string t = telemetry_line(); !t.empty()) os << t << "\n";
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
  if (w[0] == "nv") return handle_nv(engine, w, out);
  if (w[0] == "snapshot") {  // what rocemu doctor and rocemu top read
    out = nlohmann::json(take_snapshot(engine)).dump();
    return 0;
  }
  if (w[0] == "fault") return handle_fault(engine, w, out);
  if (w[0] == "nic") return handle_nic(engine, w, out);
  if (w[0] == "sysfs") return handle_sysfs(engine, w, out);
  if (w[0] == "capture") return handle_capture(engine, w, out);
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
                 int(pid->pid()), paths.socket.c_str());
    return 1;
  }
  auto topo = load(o.topology);
  if (topo.ok() && !o.part.empty()) topo = topology_part(*topo, o.part);
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

  const uint32_t memory_mb = uint32_t(uint64_t(topo->engine.mbufs) * 4800 / (1 << 20)) + 256 +
                             switch_memory_mb(*topo);
  if (Status s = dpdk::init_eal(
          {.hugepages = o.hugepages, .memory_mb = memory_mb, .telemetry = true, .extra_args = {}});
      !s.ok()) {
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
  // Rendered on the engine thread, served from the server's own.
  MetricsServer metrics([&engine](std::function<void()> job) { engine.post([job](Engine&) { job(); }); },
                        [&engine] { return prometheus_text(collect_counters(engine)); });
  if (o.metrics_port != 0) {
    if (Status s = metrics.start(o.metrics_port); !s.ok()) {
      std::fprintf(stderr, "rocemu up: %s\n", s.message().c_str());
      return 1;
    }
  }
  // DPDK telemetry: the same counters, taken on the engine thread per request.
  if (Status s = Telemetry::start([&engine](std::function<void()> job) { engine.post([job](Engine&) { job(); }); },
                                  [&engine] { return collect_counters(engine); });
      !s.ok())
    std::fprintf(stderr, "rocemu up: %s (telemetry is off)\n", s.message().c_str());
  // Every return from here on detaches telemetry before the engine goes:
  // DPDK's telemetry thread would otherwise post to a destroyed engine.
  struct TelemetryStop {
    TelemetryStop() = default;
    TelemetryStop(const TelemetryStop&) = delete;
    TelemetryStop& operator=(const TelemetryStop&) = delete;
    ~TelemetryStop() { Telemetry::stop(); }
  } telemetry_stop;
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
  std::printf("rocemu: engine up (pid %d) on %s%s; NICs %s; socket %s\n", int(getpid()), topo->file.c_str(),
              topo->part.empty() ? "" : (" part " + topo->part).c_str(), names.c_str(), paths.socket.c_str());
  if (topo->part.empty() && !topo->parts.empty()) {
    std::string parts;
    for (const PartSpec& p : topo->parts) parts += (parts.empty() ? "" : ", ") + p.name;
    std::printf("rocemu: this engine runs every part (%s), the links between them internal; `rocemu up %s --part "
                "NAME` runs one\n",
                parts.c_str(), topo->file.c_str());
  }
  if (o.metrics_port != 0) std::printf("rocemu: metrics at http://127.0.0.1:%u/metrics\n", unsigned(metrics.port()));
  if (const std::string t = telemetry_line(); !t.empty()) std::printf("rocemu: %s\n", t.c_str());
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
  Telemetry::stop();
  metrics.stop();
  server.engine_stopped();
  server.stop();
  unlink(paths.pid.c_str());
  std::printf("rocemu: engine stopped\n");
  return 0;
}

int cmd_down() {
  const RuntimePaths paths = runtime_paths();
  auto engine = running_engine(paths);
  if (!engine) {
    std::fprintf(stderr, "rocemu down: no engine is running (socket %s)\n", paths.socket.c_str());
    return 1;
  }
  std::string out;
  engine_command(paths, {"down"}, out);
  // Wait for it to go (it frees every application's resources first).
  // The pidfd names that process only: a PID reused meanwhile is not it.
  if (engine->wait_exit(10000)) {
    std::printf("rocemu: engine %d stopped\n", int(engine->pid()));
    return 0;
  }
  std::fprintf(stderr, "rocemu down: engine %d did not stop within 10 s; sending SIGTERM\n", int(engine->pid()));
  engine->signal(SIGTERM);
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
    // A bad word or value, or a port that does not exist, is a usage error.
    return e == EINVAL || e == ENODEV ? 2 : 1;
  }
  std::printf("%s%s", out.c_str(), out.empty() || out.back() == '\n' ? "" : "\n");
  return 0;
}

}  // namespace rocemu::app
