// Registered memory the engine reaches by load and store.
//
// A real NIC DMAs into the pinned pages of an MR. The engine is another
// process: without help it reaches them with process_vm_readv/writev, a
// system call and a page walk per access. Here, at ibv_reg_mr, the whole
// pages of the MR move onto a memfd: their content is copied into it,
// then it is mapped MAP_SHARED|MAP_FIXED over the same addresses with the
// same protection. The application sees the same bytes at the same
// addresses; the engine maps the same file (the fd goes with the
// registration request) and a DMA becomes one memcpy.
//
// Why this way: the engine cannot map another process's private memory,
// and the other ways to share it are worse. Asking for the memory up
// front (a custom allocator) changes the application; userfaultfd or
// /proc/PID/mem still cost a system call per access. Moving the pages is
// invisible to the application if done when nothing else can write them,
// so only this memory moves, everything else takes the fallback:
//   - private anonymous read-write memory ([heap] or unnamed mappings):
//     file-backed, shared, hugetlb, stack and special mappings do not;
//   - while the process has one thread (the caller: the provider has none
//     of its own) and signals are blocked, so no write can land between
//     the copy and the remap; the copy and the remap touch no heap memory;
//   - pages no live MR reaches through the fallback (the engine could be
//     writing them with process_vm_writev meanwhile).
// A later registration lying wholly inside moved pages that are still
// mapped from the same memfd shares them (a count per moved range); one
// overlapping them in part takes the fallback. When the last MR on a
// moved range is gone (deregistered, a dereg the dead engine answered
// with EIO, or its device closed), the pages move back to private
// anonymous memory with the same content and protection, so
// MADV_DONTNEED zero-fills and mremap grows them again, as allocators
// expect -- whatever other threads are doing meanwhile: the range is
// write-protected with userfaultfd first (a thread writing it waits in
// the kernel), copied into a new private mapping, which mremap puts in
// its place, and then the waiting writers are woken (they write the new
// pages). Without a userfaultfd that write-protects shmem (probed once:
// unprivileged_userfaultfd=0 and no CAP_SYS_PTRACE, or an old kernel),
// nothing moves: every MR takes the fallback.
//
// The memfd is sealed against shrinking and growing (the engine checks
// F_SEAL_SHRINK: a truncated file would make its copies fault). Moved
// pages are MADV_DONTFORK: a child never shares them with the parent
// (nor the engine). A fork() through libc gives the child a private copy
// of them instead, as the kernel does for pinned pages (and as
// ibv_is_fork_initialized() answers IBV_FORK_UNNEEDED): the parent's
// pthread_atfork handler snapshots them before the fork and the child's
// puts the snapshot in place. A child made with a raw clone() sees a hole
// there, as with rdma-core's ibv_fork_init().
//
// ROCEMU_DMA=process_vm moves nothing: every MR takes the fallback.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "nic/verbs/provider/provider.h"

namespace rocemu::provider {

namespace {

uint64_t page_size() {
  static const uint64_t size = uint64_t(sysconf(_SC_PAGESIZE));
  return size;
}

// A range of moved pages: [start, end) is the memfd's [0, end - start).
struct Region {
  uint64_t start, end;
  int fd;
  ino_t ino;
  uint32_t refs;
  bool pinned = false;  // keep_pages(): never moved back
};

// One line of /proc/self/maps.
struct Vma {
  uint64_t start = 0, end = 0, offset = 0;
  int prot = 0;
  bool priv = false;
  uint64_t ino = 0;
  std::string_view path;
};

bool parse_vma(std::string_view line, Vma& v) {
  const char* p = line.data();
  const char* e = p + line.size();
  auto r = std::from_chars(p, e, v.start, 16);
  if (r.ec != std::errc() || r.ptr == e || *r.ptr != '-') return false;
  r = std::from_chars(r.ptr + 1, e, v.end, 16);
  if (r.ec != std::errc() || e - r.ptr < 6 || r.ptr[0] != ' ') return false;
  p = r.ptr + 1;
  v.prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) | (p[2] == 'x' ? PROT_EXEC : 0);
  v.priv = p[3] == 'p';
  p += 4;
  while (p < e && *p == ' ') p++;
  r = std::from_chars(p, e, v.offset, 16);
  if (r.ec != std::errc()) return false;
  p = r.ptr;
  while (p < e && *p == ' ') p++;
  while (p < e && *p != ' ') p++;  // the device
  while (p < e && *p == ' ') p++;
  r = std::from_chars(p, e, v.ino, 10);
  if (r.ec != std::errc()) return false;
  p = r.ptr;
  while (p < e && *p == ' ') p++;
  v.path = std::string_view(p, size_t(e - p));
  return v.end > v.start;
}

bool read_file(const char* path, std::string& out) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[16384];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  close(fd);
  return !out.empty();
}

