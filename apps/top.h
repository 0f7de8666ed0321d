// rocemu top: one frame of the live view from two fabric snapshots
// (apps/snapshot.h): per port Gbit/s, queue depth per TC, and over the
// interval ECN marks, PFC frames, CNPs and drops.
#pragma once

#include <string>

#include "apps/snapshot.h"

namespace rocemu::app {

// The frame for the interval from `before` to `now` (plain text, no
// terminal control codes).
std::string render_top(const FabricSnapshot& now, const FabricSnapshot& before);

}  // namespace rocemu::app
