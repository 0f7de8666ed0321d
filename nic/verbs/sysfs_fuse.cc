#include "nic/verbs/sysfs_fuse.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rocemu::verbs {
namespace {

// Attributes and names may be cached for a second: the shape never
// changes. File contents never are (FOPEN_DIRECT_IO).
constexpr uint64_t kValidSeconds = 1;
// What sysfs says an attribute's size is, whatever it holds.
constexpr uint64_t kFileSize = 4096;

struct FuseReply {
  std::vector<uint8_t> bytes;
  explicit FuseReply(uint64_t unique, int error = 0) : bytes(sizeof(fuse_out_header)) {
    fuse_out_header h{};
    h.unique = unique;
    h.error = -error;
    std::memcpy(bytes.data(), &h, sizeof h);
  }
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = bytes.size();
    bytes.resize(at + n);
    std::memcpy(bytes.data() + at, p, n);
  }
  std::vector<uint8_t> done() {
    reinterpret_cast<fuse_out_header*>(bytes.data())->len = uint32_t(bytes.size());
    return std::move(bytes);
  }
};

}  // namespace

SysfsFuse::SysfsFuse(std::string root, const std::vector<SysfsFile>& shape, Source source)
    : root_(std::move(root)), source_(std::move(source)) {
  inodes_.push_back({root_, true, 1, {}});
  for (const SysfsFile& f : shape) {
    if (f.kind != SysfsFile::Kind::kFile || f.path.size() <= root_.size() + 1 ||
        f.path.compare(0, root_.size() + 1, root_ + "/") != 0)
      continue;
    // Every directory on the way, then the file.
    for (size_t i = root_.size() + 1; i < f.path.size(); i++)
      if (f.path[i] == '/') add(f.path.substr(0, i), true);
    add(f.path, false);
  }
}

uint64_t SysfsFuse::add(const std::string& path, bool dir) {
  const size_t slash = path.rfind('/');
  const std::string parent_path = path.substr(0, slash);
  uint64_t parent = 1;
  for (uint64_t id = 1; id <= inodes_.size(); id++)
    if (inodes_[id - 1].path == parent_path) parent = id;
  const std::string name = path.substr(slash + 1);
  auto& siblings = inodes_[parent - 1].children;
  if (auto it = siblings.find(name); it != siblings.end()) return it->second;
  inodes_.push_back({path, dir, parent, {}});
  const uint64_t id = inodes_.size();
  inodes_[parent - 1].children[name] = id;
  return id;
}

const SysfsFuse::Inode* SysfsFuse::inode(uint64_t id) const {
  return id >= 1 && id <= inodes_.size() ? &inodes_[id - 1] : nullptr;
}

namespace {

fuse_attr attr_of(uint64_t id, bool dir, size_t children) {
  fuse_attr a{};
  a.ino = id;
  a.mode = dir ? (S_IFDIR | 0755) : (S_IFREG | 0444);
  a.nlink = dir ? uint32_t(2 + children) : 1;
  a.size = dir ? 0 : kFileSize;
  a.blksize = 4096;
  return a;
}

}  // namespace