// The areas of this process meeting [first, last), clipped to it, in
// address order; false if it could not be read.
bool vmas_in(uint64_t first, uint64_t last, std::string& text, std::vector<Vma>& out) {
  out.clear();
  if (!read_file("/proc/self/maps", text)) return false;
  std::string_view all(text);
  while (!all.empty()) {
    const size_t nl = all.find('\n');
    const std::string_view line = all.substr(0, nl);
    all = nl == std::string_view::npos ? std::string_view{} : all.substr(nl + 1);
    Vma v;
    if (!parse_vma(line, v) || v.end <= first) continue;
    if (v.start >= last) break;
    if (v.start < first) {
      v.offset += first - v.start;
      v.start = first;
    }
    v.end = std::min(v.end, last);
    out.push_back(v);
  }
  return true;
}

int threads() {
  std::string s;
  if (!read_file("/proc/self/status", s)) return -1;
  const size_t at = s.find("\nThreads:");
  if (at == std::string::npos) return -1;
  return std::atoi(s.c_str() + at + 9);
}

bool disabled() {
  static const bool off = [] {
    const char* v = std::getenv(verbs::kDmaEnv);
    return v != nullptr && std::string_view(v) == "process_vm";
  }();
  return off;
}

std::mutex g_lock;
std::map<uint64_t, Region> g_regions;                     // by id
uint64_t g_next_id = 1;
std::vector<std::pair<uint64_t, uint64_t>> g_fallback;   // page ranges of live MRs on the fallback
std::once_flag g_atfork_once;

bool overlaps(uint64_t a0, uint64_t a1, uint64_t b0, uint64_t b1) { return a0 < b1 && b0 < a1; }

// True if [first, last) is mapped from `r`'s memfd, page for page.
bool still_mapped(const Region& r, uint64_t first, uint64_t last) {
  std::string text;
  std::vector<Vma> v;
  if (!vmas_in(first, last, text, v)) return false;
  uint64_t cur = first;
  for (const Vma& a : v) {
    if (a.start != cur || a.ino != r.ino || a.priv || a.offset != a.start - r.start) return false;
    cur = a.end;
  }
  return cur == last;
}

// All signals blocked for the life of the object.
struct SignalsBlocked {
  sigset_t old;
  SignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
  }
  ~SignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

constexpr int kMaxPieces = 64;
struct Piece {
  uint64_t start, len, offset;
  int prot;
};

// A private anonymous copy of fd's [offset, offset + len) with `prot`,
// somewhere; nullptr if it could not be made.
void* private_copy(int fd, uint64_t offset, uint64_t len, int prot) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  uint64_t got = 0;
  while (got < len) {
    const ssize_t k = pread(fd, static_cast<uint8_t*>(p) + got, len - got, off_t(offset + got));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      munmap(p, len);
      return nullptr;
    }
    got += uint64_t(k);
  }
  mprotect(p, len, prot);
  return p;
}

struct Moved {
  int fd = -1;         // the memfd, -1 if nothing is on it
  bool whole = false;  // false: some pieces are on it, the MR takes the fallback
};

