// pcapng capture of any port or link. One file (or stream), one interface
// block per captured direction with its direction flag, nanosecond
// timestamps of when each frame crossed that point. Written as it goes:
// blocks gather in a bounded buffer that flush() (the engine calls it every
// few milliseconds and before it sleeps) writes out whole, so a reader of
// the file or of a pipe sees complete blocks while the capture runs. A
// reader too slow for a stream (a pipe or FIFO, never waited for) costs
// frames, counted in dropped(), not the engine's time. In virtual time the
// file holds nothing but the packets and the engine's time, so the same run
// gives the same bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu {

// pcapng epb_flags bits 0-1.
enum class CaptureDirection : uint8_t { kUnknown = 0, kInbound = 1, kOutbound = 2 };

struct CaptureOptions {
  uint32_t snaplen = 65535;  // bytes kept of each frame (0: all of it)
  uint64_t count = 0;        // stop after this many frames (0: no limit)
  Duration duration{0};      // stop after this long (0: no limit; the engine keeps time)
  size_t max_buffer = 4u << 20;  // bytes a slow stream may hold before frames are dropped
};

class Capture {
 public:
  // `epoch_ns` is added to engine time (the wall clock at engine time 0 in
  // real time, 0 in virtual time). A path that is a FIFO is a stream.
  static Result<std::unique_ptr<Capture>> open(const std::string& path, uint64_t epoch_ns = 0,
                                               const CaptureOptions& opts = {});
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Declares an interface (e.g. "h1:0 tx"); returns its id.
  uint32_t add_interface(const std::string& name, CaptureDirection dir = CaptureDirection::kUnknown);
  void write(uint32_t interface, Time when, std::span<const uint8_t> frame);
  // Writes out what is buffered (a stream: what the reader takes now,
  // never waiting for it). The engine calls it every few milliseconds.
  void flush();
  const std::string& path() const { return path_; }
  const CaptureOptions& options() const { return opts_; }
  uint64_t packets() const { return packets_; }
  uint64_t dropped() const { return dropped_; }
  // The count is reached, or the stream's reader has gone.
  bool done() const { return broken_ || (opts_.count != 0 && packets_ >= opts_.count); }
  bool broken() const { return broken_; }
  // Everything written is out (or can never be: the reader went).
  bool drained() const { return broken_ || buffered() == 0; }
  // Bytes written but not out yet.
  size_t buffered() const { return buf_.size() - head_; }

 private:
  Capture(int fd, bool stream, std::string path, uint64_t epoch_ns, const CaptureOptions& opts);
  void block(uint32_t type, const std::vector<uint8_t>& body);

  int fd_;
  bool stream_;
  std::string path_;
  uint64_t epoch_ns_;
  CaptureOptions opts_;
  std::vector<uint8_t> buf_;
  size_t head_ = 0;           // buf_ before this is written out
  bool reader_full_ = false;  // the last write got EAGAIN: wait for the next flush() call
  std::vector<CaptureDirection> dirs_;
  uint64_t packets_ = 0;
  uint64_t dropped_ = 0;
  bool broken_ = false;
};

// A capture point: which file and which interface in it.
struct Tap {
  Capture* capture = nullptr;
  uint32_t interface = 0;
  void record(Time when, std::span<const uint8_t> frame) const {
    if (capture != nullptr) capture->write(interface, when, frame);
  }
};

// A stopped stream still writing out what it holds. It closes once all is
// out, or once its reader has taken nothing for `grace`: each time the
// reader takes some, the grace starts again.
class ClosingCapture {
 public:
  ClosingCapture(std::unique_ptr<Capture> capture, Time now, Duration grace)
      : capture_(std::move(capture)), grace_(grace), give_up_(now + grace), buffered_(capture_->buffered()) {}
  Capture& capture() { return *capture_; }
  // Writes out what the reader takes now; true when the capture may close.
  bool finish(Time now);

 private:
  std::unique_ptr<Capture> capture_;
  Duration grace_;
  Time give_up_;
  size_t buffered_;  // at the last look: less now means the reader took some
};

}  // namespace rocemu
