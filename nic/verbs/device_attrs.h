// What the emulated device says about itself, in one place for the
// provider (ibv_query_device/port) and for its sysfs tree: the vendor,
// firmware and board strings, the uverbs character device, and the IB
// speed and width codes of a link rate.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace rocemu::verbs {

// The vendor Soft-RoCE (rxe) reports: no PCI vendor, part 0. A real
// vendor's IDs would make perftest and UCX take vendor-specific paths
// (mlx5 direct verbs) that this device does not have.
inline constexpr uint32_t kVendorId = 0xffffff;
inline constexpr uint32_t kVendorPartId = 0;
inline constexpr uint32_t kHwVer = 0;
inline constexpr const char* kFwVer = "rocemu-0.1";
inline constexpr const char* kBoardId = "ROCEMU_0001";
inline constexpr const char* kHcaType = "rocemu";
// The uverbs node of the only device: the kernel's major 231, minor 192.
inline constexpr const char* kUverbsName = "uverbs0";
inline constexpr const char* kRdmaCmName = "rdma_cm";
inline constexpr unsigned kUverbsMajor = 231;
inline constexpr unsigned kUverbsMinor = 192;

// ibv_device_attr_ex.device_cap_flags_ex: the device executes RDMA ATOMIC
// WRITE (IB_UVERBS_DEVICE_ATOMIC_WRITE of Linux 6.2's uapi, which rxe sets;
// Debian 12's headers predate it).
inline constexpr uint64_t kDeviceCapAtomicWrite = 1ull << 40;

// IB speed and width codes for an Ethernet rate (how mlx5 reports them).
struct SpeedWidth {
  uint8_t speed;  // ibv_port_attr.active_speed: 1 SDR ... 32 EDR, 64 HDR, 128 NDR
  uint8_t width;  // ibv_port_attr.active_width: 1 1X, 2 4X
};
inline SpeedWidth speed_width(uint64_t bps) {
  const uint64_t g = bps / 1000000000ull;
  if (g >= 400) return {128, 2};  // 4X NDR
  if (g >= 200) return {64, 2};   // 4X HDR
  if (g >= 100) return {32, 2};   // 4X EDR
  if (g >= 50) return {64, 1};    // 1X HDR
  if (g >= 40) return {4, 2};     // 4X QDR
  if (g >= 25) return {32, 1};    // 1X EDR
  return {8, 1};                  // 1X FDR10
}

// The kernel's ports/N/rate text ("100 Gb/sec (4X EDR)").
inline std::string rate_text(uint64_t bps) {
  const SpeedWidth sw = speed_width(bps);
  const char* speed = "SDR";
  double lane = 2.5;
  switch (sw.speed) {
    case 2: speed = "DDR"; lane = 5; break;
    case 4: speed = "QDR"; lane = 10; break;
    case 8: speed = "FDR10"; lane = 10; break;
    case 16: speed = "FDR"; lane = 14; break;
    case 32: speed = "EDR"; lane = 25; break;
    case 64: speed = "HDR"; lane = 50; break;
    case 128: speed = "NDR"; lane = 100; break;
    default: break;
  }
  const int lanes = sw.width == 2 ? 4 : 1;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g Gb/sec (%dX %s)", lane * lanes, lanes, speed);
  return buf;
}

}  // namespace rocemu::verbs
