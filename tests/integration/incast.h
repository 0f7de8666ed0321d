// An N:1 incast of RC RDMA WRITEs between real NICs through the switch,
// with its own oracle: every completion in order and successful, every
// byte of the receiver's memory equal to what was sent.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tests/integration/fabric.h"

namespace rocemu::test {

struct IncastSpec {
  int senders = 4;                  // hosts 0..senders-1 write to host `senders`
  int messages = 4;                 // WRITEs per sender, posted at once
  uint32_t message_len = 256 * 1024;
  nic::SimHost::ConnectOpts connect = default_connect();
  Duration limit = ms(500);         // virtual time allowed for the transfer
  std::function<void()> observe;    // called after every event of the transfer

  static nic::SimHost::ConnectOpts default_connect() {
    nic::SimHost::ConnectOpts o;
    o.mtu = IBV_MTU_4096;
    return o;
  }
};

struct IncastResult {
  bool finished = false;
  std::string failure;               // empty if every check passed
  Time posted{0};                    // when the WRITEs were posted
  Time done{0};                      // the last send completion
  std::vector<Time> sender_done;     // the last send completion of each sender
  uint64_t bytes = 0;                // payload bytes written

  Duration completion() const { return done - posted; }
  // Payload bits per second from posting to the last completion.
  double goodput_gbps() const;
};

// The switch port toward the receiver of a default incast (host 4 of a
// five-host star): the bottleneck.
inline constexpr uint16_t kIncastBottleneck = 4;

// 4 senders x 4 x 1 MiB = 16 MiB into the default 16 MB buffer.
inline IncastSpec big_incast() {
  IncastSpec is;
  is.messages = 4;
  is.message_len = 1 << 20;
  return is;
}

// Connects one RC QP per sender to the receiver, waits for ARP, posts every
// WRITE and drives virtual time until all complete (or `limit`), then
// checks completions and memory.
IncastResult run_incast(Star& s, const IncastSpec& spec);

}  // namespace rocemu::test
