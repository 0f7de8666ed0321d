#include "switch/mmu.h"

#include <algorithm>


namespace rocemu::sw {
namespace {

void raise(uint64_t& watermark, uint64_t v) { watermark = std::max(watermark, v); }

}  // namespace

void Mmu::configure(const QosConfig& qos, const std::vector<PortHeadroom>& ports) {
  const BufferConfig& b = qos.buffer;
  lossless_pool_ = b.roce_pool_percent > 0;
  const uint64_t lossless_size = b.size / 100 * b.roce_pool_percent;
  ingress_[kLossyPool].size = b.size - lossless_size;
  egress_[kLossyPool].size = b.size - lossless_size;
  ingress_[kLosslessPool].size = lossless_size;
  egress_[kLosslessPool].size = lossless_size;
  pg_reserved_ = b.pg_reserved;
  queue_reserved_ = b.queue_reserved;
  ports_.resize(ports.size());
  const uint8_t lossless_tcs = qos.lossless_tcs();
  for (auto& p : ingress_) p.used = 0;
  for (auto& p : egress_) p.used = 0;
  for (size_t port = 0; port < ports_.size(); port++) {
    PortState& ps = ports_[port];
    ps.in_pool.fill(0);
    ps.out_pool.fill(0);
    for (uint8_t g = 0; g < kNumPg; g++) {
      PgBuffer& pg = ps.pg[g];
      pg.lossless = qos.pg_lossless(g);
      pg.pool = pg.lossless && lossless_pool_ ? kLosslessPool : kLossyPool;
      pg.alpha = alpha_to_fixed(pg.lossless ? b.ingress_lossless_alpha : b.ingress_lossy_alpha);
      pg.headroom_size = pg.lossless ? ports[port].xoff : 0;
      pg.xon = pg.lossless ? ports[port].xon : 0;
      pg.slack_size = pg.lossless ? ports[port].slack : 0;
      ingress_[pg.pool].used += pg.shared;
      ps.in_pool[pg.pool] += pg.total();
    }
    for (uint8_t tc = 0; tc < kNumTc; tc++) {
      QueueBuffer& q = ps.queue[tc];
      q.lossless = (lossless_tcs >> tc) & 1;
      q.pool = q.lossless && lossless_pool_ ? kLosslessPool : kLossyPool;
      q.alpha = alpha_to_fixed(b.egress_lossy_alpha);
      egress_[q.pool].used += q.shared;
      ps.out_pool[q.pool] += q.total();
    }
  }
}

Admission Mmu::check(uint16_t in_port, uint8_t g, uint16_t out_port, uint8_t tc, uint32_t len) const {
  Admission a;
  const PgBuffer& pg = ports_[in_port].pg[g];
  const BufferPool& ipool = ingress_[pg.pool];
  if (pg.reserved + len <= pg_reserved_) {
    a.ingress = IngressPlace::kReserved;
  } else if (pg.shared < pg_threshold(in_port, g) && ipool.used + len <= ipool.size) {
    a.ingress = IngressPlace::kShared;
  } else if (pg.lossless && pg.headroom + len <= pg.headroom_size) {
    a.ingress = IngressPlace::kHeadroom;
  } else if (pg.lossless && pg.slack + len <= pg.slack_size) {
    a.ingress = IngressPlace::kSlack;
  }
  const QueueBuffer& q = ports_[out_port].queue[tc];
  const BufferPool& epool = egress_[q.pool];
  a.egress_ok = q.lossless || q.reserved + len <= queue_reserved_ ||
                (q.shared < queue_threshold(out_port, tc) && epool.used + len <= epool.size);
  return a;
}

void Mmu::commit(uint16_t in_port, uint8_t g, uint16_t out_port, uint8_t tc, uint32_t len, IngressPlace where) {
  PortState& in = ports_[in_port];
  PgBuffer& pg = in.pg[g];
  switch (where) {
    case IngressPlace::kReserved:
      pg.reserved += len;
      break;
    case IngressPlace::kShared:
      pg.shared += len;
      ingress_[pg.pool].used += len;
      raise(ingress_[pg.pool].watermark, ingress_[pg.pool].used);
      raise(pg.shared_watermark, pg.shared);
      break;
    case IngressPlace::kHeadroom:
      pg.headroom += len;
      raise(pg.headroom_watermark, pg.headroom);
      break;
    case IngressPlace::kSlack:
      pg.slack += len;
      raise(pg.slack_watermark, pg.slack);
      break;
    case IngressPlace::kNone:
      return;
  }
  raise(pg.watermark, pg.total());
  in.in_pool[pg.pool] += len;
  raise(in.in_pool_wm[pg.pool], in.in_pool[pg.pool]);

  PortState& out = ports_[out_port];
  QueueBuffer& q = out.queue[tc];
  if (q.reserved + len <= queue_reserved_) {
    q.reserved += len;
  } else {
    q.shared += len;
    egress_[q.pool].used += len;
    raise(egress_[q.pool].watermark, egress_[q.pool].used);
  }
  raise(q.watermark, q.total());
  out.out_pool[q.pool] += len;
  raise(out.out_pool_wm[q.pool], out.out_pool[q.pool]);
}

void Mmu::release(uint16_t in_port, uint8_t g, uint16_t out_port, uint8_t tc, uint32_t len) {
  PortState& in = ports_[in_port];
  PgBuffer& pg = in.pg[g];
  uint64_t left = std::min<uint64_t>(len, pg.total());
  const uint64_t from_slack = std::min(left, pg.slack);
  pg.slack -= from_slack;
  left -= from_slack;
  const uint64_t from_headroom = std::min(left, pg.headroom);
  pg.headroom -= from_headroom;
  left -= from_headroom;
  const uint64_t from_shared = std::min(left, pg.shared);
  pg.shared -= from_shared;
  ingress_[pg.pool].used -= std::min(ingress_[pg.pool].used, from_shared);
  left -= from_shared;
  pg.reserved -= std::min(left, pg.reserved);
  in.in_pool[pg.pool] -= std::min<uint64_t>(in.in_pool[pg.pool], len);

  PortState& out = ports_[out_port];
  QueueBuffer& q = out.queue[tc];
  left = std::min<uint64_t>(len, q.total());
  const uint64_t q_shared = std::min(left, q.shared);
  q.shared -= q_shared;
  egress_[q.pool].used -= std::min(egress_[q.pool].used, q_shared);
  left -= q_shared;
  q.reserved -= std::min(left, q.reserved);
  out.out_pool[q.pool] -= std::min<uint64_t>(out.out_pool[q.pool], len);
}

void Mmu::clear_watermarks() {
  for (auto& p : ingress_) p.watermark = p.used;
  for (auto& p : egress_) p.watermark = p.used;
  for (PortState& ps : ports_) {
    for (PgBuffer& pg : ps.pg) {
      pg.shared_watermark = pg.shared;
      pg.headroom_watermark = pg.headroom;
      pg.slack_watermark = pg.slack;
      pg.watermark = pg.total();
    }
    for (QueueBuffer& q : ps.queue) q.watermark = q.total();
    ps.in_pool_wm = ps.in_pool;
    ps.out_pool_wm = ps.out_pool;
  }
}

}  // namespace rocemu::sw