// Moves [first, last) (the areas `v`, all private anonymous read-write)
// onto a new memfd. Between the copy and the last remap only the stack
// and the kernel are written.
Moved move_pages(uint64_t first, uint64_t last, const std::vector<Vma>& v) {
  Piece pieces[kMaxPieces];
  int n = 0;
  for (const Vma& a : v) {
    if (n > 0 && pieces[n - 1].prot == a.prot && pieces[n - 1].start + pieces[n - 1].len == a.start) {
      pieces[n - 1].len += a.end - a.start;
      continue;
    }
    if (n == kMaxPieces) return {};
    pieces[n++] = {a.start, a.end - a.start, a.start - first, a.prot};
  }
  const uint64_t bytes = last - first;
  const int fd = memfd_create("rocemu-mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return {};
  if (ftruncate(fd, off_t(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return {};
  }
  SignalsBlocked quiet;
  uint64_t done = 0;
  while (done < bytes) {
    const ssize_t k = pwrite(fd, reinterpret_cast<const void*>(first + done), bytes - done, off_t(done));
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      close(fd);  // nothing remapped yet
      return {};
    }
    done += uint64_t(k);
  }
  int mapped = 0;
  for (; mapped < n; mapped++) {
    const Piece& p = pieces[mapped];
    if (mmap(reinterpret_cast<void*>(p.start), p.len, p.prot, MAP_SHARED | MAP_FIXED, fd, off_t(p.offset)) ==
        MAP_FAILED)
      break;
  }
  if (mapped == n) {
    madvise(reinterpret_cast<void*>(first), bytes, MADV_DONTFORK);
    return {fd, true};
  }
  // Refused (out of mappings at vm.max_map_count: ENOMEM): the kernel
  // checks before it unmaps, so the piece is as it was -- unless it is a
  // hole now, which is then filled with its content. The pieces before it
  // go back to private memory; any that cannot stay on the memfd (the
  // caller keeps it, a later settle() retries).
  const Piece& f = pieces[mapped];
  void* hole = mmap(reinterpret_cast<void*>(f.start), f.len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (hole != MAP_FAILED) {
    uint64_t got = 0;
    while (got < f.len) {
      const ssize_t k = pread(fd, static_cast<uint8_t*>(hole) + got, f.len - got, off_t(f.offset + got));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      got += uint64_t(k);
    }
    mprotect(hole, f.len, f.prot);
  }
  bool left = false;
  for (int i = 0; i < mapped; i++) {
    const Piece& p = pieces[i];
    void* copy = private_copy(fd, p.offset, p.len, p.prot);
    if (copy != nullptr &&
        mremap(copy, p.len, p.len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(p.start)) != MAP_FAILED)
      continue;
    if (copy != nullptr) munmap(copy, p.len);
    madvise(reinterpret_cast<void*>(p.start), p.len, MADV_DONTFORK);  // as moved pages are
    left = true;
  }
  if (left) return {fd, false};
  close(fd);
  return {};
}

// The pieces of `r` still mapped from its memfd (the application may have
// unmapped or replaced some); false if there are too many to list.
bool mapped_pieces(const Region& r, Piece* out, int& n) {
  std::string text;
  std::vector<Vma> v;
  n = 0;
  if (!vmas_in(r.start, r.end, text, v)) return false;
  for (const Vma& a : v) {
    if (a.ino != r.ino || a.priv) continue;
    if (n == kMaxPieces) return false;
    out[n++] = {a.start, a.end - a.start, a.offset, a.prot};
  }
  return true;
}

// A userfaultfd able to write-protect shmem, or -1.
int open_uffd() {
  int fd = int(syscall(SYS_userfaultfd, O_CLOEXEC));
  if (fd < 0) {
    // Where unprivileged userfaultfd is off, /dev/userfaultfd may be open
    // to this user.
    const int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) return -1;
    fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC);
    close(dev);
    if (fd < 0) return -1;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = UFFD_FEATURE_WP_HUGETLBFS_SHMEM;
  if (ioctl(fd, UFFDIO_API, &api) != 0 || !(api.features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM)) {
    close(fd);
    return -1;
  }
  return fd;
}

bool wp_range(int uffd, uint64_t start, uint64_t len, bool on) {
  uffdio_writeprotect wp{};
  wp.range = {start, len};
  wp.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
  return ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
}

bool wp_register(int uffd, uint64_t start, uint64_t len) {
  uffdio_register reg{};
  reg.range = {start, len};
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  return ioctl(uffd, UFFDIO_REGISTER, &reg) == 0 && (reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT)) != 0;
}

// Whether pages can move back safely here: a memfd page registered and
// write-protected, then released.
bool can_move_back() {
  static const bool ok = [] {
    const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
    const int uffd = open_uffd();
    if (uffd < 0) return false;
    bool good = false;
    const int fd = memfd_create("rocemu-probe", MFD_CLOEXEC);
    if (fd >= 0 && ftruncate(fd, off_t(page)) == 0) {
      void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        const auto a = reinterpret_cast<uint64_t>(p);
        good = wp_register(uffd, a, page) && wp_range(uffd, a, page, true) && wp_range(uffd, a, page, false);
        munmap(p, page);
      }
    }
    if (fd >= 0) close(fd);
    close(uffd);
    return good;
  }();
  return ok;
}

