// Where a running engine lives (runtime directory, control socket, pid
// file) and how the CLI talks to it.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace rocemu::app {

struct RuntimePaths {
  std::string dir;     // $ROCEMU_RUNTIME_DIR, else /run/rocemu (root) or $XDG_RUNTIME_DIR/rocemu or /tmp/rocemu-UID
  std::string socket;  // dir/rocemu.sock
  std::string pid;     // dir/rocemu.pid
  std::string log;     // dir/rocemu.log (daemon output)
};

RuntimePaths runtime_paths();
// The runtime directory, made or checked as common/private_files.h says.
Status ensure_runtime_dir(const RuntimePaths& p);
bool ensure_dir(const std::string& dir, std::string& err);

// The pid of a live engine for these paths, if any; removes a stale pid
// file and socket left by an engine that died.
std::optional<pid_t> running_engine(const RuntimePaths& p);

// Sends one CLI command to the engine; returns 0 and its text, or an
// errno value (ECONNREFUSED/ENOENT: no engine) and a message.
int engine_command(const RuntimePaths& p, const std::vector<std::string>& words, std::string& out);

// Path of librocemu-verbs.so: $ROCEMU_PROVIDER, else ../lib or (installed)
// ../lib/rocemu from this binary.
std::string provider_path();
std::string self_path();

}  // namespace rocemu::app
