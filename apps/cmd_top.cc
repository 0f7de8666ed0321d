// rocemu top: the live view, refreshed every -d seconds (as top(1)).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "apps/commands.h"
#include "apps/runtime.h"
#include "apps/top.h"

namespace rocemu::app {

int cmd_top(const TopOptions& o) {
  const RuntimePaths paths = runtime_paths();
  std::string err;
  auto before = fetch_snapshot(paths, err);
  if (!before) {
    std::fprintf(stderr, "rocemu top: %s\n", err.c_str());
    return 1;
  }
  // Redraw in place on a terminal; frames one after another otherwise.
  const bool redraw = !o.once && isatty(STDOUT_FILENO);
  const int frames = o.once ? 1 : o.count;  // 0: until interrupted
  for (int i = 0; frames == 0 || i < frames; i++) {
    std::this_thread::sleep_for(std::chrono::duration<double>(o.delay_s));
    auto now = fetch_snapshot(paths, err);
    if (!now) {
      std::fprintf(stderr, "rocemu top: %s\n", err.c_str());
      return 1;
    }
    std::string frame = render_top(*now, *before);
    if (redraw) frame = "\033[H\033[2J" + frame;
    std::fputs(frame.c_str(), stdout);
    if (!redraw && (frames == 0 || i + 1 < frames)) std::fputs("\n", stdout);
    std::fflush(stdout);
    before = std::move(now);
  }
  return 0;
}

}  // namespace rocemu::app
