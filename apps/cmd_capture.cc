// rocemu capture PORT|LINK -w FILE [-c COUNT] [--duration D] [-s SNAPLEN],
// rocemu capture stop [ID], rocemu capture list.
//
// The engine writes the pcapng itself as it goes. `-w -` streams it to this
// command's standard output: the command makes a FIFO in the private
// runtime directory, the engine writes into it without ever waiting (a
// reader too slow loses frames, counted), and the command copies it out
// until the capture ends (its count or duration, `capture stop`, Ctrl-C).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "apps/commands.h"
#include "apps/engine_handlers.h"
#include "apps/ports.h"
#include "apps/runtime.h"
#include "common/config/config.h"

namespace rocemu::app {
namespace {

constexpr const char* kUsage =
    "usage: rocemu capture PORT|LINK -w FILE|- [-c COUNT] [--duration TIME] [-s SNAPLEN] | stop [ID] | list";

// Every header of a RoCE frame (Ethernet, VLAN, IPv6, UDP, BTH and the
// longest extension header, AtomicETH) fits; the payload mostly does not.
constexpr uint32_t kDefaultSnaplen = 128;

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

struct CaptureArgs {
  std::string target, file;
  CaptureOptions opts;
};

Status parse_args(const std::vector<std::string>& w, CaptureArgs& a) {
  a.opts.snaplen = kDefaultSnaplen;
  for (size_t i = 1; i < w.size(); i++) {
    const std::string& k = w[i];
    const bool has_value = i + 1 < w.size();
    if (k == "-w" || k == "-c" || k == "--duration" || k == "-s") {
      if (!has_value) return Status::error(k + " needs a value");
      const std::string v = w[++i];
      if (k == "-w") {
        a.file = v;
        continue;
      }
      if (k == "--duration") {
        if (v.find_first_not_of("0123456789.") == std::string::npos)
          return Status::error("--duration: '" + v + "' needs a unit (e.g. " + v + "s, " + v + "ms)");
        const auto d = config::parse_duration(v);
        if (!d || d->count() <= 0) return Status::error("--duration: '" + v + "' is not a time (e.g. 2s, 500ms)");
        a.opts.duration = *d;
        continue;
      }
      char* end = nullptr;
      const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || end != v.c_str() + v.size() || v[0] == '-')
        return Status::error(k + ": '" + v + "' is not a number");
      if (k == "-c") {
        if (n == 0) return Status::error("-c: the count must be at least 1");
        a.opts.count = n;
      } else {
        if (n != 0 && n < 54) return Status::error("-s: " + v + " bytes would cut the BTH (at least 54, or 0: all)");
        if (n > 262144) return Status::error("-s: " + v + " is above 262144");
        a.opts.snaplen = uint32_t(n);
      }
      continue;
    }
    if (!k.empty() && k[0] == '-') return Status::error("unknown option '" + k + "'");
    if (!a.target.empty()) return Status::error("unexpected '" + k + "' (one port or link)");
    a.target = k;
  }
  if (a.target.empty()) return Status::error("which port or link? (" + std::string(kUsage) + ")");
  if (a.file.empty()) return Status::error("-w FILE is needed (or -w - for standard output)");
  return {};
}

std::string describe(const Engine::CaptureInfo& c) {
  return "capture " + std::to_string(c.id) + ": " + c.point + " to " + c.path + ", " + std::to_string(c.packets) +
         " frames (" + std::to_string(c.dropped) + " dropped)";
}

int stop(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  if (w.size() > 3) {
    out = "usage: rocemu capture stop [ID]";
    return EINVAL;
  }
  const auto all = engine.captures();
  for (const auto& c : all) {
    if (w.size() == 3 && std::to_string(c.id) != w[2]) continue;
    engine.stop_capture(c.id);
    out += (out.empty() ? "" : "\n") + describe(c) + ", stopped";
  }
  if (!out.empty()) return 0;
  std::vector<std::string> ids;
  for (const auto& c : all) ids.push_back(std::to_string(c.id));
  out = w.size() == 3 ? "no capture " + w[2] + " (captures: " + (ids.empty() ? "none" : joined(ids)) + ")"
                      : "no capture is running";
  return w.size() == 3 ? EINVAL : 0;
}

// Copies the FIFO to standard output until the engine closes it; Ctrl-C
// (or a reader of our output that goes away) stops the capture first.
int stream(const RuntimePaths& paths, int fifo, const std::string& id) {
  struct sigaction sa{};
  sa.sa_handler = on_interrupt;  // no SA_RESTART: read() returns
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  fcntl(fifo, F_SETFL, fcntl(fifo, F_GETFL) & ~O_NONBLOCK);
  bool stopped = false;
  auto stop_it = [&] {
    if (stopped) return;
    stopped = true;
    std::string out;
    engine_command(paths, {"capture", "stop", id}, out);
  };
  char buf[65536];
  for (;;) {
    if (g_interrupted) stop_it();
    const ssize_t n = read(fifo, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (ssize_t off = 0; off < n;) {
      const ssize_t m = write(STDOUT_FILENO, buf + off, size_t(n - off));
      if (m < 0 && errno == EINTR) continue;
      if (m <= 0) {
        stop_it();  // our reader went: nothing more to copy
        close(fifo);
        return 0;
      }
      off += m;
    }
  }
  close(fifo);
  return 0;
}

}  // namespace

int handle_capture(Engine& engine, const std::vector<std::string>& w, std::string& out) {
  if (w.size() >= 2 && w[1] == "stop") return stop(engine, w, out);
  if (w.size() == 2 && w[1] == "list") {
    for (const auto& c : engine.captures()) out += describe(c) + "\n";
    if (out.empty()) out = "no capture is running";
    return 0;
  }
  CaptureArgs a;
  if (Status s = parse_args(w, a); !s.ok()) {
    out = s.message();
    return EINVAL;
  }
  Result<uint32_t> id = Status::error("");
  std::string point;
  if (InternalLink* l = engine.find_link(a.target)) {
    point = l->name();
    id = engine.capture_link(*l, a.file, a.opts);
  } else {
    const auto ref = resolve_port(engine, a.target, out);
    if (!ref) return EINVAL;
    point = ref->label;
    id = engine.capture_port(*ref->node, ref->port, a.file, a.opts);
  }
  if (!id.ok()) {
    out = id.status().message();
    return EIO;
  }
  out = "capture " + std::to_string(id.value()) + ": " + point + " to " + a.file + " (snaplen " +
        (a.opts.snaplen == 0 ? std::string("all") : std::to_string(a.opts.snaplen)) + ")";
  return 0;
}

int cmd_capture(std::vector<std::string> words) {
  const RuntimePaths paths = runtime_paths();
  size_t w_at = 0;
  for (size_t i = 1; i + 1 < words.size(); i++)
    if (words[i] == "-w") w_at = i + 1;
  int fifo = -1;
  std::string fifo_path;
  if (w_at != 0 && words[w_at] == "-") {
    if (!running_engine(paths)) {
      std::fprintf(stderr, "rocemu capture: no rocemu engine is running (socket %s); start one with `rocemu up`\n",
                   paths.socket.c_str());
      return 1;
    }
    fifo_path = paths.dir + "/capture-" + std::to_string(getpid()) + ".fifo";
    unlink(fifo_path.c_str());
    if (mkfifo(fifo_path.c_str(), 0600) != 0 ||
        (fifo = open(fifo_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
      std::fprintf(stderr, "rocemu capture: %s: %s\n", fifo_path.c_str(), std::strerror(errno));
      unlink(fifo_path.c_str());
      return 1;
    }
    words[w_at] = fifo_path;
  } else if (w_at != 0 && !words[w_at].empty() && words[w_at][0] != '/') {
    // The engine runs elsewhere: a relative path is this directory's.
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof cwd) != nullptr) words[w_at] = std::string(cwd) + "/" + words[w_at];
  }
  std::string out;
  const int e = engine_command(paths, words, out);
  if (!fifo_path.empty()) unlink(fifo_path.c_str());
  if (e != 0) {
    std::fprintf(stderr, "rocemu capture: %s\n", out.c_str());
    if (fifo >= 0) close(fifo);
    return e == EINVAL || e == ENODEV ? 2 : 1;
  }
  if (fifo < 0) {
    std::printf("%s\n", out.c_str());
    return 0;
  }
  std::fprintf(stderr, "rocemu: %s\n", out.c_str());
  // "capture N: ..."
  const std::string id = out.substr(8, out.find(':') - 8);
  return stream(paths, fifo, id);
}

}  // namespace rocemu::app
