// Running real programs from tests: output captured through a pipe, every
// wait bounded by a deadline and woken by the event it waits for (output,
// exit), never by a fixed sleep.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "common/tcp_listen.h"

namespace rocemu::test {

struct Process {
  pid_t pid = -1;
  int out = -1;        // stdout and stderr, merged
  std::string output;  // everything read so far
  int status = -1;     // exit code once reaped (128 + signal if killed)
  bool done = false;
};

// Starts argv with `env` added to the environment.
Process spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
// Reads what is available, waiting at most `wait`.
void pump(Process& p, std::chrono::milliseconds wait);
// Waits for the process to exit (deadline, then SIGKILL); returns its status.
int finish(Process& p, std::chrono::seconds deadline);
// Waits until `cond` holds, pumping every process in `watch` meanwhile;
// false on timeout.
bool wait_until(const std::function<bool()>& cond, std::chrono::seconds deadline, std::vector<Process*> watch = {});
using rocemu::tcp_listening;  // true while something listens on this TCP port
// Runs to completion and returns (status, output).
std::pair<int, std::string> run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                                std::chrono::seconds deadline = std::chrono::seconds(60));

}  // namespace rocemu::test
