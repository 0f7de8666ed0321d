// Whether something listens on a local TCP port, read from /proc/net:
// how `rocemu demo` and the end-to-end tests know a perftest server is up.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace rocemu {

// `pid`: in the network namespace of that process (0: this one's).
inline bool tcp_listening(int port, int pid = 0) {
  char hex[8];
  std::snprintf(hex, sizeof hex, ":%04X", port);
  const std::string net = pid > 0 ? "/proc/" + std::to_string(pid) + "/net/" : "/proc/net/";
  for (const char* f : {"tcp", "tcp6"}) {
    std::ifstream in(net + f);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream ls(line);
      std::string sl, local, remote, state;
      ls >> sl >> local >> remote >> state;
      if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == hex) return true;
    }
  }
  return false;
}

}  // namespace rocemu
