// A real-time engine started the way a user starts it (`rocemu up
// --daemon`, in a private runtime directory), and real programs run on its
// NICs with `rocemu exec`.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/e2e/process.h"

namespace rocemu::test {

inline std::string bin(const std::string& name) { return std::string(ROCEMU_BINARY_DIR) + "/bin/" + name; }

class Fabric {
 public:
  // Starts an engine on `topology` (empty: the built-in one), with more
  // `rocemu up` options if given. Every rocemu command (up, exec, down, ...)
  // runs under `wrapper` if given, e.g. {"ip", "netns", "exec", NAME}: the
  // engine and its programs in a network namespace, as on another machine.
  explicit Fabric(const std::string& topology = "", const std::vector<std::string>& up_options = {},
                  const std::vector<std::string>& wrapper = {});
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const std::vector<std::string>& env() const { return env_; }
  const std::string& dir() const { return dir_; }
  int engine_pid() const { return pid_; }
  // The applications attached to the engine, as `rocemu status` counts
  // them (-1 if it does not answer).
  int attached() const;
  // `rocemu ARGS...` against this engine.
  std::pair<int, std::string> rocemu(const std::vector<std::string>& args, int seconds = 30) const;
  // A program on NODE's NIC.
  Process exec(const std::string& node, const std::vector<std::string>& argv) const;
  // `rocemu counters` (nonzero ones) as "SCOPE NAME" -> value; read one
  // with counter_at (0 if absent).
  std::map<std::string, uint64_t> counters() const;
  void forget_engine() { pid_ = -1; }

 private:
  std::vector<std::string> command(const std::vector<std::string>& args) const;
  void stop();  // the engine (by pid) and the runtime directory

  std::string dir_;
  std::vector<std::string> env_;
  std::vector<std::string> wrapper_;
  int pid_ = -1;
};

struct PairResult {
  int server = -1, client = -1;
  std::string server_out, client_out;
};

// A perftest-style pair: the server on `server_node`, then the client on
// `client_node` connecting to 127.0.0.1 (the out-of-band TCP exchange runs
// over the kernel's loopback; RoCE crosses the fabric). A run that perftest
// ends because its own clock calibration failed under CPU contention is
// repeated (up to 3 runs in all; fabric.cc says why), nothing else.
PairResult run_pair(const Fabric& f, const std::string& server_node, const std::string& client_node,
                    const std::vector<std::string>& server_argv, const std::vector<std::string>& client_argv, int port,
                    int seconds = 120);
// The same across two engines (e.g. in two network namespaces): the server
// on `server_fabric`'s node, the client on `client_fabric`'s (its argv
// names the server's address); the server's port is looked for in the
// server's own network namespace.
PairResult run_pair(const Fabric& server_fabric, const std::string& server_node, const Fabric& client_fabric,
                    const std::string& client_node, const std::vector<std::string>& server_argv,
                    const std::vector<std::string>& client_argv, int port, int seconds = 120);

// A counter of Fabric::counters(), 0 if absent (it lists nonzero ones).
inline uint64_t counter_at(const std::map<std::string, uint64_t>& c, const std::string& key) {
  const auto it = c.find(key);
  return it == c.end() ? 0 : it->second;
}

// Runs `cmd` with /bin/sh: true if it exited 0.
bool sh(const std::string& cmd);

// A free TCP port for a test pair.
int pick_port();

}  // namespace rocemu::test
