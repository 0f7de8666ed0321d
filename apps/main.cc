// rocemu: one command for the emulated RoCE fabric.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/commands.h"

namespace {

const char* kUsage = R"(rocemu - a software RoCEv2 fabric: emulated NICs and a RoCE switch

usage:
  rocemu up [TOPOLOGY] [--daemon] [--hugepages] [--capture DIR] [-v]
                                   start an engine (built-in topology: h1 -- sw1 -- h2)
  rocemu down                      stop it
  rocemu status                    nodes, links and attached applications
  rocemu exec NODE -- PROGRAM ARGS run an unmodified verbs program on NODE's NIC (rocemu0)
  rocemu demo                      start a fabric, run ib_write_bw and ib_write_lat, stop
  rocemu nv set|unset|show|action ...   NVUE-style switch configuration and counters
  rocemu counters [SCOPE] [--all]  every counter of the running engine (nonzero ones)
  rocemu fault NODE[:PORT] [out|in|both] clear | KEY VALUE ...
                                   faults on the link at that port (loss 0.01, delay 5us, ...)
  rocemu capture NODE[:PORT] FILE  capture a port to a pcapng file
  rocemu sim SCENARIO.yaml [-o DIR] [--junit FILE] [--baseline FILE] [--write-baseline FILE] [--no-plots]
                                   run a scenario in virtual time: summary.json, CSVs, plots, verdict

Run `rocemu COMMAND --help` for the options of a command.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace rocemu::app;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  std::vector<std::string> rest(argv + 2, argv + argc);

  // Commands that pass their words through untouched.
  if (cmd == "exec") {
    if (rest.empty() || rest[0] == "--help") {
      std::printf("usage: rocemu exec NODE -- PROGRAM [ARGS...]\n"
                  "Runs PROGRAM with librocemu-verbs.so preloaded, attached to NODE's emulated NIC.\n");
      return rest.empty() ? 2 : 0;
    }
    const std::string node = rest[0];
    size_t i = 1;
    if (i < rest.size() && rest[i] == "--") i++;
    return cmd_exec(node, std::vector<std::string>(rest.begin() + long(i), rest.end()));
  }
  if (cmd == "nv" || cmd == "counters" || cmd == "fault" || cmd == "capture") {
    std::vector<std::string> words = {cmd};
    words.insert(words.end(), rest.begin(), rest.end());
    return cmd_engine(words);
  }
  if (cmd == "down") return cmd_down();
  if (cmd == "status") return cmd_status();

  CLI::App app{"rocemu " + cmd};
  if (cmd == "up") {
    UpOptions o;
    app.add_option("topology", o.topology, "topology file (YAML); default: the built-in one");
    app.add_flag("--daemon", o.daemon, "run in the background");
    app.add_flag("--hugepages", o.hugepages, "use hugepages (EAL --in-memory)");
    app.add_option("--capture", o.capture_dir, "capture every link to DIR/<link>.pcapng");
    app.add_flag("-v,--verbose", o.verbose, "log more (twice: debug)");
    bool no_rt = false;
    app.add_flag("--no-realtime", no_rt, "keep the engine thread at normal priority");
    CLI11_PARSE(app, argc - 1, argv + 1);
    o.realtime = !no_rt;
    return cmd_up(o);
  }
  if (cmd == "demo") {
    DemoOptions o;
    app.add_option("--topology", o.topology, "topology file; default: the built-in one");
    CLI11_PARSE(app, argc - 1, argv + 1);
    return cmd_demo(o);
  }
  if (cmd == "sim") {
    SimOptions o;
    app.add_option("scenario", o.scenario, "scenario file (YAML)")->required();
    app.add_option("-o,--output", o.out_dir, "output directory (default: the scenario's name)");
    app.add_option("--junit", o.junit, "write the expectations as JUnit XML test cases to FILE");
    app.add_option("--baseline", o.baseline, "compare summary metrics with this baseline file");
    app.add_option("--write-baseline", o.write_baseline, "write a baseline of this run to FILE");
    app.add_flag("--no-plots", o.no_plots, "do not draw PNG plots");
    uint64_t seed = 0;
    auto* seed_opt = app.add_option("--seed", seed, "override the scenario's seed");
    try {
      app.parse(argc - 1, argv + 1);
    } catch (const CLI::ParseError& e) {
      const int rc = app.exit(e);
      return rc == 0 ? 0 : 2;
    }
    if (seed_opt->count() > 0) o.seed = seed;
    return cmd_sim(o);
  }
  std::fprintf(stderr, "rocemu: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
