#include "tests/e2e/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

extern char** environ;

namespace rocemu::test {

Process spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  Process p;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return p;
  p.pid = fork();
  if (p.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  p.out = fds[0];
  fcntl(p.out, F_SETFL, O_NONBLOCK);
  return p;
}

void pump(Process& p, std::chrono::milliseconds wait) {
  if (p.out < 0) return;
  pollfd pf{p.out, POLLIN, 0};
  if (::poll(&pf, 1, int(wait.count())) <= 0) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(p.out, buf, sizeof buf);
    if (n > 0) {
      p.output.append(buf, size_t(n));
      continue;
    }
    if (n == 0) {
      close(p.out);
      p.out = -1;
    }
    return;
  }
}

namespace {

bool reap(Process& p, bool block) {
  if (p.done) return true;
  int st = 0;
  const pid_t r = waitpid(p.pid, &st, block ? 0 : WNOHANG);
  if (r != p.pid) return false;
  p.done = true;
  p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

}  // namespace

int finish(Process& p, std::chrono::seconds deadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  // The pidfd becomes readable when the process exits.
  const int pidfd = int(syscall(SYS_pidfd_open, p.pid, 0));
  while (!reap(p, false)) {
    if (std::chrono::steady_clock::now() > end) {
      kill(p.pid, SIGKILL);
      reap(p, true);
      p.status = -1;
      break;
    }
    pollfd pf[2] = {{pidfd, POLLIN, 0}, {p.out, POLLIN, 0}};
    ::poll(pf, p.out >= 0 ? 2 : 1, 100);
    pump(p, std::chrono::milliseconds(0));
  }
  if (pidfd >= 0) close(pidfd);
  while (p.out >= 0) pump(p, std::chrono::milliseconds(100));
  return p.status;
}

bool wait_until(const std::function<bool()>& cond, std::chrono::seconds deadline, std::vector<Process*> watch) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return false;
    // Wake on output of a watched process, or re-check after 20 ms.
    std::vector<pollfd> pf;
    for (Process* p : watch)
      if (p->out >= 0) pf.push_back({p->out, POLLIN, 0});
    ::poll(pf.data(), pf.size(), 20);
    for (Process* p : watch) {
      pump(*p, std::chrono::milliseconds(0));
      reap(*p, false);
      if (p->done && !cond()) return cond();  // it exited: no point waiting
    }
  }
  return true;
}

std::pair<int, std::string> run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                                std::chrono::seconds deadline) {
  Process p = spawn(argv, env);
  const int st = finish(p, deadline);
  return {st, p.output};
}

}  // namespace rocemu::test
