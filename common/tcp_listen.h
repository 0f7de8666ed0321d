// Whether something listens on a local TCP port, read from /proc/net:
// how `rocemu demo` and the end-to-end tests know a perftest server is up.
#pragma once

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace rocemu {

inline bool tcp_listening(int port) {
  char hex[8];
  std::snprintf(hex, sizeof hex, ":%04X", port);
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(f);
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
