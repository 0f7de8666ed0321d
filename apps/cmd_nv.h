// rocemu nv: NVUE-style commands on a running engine's switch.
#pragma once

#include <string>
#include <vector>

namespace rocemu {
class Engine;
}

namespace rocemu::app {

// On the engine thread: w = {"nv", [--switch NAME], words...}. Returns 0 or
// an errno value, with the text to print in `out`.
int handle_nv(Engine& engine, const std::vector<std::string>& w, std::string& out);

}  // namespace rocemu::app
