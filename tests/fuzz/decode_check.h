// What must hold for any frame wire::decode() is given, and a walk over
// everything a decoded view lets a caller read. Shared by the decoder
// robustness tests and the libFuzzer target, so a property the unit tests
// state is the property the fuzzer hunts for counterexamples to.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/wire/packet.h"

namespace rocemu::test {

// Empty if `v`, which decode() returned kOk for, keeps decode's contract
// (every offset inside the frame, lengths that add up, RoCE layout as the
// opcode table says); otherwise what is broken.
std::string view_contract_violation(std::span<const uint8_t> frame, const wire::PacketView& v);

// Reads every field and byte a caller may read from an accepted view, as
// its kind allows: addresses, ports, BTH, each extension header the opcode
// has, the payload, the ICRC (on the wire and computed), ARP and PFC
// fields. Returns a digest so that nothing is optimised away.
uint64_t touch_view(const wire::PacketView& v);

// The whole check on one input: decode an exact-size heap copy (so a read
// past its end is a heap overflow under ASan), check the error is a known
// one and, on kOk, the contract; touch the view; then let
// FaultInjector::corrupt() flip a bit in another exact-size copy and require
// that a RoCE frame whose ICRC was right no longer passes its ICRC check.
// Returns "" or the first violation.
std::string check_decode(std::span<const uint8_t> input, uint64_t seed);

}  // namespace rocemu::test
