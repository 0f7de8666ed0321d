// One spdlog logger per component ("engine", "nic", "switch", "verbs", ...).
// Per-packet tracing goes through ROCEMU_TRACE, compiled out unless
// ROCEMU_PACKET_TRACE is defined.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace rocemu {

std::shared_ptr<spdlog::logger> logger(const std::string& component);
void set_log_level(spdlog::level::level_enum level);

}  // namespace rocemu

#ifdef ROCEMU_PACKET_TRACE
#define ROCEMU_TRACE(log, ...) (log)->trace(__VA_ARGS__)
#else
#define ROCEMU_TRACE(log, ...) \
  do {                         \
  } while (0)
#endif