// Puts private anonymous memory with the same content and protection in
// place of what is left of `r` on its memfd; false (nothing changed) if
// it cannot. Other threads may be writing the pages: they are
// write-protected from the copy until the new pages are in place.
bool move_back(const Region& r) {
  Piece pieces[kMaxPieces];
  int n = 0;
  if (!mapped_pieces(r, pieces, n)) return false;
  if (n == 0) return true;
  const int uffd = open_uffd();
  if (uffd < 0) return false;
  for (int i = 0; i < n; i++) {
    if (!wp_register(uffd, pieces[i].start, pieces[i].len)) {
      close(uffd);  // unregisters
      return false;
    }
  }
  SignalsBlocked quiet;
  // From here to the wake nothing may touch the heap: a thread waiting on
  // a write-protected page may hold the allocator's lock.
  int protected_ = 0;
  while (protected_ < n && wp_range(uffd, pieces[protected_].start, pieces[protected_].len, true)) protected_++;
  int moved = 0;
  if (protected_ == n) {
    for (; moved < n; moved++) {
      const Piece& p = pieces[moved];
      void* copy = private_copy(r.fd, p.offset, p.len, p.prot);
      if (copy == nullptr) break;
      if (mremap(copy, p.len, p.len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(p.start)) == MAP_FAILED) {
        munmap(copy, p.len);
        break;
      }
    }
  }
  // What did not move stays on the memfd, writable again.
  for (int i = moved; i < protected_; i++) wp_range(uffd, pieces[i].start, pieces[i].len, false);
  uffdio_range all{r.start, r.end - r.start};
  ioctl(uffd, UFFDIO_WAKE, &all);
  close(uffd);  // wakes whatever still waits, unregisters the rest
  return moved == n;
}

// ---- fork(): the child gets a private copy of the moved pages ----------

struct Snapshot {
  uint64_t start, len;
  void* copy;
};
std::vector<Snapshot> g_snapshots;

void before_fork() {
  g_lock.lock();
  g_snapshots.clear();
  for (const auto& [id, r] : g_regions) {
    Piece pieces[kMaxPieces];
    int n = 0;
    mapped_pieces(r, pieces, n);
    for (int i = 0; i < n; i++) {
      void* copy = private_copy(r.fd, pieces[i].offset, pieces[i].len, pieces[i].prot);
      if (copy != nullptr) g_snapshots.push_back({pieces[i].start, pieces[i].len, copy});
    }
  }
}

void after_fork_parent() {
  for (const Snapshot& s : g_snapshots) munmap(s.copy, s.len);
  g_snapshots.clear();
  g_lock.unlock();
}

void after_fork_child() {
  // The moved pages were not inherited (MADV_DONTFORK): their snapshot
  // takes their place.
  for (const Snapshot& s : g_snapshots)
    mremap(s.copy, s.len, s.len, MREMAP_MAYMOVE | MREMAP_FIXED, reinterpret_cast<void*>(s.start));
  g_snapshots.clear();
  // The child shares nothing with the engine.
  for (const auto& [id, r] : g_regions) close(r.fd);
  g_regions.clear();
  g_fallback.clear();
  g_lock.unlock();
}

}  // namespace

