// The FUSE file system the engine serves on /sys/class/infiniband in a
// program's mount namespace (`rocemu exec` mounts it and hands the
// /dev/fuse descriptor over): a read-only tree of the NIC's device files
// whose every read is answered from the NIC as it is at that moment, as
// sysfs regenerates an attribute on each read. So `ib_write_bw -W`, which
// opens a counter once and reads it again after lseek(0), sees live
// values, and so does any reader (fread, realpath, Go), with no
// interposition.
//
// This class is the protocol only: requests in, replies out, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "nic/verbs/sysfs_tree.h"

namespace rocemu::verbs {

class SysfsFuse {
 public:
  // The tree now (every file under `root`); called for each read.
  using Source = std::function<std::vector<SysfsFile>()>;
  // `root` is the mount point: the tree's paths below it make the file
  // system's shape, fixed from `shape` (the set of files does not change).
  SysfsFuse(std::string root, const std::vector<SysfsFile>& shape, Source source);

  // One request as read from /dev/fuse; the reply to write, or nothing
  // for the requests that take none (FORGET).
  std::vector<uint8_t> handle(std::span<const uint8_t> request);
  // The kernel said DESTROY: the mount is gone.
  bool destroyed() const { return destroyed_; }
  // The size of buffer a read of /dev/fuse needs.
  static constexpr size_t kReadBuffer = 128 * 1024 + 4096;

 private:
  struct Inode {
    std::string path;  // absolute
    bool dir = false;
    uint64_t parent = 1;
    std::map<std::string, uint64_t> children;
  };
  uint64_t add(const std::string& path, bool dir);
  const Inode* inode(uint64_t id) const;

  std::string root_;
  std::vector<Inode> inodes_;  // nodeid - 1
  Source source_;
  bool destroyed_ = false;
};

}  // namespace rocemu::verbs
