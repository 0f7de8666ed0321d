// The device files a program sees for the emulated NIC, as the kernel
// would show them for a RoCE device: /sys/class/infiniband/<dev>/...,
// /sys/class/infiniband_verbs/uverbsN/... and /dev/infiniband/uverbsN.
// The engine describes them (sysfs.h); `rocemu exec` lays out the static
// ones in the program's private mount namespace and mounts a FUSE file
// system the engine serves on /sys/class/infiniband, so that every read
// of a counter or of the port state is answered with the NIC's value at
// that moment, as sysfs does (sysfs_fuse.h). This header is the
// description and its wire form, shared by both sides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rocemu::verbs {

struct SysfsFile {
  enum class Kind : char { kFile = 'F', kCharDevice = 'C' };
  Kind kind = Kind::kFile;
  std::string path;     // absolute
  std::string content;  // a file's bytes; a device's "MAJOR:MINOR"
};

// The roots a tree lives under; `rocemu exec` shadows their parents.
inline constexpr const char* kSysfsIbRoot = "/sys/class/infiniband";
inline constexpr const char* kSysfsVerbsRoot = "/sys/class/infiniband_verbs";
inline constexpr const char* kDevIbRoot = "/dev/infiniband";

// "K PATH LENGTH\n" then LENGTH bytes, per file.
inline std::string serialize(const std::vector<SysfsFile>& files) {
  std::string out;
  for (const SysfsFile& f : files) {
    out += char(f.kind);
    out += ' ';
    out += f.path;
    out += ' ';
    out += std::to_string(f.content.size());
    out += '\n';
    out += f.content;
  }
  return out;
}

inline std::optional<std::vector<SysfsFile>> parse_sysfs(std::string_view in) {
  std::vector<SysfsFile> files;
  while (!in.empty()) {
    const size_t eol = in.find('\n');
    if (eol == std::string_view::npos || eol < 5 || in[1] != ' ') return std::nullopt;
    const std::string_view head = in.substr(0, eol);
    const size_t sp = head.rfind(' ');
    if (sp <= 2) return std::nullopt;
    SysfsFile f;
    if (head[0] == 'F') f.kind = SysfsFile::Kind::kFile;
    else if (head[0] == 'C') f.kind = SysfsFile::Kind::kCharDevice;
    else return std::nullopt;
    f.path = std::string(head.substr(2, sp - 2));
    size_t len = 0;
    for (char c : head.substr(sp + 1)) {
      if (c < '0' || c > '9' || len > (1u << 20)) return std::nullopt;
      len = len * 10 + size_t(c - '0');
    }
    in.remove_prefix(eol + 1);
    if (len > in.size() || f.path.empty() || f.path[0] != '/' || f.path.find("/../") != std::string::npos)
      return std::nullopt;
    f.content = std::string(in.substr(0, len));
    in.remove_prefix(len);
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace rocemu::verbs
