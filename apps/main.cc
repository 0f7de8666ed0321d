// rocemu: one command for the emulated RoCE fabric.
//
// Every subcommand is a row of kCommands: its synopsis and help live there,
// `rocemu --help`, `rocemu COMMAND --help` and the bash completion are
// made from it, and `--help` is answered here, before anything reaches an
// engine. Exit status: 0 ok, 1 failure (or findings), 2 usage.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "apps/commands.h"

#ifndef ROCEMU_VERSION
#error "the build defines ROCEMU_VERSION"
#endif

namespace {

using namespace rocemu::app;

constexpr int kUsageError = 2;

struct Command {
  const char* name;
  const char* synopsis;  // what follows "rocemu NAME"
  const char* summary;   // one line for `rocemu --help`
  const char* details;   // the rest of `rocemu NAME --help`
  const char* options;   // for the completion: its options, space-separated
};

const Command kCommands[] = {
    {"up", "[TOPOLOGY] [--part NAME] [--daemon] [--hugepages] [--capture DIR] [--metrics-port PORT] [-v] [--no-realtime]",
     "start an engine (built-in topology: h1 -- sw1 -- h2)",
     "--part NAME runs one part of a topology with parts: (one engine per machine);\n"
     "each link to another part becomes an external port on the interface or device\n"
     "the part's external: entry names. Without --part one engine runs every part.\n"
     "--metrics-port PORT serves every counter in Prometheus's text format at\n"
     "http://127.0.0.1:PORT/metrics (loopback only; off unless given).\n",
     "--part --daemon --hugepages --capture --metrics-port --verbose --no-realtime --help"},
    {"down", "", "stop the running engine (it frees every application's resources first)", nullptr, "--help"},
    {"status", "", "nodes, links and attached applications of the running engine", nullptr, "--help"},
    {"exec", "NODE -- PROGRAM [ARGS...]", "run an unmodified verbs program on NODE's NIC (device rocemu0)",
     "PROGRAM runs with librocemu-verbs.so preloaded, attached to NODE's emulated NIC;\n"
     "everything after `--` is the program's, its own --help included.\n",
     "--help"},
    {"demo", "[--topology FILE]", "start a fabric, run ib_write_bw and ib_write_lat through it, stop", nullptr,
     "--topology --help"},
    {"nv", "[--switch NAME] set|unset|config|show|action ...", "NVUE-style switch configuration and counters",
     "  rocemu nv show qos roce                      the RoCE profile\n"
     "  rocemu nv set qos roce mode lossless|lossy   stage a change (set/unset only stage)\n"
     "  rocemu nv config diff                        what is staged\n"
     "  rocemu nv config apply                       validate it whole and apply it\n"
     "  rocemu nv config show -o yaml                the running config (a topology's switch section)\n"
     "  rocemu nv config save [FILE]                 write it (default: RUNTIME_DIR/nv-startup.yaml)\n"
     "  rocemu nv config detach                      drop what is staged\n"
     "  rocemu nv show interface swp1 counters       a port's counters\n"
     "  rocemu nv action clear ...                   clear counters\n",
     "--switch --help"},
    {"nic", "show NODE [counters|cc] | set NODE cc KNOB VALUE ...",
     "a NIC: device, GIDs and QPs; its counters; DCQCN knobs read and set by mlx5 name",
     "  rocemu nic show h1                  device, link, GID table, QPs (state, PSNs, rate)\n"
     "  rocemu nic show h1 counters         the NIC's counters (mlx5 names), zeros included\n"
     "  rocemu nic show h1 cc               every DCQCN knob in mlx5's units (Mbit/s, us, ...)\n"
     "  rocemu nic set h1 cc rpg_ai_rate 10 rpg_time_reset 300\n"
     "                                      set knobs live, as mlx5's cc_params; every QP uses them\n"
     "                                      from its next event (roce_rp_enable / roce_np_enable: 3 or 0,3)\n",
     "show set counters cc --help"},
    {"counters", "[SCOPE] [--all]", "every counter of the running engine (nonzero ones; --all: every one)",
     "SCOPE keeps the counters whose scope starts with it (h1, sw1, h1/qp17, ...).\n", "--all --help"},
    {"fault", "add TARGET [out|in|both] KIND PARAMS... | list | del ID | clear [TARGET]",
     "faults on a link or switch port in tc-netem's forms, each with an id and counters",
     "TARGET is a port (h1, sw1:swp1: the link at it) or a link by name (h1:0-sw1:0);\n"
     "out: what the port sends, in: what it receives, both (the default). Faults add up.\n"
     "  loss 1% [25%]  |  loss gemodel P% [R% [1-H% [1-K%]]]   Bernoulli or Gilbert-Elliott loss\n"
     "  delay 100us [10us [25%]]                         delay, give or take the jitter (uniform)\n"
     "  rate 10gbit        duplicate 1% [25%]        corrupt 0.1% [25%]\n"
     "  reorder 25% [50%] [gap N] [5us]                  with a delay: 25% of frames skip it;\n"
     "                                                   without: they are held back 5us\n"
     "  (a second percentage is netem's correlation: how often a draw repeats the last)\n"
     "  drop match [qpn=N] [psn=N] [opcode=N] [every=N] [times=N]\n"
     "  link down | link up                              pfc-storm prio 3 [quanta N] [interval T]\n"
     "Every value carries its unit (a bare 5 is refused). `fault list` shows each fault's\n"
     "id and what it dropped, delayed, duplicated and corrupted; `fault del ID` removes one,\n"
     "`fault clear [TARGET]` all of them (the topology's too).\n",
     "add list del clear out in both loss gemodel random delay distribution uniform rate duplicate reorder gap "
     "corrupt drop match link down up "
     "pfc-storm prio --help"},
    {"capture", "PORT|LINK -w FILE|- [-c COUNT] [--duration TIME] [-s SNAPLEN] | stop [ID] | list",
     "capture a port or link to pcapng while traffic runs",
     "Written as it goes (tshark -r FILE reads it at any time); each frame stamped when it\n"
     "crossed the port, with its direction (outbound/inbound). -s: bytes kept of each frame\n"
     "(default 128: every header; 0: all). -w - streams to standard output:\n"
     "  rocemu capture sw1:swp1 -w - | tshark -r -\n"
     "It runs until COUNT frames, TIME, `rocemu capture stop [ID]` or Ctrl-C (with -w -).\n",
     "-w -c --duration -s stop list --help"},
    {"sim", "SCENARIO.yaml [-o DIR] [--junit FILE] [--baseline FILE] [--write-baseline FILE] [--seed N] [--no-plots]",
     "run a scenario in virtual time: summary.json, CSVs, plots, verdict", nullptr,
     "--output --junit --baseline --write-baseline --seed --no-plots --help"},
    {"topo", "leaf-spine [--leaves N] [--spines N] [--hosts-per-leaf N] [--rate RATE] [--oversubscription H:U] "
             "[-o FILE] | fat-tree --k K [--rate RATE] [-o FILE]",
     "write a leaf-spine (or two-tier fat-tree) topology file: addresses, ECMP routes, the RoCE profile",
     "Every leaf reaches the other leaves' hosts over an ECMP group of its uplinks (one next hop per\n"
     "spine, hashed on the 5-tuple with RoCE's UDP source port); spines route each leaf down. The\n"
     "uplinks' rate follows from --oversubscription (host bandwidth : uplink bandwidth of a leaf).\n"
     "  rocemu topo leaf-spine --leaves 4 --spines 2 --hosts-per-leaf 4 --rate 400G -o fabric.yaml\n"
     "  rocemu up fabric.yaml        (or a scenario's topology_file: for rocemu sim)\n"
     "fat-tree --k K is the leaf-spine of K-port switches: K leaves, K/2 spines, K/2 hosts per leaf.\n"
     "Other options: --roce lossless|lossy (default lossless), --load-balancing hash|per-packet (the\n"
     "leaves' ECMP, default hash), --loss-recovery go-back-n|selective-repeat (every NIC's, default\n"
     "go-back-n), --delay TIME (1us), --mtu N (9000).\n",
     "leaf-spine fat-tree --leaves --spines --hosts-per-leaf --rate --oversubscription --k --roce --load-balancing "
     "--loss-recovery --delay --mtu --output --help"},
    {"doctor", "[-o text|json] [--interval SECONDS] [--list]",
     "check the running fabric for RoCE misconfigurations: each finding with its evidence and fix",
     "Checks (rocemu doctor --list): host DSCP vs the switch's RoCE DSCP, CNP class, PFC priorities at\n"
     "both ends of each link, MTU, ECN on the RoCE TC, PFC climbing with few ECN marks, drops on a\n"
     "lossless priority, PFC watchdog, DSCP 26 on a lossy class. The counter checks compare two\n"
     "samples taken --interval apart (default 1 s).\n"
     "Exit status: 0 healthy, 1 findings (or no engine), 2 usage.\n",
     "--output --interval --list --help"},
    {"top", "[--once] [-n COUNT] [-d SECONDS]",
     "a live view of the running fabric: per port Gbit/s, queue depth per TC, ECN marks, PFC, CNPs, drops",
     "Refreshes every -d seconds (default 1) until Ctrl-C, or -n COUNT frames, or one frame with --once.\n"
     "Rates and counts are over the last interval; queue depths are packets now.\n",
     "--once -n -d --help"},
    {"completion", "bash", "print the bash completion script (source <(rocemu completion bash))", nullptr, "--help"},
};

const Command* find_command(std::string_view name) {
  for (const Command& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

void print_usage(FILE* out) {
  std::fprintf(out, "rocemu %s - a software RoCEv2 fabric: emulated NICs and a RoCE switch\n\nusage:\n",
               ROCEMU_VERSION);
  for (const Command& c : kCommands) {
    const std::string head = std::string("  rocemu ") + c.name + (*c.synopsis ? " " : "") + c.synopsis;
    std::fprintf(out, "%s\n      %s\n", head.c_str(), c.summary);
  }
  std::fputs("\nRun `rocemu COMMAND --help` for one command; `rocemu --version` for the version.\n"
             "Exit status: 0 ok, 1 failure, 2 usage error.\n",
             out);
}

void print_help(const Command& c) {
  std::printf("usage: rocemu %s%s%s\n%s.\n", c.name, *c.synopsis ? " " : "", c.synopsis, c.summary);
  if (c.details != nullptr) std::printf("\n%s", c.details);
}

// `--help` or `-h` among the words a command forwards to the engine.
bool asks_help(const std::vector<std::string>& words) {
  for (const std::string& w : words)
    if (w == "--help" || w == "-h") return true;
  return false;
}

std::string completion_script() {
  std::string names, cases;
  for (const Command& c : kCommands) {
    names += std::string(names.empty() ? "" : " ") + c.name;
    cases += std::string("    ") + c.name + ") opts=\"" + c.options + "\" ;;\n";
  }
  return "# bash completion for rocemu (made by `rocemu completion bash`)\n"
         "_rocemu() {\n"
         "  local cur=${COMP_WORDS[COMP_CWORD]} opts\n"
         "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
         "    COMPREPLY=($(compgen -W \"" + names + " --help --version\" -- \"$cur\"))\n"
         "    return\n"
         "  fi\n"
         "  case ${COMP_WORDS[1]} in\n" + cases +
         "    *) opts=\"\" ;;\n"
         "  esac\n"
         "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
         "  [ ${#COMPREPLY[@]} -eq 0 ] && COMPREPLY=($(compgen -f -- \"$cur\"))\n"
         "}\n"
         "complete -F _rocemu rocemu\n";
}

// Parses a command's options with CLI11: 0 to go on, else the exit status
// (0 after --help, kUsageError on a usage error).
int parse(CLI::App& app, const Command& c, int argc, char** argv, bool& stop) {
  app.footer(c.details != nullptr ? std::string("\n") + c.details : "");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    stop = true;
    return app.exit(e) == 0 ? 0 : kUsageError;
  }
  stop = false;
  return 0;
}

int run_typed(const Command& c, int argc, char** argv) {
  CLI::App app{std::string(c.summary), std::string("rocemu ") + c.name};
  bool stop = false;
  if (std::strcmp(c.name, "up") == 0) {
    UpOptions o;
    app.add_option("topology", o.topology, "topology file (YAML); default: the built-in one");
    app.add_option("--part", o.part, "run only this part of a topology with parts:");
    app.add_flag("--daemon", o.daemon, "run in the background");
    app.add_flag("--hugepages", o.hugepages, "use hugepages (EAL --in-memory)");
    app.add_option("--capture", o.capture_dir, "capture every link to DIR/<link>.pcapng");
    app.add_option("--metrics-port", o.metrics_port, "serve Prometheus metrics on 127.0.0.1:PORT")
        ->check(CLI::Range(1, 65535));
    app.add_flag("-v,--verbose", o.verbose, "log more (twice: debug)");
    bool no_rt = false;
    app.add_flag("--no-realtime", no_rt, "keep the engine thread at normal priority");
    if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
    o.realtime = !no_rt;
    return cmd_up(o);
  }
  if (std::strcmp(c.name, "demo") == 0) {
    DemoOptions o;
    app.add_option("--topology", o.topology, "topology file; default: the built-in one");
    if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
    return cmd_demo(o);
  }
  if (std::strcmp(c.name, "sim") == 0) {
    SimOptions o;
    app.add_option("scenario", o.scenario, "scenario file (YAML)")->required();
    app.add_option("-o,--output", o.out_dir, "output directory (default: the scenario's name)");
    app.add_option("--junit", o.junit, "write the expectations as JUnit XML test cases to FILE");
    app.add_option("--baseline", o.baseline, "compare summary metrics with this baseline file");
    app.add_option("--write-baseline", o.write_baseline, "write a baseline of this run to FILE");
    app.add_flag("--no-plots", o.no_plots, "do not draw PNG plots");
    uint64_t seed = 0;
    auto* seed_opt = app.add_option("--seed", seed, "override the scenario's seed");
    if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
    if (seed_opt->count() > 0) o.seed = seed;
    return cmd_sim(o);
  }
  if (std::strcmp(c.name, "topo") == 0) {
    TopoOptions o;
    app.require_subcommand(1);
    CLI::App* ls = app.add_subcommand("leaf-spine", "a two-tier leaf-spine Clos");
    CLI::App* ft = app.add_subcommand("fat-tree", "the two-tier fat-tree of K-port switches");
    ls->add_option("--leaves", o.leaves, "leaf switches (default 4)");
    ls->add_option("--spines", o.spines, "spine switches (default 2)");
    ls->add_option("--hosts-per-leaf", o.hosts_per_leaf, "hosts on each leaf (default 4)");
    ls->add_option("--oversubscription", o.oversubscription, "host : uplink bandwidth of a leaf (default 1:1)");
    ft->add_option("--k", o.k, "ports per switch (even)")->required();
    for (CLI::App* sub : {ls, ft}) {
      sub->add_option("--rate", o.rate, "host link rate (default 400G)");
      sub->add_option("--roce", o.roce, "qos roce mode of every switch: lossless or lossy");
      sub->add_option("--load-balancing", o.load_balancing, "the leaves' ECMP: hash (default) or per-packet");
      sub->add_option("--loss-recovery", o.loss_recovery, "every NIC's: go-back-n (default) or selective-repeat");
      sub->add_option("--delay", o.delay, "propagation delay of every link (default 1us)");
      sub->add_option("--mtu", o.mtu, "MTU of every link (default 9000)");
      sub->add_option("-o,--output", o.output, "write the file here (default: standard output)");
    }
    if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
    o.fat_tree = ft->parsed();
    for (int i = 0; i < argc; i++) o.command_line += std::string(i == 0 ? "rocemu " : " ") + argv[i];
    return cmd_topo(o);
  }
  if (std::strcmp(c.name, "doctor") == 0) {
    DoctorOptions o;
    app.add_option("-o,--output", o.format, "text or json")->check(CLI::IsMember({"text", "json"}));
    app.add_option("--interval", o.interval_s, "seconds between the two samples")->check(CLI::Range(0.0, 3600.0));
    app.add_flag("--list", o.list, "list the checks");
    if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
    return cmd_doctor(o);
  }
  if (std::strcmp(c.name, "top") == 0) {
    TopOptions o;
    app.add_flag("--once", o.once, "print one frame and exit");
    app.add_option("-n,--iterations", o.count, "frames before exiting (0: until interrupted)")->check(CLI::NonNegativeNumber);
    app.add_option("-d,--delay", o.delay_s, "seconds between frames")->check(CLI::Range(0.05, 3600.0));
    if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
    return cmd_top(o);
  }
  // completion
  std::string shell;
  app.add_option("shell", shell, "the shell (bash)")->required()->check(CLI::IsMember({"bash"}));
  if (int rc = parse(app, c, argc, argv, stop); stop) return rc;
  std::fputs(completion_script().c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return kUsageError;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    print_usage(stdout);
    return 0;
  }
  if (cmd == "--list-commands") {  // for scripts (the man pages are made from it): NAME<TAB>SUMMARY
    for (const Command& x : kCommands) std::printf("%s\t%s\n", x.name, x.summary);
    return 0;
  }
  if (cmd == "--version" || cmd == "-V") {
    std::printf("rocemu %s\n", ROCEMU_VERSION);
    return 0;
  }
  const Command* c = find_command(cmd);
  if (c == nullptr) {
    std::fprintf(stderr, "rocemu: unknown command '%s'\n\n", cmd.c_str());
    print_usage(stderr);
    return kUsageError;
  }
  std::vector<std::string> rest(argv + 2, argv + argc);

  // Commands whose words go to the engine (or to a program) untouched.
  if (cmd == "exec") {
    // Only the words before the program can ask us for help: the rest,
    // its own --help included, are the program's.
    const auto is_help = [&](size_t i) { return i < rest.size() && (rest[i] == "--help" || rest[i] == "-h"); };
    if (is_help(0) || is_help(1)) {
      print_help(*c);
      return 0;
    }
    size_t i = 1;
    if (i < rest.size() && rest[i] == "--") i++;
    if (rest.empty() || rest[0] == "--" || i >= rest.size()) {
      std::fprintf(stderr, "usage: rocemu exec %s\n", c->synopsis);
      return kUsageError;
    }
    return cmd_exec(rest[0], std::vector<std::string>(rest.begin() + long(i), rest.end()));
  }
  const bool engine_words = cmd == "nv" || cmd == "nic" || cmd == "counters" || cmd == "fault" || cmd == "capture";
  if (engine_words || cmd == "down" || cmd == "status") {
    if (asks_help(rest)) {
      print_help(*c);
      return 0;
    }
    if (!engine_words && !rest.empty()) {
      std::fprintf(stderr, "rocemu %s: unexpected argument '%s'\nusage: rocemu %s\n", c->name, rest[0].c_str(),
                   c->name);
      return kUsageError;
    }
    if (cmd == "down") return cmd_down();
    if (cmd == "status") return cmd_status();
    std::vector<std::string> words = {cmd};
    words.insert(words.end(), rest.begin(), rest.end());
    if (cmd == "capture") return cmd_capture(std::move(words));
    return cmd == "nv" ? cmd_nv(words) : cmd_engine(words);
  }
  return run_typed(*c, argc - 1, argv + 1);
}
