#include "apps/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace rocemu::app {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

// Named, not anonymous: MetricsServer::Impl (external linkage) holds them,
// which gcc refuses (-Wsubobject-linkage) when a unity build includes this
// file into another.
namespace metrics_server_detail {

// What the engine thread hands back: the text of one render, by
// generation. Shared with the jobs in flight, so a job the engine runs
// after the server is gone writes into it harmlessly.
struct Handover {
  std::mutex m;
  uint64_t gen = 0;
  std::string text;
  int wake_fd = -1;  // eventfd: a render finished (or stop)
  ~Handover() {
    if (wake_fd >= 0) close(wake_fd);
  }
  void wake() const {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = write(wake_fd, &one, sizeof one);
  }
};

struct Client {
  enum class State { kReading, kWaiting, kWriting } state = State::kReading;
  int fd = -1;
  std::string in;
  std::string out;
  size_t sent = 0;
  bool head = false;  // HEAD: headers only
  Clock::time_point deadline;
};

}  // namespace metrics_server_detail

namespace {

std::string response(int code, const char* reason, const std::string& type, const std::string& body, bool head) {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
                  "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

}  // namespace

struct MetricsServer::Impl {
  using Client = metrics_server_detail::Client;
  using Handover = metrics_server_detail::Handover;

  Post post;
  Render render;
  int listen_fd = -1;
  uint16_t port = 0;
  std::shared_ptr<Handover> handover = std::make_shared<Handover>();
  std::atomic<bool> stopping{false};
  std::thread thread;
  std::list<Client> clients;
  uint64_t render_gen = 0;
  bool render_in_flight = false;
  Clock::time_point render_started;

  void reply(Client& c, std::string text) {
    c.out = std::move(text);
    c.sent = 0;
    c.state = Client::State::kWriting;
  }

  void start_render() {
    if (render_in_flight) return;
    render_in_flight = true;
    render_started = Clock::now();
    const uint64_t gen = ++render_gen;
    post([h = handover, r = render, gen] {
      std::string text = r();
      {
        std::lock_guard<std::mutex> lock(h->m);
        h->gen = gen;
        h->text = std::move(text);
      }
      h->wake();
    });
  }

