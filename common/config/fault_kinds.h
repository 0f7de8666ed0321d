// The fault kinds, in one table: the keys of a topology's `faults:`
// mapping and a scenario's `set:` (parse_faults in topology.h), and the
// words of `rocemu fault add` in tc-netem's forms (parse_fault_words), and
// back (describe_faults, for `rocemu fault list`).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/engine/fault.h"
#include "common/status.h"

namespace rocemu::config {

// How a kind's value is written. On the command line every value carries
// its unit (a probability as a percentage, `1%`): netem, tc and the
// topology read bare numbers differently, so none is guessed. A count
// (netem's gap) is a plain number.
enum class FaultUnit { kProbability, kTime, kRate, kCount, kFlag };

// One kind's value, in the slot of its unit (`number`: a rate in bit/s,
// 0 for none, or a count).
struct FaultValue {
  double probability = 0;
  Duration time{0};
  uint64_t number = 0;
  bool flag = false;
  bool operator==(const FaultValue&) const = default;
};

// A fault kind with one value.
struct FaultKind {
  std::string_view key;  // topology/scenario key; on the command line `_` may be `-`
  FaultUnit unit;
  // `number`: a rate in bit/s or a count
  void (*set)(FaultConfig& fc, double probability, Duration time, uint64_t number, bool flag);
  FaultValue (*get)(const FaultConfig& fc);  // what set() wrote
};

std::span<const FaultKind> fault_kinds();
const FaultKind* find_fault_kind(std::string_view key);
// Every key a `faults:` mapping takes (the table's and `burst`, `drop`).
std::span<const std::string_view> fault_keys();

// What `rocemu fault add` reads after its target, in netem's forms (C%:
// netem's correlation, see FaultConfig):
//   loss [random] P% [C%]     loss gemodel P% [R% [1-H% [1-K%]]]
//   delay TIME [JITTER [C%]] [distribution uniform]
//   rate RATE                 duplicate P% [C%]    corrupt P% [C%]
//   reorder P% [C%] [gap N] [TIME]  (TIME: the hold-back without a delay)
//   drop match [qpn=N] [psn=N] [opcode=N] [every=N] [times=N]
//   link down                 and every key of the table with its value
// Several kinds may follow each other (`delay 100us loss 1%`). `link up`
// is not a fault: it sets `link_up` (the caller removes link-down faults).
struct FaultWords {
  FaultConfig faults;
  bool link_up = false;
};
Result<FaultWords> parse_fault_words(std::span<const std::string> words);

// The faults of `fc` in the words parse_fault_words reads.
std::string describe_faults(const FaultConfig& fc);

}  // namespace rocemu::config
