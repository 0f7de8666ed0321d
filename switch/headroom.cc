#include "switch/headroom.h"

#include <cmath>

namespace rocemu::sw {
namespace {

constexpr double kSpeedOfLight = 198000000.0;  // m/s in fibre, as SONiC uses
constexpr double kMinimalPacketSize = 64.0;

uint64_t round_up_kib(double v) { return uint64_t(std::ceil(v / 1024.0)) * 1024; }

}  // namespace

uint32_t peer_response_quanta(uint64_t speed_bps) {
  struct Row {
    uint64_t mbps;
    uint32_t quanta;
  };
  static constexpr Row kTable[] = {{800000, 905}, {400000, 905}, {200000, 453}, {100000, 394}, {50000, 147},
                                   {40000, 118},  {25000, 80},   {10000, 67},   {1000, 2},     {100, 1}};
  const uint64_t mbps = speed_bps / 1000000;
  for (const Row& r : kTable)
    if (mbps >= r.mbps) return r.quanta;
  return 0;
}

double bytes_on_cable(uint32_t metres, uint64_t speed_bps) {
  const double mbps = double(speed_bps) / 1e6;
  return 2.0 * metres * mbps * 1e9 / kSpeedOfLight / (8.0 * 1024.0);
}

Headroom compute_headroom(uint64_t speed_bps, uint32_t port_mtu, uint32_t cable_length_m, const HeadroomParams& p) {
  const double cell = p.cell_size;
  const double worst_case_factor =
      cell > 2 * kMinimalPacketSize ? cell / kMinimalPacketSize : (2 * cell) / (1 + cell);
  const double pct = p.small_packet_percentage;
  const double cell_occupancy = (100.0 - pct + pct * worst_case_factor) / 100.0;
  const double mbps = double(speed_bps) / 1e6;
  const double gearbox = p.gearbox_delay_ns == 0 ? 0.0 : mbps * p.gearbox_delay_ns / (8.0 * 1024.0);
  const double peer_response = double(peer_response_quanta(speed_bps)) * 512.0 / 8.0;
  const double propagation =
      double(port_mtu) + bytes_on_cable(cable_length_m, speed_bps) + 2 * gearbox + p.mac_phy_delay + peer_response;
  Headroom h;
  h.xoff = round_up_kib(double(p.lossless_mtu) + propagation * cell_occupancy);
  h.xon = round_up_kib(double(p.pipeline_latency));
  h.size = round_up_kib(double(h.xoff + h.xon));
  return h;
}

}  // namespace rocemu::sw