SharedPages share_pages(uint64_t addr, uint64_t length, bool may_move) {
  SharedPages out;
  const uint64_t page = page_size();
  const uint64_t first = addr & ~(page - 1);
  const uint64_t last = (addr + length + page - 1) & ~(page - 1);
  out.first = first;
  out.last = last;
  std::lock_guard lock(g_lock);
  auto fallback = [&] {
    g_fallback.emplace_back(first, last);
    return out;
  };
  if (!may_move || disabled() || last <= first || !can_move_back()) return fallback();
  for (auto it = g_regions.begin(); it != g_regions.end();) {
    Region& r = it->second;
    if (!overlaps(r.start, r.end, first, last)) {
      ++it;
      continue;
    }
    if (r.start <= first && last <= r.end && still_mapped(r, first, last)) {
      r.refs++;
      out.fd = r.fd;
      out.offset = first - r.start;
      out.region = it->first;
      return out;
    }
    // Moved pages no MR uses that the application has since unmapped
    // altogether: forgotten.
    Piece pieces[kMaxPieces];
    int n = 0;
    if (r.refs == 0 && mapped_pieces(r, pieces, n) && n == 0) {
      close(r.fd);
      it = g_regions.erase(it);
      continue;
    }
    return fallback();
  }
  for (const auto& [a, b] : g_fallback)
    if (overlaps(a, b, first, last)) return fallback();
  if (threads() != 1) return fallback();
  std::string text;
  std::vector<Vma> v;
  if (!vmas_in(first, last, text, v)) return fallback();
  uint64_t cur = first;
  for (const Vma& a : v) {
    const bool anonymous = a.path.empty() || a.path == "[heap]";
    if (a.start != cur || !a.priv || !anonymous || (a.prot & (PROT_READ | PROT_WRITE)) != (PROT_READ | PROT_WRITE))
      return fallback();
    cur = a.end;
  }
  if (cur != last) return fallback();
  text = std::string();  // nothing is freed while the pages move
  std::call_once(g_atfork_once, [] { pthread_atfork(before_fork, after_fork_parent, after_fork_child); });
  const Moved m = move_pages(first, last, v);
  if (m.fd < 0) return fallback();
  const int fd = m.fd;
  struct stat st {};
  fstat(fd, &st);
  const uint64_t id = g_next_id++;
  if (!m.whole) {
    // Some pages could not go back: kept, with no MR on them.
    g_regions[id] = Region{first, last, fd, st.st_ino, 0};
    return fallback();
  }
  g_regions[id] = Region{first, last, fd, st.st_ino, 1};
  out.fd = fd;
  out.offset = 0;
  out.region = id;
  return out;
}

namespace {

// Moved pages no MR uses go back to private memory unless an MR on the
// fallback still reaches them (the engine may be writing them with
// process_vm_writev): the last of those brings them back.
void settle(std::map<uint64_t, Region>::iterator it) {
  const Region& r = it->second;
  // Pinned pages stay a region (refs 0): fork() gives a child its copy of
  // them from the region (they are MADV_DONTFORK), as of any moved pages.
  if (r.refs > 0 || r.pinned) return;
  for (const auto& [a, b] : g_fallback)
    if (overlaps(a, b, r.start, r.end)) return;
  if (!move_back(r)) return;
  close(r.fd);
  g_regions.erase(it);
}

}  // namespace

void unshare_pages(const SharedPages& p) {
  std::lock_guard lock(g_lock);
  if (p.region == 0) {
    for (auto it = g_fallback.begin(); it != g_fallback.end(); ++it) {
      if (it->first == p.first && it->second == p.last) {
        g_fallback.erase(it);
        break;
      }
    }
    for (auto it = g_regions.begin(); it != g_regions.end();) {
      auto next = std::next(it);
      if (it->second.refs == 0 && overlaps(it->second.start, it->second.end, p.first, p.last)) settle(it);
      it = next;
    }
    return;
  }
  auto it = g_regions.find(p.region);
  if (it == g_regions.end()) return;  // a child's copy of the parent's MR
  if (--it->second.refs == 0) settle(it);
}

void keep_pages(const SharedPages& p) {
  {
    std::lock_guard lock(g_lock);
    auto it = g_regions.find(p.region);
    if (p.region != 0 && it != g_regions.end()) it->second.pinned = true;
  }
  unshare_pages(p);
}

}  // namespace rocemu::provider
