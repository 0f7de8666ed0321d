#include "common/engine/capture.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rocemu {
namespace {

// A file is written once this much is buffered (and on every flush()).
constexpr size_t kWriteAt = 256u << 10;

void put32(std::vector<uint8_t>& b, uint32_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + 4);
}
void put16(std::vector<uint8_t>& b, uint16_t v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p, p + 2);
}
void pad4(std::vector<uint8_t>& b) {
  while (b.size() % 4) b.push_back(0);
}
void option(std::vector<uint8_t>& b, uint16_t code, const void* data, uint16_t len) {
  put16(b, code);
  put16(b, len);
  const auto* p = static_cast<const uint8_t*>(data);
  b.insert(b.end(), p, p + len);
  pad4(b);
}

}  // namespace

Result<std::unique_ptr<Capture>> Capture::open(const std::string& path, uint64_t epoch_ns,
                                               const CaptureOptions& opts) {
  struct stat st{};
  const bool fifo = stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
  // A FIFO's reader is there already (else this fails with ENXIO); it is
  // never waited for.
  const int fd = fifo ? ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)
                      : ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error("capture " + path + ": " + std::strerror(errno));
  std::unique_ptr<Capture> c(new Capture(fd, fifo, path, epoch_ns, opts));
  std::vector<uint8_t> shb;
  put32(shb, 0x1a2b3c4d);  // byte-order magic
  put16(shb, 1);
  put16(shb, 0);
  put32(shb, 0xffffffff);  // section length unknown
  put32(shb, 0xffffffff);
  const char app[] = "rocemu";
  option(shb, 4, app, sizeof app - 1);  // shb_userappl
  option(shb, 0, nullptr, 0);
  c->block(0x0a0d0d0a, shb);
  return c;
}

Capture::Capture(int fd, bool stream, std::string path, uint64_t epoch_ns, const CaptureOptions& opts)
    : fd_(fd), stream_(stream), path_(std::move(path)), epoch_ns_(epoch_ns), opts_(opts) {
  buf_.reserve(64u << 10);
}

Capture::~Capture() {
  // Never waits for a stream's reader (the engine thread destroys it): what
  // the reader has not taken by now is lost with the stream.
  flush();
  ::close(fd_);
}

void Capture::block(uint32_t type, const std::vector<uint8_t>& body) {
  const uint32_t total = uint32_t(body.size()) + 12;
  put32(buf_, type);
  put32(buf_, total);
  buf_.insert(buf_.end(), body.begin(), body.end());
  put32(buf_, total);
}

uint32_t Capture::add_interface(const std::string& name, CaptureDirection dir) {
  std::vector<uint8_t> idb;
  put16(idb, 1);  // LINKTYPE_ETHERNET
  put16(idb, 0);
  put32(idb, opts_.snaplen);
  option(idb, 2, name.data(), uint16_t(name.size()));  // if_name
  const uint8_t tsresol = 9;                           // nanoseconds
  option(idb, 9, &tsresol, 1);
  option(idb, 0, nullptr, 0);
  block(1, idb);
  dirs_.push_back(dir);
  return uint32_t(dirs_.size() - 1);
}

void Capture::write(uint32_t interface, Time when, std::span<const uint8_t> frame) {
  if (done()) return;
  const uint32_t len = uint32_t(frame.size());
  const uint32_t caplen = opts_.snaplen == 0 ? len : std::min(len, opts_.snaplen);
  const uint32_t padded = (caplen + 3) & ~3u;
  const uint32_t total = 32 + padded + 12;  // + epb_flags and the end of options
  if (stream_ && buffered() + total > opts_.max_buffer) {
    dropped_++;
    return;
  }
  const uint64_t ts = epoch_ns_ + uint64_t(to_ns(when));
  const uint32_t hdr[7] = {6, total, interface, uint32_t(ts >> 32), uint32_t(ts), caplen, len};
  const auto* h = reinterpret_cast<const uint8_t*>(hdr);
  buf_.insert(buf_.end(), h, h + sizeof hdr);
  buf_.insert(buf_.end(), frame.begin(), frame.begin() + caplen);
  buf_.resize(buf_.size() + (padded - caplen), 0);
  const uint32_t flags = interface < dirs_.size() ? uint32_t(dirs_[interface]) : 0;
  const uint32_t opts[4] = {2u | 4u << 16, flags, 0, total};  // epb_flags (code 2, 4 bytes), opt_endofopt
  const auto* o = reinterpret_cast<const uint8_t*>(opts);
  buf_.insert(buf_.end(), o, o + sizeof opts);
  packets_++;
  // A slow reader is tried again at the next flush() call, not per frame.
  if (buffered() >= kWriteAt && !reader_full_) {
    flush();
    reader_full_ = buffered() > 0;
  }
}

void Capture::flush() {
  reader_full_ = false;
  while (head_ < buf_.size() && !broken_) {
    const ssize_t n = ::write(fd_, buf_.data() + head_, buf_.size() - head_);
    if (n > 0) {
      head_ += size_t(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;  // a stream's reader is slow: the rest waits
    } else {
      broken_ = true;  // the reader went (EPIPE) or the disk failed
      head_ = buf_.size();
    }
  }
  // What is written out goes once it is most of the buffer, not on every
  // partial write (each would move the rest, up to max_buffer bytes).
  if (head_ == buf_.size()) {
    buf_.clear();
    head_ = 0;
  } else if (head_ > buf_.size() / 2) {
    buf_.erase(buf_.begin(), buf_.begin() + long(head_));
    head_ = 0;
  }
}

bool ClosingCapture::finish(Time now) {
  capture_->flush();
  if (capture_->drained()) return true;
  if (const size_t b = capture_->buffered(); b < buffered_) {
    buffered_ = b;
    give_up_ = now + grace_;
  }
  return now >= give_up_;
}

}  // namespace rocemu
