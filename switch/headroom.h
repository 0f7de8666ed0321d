// PFC headroom: how many bytes a lossless priority group must still absorb
// after it sends XOFF, from the port speed, MTU and cable length. This is
// SONiC's Mellanox calculation (sonic-swss cfgmgr/buffer_headroom_mellanox.lua)
// with its unit quirks kept, so a network engineer gets the figures SONiC
// prints for the same port.
#pragma once

#include <cstdint>

namespace rocemu::sw {

// ASIC and traffic-pattern parameters of the calculation (STATE_DB
// ASIC_TABLE and CONFIG_DB LOSSLESS_TRAFFIC_PATTERN in SONiC). The defaults
// are a Spectrum-2/3-class ASIC with SONiC's default traffic pattern.
struct HeadroomParams {
  uint32_t cell_size = 144;                // bytes per buffer cell
  uint32_t pipeline_latency = 18 * 1024;   // bytes; becomes xon
  uint32_t mac_phy_delay = 819;            // bytes held in MAC/PHY (0.8 KiB)
  uint32_t lossless_mtu = 1024;            // LOSSLESS_TRAFFIC_PATTERN mtu
  uint32_t small_packet_percentage = 100;  // worst case for cell use
  uint32_t gearbox_delay_ns = 0;
};

struct Headroom {
  uint64_t xoff = 0;  // bytes absorbed after XOFF (the headroom proper)
  uint64_t xon = 0;   // hysteresis before XON
  uint64_t size = 0;  // xoff + xon: the PG's headroom buffer
};

// IEEE 802.3 31B.3.7 pause quanta a peer may take to react, by speed
// (rounded down to the nearest listed speed; 0 below 100 Mbit/s).
uint32_t peer_response_quanta(uint64_t speed_bps);

// Bytes in flight on a cable of `metres` in both directions at
// `speed_bps`, as the SONiC script computes them (speed in Mb/s x 1e9 /
// (8 x 1024), i.e. bytes x 1000/1024).
double bytes_on_cable(uint32_t metres, uint64_t speed_bps);

Headroom compute_headroom(uint64_t speed_bps, uint32_t port_mtu, uint32_t cable_length_m,
                          const HeadroomParams& p = {});

}  // namespace rocemu::sw