  // A whole request is in c.in: route it.
  void route(Client& c) {
    const size_t eol = c.in.find_first_of("\r\n");
    const std::string line = c.in.substr(0, eol);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
    if (sp1 == std::string::npos) {
      reply(c, response(400, "Bad Request", "text/plain", "bad request\n", false));
      return;
    }
    const std::string method = line.substr(0, sp1);
    std::string path = line.substr(sp1 + 1, sp2 == std::string::npos ? std::string::npos : sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    c.head = method == "HEAD";
    if (method != "GET" && method != "HEAD") {
      reply(c, response(405, "Method Not Allowed", "text/plain", "GET /metrics\n", false));
    } else if (path == "/metrics") {
      c.state = Client::State::kWaiting;
      start_render();
    } else if (path == "/") {
      reply(c, response(200, "OK", "text/plain", "rocemu: Prometheus metrics at /metrics\n", c.head));
    } else {
      reply(c, response(404, "Not Found", "text/plain", "not found; try /metrics\n", c.head));
    }
  }

  void on_readable(Client& c) {
    char buf[4096];
    for (;;) {
      const ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) {
        c.state = Client::State::kWriting;  // gone: close
        c.out.clear();
        return;
      }
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          c.state = Client::State::kWriting;
          c.out.clear();
        }
        return;
      }
      c.in.append(buf, size_t(n));
      if (c.in.find("\r\n\r\n") != std::string::npos || c.in.find("\n\n") != std::string::npos) {
        route(c);
        return;
      }
      if (c.in.size() > kMaxRequest) {
        reply(c, response(431, "Request Header Fields Too Large", "text/plain", "request too large\n", false));
        return;
      }
    }
  }

  // False when the client is done (sent all, or failed).
  bool on_writable(Client& c) {
    while (c.sent < c.out.size()) {
      const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      c.sent += size_t(n);
    }
    return false;
  }

  void on_rendered() {
    uint64_t v = 0;
    [[maybe_unused]] ssize_t r = read(handover->wake_fd, &v, sizeof v);
    std::string text;
    {
      std::lock_guard<std::mutex> lock(handover->m);
      if (!render_in_flight || handover->gen != render_gen) return;  // stop, or a render given up on
      text = std::move(handover->text);
    }
    render_in_flight = false;
    for (Client& c : clients)
      if (c.state == Client::State::kWaiting)
        reply(c, response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", text, c.head));
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or out of descriptors: the next round
      if (clients.size() >= kMaxClients) {
        close(fd);
        continue;
      }
      Client c;
      c.fd = fd;
      c.deadline = Clock::now() + kClientDeadline;
      clients.push_back(std::move(c));
    }
  }

  void loop() {
    std::vector<pollfd> fds;
    std::vector<Client*> owners;
    while (!stopping.load()) {
      fds.clear();
      owners.clear();
      fds.push_back({listen_fd, POLLIN, 0});
      fds.push_back({handover->wake_fd, POLLIN, 0});
      Clock::time_point next = Clock::now() + std::chrono::seconds(1);
      if (render_in_flight) next = std::min(next, render_started + kRenderDeadline);
      for (Client& c : clients) {
        next = std::min(next, c.deadline);
        if (c.state == Client::State::kWaiting) continue;
        fds.push_back({c.fd, short(c.state == Client::State::kReading ? POLLIN : POLLOUT), 0});
        owners.push_back(&c);
      }
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
      poll(fds.data(), fds.size(), int(std::max<int64_t>(0, wait) + 1));
      if (stopping.load()) break;
      if (fds[1].revents & POLLIN) on_rendered();
      for (size_t i = 0; i < owners.size(); i++) {
        Client& c = *owners[i];
        const short ev = fds[i + 2].revents;
        if (ev == 0) continue;
        if (c.state == Client::State::kReading) {
          on_readable(c);
          if (c.state == Client::State::kWriting && !on_writable(c)) c.deadline = {};  // done: close below
        } else if (!on_writable(c)) {
          c.deadline = {};
        }
      }
      if (fds[0].revents & POLLIN) accept_all();
      const auto now = Clock::now();
      if (render_in_flight && now >= render_started + kRenderDeadline) {
        render_in_flight = false;  // the engine did not answer: give up on this render
        for (Client& c : clients)
          if (c.state == Client::State::kWaiting)
            reply(c, response(503, "Service Unavailable", "text/plain", "the engine did not answer\n", c.head));
      }
      for (auto it = clients.begin(); it != clients.end();) {
        if (now >= it->deadline) {
          close(it->fd);
          it = clients.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (Client& c : clients) close(c.fd);
    clients.clear();
  }
};

MetricsServer::MetricsServer(Post post, Render render) : impl_(std::make_unique<Impl>()) {
  impl_->post = std::move(post);
  impl_->render = std::move(render);
}

MetricsServer::~MetricsServer() { stop(); }

Status MetricsServer::start(uint16_t port) {
  Impl& s = *impl_;
  s.handover->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s.handover->wake_fd < 0) return Status::error(std::string("metrics: eventfd: ") + std::strerror(errno));
  s.listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s.listen_fd < 0) return Status::error(std::string("metrics: socket: ") + std::strerror(errno));
  const int one = 1;
  setsockopt(s.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only
  if (bind(s.listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(s.listen_fd, 128) != 0) {
    const int e = errno;
    close(s.listen_fd);
    s.listen_fd = -1;
    return Status::error("metrics: 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(e));
  }
  socklen_t len = sizeof addr;
  getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s.port = ntohs(addr.sin_port);
  s.thread = std::thread([&s] { s.loop(); });
  return {};
}

uint16_t MetricsServer::port() const { return impl_->port; }

void MetricsServer::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  s.stopping.store(true);
  s.handover->wake();
  s.thread.join();
  close(s.listen_fd);
  s.listen_fd = -1;
}

}  // namespace rocemu::app
