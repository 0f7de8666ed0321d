// The node kinds the rocemu program knows, and the built-in topology.
#pragma once

#include <string>

#include "common/config/topology.h"

namespace rocemu::app {

const NodeKindRegistry& registry();

// One switch (sw1) routing between two hosts, h1 (10.0.1.1) and h2
// (10.0.2.1), 100 Gbit/s links, NVUE's lossless RoCE profile.
extern const char* const kDefaultTopology;

// EAL memory (MiB) the topology's switches take beyond their packets: a
// route table each, most of it rte_lpm's 64 MiB tbl24.
uint32_t switch_memory_mb(const Topology& topo);

// Loads `path`, or the built-in topology if it is empty.
Result<Topology> load(const std::string& path);

}  // namespace rocemu::app
