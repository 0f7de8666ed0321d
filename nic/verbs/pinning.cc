#include "nic/verbs/pinning.h"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

namespace rocemu::verbs {

namespace {

constexpr uint64_t kPage = 4096;

struct Vma {
  uint64_t start = 0, end = 0;
  bool read = false, write = false;
};

// "start-end perms ..." -> a Vma; false if the line is not one.
bool parse_vma(std::string_view line, Vma& v) {
  const char* p = line.data();
  const char* e = p + line.size();
  auto r = std::from_chars(p, e, v.start, 16);
  if (r.ec != std::errc() || r.ptr == e || *r.ptr != '-') return false;
  r = std::from_chars(r.ptr + 1, e, v.end, 16);
  if (r.ec != std::errc() || e - r.ptr < 3 || r.ptr[0] != ' ') return false;
  v.read = r.ptr[1] == 'r';
  v.write = r.ptr[2] == 'w';
  return v.end > v.start;
}

}  // namespace

bool mr_writable(int access) {
  return access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
}

int check_pinnable_in(std::string_view maps, uint64_t addr, uint64_t length, bool writable) {
  if (length == 0 || addr + length < addr) return EINVAL;
  uint64_t cur = addr & ~(kPage - 1);  // the first page not yet found pinnable
  const uint64_t end = addr + length;
  // The maps file lists areas in address order.
  while (!maps.empty() && cur < end) {
    const size_t nl = maps.find('\n');
    const std::string_view line = maps.substr(0, nl);
    maps = nl == std::string_view::npos ? std::string_view{} : maps.substr(nl + 1);
    Vma v;
    if (!parse_vma(line, v) || v.end <= cur) continue;
    if (v.start > cur) return EFAULT;  // a hole
    if (!v.read || (writable && !v.write)) return EFAULT;
    cur = v.end;
  }
  return cur >= end ? 0 : EFAULT;
}

int check_pinnable(int proc_dir_fd, uint64_t addr, uint64_t length, bool writable) {
  const int fd = openat(proc_dir_fd, "maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? ESRCH : errno;
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  const int e = n < 0 ? errno : 0;
  close(fd);
  if (e != 0) return e;
  return check_pinnable_in(text, addr, length, writable);
}

}  // namespace rocemu::verbs
