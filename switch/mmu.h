// The shared buffer (the MMU): one memory seen twice, by ingress priority
// group and by egress queue, as Spectrum and SONiC account it.
//
//   ingress: each (port, PG) takes its reserved bytes, then shared bytes
//            from its pool while below the dynamic threshold
//            alpha x (pool size - pool used), then, if lossless, headroom.
//            A lossless PG asserts XOFF once its shared part reaches the
//            threshold (or it spills into headroom) and XON once headroom
//            is empty and shared is `xon` below the threshold. In real
//            time a lossless PG then takes up to `slack` more bytes: what
//            the link partner, running ahead of the engine's clock (the
//            links' tx_slack), sent before it could see the XOFF -- frames
//            the modelled fabric would not have sent. A packet that fits
//            nowhere is a no-buffer-discard.
//   egress:  each (port, queue) takes reserved, then shared under its own
//            dynamic threshold; lossless queues are not limited at egress
//            (SONiC's egress_lossless_profile), ingress already admitted
//            them.
//
// Bytes are released in the reverse order they were taken: slack, headroom,
// then shared, then reserved. Plain arithmetic; no packets, no clock.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "switch/dynamic_threshold.h"
#include "switch/qos_config.h"

namespace rocemu::sw {

inline constexpr int kNumPg = 8;
enum PoolIndex : uint8_t { kLossyPool = 0, kLosslessPool = 1, kNumPools = 2 };

struct BufferPool {
  uint64_t size = 0;
  uint64_t used = 0;  // shared bytes in use
  uint64_t watermark = 0;
};

struct PgBuffer {
  // configuration
  bool lossless = false;
  uint8_t pool = kLossyPool;
  uint64_t alpha = 0;          // fixed point, 1/65536 (dynamic_threshold.h)
  uint64_t headroom_size = 0;  // xoff: bytes absorbed after XOFF
  uint64_t xon = 0;            // hysteresis below the threshold before XON
  uint64_t slack_size = 0;     // real time: bytes the partner sends late, beyond xoff
  // state
  uint64_t reserved = 0, shared = 0, headroom = 0, slack = 0;
  uint64_t shared_watermark = 0, headroom_watermark = 0, slack_watermark = 0, watermark = 0;
  bool xoff = false;

  uint64_t total() const { return reserved + shared + headroom + slack; }
};

struct QueueBuffer {
  bool lossless = false;
  uint8_t pool = kLossyPool;
  uint64_t alpha = 0;  // fixed point, 1/65536
  uint64_t reserved = 0, shared = 0;
  uint64_t watermark = 0;

  uint64_t total() const { return reserved + shared; }
};

// Where an admitted packet went at ingress.
enum class IngressPlace : uint8_t { kReserved, kShared, kHeadroom, kSlack, kNone };

struct Admission {
  IngressPlace ingress = IngressPlace::kNone;
  bool egress_ok = false;
  bool ok() const { return ingress != IngressPlace::kNone && egress_ok; }
};

class Mmu {
 public:
  // Per port: the PG headroom (xoff) and xon of its lossless PGs, and the
  // bytes its link partner may send late in real time (0 in virtual time).
  struct PortHeadroom {
    uint64_t xoff = 0;
    uint64_t xon = 0;
    uint64_t slack = 0;
  };
  // (Re)configures pools, thresholds and which PGs and queues are
  // lossless. Bytes in use are kept; pool usage is recounted.
  void configure(const QosConfig& qos, const std::vector<PortHeadroom>& ports);

  // The decision for a packet of `len` bytes from (in_port, pg) to
  // (out_port, tc), without taking anything.
  Admission check(uint16_t in_port, uint8_t pg, uint16_t out_port, uint8_t tc, uint32_t len) const;
  // Takes the buffer `check` found.
  void commit(uint16_t in_port, uint8_t pg, uint16_t out_port, uint8_t tc, uint32_t len, IngressPlace where);
  // Gives back a packet's bytes when it leaves its queue.
  void release(uint16_t in_port, uint8_t pg, uint16_t out_port, uint8_t tc, uint32_t len);

  // PFC decisions for a lossless PG, on its current state.
  bool pg_wants_xoff(uint16_t port, uint8_t g) const {
    const PgBuffer& b = ports_[port].pg[g];
    return b.lossless && (b.headroom > 0 || b.slack > 0 || b.shared >= pg_threshold(port, g));
  }
  bool pg_may_xon(uint16_t port, uint8_t g) const {
    const PgBuffer& b = ports_[port].pg[g];
    return b.headroom == 0 && b.slack == 0 && (b.shared == 0 || b.shared + b.xon <= pg_threshold(port, g));
  }

  uint64_t pg_threshold(uint16_t port, uint8_t g) const {
    const PgBuffer& b = ports_[port].pg[g];
    const BufferPool& pool = ingress_[b.pool];
    return dynamic_threshold_fixed(b.alpha, pool.size, pool.used);
  }
  uint64_t queue_threshold(uint16_t port, uint8_t tc) const {
    const QueueBuffer& q = ports_[port].queue[tc];
    const BufferPool& pool = egress_[q.pool];
    return dynamic_threshold_fixed(q.alpha, pool.size, pool.used);
  }

  PgBuffer& pg(uint16_t port, uint8_t pg) { return ports_[port].pg[pg]; }
  const PgBuffer& pg(uint16_t port, uint8_t pg) const { return ports_[port].pg[pg]; }
  const QueueBuffer& queue(uint16_t port, uint8_t tc) const { return ports_[port].queue[tc]; }
  const BufferPool& ingress_pool(int i) const { return ingress_[i]; }
  const BufferPool& egress_pool(int i) const { return egress_[i]; }
  // Bytes one port holds in an ingress or egress pool (all places), and the
  // most it held.
  uint64_t port_ingress_bytes(uint16_t port, int pool) const { return ports_[port].in_pool[pool]; }
  uint64_t port_ingress_watermark(uint16_t port, int pool) const { return ports_[port].in_pool_wm[pool]; }
  uint64_t port_egress_bytes(uint16_t port, int pool) const { return ports_[port].out_pool[pool]; }
  uint64_t port_egress_watermark(uint16_t port, int pool) const { return ports_[port].out_pool_wm[pool]; }
  uint16_t num_ports() const { return uint16_t(ports_.size()); }
  bool has_lossless_pool() const { return lossless_pool_; }

  void clear_watermarks();

 private:
  struct PortState {
    std::array<PgBuffer, kNumPg> pg{};
    std::array<QueueBuffer, kNumTc> queue{};
    std::array<uint64_t, kNumPools> in_pool{}, in_pool_wm{}, out_pool{}, out_pool_wm{};
  };
  std::vector<PortState> ports_;
  std::array<BufferPool, kNumPools> ingress_{}, egress_{};
  uint64_t pg_reserved_ = 0, queue_reserved_ = 0;
  bool lossless_pool_ = false;
};

}  // namespace rocemu::sw
