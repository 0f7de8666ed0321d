// The Prometheus endpoint of a running engine: GET /metrics on
// 127.0.0.1:PORT, served from its own thread. The exposition text is made
// on the engine thread (a job handed over with `post`, the text handed
// back under a lock), so the server never blocks the engine and the
// engine never waits for a client.
//
// Hostile clients get bounded resources: a request larger than
// kMaxRequest, a client slower than kClientDeadline (reading or writing)
// or one beyond kMaxClients is closed; nothing a client does stalls the
// others.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"

namespace rocemu::app {

class MetricsServer {
 public:
  // Runs a job on the engine thread (Engine::post).
  using Post = std::function<void(std::function<void()>)>;
  // Makes the exposition text (called on the engine thread).
  using Render = std::function<std::string()>;

  static constexpr size_t kMaxRequest = 8192;
  static constexpr size_t kMaxClients = 64;
  static constexpr std::chrono::milliseconds kClientDeadline{5000};
  // A render the engine has not answered within this: 503.
  static constexpr std::chrono::milliseconds kRenderDeadline{2000};

  MetricsServer(Post post, Render render);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Listens on 127.0.0.1:port (0: any free port) and starts serving.
  Status start(uint16_t port);
  uint16_t port() const;  // the port listened on
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rocemu::app
