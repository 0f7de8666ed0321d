// pcapng capture of any port or link. One file, one interface block per
// captured direction, nanosecond timestamps. In virtual time the file
// holds nothing but the packets and the engine's time, so the same run
// gives the same bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "common/engine/time.h"
#include "common/status.h"

namespace rocemu {

class Capture {
 public:
  // `epoch_ns` is added to engine time (wall-clock offset in real time, 0
  // in virtual time).
  static Result<std::unique_ptr<Capture>> open(const std::string& path, uint64_t epoch_ns = 0);
  ~Capture();
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // Declares an interface (e.g. "h1->sw1:1"); returns its id.
  uint32_t add_interface(const std::string& name, uint32_t snaplen = 65535);
  void write(uint32_t interface, Time when, std::span<const uint8_t> frame);
  void flush();
  const std::string& path() const { return path_; }
  uint64_t packets() const { return packets_; }

 private:
  Capture(FILE* f, std::string path, uint64_t epoch_ns) : f_(f), path_(std::move(path)), epoch_ns_(epoch_ns) {}
  FILE* f_;
  std::string path_;
  uint64_t epoch_ns_;
  uint32_t interfaces_ = 0;
  uint64_t packets_ = 0;
};

// A capture point: which file and which interface in it.
struct Tap {
  Capture* capture = nullptr;
  uint32_t interface = 0;
  void record(Time when, std::span<const uint8_t> frame) const {
    if (capture != nullptr) capture->write(interface, when, frame);
  }
};

}  // namespace rocemu
