// The rocemu subcommands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rocemu::app {

struct UpOptions {
  std::string topology;     // empty: the built-in one
  std::string part;         // run only this part of a file with parts: (common/config/parts.h)
  bool daemon = false;
  bool hugepages = false;
  std::string capture_dir;  // capture every link there (pcapng)
  int verbose = 0;
  bool realtime = true;      // SCHED_FIFO for the engine thread where allowed
  uint16_t metrics_port = 0; // Prometheus endpoint on 127.0.0.1:PORT; 0: none
};
int cmd_up(const UpOptions& o);
int cmd_down();
int cmd_status();
int cmd_exec(const std::string& node, const std::vector<std::string>& argv);
int cmd_engine(const std::vector<std::string>& words);  // nv ..., counters ..., fault ...
int cmd_capture(std::vector<std::string> words);       // capture ... (-w -: streams to stdout)
int cmd_nv(const std::vector<std::string>& words);      // nv config save here, the rest via cmd_engine

struct DemoOptions {
  std::string topology;
  int seconds = 3;
  bool keep_running = false;
};
int cmd_demo(const DemoOptions& o);

struct DoctorOptions {
  std::string format = "text";  // or json
  double interval_s = 1.0;      // between the two samples the counter checks compare
  bool list = false;            // list the checks
};
int cmd_doctor(const DoctorOptions& o);

struct TopoOptions {
  bool fat_tree = false;
  uint32_t leaves = 4, spines = 2, hosts_per_leaf = 4, k = 0;
  std::string oversubscription = "1:1";
  std::string rate = "400G";
  std::string roce = "lossless";
  std::string load_balancing = "hash";
  std::string loss_recovery = "go-back-n";
  std::string delay = "1us";
  uint32_t mtu = 9000;
  std::string output;  // empty: standard output
  std::string command_line;
};
int cmd_topo(const TopoOptions& o);

struct TopOptions {
  bool once = false;     // one frame, then exit
  int count = 0;         // -n: frames, then exit; 0: until interrupted
  double delay_s = 1.0;  // -d: seconds between frames
};
int cmd_top(const TopOptions& o);

struct SimOptions {
  std::string scenario;
  std::string out_dir;            // default: the scenario's name
  std::string junit;              // write the verdict as JUnit XML here
  std::string baseline;           // compare with this baseline
  std::string write_baseline;     // save a baseline of this run here
  bool no_plots = false;
  std::optional<uint64_t> seed;   // overrides the scenario's
};
int cmd_sim(const SimOptions& o);

}  // namespace rocemu::app
