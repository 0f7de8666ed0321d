// CLI commands the engine serves on its own thread (between bursts), each
// in its own file: they return 0 or an errno value (EINVAL: a usage error)
// and the text for the user in `out`.
#pragma once

#include <string>
#include <vector>

#include "common/engine/engine.h"

namespace rocemu::app {

// fault add|del|list|clear ... (apps/cmd_fault.cc)
int handle_fault(Engine& engine, const std::vector<std::string>& words, std::string& out);
// capture PORT|LINK -w FILE ... | stop [ID] | list (apps/cmd_capture.cc)
int handle_capture(Engine& engine, const std::vector<std::string>& words, std::string& out);

}  // namespace rocemu::app
