// A message-level fuzzer of the control protocol (nic/verbs/protocol.h):
// each input becomes a session of requests -- ops, sizes, counts, handles
// (now and then ones the server handed out), addresses, ring indices
// written into the queues it was given -- sent by a raw client to a
// control server in this process. The contract: every request gets a
// reply (or the client is dropped) within two seconds, the server then
// still serves a new client, and nothing trips ASan/UBSan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace rocemu::test {

// "" if the server kept the contract over this input, else what broke.
std::string fuzz_control_session(const uint8_t* data, size_t size);

}  // namespace rocemu::test