std::vector<uint8_t> SysfsFuse::handle(std::span<const uint8_t> request) {
  if (request.size() < sizeof(fuse_in_header)) return {};
  fuse_in_header in;
  std::memcpy(&in, request.data(), sizeof in);
  if (in.len != request.size()) return FuseReply(in.unique, EIO).done();
  const uint8_t* arg = request.data() + sizeof in;
  const size_t arg_len = request.size() - sizeof in;
  const Inode* node = inode(in.nodeid);
  switch (in.opcode) {
    case FUSE_INIT: {
      fuse_init_in init{};
      std::memcpy(&init, arg, std::min(arg_len, sizeof init));
      FuseReply r(in.unique);
      if (init.major != FUSE_KERNEL_VERSION) {
        // A kernel of another major version: say which one we speak.
        fuse_init_out out{};
        out.major = FUSE_KERNEL_VERSION;
        out.minor = FUSE_KERNEL_MINOR_VERSION;
        r.append(&out, FUSE_COMPAT_INIT_OUT_SIZE);
        return r.done();
      }
      fuse_init_out out{};
      out.major = FUSE_KERNEL_VERSION;
      out.minor = std::min<uint32_t>(init.minor, FUSE_KERNEL_MINOR_VERSION);
      out.max_readahead = 0;
      out.flags = 0;
      out.max_background = 1;
      out.congestion_threshold = 1;
      out.max_write = 4096;
      out.time_gran = 1;
      r.append(&out, out.minor < 23 ? FUSE_COMPAT_22_INIT_OUT_SIZE : sizeof out);
      return r.done();
    }
    case FUSE_DESTROY:
      destroyed_ = true;
      return FuseReply(in.unique).done();
    case FUSE_FORGET:
    case FUSE_BATCH_FORGET:
    case FUSE_INTERRUPT:
      return {};  // no reply
    case FUSE_LOOKUP: {
      if (node == nullptr || !node->dir) return FuseReply(in.unique, ENOTDIR).done();
      const std::string name(reinterpret_cast<const char*>(arg), strnlen(reinterpret_cast<const char*>(arg), arg_len));
      auto it = node->children.find(name);
      if (it == node->children.end()) return FuseReply(in.unique, ENOENT).done();
      const Inode& child = inodes_[it->second - 1];
      fuse_entry_out e{};
      e.nodeid = it->second;
      e.entry_valid = kValidSeconds;
      e.attr_valid = kValidSeconds;
      e.attr = attr_of(it->second, child.dir, child.children.size());
      FuseReply r(in.unique);
      r.append(&e, sizeof e);
      return r.done();
    }
    case FUSE_GETATTR: {
      if (node == nullptr) return FuseReply(in.unique, ENOENT).done();
      fuse_attr_out a{};
      a.attr_valid = kValidSeconds;
      a.attr = attr_of(in.nodeid, node->dir, node->children.size());
      FuseReply r(in.unique);
      r.append(&a, sizeof a);
      return r.done();
    }
    case FUSE_OPEN: {
      if (node == nullptr) return FuseReply(in.unique, ENOENT).done();
      if (node->dir) return FuseReply(in.unique, EISDIR).done();
      fuse_open_in o{};
      std::memcpy(&o, arg, std::min(arg_len, sizeof o));
      // Read-only, for root too (sysfs attributes without a store).
      if ((o.flags & O_ACCMODE) != O_RDONLY) return FuseReply(in.unique, EACCES).done();
      fuse_open_out out{};
      out.open_flags = FOPEN_DIRECT_IO;
      FuseReply r(in.unique);
      r.append(&out, sizeof out);
      return r.done();
    }
    case FUSE_OPENDIR: {
      if (node == nullptr) return FuseReply(in.unique, ENOENT).done();
      if (!node->dir) return FuseReply(in.unique, ENOTDIR).done();
      fuse_open_out out{};
      FuseReply r(in.unique);
      r.append(&out, sizeof out);
      return r.done();
    }
    case FUSE_READ: {
      if (node == nullptr || node->dir) return FuseReply(in.unique, EISDIR).done();
      fuse_read_in rd{};
      std::memcpy(&rd, arg, std::min(arg_len, sizeof rd));
      std::string content;
      bool found = false;
      for (const SysfsFile& f : source_()) {
        if (f.path == node->path) {
          content = f.content;
          found = true;
          break;
        }
      }
      if (!found) return FuseReply(in.unique, ENODEV).done();  // the NIC is gone
      FuseReply r(in.unique);
      if (rd.offset < content.size())
        r.append(content.data() + rd.offset, std::min<size_t>(rd.size, content.size() - rd.offset));
      return r.done();
    }
    case FUSE_READDIR: {
      if (node == nullptr || !node->dir) return FuseReply(in.unique, ENOTDIR).done();
      fuse_read_in rd{};
      std::memcpy(&rd, arg, std::min(arg_len, sizeof rd));
      struct Item {
        std::string name;
        uint64_t ino;
        bool dir;
      };
      std::vector<Item> items = {{".", in.nodeid, true}, {"..", node->parent, true}};
      for (const auto& [name, id] : node->children) items.push_back({name, id, inodes_[id - 1].dir});
      FuseReply r(in.unique);
      size_t used = 0;
      for (uint64_t i = rd.offset; i < items.size(); i++) {
        const Item& it = items[i];
        const size_t rec = FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + it.name.size());
        if (used + rec > rd.size) break;
        std::vector<uint8_t> buf(rec, 0);
        auto* d = reinterpret_cast<fuse_dirent*>(buf.data());
        d->ino = it.ino;
        d->off = i + 1;
        d->namelen = uint32_t(it.name.size());
        d->type = it.dir ? DT_DIR : DT_REG;
        std::memcpy(buf.data() + FUSE_NAME_OFFSET, it.name.data(), it.name.size());
        r.append(buf.data(), rec);
        used += rec;
      }
      return r.done();
    }
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
    case FUSE_FLUSH:
      return FuseReply(in.unique).done();
    case FUSE_STATFS: {
      fuse_statfs_out s{};
      s.st.bsize = 4096;
      s.st.frsize = 4096;
      s.st.namelen = 255;
      FuseReply r(in.unique);
      r.append(&s, sizeof s);
      return r.done();
    }
    case FUSE_ACCESS:
      // Mounted with default_permissions: the kernel checks the modes.
      return FuseReply(in.unique).done();
    default:
      // Writes, xattrs, links, locks...: a read-only tree without them.
      return FuseReply(in.unique, ENOSYS).done();
  }
}

}  // namespace rocemu::verbs
