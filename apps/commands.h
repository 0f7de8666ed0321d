// The rocemu subcommands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rocemu::app {

struct UpOptions {
  std::string topology;     // empty: the built-in one
  bool daemon = false;
  bool hugepages = false;
  std::string capture_dir;  // capture every link there (pcapng)
  int verbose = 0;
  bool realtime = true;      // SCHED_FIFO for the engine thread where allowed
};
int cmd_up(const UpOptions& o);
int cmd_down();
int cmd_status();
int cmd_exec(const std::string& node, const std::vector<std::string>& argv);
int cmd_engine(const std::vector<std::string>& words);  // nv ..., counters ..., fault ...
int cmd_nv(const std::vector<std::string>& words);      // nv config save here, the rest via cmd_engine

struct DemoOptions {
  std::string topology;
  int seconds = 3;
  bool keep_running = false;
};
int cmd_demo(const DemoOptions& o);

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
