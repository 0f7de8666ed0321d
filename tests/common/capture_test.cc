// pcapng capture into a stream whose reader is slow (common/engine/capture.h):
// the writer never waits, keeps at most its bound, drops whole frames and
// counts them, and the reader only ever sees whole blocks.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "common/engine/capture.h"

using namespace rocemu;

namespace {

// Everything the FIFO holds now.
void drain(int fd, std::vector<uint8_t>& into) {
  uint8_t buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return;
    into.insert(into.end(), buf, buf + n);
  }
}

uint32_t u32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

}  // namespace

TEST_CASE("A capture into a pipe never waits for its reader: it drops whole frames and counts them",
          "[unit][engine]") {
  const std::string path = std::string(ROCEMU_BINARY_DIR) + "/capture-test.fifo";
  unlink(path.c_str());
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  const int reader = open(path.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  CaptureOptions opts;
  opts.snaplen = 0;
  opts.max_buffer = 256u << 10;
  auto cap = Capture::open(path, 0, opts);
  REQUIRE(cap.ok());
  Capture& c = *cap.value();
  const uint32_t tx = c.add_interface("p tx", CaptureDirection::kOutbound);
  std::vector<uint8_t> frame(1000, 0x5a);
  constexpr int kFrames = 5000;  // 5 MB: far more than the pipe (64 KiB) and the bound (256 KiB) hold
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kFrames; i++) {
    c.write(tx, us(i), frame);
    if (i % 32 == 0) c.flush();  // as the engine does, often
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took < std::chrono::seconds(2));  // it never blocked on the reader
  CHECK(c.dropped() > 0);
  CHECK(c.packets() + c.dropped() == uint64_t(kFrames));
  CHECK_FALSE(c.broken());

  // The reader catches up: what it gets is whole blocks, one per frame kept.
  std::vector<uint8_t> got;
  for (int round = 0; round < 1000; round++) {
    drain(reader, got);
    c.flush();
    std::vector<uint8_t> more;
    drain(reader, more);
    got.insert(got.end(), more.begin(), more.end());
    if (more.empty()) break;
  }
  size_t at = 0, epbs = 0;
  while (at + 12 <= got.size()) {
    const uint32_t type = u32(got, at), len = u32(got, at + 4);
    REQUIRE(len % 4 == 0);
    REQUIRE(at + len <= got.size());
    CHECK(u32(got, at + len - 4) == len);
    if (type == 6) {
      epbs++;
      CHECK(u32(got, at + 20) == 1000);       // captured length
      CHECK(u32(got, at + 28 + 1000) == (2u | 4u << 16));  // epb_flags ...
      CHECK(u32(got, at + 32 + 1000) == 2u);               // ... outbound
    }
    at += len;
  }
  CHECK(at == got.size());
  CHECK(epbs == c.packets());
  cap.value().reset();
  close(reader);
  unlink(path.c_str());
}

TEST_CASE("A stopped stream closes once its reader has taken nothing for the grace, not at a fixed time",
          "[unit][engine]") {
  const std::string path = std::string(ROCEMU_BINARY_DIR) + "/capture-close-test.fifo";
  unlink(path.c_str());
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  const int reader = open(path.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  {  // every capture goes before the reader does (a write after would raise SIGPIPE)
    auto cap = Capture::open(path, 0, {});
    REQUIRE(cap.ok());
    const uint32_t tx = cap.value()->add_interface("p tx", CaptureDirection::kOutbound);
    std::vector<uint8_t> frame(1000, 0x5a);
    for (int i = 0; i < 400; i++) cap.value()->write(tx, us(i), frame);  // 400 KB: far more than the pipe holds
    cap.value()->flush();
    REQUIRE(cap.value()->buffered() > 0);

    ClosingCapture closing(std::move(cap.value()), Time{0}, ms(2000));
    CHECK_FALSE(closing.finish(ms(1500)));  // the reader took nothing yet, within the grace
    std::vector<uint8_t> got;
    drain(reader, got);
    REQUIRE(!got.empty());
    CHECK_FALSE(closing.finish(ms(1900)));  // it took some: the grace starts again
    CHECK_FALSE(closing.finish(ms(3000)));  // past the first 2 s, but the reader took some 1.1 s ago
    CHECK(closing.finish(ms(3900)));        // nothing taken for 2 s: give up
    CHECK_FALSE(closing.capture().drained());

    // A reader that keeps taking sees the whole stream, however long it takes.
    auto again = Capture::open(path, 0, {});
    REQUIRE(again.ok());
    drain(reader, got);
    const uint32_t i2 = again.value()->add_interface("p tx", CaptureDirection::kOutbound);
    for (int i = 0; i < 400; i++) again.value()->write(i2, us(i), frame);
    again.value()->flush();
    ClosingCapture slow(std::move(again.value()), Time{0}, ms(2000));
    bool closed = false;
    for (int k = 1; k <= 1000 && !closed; k++) {
      std::vector<uint8_t> some;
      drain(reader, some);
      closed = slow.finish(ms(1500) * k);  // 1.5 s between reads, 10 s and more in all
    }
    CHECK(closed);
    CHECK(slow.capture().drained());
  }
  close(reader);
  unlink(path.c_str());
}
