// Counters come from one list (an X-macro) that yields the enum, the name
// and the help text; nodes report them through a CounterSink.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace rocemu {

// Receives counters from a node: `scope` is e.g. "h1" or "sw1/swp1",
// `name` the counter's name as the field names it.
class CounterSink {
 public:
  virtual ~CounterSink() = default;
  virtual void counter(std::string_view scope, std::string_view name, uint64_t value) = 0;
};

// A fixed set of counters named by an X-macro list:
//   #define MY_COUNTERS(X) X(rx_packets, "packets received") ...
//   ROCEMU_COUNTER_SET(MyCounters, MY_COUNTERS);
#define ROCEMU_COUNTER_ENUM(name, help) name,
#define ROCEMU_COUNTER_NAME(name, help) #name,
#define ROCEMU_COUNTER_HELP(name, help) help,
#define ROCEMU_COUNTER_SET(Type, LIST)                                                  \
  struct Type {                                                                         \
    enum Id : uint16_t { LIST(ROCEMU_COUNTER_ENUM) kCount };                            \
    static constexpr std::array<std::string_view, kCount> kNames = {                    \
        LIST(ROCEMU_COUNTER_NAME)};                                                     \
    static constexpr std::array<std::string_view, kCount> kHelp = {LIST(ROCEMU_COUNTER_HELP)}; \
    std::array<uint64_t, kCount> v{};                                                   \
    uint64_t& operator[](Id id) { return v[id]; }                                       \
    uint64_t operator[](Id id) const { return v[id]; }                                  \
    void report(CounterSink& sink, std::string_view scope) const {                      \
      for (size_t i = 0; i < kCount; i++) sink.counter(scope, kNames[i], v[i]);         \
    }                                                                                   \
    void clear() { v.fill(0); }                                                         \
  }

}  // namespace rocemu
