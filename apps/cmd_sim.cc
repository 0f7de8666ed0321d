// rocemu sim SCENARIO.yaml: run a scenario in virtual time, write
// summary.json, CSV series and PNG plots, print the verdict; exit 1 if an
// expectation (or a baseline metric) fails, 2 for a usage or file error.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "apps/commands.h"
#include "apps/runtime.h"
#include "apps/fabric.h"
#include "common/engine/dpdk.h"
#include "common/log.h"
#include "sim/baseline.h"
#include "sim/junit.h"
#include "sim/runner.h"

extern char** environ;

namespace rocemu::app {
namespace {

constexpr int kExitFail = 1, kExitUsage = 2;

// Where sim-plot.py is: $ROCEMU_SIM_PLOT, else the installed copy
// (../share/rocemu from this binary), else the source tree's.
std::string plot_script() {
  if (const char* p = std::getenv("ROCEMU_SIM_PLOT")) return p;
  const std::string self = self_path();
  const std::string installed = self.substr(0, self.rfind('/')) + "/../share/rocemu/sim-plot.py";
  if (std::filesystem::exists(installed)) return installed;
  return ROCEMU_SIM_PLOT_SCRIPT;
}

// The Python that has matplotlib: $ROCEMU_PYTHON, else Debian's (a
// python3 earlier in PATH, e.g. pyenv's, may lack python3-matplotlib).
std::string python() {
  if (const char* p = std::getenv("ROCEMU_PYTHON")) return p;
  return std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// Runs the plot script; it exits 3 when matplotlib is missing.
void plot(const std::string& dir) {
  std::fflush(stdout);
  const std::string script = plot_script();
  std::vector<std::string> argv = {python(), script, dir};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid;
  if (!std::filesystem::exists(script) || posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0) {
    std::printf("plots: skipped (python3 or %s not found)\n", script.c_str());
    return;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (rc == 3) std::printf("plots: skipped (python3-matplotlib is not installed)\n");
  else if (rc != 0) std::printf("plots: %s failed (exit status %d)\n", script.c_str(), rc);
}

void progress_line(const sim::Progress& p) {
  std::printf("\r  virtual %.3f of %.3f ms  wall %.1f s  %.2f M events/s   ", to_us(p.now) / 1000,
              to_us(p.duration) / 1000, p.wall_seconds,
              p.wall_seconds > 0 ? double(p.events) / p.wall_seconds / 1e6 : 0);
  std::fflush(stdout);
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  return bool(out);
}

Result<sim::Scenario> load(const SimOptions& o) {
  auto s = sim::load_scenario(o.scenario, registry());
  if (s.ok() && o.seed) {
    s->seed = *o.seed;
    s->topology.engine.seed = *o.seed;
  }
  return s;
}

Result<sim::Baseline> load_baseline(const std::string& path, const sim::Scenario& s) {
  auto b = sim::load_baseline(path);
  if (b.ok() && !b->scenario.empty() && b->scenario != s.name)
    return Status::error(path + ": a baseline of scenario '" + b->scenario + "', not of '" + s.name + "'");
  return b;
}

// The baseline, compared and/or written; false if a metric failed.
bool baseline(const SimOptions& o, const sim::Scenario& s, const sim::RunResult& r, const sim::Baseline* b,
              sim::Verdict& v) {
  if (!o.write_baseline.empty()) {
    if (!write_text(o.write_baseline, sim::baseline_yaml(s, r.summary)))
      std::fprintf(stderr, "rocemu sim: cannot write %s\n", o.write_baseline.c_str());
    else std::printf("baseline written: %s\n", o.write_baseline.c_str());
  }
  if (b == nullptr) return true;
  v = sim::compare_baseline(*b, r.summary);
  std::fputs(sim::format_verdict("baseline " + o.baseline, v).c_str(), stdout);
  return v.pass();
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return kExitUsage;
}

// The EAL, sized for the topology's packet pool (an mbuf takes about 5 KB
// with its frame), each switch's route table (rte_lpm's 64 MiB tbl24) and
// the rest (rings) with room to spare.
Status start_dpdk(const sim::Scenario& s) {
  const uint32_t memory_mb = uint32_t(uint64_t(s.topology.engine.mbufs) * 5200 / (1 << 20)) + 512 +
                             switch_memory_mb(s.topology);
  return dpdk::init_eal({.hugepages = false, .memory_mb = memory_mb, .extra_args = {}});
}

Result<sim::RunResult> run(const sim::Scenario& s) {
  sim::RunOptions ro;
  ro.keep_at_exit = true;  // the command ends with the run
  const bool tty = isatty(STDOUT_FILENO) == 1;
  if (tty) ro.progress = progress_line;
  auto r = sim::run_scenario(s, ro);
  if (tty) std::printf("\r%*s\r", 72, "");
  return r;
}

void print_run(const sim::RunResult& r, const std::string& dir) {
  std::printf("  virtual %.3f ms (%s samples) in %.2f s wall (set-up %.2f s), %.2f M events/s; outputs in %s/\n",
              r.summary["end_us"].get<double>() / 1000, std::to_string(r.summary["samples"].get<uint64_t>()).c_str(),
              r.wall_seconds, r.setup_seconds, r.wall_seconds > 0 ? double(r.events) / r.wall_seconds / 1e6 : 0,
              dir.c_str());
}

}  // namespace

int cmd_sim(const SimOptions& o) {
  auto s = load(o);
  if (!s.ok()) return usage_error(s.status().message());
  std::optional<sim::Baseline> base;
  if (!o.baseline.empty()) {
    auto b = load_baseline(o.baseline, *s);
    if (!b.ok()) return usage_error(b.status().message());
    base = std::move(b.value());
  }
  set_log_level(spdlog::level::err);  // the verdict and summary say what happened
  if (Status st = start_dpdk(*s); !st.ok()) return usage_error("rocemu sim: " + st.message());
  std::printf("rocemu sim: %s (%s), seed %s\n", s->name.c_str(), o.scenario.c_str(), std::to_string(s->seed).c_str());
  auto r = run(*s);
  if (!r.ok()) return usage_error("rocemu sim: " + r.status().message());
  const std::string dir = o.out_dir.empty() ? s->name : o.out_dir;
  if (Status st = sim::write_outputs(*r, dir); !st.ok()) return usage_error("rocemu sim: " + st.message());
  print_run(*r, dir);
  if (!o.no_plots) plot(dir);
  std::fputs(sim::format_verdict("verdict", r->verdict).c_str(), stdout);
  sim::Verdict bv;
  const bool base_ok = baseline(o, *s, *r, base ? &*base : nullptr, bv);
  if (!o.junit.empty()) {
    std::vector<sim::JunitSuite> suites{{s->name, &r->verdict}};
    if (base) suites.push_back({s->name + ".baseline", &bv});
    if (!write_text(o.junit, sim::junit_xml(suites, r->wall_seconds)))
      return usage_error("rocemu sim: cannot write " + o.junit);
  }
  return r->verdict.pass() && base_ok ? 0 : kExitFail;
}

}  // namespace rocemu::app
