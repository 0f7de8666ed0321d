// rocemu topo: writes a leaf-spine or fat-tree topology file (apps/topo_gen.h).
#include <cstdio>
#include <fstream>

#include "apps/commands.h"
#include "apps/topo_gen.h"
#include "common/config/config.h"

namespace rocemu::app {

int cmd_topo(const TopoOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "rocemu topo: %s\n", m.c_str());
    return 2;
  };
  LeafSpineOptions ls;
  ls.leaves = o.leaves;
  ls.spines = o.spines;
  ls.hosts_per_leaf = o.hosts_per_leaf;
  ls.roce_mode = o.roce;
  ls.load_balancing = o.load_balancing;
  ls.loss_recovery = o.loss_recovery;
  ls.mtu = o.mtu;
  const auto rate = config::parse_rate(o.rate);
  if (!rate) return fail("--rate: '" + o.rate + "' is not a rate (e.g. 400G)");
  ls.rate_bps = *rate;
  const auto delay = config::parse_duration(o.delay);
  if (!delay || delay->count() < 0) return fail("--delay: '" + o.delay + "' is not a duration (e.g. 1us)");
  ls.delay = *delay;
  if (o.mtu < 68 || o.mtu > 9216) return fail("--mtu must be 68..9216");
  const auto ratio = parse_oversubscription(o.oversubscription);
  if (!ratio) return fail("--oversubscription: '" + o.oversubscription + "' is not HOSTS:UPLINKS (e.g. 1:1, 3:1)");
  ls.oversubscription = *ratio;
  const Result<std::string> text =
      o.fat_tree ? fat_tree_topology(o.k, ls, o.command_line) : leaf_spine_topology(ls, o.command_line);
  if (!text.ok()) return fail(text.status().message());
  if (o.output.empty()) {
    std::fputs(text.value().c_str(), stdout);
    return 0;
  }
  std::ofstream out(o.output);
  out << text.value();
  out.close();
  if (!out) {
    std::fprintf(stderr, "rocemu topo: cannot write %s\n", o.output.c_str());
    return 1;
  }
  std::fprintf(stderr, "rocemu topo: wrote %s\n", o.output.c_str());
  return 0;
}

}  // namespace rocemu::app
