#include "common/private_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rocemu {

namespace {

std::string mode_text(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", unsigned(m & 07777));
  return b;
}

Status errno_status(const std::string& path) { return Status::error(path + ": " + std::strerror(errno)); }

}  // namespace

Status ensure_private_dir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return errno_status(dir);
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR)
      return Status::error(dir + ": not a directory (or a symbolic link): refusing to use it as the runtime directory");
    return errno_status(dir);
  }
  struct stat st{};
  const int r = fstat(fd, &st);
  close(fd);
  if (r != 0) return errno_status(dir);
  if (st.st_uid != geteuid())
    return Status::error(dir + ": owned by uid " + std::to_string(st.st_uid) + ", not this user (uid " +
                         std::to_string(geteuid()) + "): refusing to use it; remove it or set ROCEMU_RUNTIME_DIR");
  if (st.st_mode & 077)
    return Status::error(dir + ": mode " + mode_text(st.st_mode) +
                         " lets group or others in: refusing to use it; `chmod 700` it or remove it");
  return {};
}

Result<int> open_private_file(const std::string& path, bool truncate) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0600);
  if (fd < 0) {
    if (errno == ELOOP) return Status::error(path + ": a symbolic link: refusing to write through it");
    return errno_status(path);
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return Status::error(path + ": not a regular file of this user: refusing to write it");
  }
  return fd;
}

Status write_private_file(const std::string& path, const std::string& text) {
  auto fd = open_private_file(path, true);
  if (!fd.ok()) return fd.status();
  const ssize_t n = write(*fd, text.data(), text.size());
  const int e = errno;
  close(*fd);
  if (n != ssize_t(text.size())) return Status::error(path + ": " + std::strerror(n < 0 ? e : EIO));
  return {};
}

}  // namespace rocemu
