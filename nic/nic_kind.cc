#include "nic/nic_kind.h"

#include <array>
#include <cstdint>
#include <span>

#include "nic/cc/cc_config.h"
#include "nic/nic.h"

namespace rocemu::nic {
namespace {

// The device capabilities a topology may set (NicConfig), with their ranges:
// at most what the NIC's data structures hold.
struct CapKey {
  std::string_view key;
  uint32_t NicConfig::*field;
  int64_t lo, hi;
};
constexpr CapKey kCapKeys[] = {
    {"max_qp", &NicConfig::max_qp, 1, kNumQpns},  // a QPN each
    {"max_qp_wr", &NicConfig::max_qp_wr, 1, 1 << 20},
    {"max_cqe", &NicConfig::max_cqe, 1, 1 << 22},
    {"max_mr", &NicConfig::max_mr, 1, (1 << 19) - 1},  // the key table's slots (MR keys stay below kMwKeyBit)
    {"max_sge", &NicConfig::max_sge, 1, kMaxSge},
    {"max_qp_rd_atom", &NicConfig::max_qp_rd_atom, 1, kMaxRdAtomic},
    {"max_qp_init_rd_atom", &NicConfig::max_qp_init_rd_atom, 1, 255},  // ibv_qp_attr.max_rd_atomic is 8 bits
};
// The provider reports max_res_rd_atom = max_qp_rd_atom * max_qp as an int.
static_assert(uint64_t(kMaxRdAtomic) * kNumQpns <= uint64_t(INT32_MAX));

// Every key of a nic entry.
constexpr auto kNicKeys = [] {
  constexpr std::string_view base[] = {"kind", "mac", "ip", "ips", "prefix", "gateway", "neighbors", "loss_recovery",
                                       "sr_window", "sr_rto_low", "traffic_class", "ecn", "trim_dscp", "cnp_dscp",
                                       "cnp_802p_prio", "pfc", "vlan", "cc"};
  std::array<std::string_view, std::size(base) + std::size(kCapKeys)> keys{};
  size_t i = 0;
  for (std::string_view k : base) keys[i++] = k;
  for (const CapKey& c : kCapKeys) keys[i++] = c.key;
  return keys;
}();

class NicKind final : public NodeKind {
 public:
  std::string_view name() const override { return "nic"; }

