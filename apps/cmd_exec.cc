// rocemu exec NODE -- PROGRAM ARGS: run an unmodified verbs program on a
// NIC of the running engine, with librocemu-verbs.so preloaded.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "apps/commands.h"
#include "apps/device_files.h"
#include "apps/runtime.h"
#include "nic/verbs/protocol.h"
#include "nic/verbs/sysfs_tree.h"

namespace rocemu::app {

int cmd_exec(const std::string& node, const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::fprintf(stderr, "usage: rocemu exec NODE -- PROGRAM [ARGS...]\n");
    return 2;
  }
  const RuntimePaths paths = runtime_paths();
  std::string nodes;
  if (engine_command(paths, {"nodes"}, nodes) != 0) {
    std::fprintf(stderr, "rocemu exec: no rocemu engine is running (socket %s); start one with `rocemu up`\n",
                 paths.socket.c_str());
    return 1;
  }
  std::istringstream in(nodes);
  std::string name, kind, nics;
  bool found = false;
  while (in >> name >> kind) {
    if (kind != "nic") continue;
    nics += (nics.empty() ? "" : ", ") + name;
    found = found || name == node;
  }
  if (!found) {
    std::fprintf(stderr, "rocemu exec: the engine has no NIC named '%s' (NICs: %s)\n", node.c_str(), nics.c_str());
    return 1;
  }
  const std::string provider = provider_path();
  if (access(provider.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "rocemu exec: cannot find librocemu-verbs.so at %s (set ROCEMU_PROVIDER)\n", provider.c_str());
    return 1;
  }
  // The device files UCX, ibstat and friends look for, in a mount
  // namespace of the program's own (apps/device_files.h).
  std::string tree_text;
  if (const int e = engine_command(paths, {"sysfs", node}, tree_text); e != 0) {
    std::fprintf(stderr, "rocemu exec: the engine gave no device files for %s: %s\n", node.c_str(), tree_text.c_str());
    return 1;
  }
  const auto tree = verbs::parse_sysfs(tree_text);
  if (!tree) {
    std::fprintf(stderr, "rocemu exec: the engine's device files for %s do not parse\n", node.c_str());
    return 1;
  }
  const DevicePlacement placed = enter_device_namespace(*tree, [&](int fuse_fd) -> Status {
    std::string why;
    if (engine_serve_sysfs(paths, node, fuse_fd, why) != 0) return Status::error(why);
    return {};
  });
  switch (placed.kind) {
    case DeviceFiles::kLive:
      break;
    case DeviceFiles::kSnapshot:
      std::fprintf(stderr, "rocemu exec: %s: /sys/class/infiniband shows %s as it was at start\n",
                   placed.why.c_str(), node.c_str());
      break;
    case DeviceFiles::kNotPermitted:
      std::fprintf(stderr,
                   "rocemu exec: no /dev/infiniband or /sys/class/infiniband for %s (a private mount namespace needs "
                   "root or CAP_SYS_ADMIN); verbs calls work, programs that look for these files (UCX) find no "
                   "device\n",
                   node.c_str());
      break;
    case DeviceFiles::kFailed:
      std::fprintf(stderr,
                   "rocemu exec: no /dev/infiniband or /sys/class/infiniband for %s (%s); verbs calls work, programs "
                   "that look for these files (UCX) find no device\n",
                   node.c_str(), placed.why.c_str());
      break;
  }
  std::string preload = provider;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv(verbs::kNodeEnv, node.c_str(), 1);
  setenv(verbs::kSocketEnv, paths.socket.c_str(), 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "rocemu exec: %s: %s\n", argv[0].c_str(), std::strerror(errno));
  return 127;
}

}  // namespace rocemu::app
