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
  std::fprintf(stderr, "rocemu: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