  std::any parse(const YAML::Node& n, std::string_view field, config::Context& ctx) const override {
    const std::string f(field);
    ctx.check_keys(n, f, std::span<const std::string_view>(kNicKeys));
    NicConfig c;
    if (n["mac"]) {
      if (auto s = ctx.str(n["mac"], f + ".mac")) {
        if (auto m = wire::MacAddr::parse(*s); m && !m->is_multicast()) c.mac = *m;
        else ctx.error(n["mac"], f + ".mac", "'" + *s + "' is not a unicast MAC address");
      }
    } else {
      // A stable, locally administered address from the node name.
      uint32_t h = 2166136261u;
      for (char ch : f) h = (h ^ uint8_t(ch)) * 16777619u;
      c.mac = wire::MacAddr{{0x02, 0x52, uint8_t(h >> 24), uint8_t(h >> 16), uint8_t(h >> 8), uint8_t(h)}};
    }
    auto ip = [&](const YAML::Node& v, const std::string& where) -> std::optional<wire::IpAddr> {
      auto s = ctx.str(v, where);
      if (!s) return std::nullopt;
      auto a = wire::IpAddr::parse(*s);
      if (!a) ctx.error(v, where, "'" + *s + "' is not an IPv4 or IPv6 address");
      return a;
    };
    if (n["ip"] && n["ips"]) ctx.error(n["ips"], f + ".ips", "give ip or ips, not both");
    if (n["ip"]) {
      if (auto a = ip(n["ip"], f + ".ip")) c.ips.push_back(*a);
    } else if (n["ips"]) {
      if (!n["ips"].IsSequence()) ctx.error(n["ips"], f + ".ips", "expected a list of addresses");
      for (size_t i = 0; n["ips"].IsSequence() && i < n["ips"].size(); i++)
        if (auto a = ip(n["ips"][i], f + ".ips[" + std::to_string(i) + "]")) c.ips.push_back(*a);
    } else {
      ctx.error(n, f + ".ip", "a NIC needs an address (ip or ips)");
    }
    if (n["prefix"]) c.prefix_len = uint8_t(ctx.integer(n["prefix"], f + ".prefix", 0, 32).value_or(24));
    if (n["gateway"]) c.gateway = ip(n["gateway"], f + ".gateway");
    if (const auto& nb = n["neighbors"]) {
      if (!nb.IsMap()) ctx.error(nb, f + ".neighbors", "expected a mapping of IP address to MAC address");
      for (const auto& kv : nb) {
        const std::string where = f + ".neighbors." + kv.first.Scalar();
        auto a = wire::IpAddr::parse(kv.first.Scalar());
        auto m = kv.second.IsScalar() ? wire::MacAddr::parse(kv.second.Scalar()) : std::nullopt;
        if (!a) ctx.error(kv.first, where, "not an IP address");
        else if (!m) ctx.error(kv.second, where, "not a MAC address");
        else c.neighbors[*a] = *m;
      }
    }
    if (n["loss_recovery"]) {
      if (auto r = ctx.choice(n["loss_recovery"], f + ".loss_recovery", {"go-back-n", "selective-repeat"}))
        c.recovery = *r == "go-back-n" ? LossRecovery::kGoBackN : LossRecovery::kSelectiveRepeat;
    }
    if (n["sr_window"]) c.sr_window = uint32_t(ctx.integer(n["sr_window"], f + ".sr_window", 4, 1 << 20).value_or(512));
    if (n["sr_rto_low"]) {
      c.sr_rto_low = ctx.duration(n["sr_rto_low"], f + ".sr_rto_low").value_or(us(100));
      if (c.sr_rto_low < us(1)) ctx.error(n["sr_rto_low"], f + ".sr_rto_low", "must be at least 1us");
    }
    if (n["traffic_class"])
      c.default_traffic_class = uint8_t(ctx.integer(n["traffic_class"], f + ".traffic_class", 0, 255).value_or(106));
    if (n["ecn"]) c.ecn = ctx.boolean(n["ecn"], f + ".ecn").value_or(true);
    if (n["trim_dscp"]) c.trim_dscp = uint8_t(ctx.integer(n["trim_dscp"], f + ".trim_dscp", 0, 63).value_or(11));
    if (n["cnp_dscp"]) c.cnp_dscp = uint8_t(ctx.integer(n["cnp_dscp"], f + ".cnp_dscp", 0, 63).value_or(48));
    if (n["cnp_802p_prio"]) c.cnp_prio = uint8_t(ctx.integer(n["cnp_802p_prio"], f + ".cnp_802p_prio", 0, 7).value_or(6));
    if (const auto& pfc = n["pfc"]) {
      // mlnx_qos --pfc: the priorities with PFC, as a list ([3], [] for none).
      if (!pfc.IsSequence()) ctx.error(pfc, f + ".pfc", "expected a list of priorities 0-7, e.g. [3] ([] for none)");
      c.pfc_priorities = 0;
      for (size_t i = 0; pfc.IsSequence() && i < pfc.size(); i++)
        if (auto p = ctx.integer(pfc[i], f + ".pfc[" + std::to_string(i) + "]", 0, 7)) c.pfc_priorities |= uint8_t(1u << *p);
    }
    if (n["cc"]) c.cc = cc::parse_cc(n["cc"], f + ".cc", ctx);
    if (n["vlan"]) {
      c.vlan = true;
      c.vid = uint16_t(ctx.integer(n["vlan"], f + ".vlan", 1, 4094).value_or(1));
    }
    for (const CapKey& k : kCapKeys) {
      const std::string key(k.key);
      if (n[key]) c.*k.field = uint32_t(ctx.integer(n[key], f + "." + key, k.lo, k.hi).value_or(c.*k.field));
    }
    return c;
  }

  uint16_t num_ports(const std::any&) const override { return 1; }

  std::unique_ptr<Node> create(const std::string& name, const std::any& cfg) const override {
    return std::make_unique<Nic>(name, std::any_cast<const NicConfig&>(cfg));
  }
};

}  // namespace

void register_nic_kind(NodeKindRegistry& reg) { reg.add(std::make_unique<NicKind>()); }

}  // namespace rocemu::nic
