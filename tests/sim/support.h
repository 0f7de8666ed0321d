// Helpers for the rocemu sim tests: the node kinds `rocemu sim` knows, a
// small scenario (a 2:1 incast of a few hundred microseconds), a fresh
// directory, files as bytes, and running the rocemu program.
#pragma once

#include <string>

#include "common/config/topology.h"
#include "sim/runner.h"
#include "sim/scenario.h"

namespace rocemu::test {

const NodeKindRegistry& sim_registry();

// A 2:1 incast of 64 KiB WRITEs through one switch (h0, h1 -> h2), `count`
// messages per flow; `extra` is appended (more top-level keys).
std::string small_scenario(const std::string& expectations, int count = 8, const std::string& extra = "");

// Parses (REQUIREs success), starts the EAL if needed and runs.
sim::RunResult run_text(const std::string& text, const std::string& file = "small.yaml");

std::string fresh_dir(const std::string& tag);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& text);
// Runs <build>/bin/rocemu with `args` ("sim ..."), output to `log`; its exit status.
int run_rocemu(const std::string& args, const std::string& log);

}  // namespace rocemu::test
