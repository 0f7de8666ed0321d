#include "nic/cc/cc.h"

#include "nic/cc/dcqcn.h"

namespace rocemu::nic::cc {
namespace {

// No congestion control: every QP at line rate, CE marks counted only.
class NoCc final : public Algorithm {
 public:
  std::string_view name() const override { return "none"; }
  std::unique_ptr<Flow> open(const FlowInit& init) const override {
    return std::make_unique<Flow>(init);
  }
};

}  // namespace

std::unique_ptr<Algorithm> make_algorithm(const CcConfig& cfg) {
  if (cfg.algorithm == "none") return std::make_unique<NoCc>();
  if (cfg.algorithm == "dcqcn") return std::make_unique<Dcqcn>(cfg.dcqcn);
  return nullptr;
}

}  // namespace rocemu::nic::cc
