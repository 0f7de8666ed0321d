#include "apps/device_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace rocemu::app {
namespace {

Status sys_error(const std::string& what) { return Status::error(what + ": " + std::strerror(errno)); }

Status make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); i++) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + part);
  }
  return {};
}

struct Entry {
  std::string name;
  mode_t mode;
};

// Covers `dir` with a tmpfs holding what it held: each directory, device,
// socket or file bind-mounted from the original (reached through an fd
// opened before the cover), each symlink made again. `added` names the
// entries the caller adds itself (left out if present).
Status shadow_dir(const std::string& dir, const std::vector<std::string>& added, unsigned long mount_flags) {
  const int old = open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (old < 0) return sys_error("open " + dir);
  std::vector<Entry> entries;
  {
    const int list_fd = openat(old, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = list_fd >= 0 ? fdopendir(list_fd) : nullptr;
    if (d == nullptr) {
      if (list_fd >= 0) close(list_fd);
      close(old);
      return sys_error("list " + dir);
    }
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      bool skip = false;
      for (const auto& a : added) skip = skip || a == name;
      struct stat st {};
      if (skip || fstatat(old, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      entries.push_back({name, st.st_mode});
    }
    closedir(d);
  }
  if (mount("tmpfs", dir.c_str(), "tmpfs", mount_flags, "mode=0755") != 0) {
    const Status s = sys_error("mount a tmpfs on " + dir);
    close(old);
    return s;
  }
  const std::string from = "/proc/self/fd/" + std::to_string(old) + "/";
  for (const Entry& e : entries) {
    const std::string src = from + e.name;
    const std::string dst = dir + "/" + e.name;
    if (S_ISLNK(e.mode)) {
      char target[4096];
      const ssize_t n = readlinkat(old, e.name.c_str(), target, sizeof target - 1);
      if (n < 0) continue;  // gone meanwhile
      target[n] = '\0';
      if (symlink(target, dst.c_str()) != 0) return sys_error("symlink " + dst);
      continue;
    }
    if (S_ISDIR(e.mode)) {
      if (mkdir(dst.c_str(), e.mode & 07777) != 0) return sys_error("mkdir " + dst);
    } else {
      const int f = open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (f < 0) return sys_error("create " + dst);
      close(f);
    }
    if (mount(src.c_str(), dst.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
      if (errno == ENOENT) continue;  // gone meanwhile
      const Status s = sys_error("bind " + dir + "/" + e.name);
      close(old);
      return s;
    }
  }
  close(old);
  return {};
}

bool under(const std::string& path, const char* root) {
  const size_t n = std::strlen(root);
  return path.compare(0, n, root) == 0 && path.size() > n && path[n] == '/';
}

Status lay_out(const verbs::SysfsFile& f) {
  if (!under(f.path, verbs::kSysfsIbRoot) && !under(f.path, verbs::kSysfsVerbsRoot) && !under(f.path, verbs::kDevIbRoot))
    return Status::error("refusing a device file outside the device trees: " + f.path);
  const size_t slash = f.path.rfind('/');
  if (Status s = make_dirs(f.path.substr(0, slash)); !s.ok()) return s;
  if (f.kind == verbs::SysfsFile::Kind::kCharDevice) {
    unsigned major = 0, minor = 0;
    if (std::sscanf(f.content.c_str(), "%u:%u", &major, &minor) != 2) return Status::error("bad device " + f.path);
    if (mknod(f.path.c_str(), S_IFCHR | 0666, makedev(major, minor)) != 0) return sys_error("mknod " + f.path);
    chmod(f.path.c_str(), 0666);  // past the umask, as udev makes uverbs nodes
    return {};
  }
  const int fd = open(f.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
  if (fd < 0) return sys_error("create " + f.path);
  const bool ok = write(fd, f.content.data(), f.content.size()) == ssize_t(f.content.size());
  close(fd);
  return ok ? Status{} : sys_error("write " + f.path);
}

// /sys/class/infiniband as a FUSE mount the engine serves; false (and
// nothing mounted) where FUSE is not available.
Result<bool> mount_live_tree(const ServeSysfs& serve) {
  const int fuse = open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fuse < 0) return false;
  if (mkdir(verbs::kSysfsIbRoot, 0755) != 0 && errno != EEXIST) {
    const Status s = sys_error(std::string("mkdir ") + verbs::kSysfsIbRoot);
    close(fuse);
    return s;
  }
  const std::string opts = "fd=" + std::to_string(fuse) + ",rootmode=40755,user_id=" + std::to_string(getuid()) +
                           ",group_id=" + std::to_string(getgid()) + ",default_permissions,allow_other";
  if (mount("rocemu", verbs::kSysfsIbRoot, "fuse.rocemu", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
            opts.c_str()) != 0) {
    close(fuse);
    return false;
  }
  const Status served = serve(fuse);
  close(fuse);  // the engine holds its own copy now
  if (!served.ok()) return Status::error("the engine does not serve " + std::string(verbs::kSysfsIbRoot) + ": " +
                                         served.message());
  return true;
}

}  // namespace

Result<DeviceFiles> enter_device_namespace(const std::vector<verbs::SysfsFile>& files, const ServeSysfs& serve) {
  if (unshare(CLONE_NEWNS) != 0) {
    if (errno == EPERM) return DeviceFiles::kNotPermitted;
    return sys_error("unshare(CLONE_NEWNS)");
  }
  // Nothing done here may reach the rest of the system.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return sys_error("make / private");
  if (Status s = shadow_dir("/sys/class", {"infiniband", "infiniband_verbs"}, MS_NOSUID | MS_NODEV | MS_NOEXEC);
      !s.ok())
    return s;
  if (Status s = shadow_dir("/dev", {"infiniband"}, MS_NOSUID); !s.ok()) return s;
  auto live = mount_live_tree(serve);
  if (!live.ok()) return live.status();
  for (const verbs::SysfsFile& f : files) {
    if (live.value() && under(f.path, verbs::kSysfsIbRoot)) continue;  // the engine serves those
    if (Status s = lay_out(f); !s.ok()) return s;
  }
  return live.value() ? DeviceFiles::kLive : DeviceFiles::kSnapshot;
}

}  // namespace rocemu::app
