#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

namespace rocemu {
namespace {
std::mutex g_mutex;
spdlog::level::level_enum g_level = spdlog::level::warn;
}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& component) {
  std::lock_guard lock(g_mutex);
  auto log = spdlog::get(component);
  if (log) return log;
  log = spdlog::stderr_color_mt(component);
  log->set_level(g_level);
  log->set_pattern("%^%l%$ [%n] %v");
  return log;
}

void set_log_level(spdlog::level::level_enum level) {
  std::lock_guard lock(g_mutex);
  g_level = level;
  spdlog::apply_all([level](const std::shared_ptr<spdlog::logger>& l) { l->set_level(level); });
}

}  // namespace rocemu
