// The port side of the NIC: receive dispatch (decode, ICRC, ARP, PFC, to
// requester or responder), neighbour resolution and transmit scheduling.
#include "nic/nic.h"

#include <algorithm>
#include <cstring>

#include "common/engine/engine.h"
#include "common/engine/lazy_payload.h"
#include "nic/cc/cc_config.h"

namespace rocemu::nic {

namespace {
constexpr uint32_t kPumpBudget = 64;
}  // namespace

NicConfig::NicConfig() {
  for (size_t d = 0; d < dscp_to_prio.size(); d++) dscp_to_prio[d] = uint8_t(d >> 3);
}

Nic::Nic(std::string name, NicConfig cfg) : Node(std::move(name), 3), cfg_(std::move(cfg)), log_(logger("nic")) {
  // GID table as mlx5 lays it out: per address a RoCE v1 and a v2 entry;
  // first the MAC-derived link-local address, then each IP address, IPv4
  // ones as IPv4-mapped IPv6. With one IPv4 address, index 3 is its v2 GID.
  wire::IpAddr ll;
  ll.b[0] = 0xfe;
  ll.b[1] = 0x80;
  ll.b[8] = uint8_t(cfg_.mac.b[0] ^ 0x02);
  ll.b[9] = cfg_.mac.b[1];
  ll.b[10] = cfg_.mac.b[2];
  ll.b[11] = 0xff;
  ll.b[12] = 0xfe;
  ll.b[13] = cfg_.mac.b[3];
  ll.b[14] = cfg_.mac.b[4];
  ll.b[15] = cfg_.mac.b[5];
  gids_.push_back({ll, IBV_GID_TYPE_ROCE_V1});
  gids_.push_back({ll, IBV_GID_TYPE_ROCE_V2});
  for (const auto& ip : cfg_.ips) {
    gids_.push_back({ip, IBV_GID_TYPE_ROCE_V1});
    gids_.push_back({ip, IBV_GID_TYPE_ROCE_V2});
  }
  arp_timer_.bind<&Nic::on_arp_timer>(this);
  pump_timer_.bind<&Nic::on_pump>(this);
  unpause_timer_.bind<&Nic::on_unpause>(this);
  cc_ = cc::make_algorithm(cfg_.cc);
  if (cc_ == nullptr) cc_ = cc::make_algorithm(cc::CcConfig{"none", "", {}});
  make_cm();
}

Status Nic::set_cc_knobs(const YAML::Node& knobs) {
  if (cfg_.cc.algorithm != "dcqcn")
    return Status::error(name() + ": congestion control is " + cfg_.cc.algorithm +
                         "; the algorithm is chosen in the topology (cc: dcqcn)");
  config::Context ctx("");
  cc::set_knobs(knobs, "cc", ctx, cfg_.cc.dcqcn);
  if (ctx.ok()) cc_->configure(cfg_.cc);
  return ctx.status();
}

Nic::~Nic() {
  flush_dma();
  for (auto& [qpn, qp] : qps_) {
    for (rte_mbuf* m : qp->lr.ooo)
      if (m != nullptr) rte_pktmbuf_free(m);
    drop_prefetch(*qp);
  }
  for (const ControlFrame& c : control_q_) rte_pktmbuf_free(c.m);
}

void Nic::on_start(Time now) {
  // QP-to-QP traffic on this NIC turns around inside it, at port speed.
  LinkParams lp;
  lp.rate_bps = link_rate_bps();
  lp.delay = ns(100);
  lp.mtu = 9000;
  lp.tx_slack = engine().tx_slack();
  loopback_ = std::make_unique<InternalLink>(name() + ":loopback", this, kLoopbackTx, this, kLoopbackRx, lp,
                                             timers(), pool(), rng().next());
  sched_.bind(&timers(), Timer::method<&Nic::on_pace, Nic>(), this);
  pace_burst_ = lp.tx_slack;
  announce(now);
}

void Nic::announce(Time now) {
  // Gratuitous ARP for each IPv4 address, as a host does when its link
  // comes up: switches learn where we are before the first packet to us
  // (UD has no retransmission to hide a neighbour miss).
  for (const auto& ip : cfg_.ips) {
    if (!ip.is_v4()) continue;
    rte_mbuf* m = new_frame();
    if (m == nullptr) return;
    const uint32_t len = wire::encode_arp({rte_pktmbuf_mtod(m, uint8_t*), dpdk::PacketPool::kMaxFrame},
                                          wire::kArpRequest, cfg_.mac, ip.v4_host_order(), wire::MacAddr{},
                                          ip.v4_host_order(), wire::kBroadcastMac);
    rte_pktmbuf_append(m, uint16_t(len));
    counters_[NicCounters::tx_arp]++;
    send_control(m, now);
  }
}

uint64_t Nic::link_rate_bps() const {
  const Port* p = port(kWirePort);
  return p != nullptr ? p->rate_bps() : cfg_.port_rate_bps;
}

uint32_t Nic::link_mtu() const {
  const Port* p = port(kWirePort);
  return p != nullptr ? p->mtu() : 1500;
}

bool Nic::link_up() const {
  const Port* p = port(kWirePort);
  return p != nullptr && p->link_up();
}

ibv_mtu Nic::active_mtu() const {
  // RoCE headers on top of the IB MTU: IPv6 40 + UDP 8 + BTH 12 + up to
  // 28 bytes of extension headers + ICRC 4 = 92 (rxe budgets 80 + ...).
  const uint32_t mtu = link_mtu();
  ibv_mtu best = IBV_MTU_256;
  for (ibv_mtu m : {IBV_MTU_256, IBV_MTU_512, IBV_MTU_1024, IBV_MTU_2048, IBV_MTU_4096})
    if (mtu_bytes(m) + 92 <= mtu) best = m;
  return best;
}

rte_mbuf* Nic::new_frame() {
  rte_mbuf* m = pool().alloc();
  if (m == nullptr) counters_[NicCounters::tx_no_mbuf]++;
  return m;
}

bool Nic::is_local_ip(const wire::IpAddr& ip) const {
  // Per received packet: two 64-bit compares per address, not a memcmp call.
  uint64_t a[2];
  std::memcpy(a, ip.b.data(), sizeof a);
  for (const wire::IpAddr& own : cfg_.ips) {
    uint64_t b[2];
    std::memcpy(b, own.b.data(), sizeof b);
    if (((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0) return true;
  }
  return false;
}

// ------------------------------------------------------------- receive ----

void Nic::on_rx(uint16_t port_index, rte_mbuf** pkts, uint16_t n, Time now) {
  // A burst is processed whole before anything is sent: ACKs owed for
  // several requests of the burst coalesce into one, and the burst's DMA
  // writes go to each host together -- before any ACK says they are done.
  const bool was_pumping = pumping_;
  pumping_ = true;
  for (uint16_t i = 0; i < n; i++) handle_frame(port_index, pkts[i], now);
  flush_dma();
  handle_dma_failures(now);
  pumping_ = was_pumping;
  if (!pumping_) pump(now);
}

bool Nic::dma_write(const DmaOwner& owner, uint64_t host_addr, const uint8_t* src, uint32_t len) {
  HostMemory* mem = owner.read_response ? owner.qp->ctx->memory : owner.qp->responder_memory();
  if (std::find(dirty_.begin(), dirty_.end(), mem) == dirty_.end()) dirty_.push_back(mem);
  if (dma_owners_.empty() || !(dma_owners_.back() == owner)) dma_owners_.push_back(owner);
  const auto tag = DmaTag(dma_owners_.size() - 1);
  // Payload of a frame that points into the sender's memory: from there,
  // copied now or set aside (write_deferred) -- that memory is not held.
  if (rx_frame_ != nullptr && dpdk::lazy(rx_frame_)) {
    if (const uint8_t* from = dpdk::lazy_source(rx_frame_, src, len)) return mem->write_deferred(host_addr, from, len, tag);
    dpdk::materialize(rx_frame_);  // not (wholly) its payload: the frame's bytes, made real
  }
  // Payload of the frame being received: keep the frame until the flush
  // and write from it directly.
  if (rx_frame_ != nullptr && mem->batches()) {
    const uint8_t* base = rte_pktmbuf_mtod(rx_frame_, const uint8_t*);
    if (src >= base && src + len <= base + rte_pktmbuf_data_len(rx_frame_)) {
      if (held_.empty() || held_.back() != rx_frame_) {
        rte_mbuf_refcnt_update(rx_frame_, 1);
        held_.push_back(rx_frame_);
      }
      return mem->write_deferred_ref(host_addr, src, len, tag);
    }
  }
  return mem->write_deferred(host_addr, src, len, tag);
}

void Nic::flush_dma() {
  if (dirty_.empty() && held_.empty() && dma_owners_.empty()) return;  // an ACK, a CNP: nothing was written
  // Reads and immediate writes flush too: what failed then is collected here.
  for (HostMemory* mem : dirty_) {
    mem->flush();
    for (DmaTag tag : mem->take_failed())
      if (tag < dma_owners_.size()) note_dma_failure(dma_owners_[tag]);
  }
  dirty_.clear();
  dma_owners_.clear();
  for (rte_mbuf* m : held_) rte_pktmbuf_free(m);
  held_.clear();
}

bool Nic::read_responses_pending(const Qp& qp) const {
  return std::any_of(dma_owners_.begin(), dma_owners_.end(),
                     [&](const DmaOwner& o) { return o.qp == &qp && o.read_response; });
}

void Nic::note_dma_failure(const DmaOwner& owner) {
  counters_[NicCounters::dma_write_errors]++;
  Qp& qp = *owner.qp;
  if (owner.read_response) {
    // The READ's data is not all in place: its completion says so (the
    // completer decides completions after a flush).
    if (uint32_t(owner.id - qp.req.sq_head) < uint32_t(qp.req.sq_fetched - qp.req.sq_head) &&
        qp.work(owner.id).status == IBV_WC_SUCCESS)
      qp.work(owner.id).status = IBV_WC_LOC_PROT_ERR;
    return;
  }
  // The message in progress lost data (a write of an earlier message, one
  // with no receive, flushed late, is not this message's).
  if (wire::psn_ge(owner.id, qp.resp.message_psn)) qp.resp.message_data_lost = true;
  // RC also NAKs the request (handle_dma_failures); UC and UD have no ACK.
  if (qp.reliable() &&
      std::find_if(dma_failed_.begin(), dma_failed_.end(), [&](const DmaOwner& o) { return o.qp == &qp; }) ==
          dma_failed_.end())
    dma_failed_.push_back(owner);
}

void Nic::handle_dma_failures(Time now) {
  // A request whose data did not land is NAKed (remote operational error:
  // the responder failed locally) instead of acknowledged, and the QP goes
  // to ERR; the pending ACK, which may cover later PSNs of the burst, is
  // replaced by the NAK. UC and UD have no ACK: their receive completion
  // already carries the error.
  if (dma_failed_.empty()) return;
  for (const DmaOwner& o : std::exchange(dma_failed_, {})) {
    Qp& qp = *o.qp;
    if (!qp.reliable() || qp.state == IBV_QPS_ERR) continue;
    responder_error(qp, IBV_WC_LOC_PROT_ERR, wire::aeth_nak(wire::NakCode::kRemoteOperationalError), o.id, now);
  }
}

void Nic::handle_frame(uint16_t, rte_mbuf* m, Time now) {
  // The one owner of a received frame: handlers return what they did with
  // it, and it is freed here unless one kept it.
  if (dispatch(m, now) == RxDisposition::kFree) rte_pktmbuf_free(m);
}

RxDisposition Nic::dispatch(rte_mbuf* m, Time now) {
  wire::PacketView v;
  // Like the ICRC below: a frame the engine built and nothing corrupted
  // since has a right IPv4 checksum, and only others are summed.
  const wire::DecodeError e = (dpdk::meta(m).flags & dpdk::kMetaIcrcValid)
                                  ? wire::decode_ip_checksum_good(dpdk::bytes(m), v)
                                  : wire::decode(dpdk::bytes(m), v);
  if (e != wire::DecodeError::kOk) {
    counters_[NicCounters::rx_malformed]++;
    return RxDisposition::kFree;
  }
  switch (v.kind) {
    case wire::PacketKind::kArp:
      handle_arp(v, now);
      break;
    case wire::PacketKind::kPfc:
      handle_pfc(v, now);
      break;
    case wire::PacketKind::kIpv4:
    case wire::PacketKind::kIpv6:
      if (v.is_roce) return handle_roce(m, v, now);
      break;
    default:
      break;
  }
  return RxDisposition::kFree;
}

RxDisposition Nic::handle_roce(rte_mbuf* m, const wire::PacketView& v, Time now) {
  if (!is_local_ip(v.dst_ip())) {
    counters_[NicCounters::rx_not_for_us]++;
    return RxDisposition::kFree;
  }
  // Frames from outside, or corrupted on the way, are checked; a frame
  // this engine built and nothing altered since carries the flag instead.
  if (!(dpdk::meta(m).flags & dpdk::kMetaIcrcValid) && !v.icrc_ok()) {
    counters_[NicCounters::rx_icrc_error]++;
    return RxDisposition::kFree;
  }
  counters_[NicCounters::rx_roce_packets]++;
  counters_[NicCounters::rx_roce_bytes] += v.len;
  const bool ce = v.ecn == wire::Ecn::kCe;
  if (ce) counters_[NicCounters::np_ecn_marked_roce_packets]++;
  const wire::Bth& bth = v.bth();
  if (bth.dest_qp() == cm::kGsiQpn) return handle_gsi(v, now);
  Qp* qp = find_qp(bth.dest_qp());
  const bool live = qp != nullptr && qp->ctx != nullptr && !qp->ctx->dead;
  if (v.opcode == wire::op::kCnp) {
    // Reaction point: the QP's algorithm decides (and may ignore its priority).
    const bool handled = live && !qp->is_ud() && cc_flow(*qp).on_cnp(now);
    counters_[handled ? NicCounters::rp_cnp_handled : NicCounters::rp_cnp_ignored]++;
    return RxDisposition::kFree;
  }
  if (!live) {
    counters_[NicCounters::rx_not_for_us]++;
    return RxDisposition::kFree;
  }
  // The transport of the opcode must be the QP's.
  const wire::Transport t = wire::opcode_transport(v.opcode);
  // XRC: requests go to targets, responses to initiators.
  const bool request = v.op().any(wire::kOpRequest);
  const bool type_ok = (t == wire::Transport::kRc && qp->type == QpType::kRc) ||
                       (t == wire::Transport::kUc && qp->type == QpType::kUc) ||
                       (t == wire::Transport::kUd && qp->type == QpType::kUd) ||
                       (t == wire::Transport::kXrc && qp->type == (request ? QpType::kXrcRecv : QpType::kXrcSend));
  if (!type_ok) {
    counters_[NicCounters::rx_not_for_us]++;
    return RxDisposition::kFree;
  }
  if (ce && !qp->is_ud()) on_ce_marked(*qp, now);
  rx_frame_ = m;
  RxDisposition d = RxDisposition::kFree;
  if (!v.op().any(wire::kOpRequest)) {
    d = handle_response(*qp, v, now);
  } else if (qp->is_ud()) {
    responder_ud(*qp, v, now);
  } else {
    d = handle_request(*qp, m, v, now);
  }
  rx_frame_ = nullptr;
  return d;
}

void Nic::handle_arp(const wire::PacketView& v, Time now) {
  counters_[NicCounters::rx_arp]++;
  const wire::ArpHdr& arp = v.arp();
  if (arp.htype.get() != 1 || arp.ptype.get() != 0x0800 || arp.hlen != 6 || arp.plen != 4) return;
  const wire::IpAddr sender = wire::IpAddr::v4(arp.spa.get());
  const wire::IpAddr target = wire::IpAddr::v4(arp.tpa.get());
  if (arp.spa.get() != 0) {
    learn_neighbor(sender, arp.sha);
    arp_pending_.erase(sender);
  }
  if (arp.oper.get() == wire::kArpRequest && is_local_ip(target)) {
    if (rte_mbuf* m = new_frame()) {
      const uint32_t len = wire::encode_arp({rte_pktmbuf_mtod(m, uint8_t*), dpdk::PacketPool::kMaxFrame},
                                            wire::kArpReply, cfg_.mac, target.v4_host_order(), arp.sha,
                                            sender.v4_host_order(), arp.sha);
      rte_pktmbuf_append(m, uint16_t(len));
      counters_[NicCounters::tx_arp]++;
      send_control(m, now);
    }
  }
  // QPs waiting for a neighbour may go now.
  auto waiting = std::move(waiting_for_arp_);
  waiting_for_arp_.clear();
  for (Qp* qp : waiting) {
    if (resolve_neighbor(*qp, now)) activate(*qp, now);
  }
}

void Nic::handle_pfc(const wire::PacketView& v, Time now) {
  counters_[NicCounters::rx_pfc_frames]++;
  const wire::PfcHdr& pfc = v.pfc();
  const uint64_t rate = link_rate_bps();
  Time earliest = kTimeNever;
  for (int p = 0; p < wire::kNumPriorities; p++) {
    if (!pfc.enabled(p)) continue;
    prio_counters_[size_t(p)][NicPrioCounters::rx_pause]++;
    if (((cfg_.pfc_priorities >> p) & 1) == 0) continue;
    const uint32_t quanta = pfc.time[p].get();
    const Time until = now + serialization_time(uint64_t(quanta) * wire::kBitsPerQuantum / 8, rate);
    // A new pause replaces what was left of the last one.
    const Duration left = pause_until_[size_t(p)] > now ? pause_until_[size_t(p)] - now : Duration(0);
    counters_[NicCounters::tx_pfc_paused_time_ps] += uint64_t((until - now).count()) - uint64_t(left.count());
    pause_granted_[size_t(p)] += (until - now) - left;
    pause_until_[size_t(p)] = until;
    if (until > now) {
      xoff_ |= uint8_t(1u << p);
      earliest = std::min(earliest, until);
    } else if ((xoff_ >> p) & 1) {  // XON: quanta 0
      xoff_ &= uint8_t(~(1u << p));
      prio_counters_[size_t(p)][NicPrioCounters::rx_pause_transition]++;
    }
  }
  for (int p = 0; p < wire::kNumPriorities; p++)
    if (pause_until_[size_t(p)] > now) earliest = std::min(earliest, pause_until_[size_t(p)]);
  if (earliest != kTimeNever) {
    timers().schedule(unpause_timer_, earliest);
  } else {
    on_unpause(now);
  }
}

void Nic::on_unpause(Time now) {
  for (int p = 0; p < wire::kNumPriorities; p++)
    if (((xoff_ >> p) & 1) && pause_until_[size_t(p)] <= now) {  // the pause ran out
      xoff_ &= uint8_t(~(1u << p));
      prio_counters_[size_t(p)][NicPrioCounters::rx_pause_transition]++;
    }
  for (Qp* qp : sched_.take_paused()) {
    if (priority_paused(qp->priority, now)) {
      sched_.wait_pause(*qp);
    } else {
      activate(*qp, now);
    }
  }
  Time earliest = kTimeNever;
  for (Time t : pause_until_)
    if (t > now) earliest = std::min(earliest, t);
  if (earliest != kTimeNever) timers().schedule(unpause_timer_, earliest);
  if (!control_q_.empty() && !pumping_) pump(now);  // CNPs that waited
}

// ----------------------------------------------------------- neighbours ----

std::optional<wire::MacAddr> Nic::neighbor(const wire::IpAddr& ip) {
  if (auto it = cfg_.neighbors.find(ip); it != cfg_.neighbors.end()) return it->second;
  if (auto it = arp_cache_.find(ip); it != arp_cache_.end()) return it->second;
  return std::nullopt;
}

void Nic::learn_neighbor(const wire::IpAddr& ip, const wire::MacAddr& mac) {
  if (auto it = arp_cache_.find(ip); it != arp_cache_.end()) {
    it->second = mac;
    return;
  }
  // Full: the oldest entry goes (QPs keep the MAC they resolved).
  if (arp_cache_.size() >= kMaxNeighbors) {
    arp_cache_.erase(arp_order_.front());
    arp_order_.pop_front();
  }
  arp_cache_.emplace(ip, mac);
  arp_order_.push_back(ip);
}

wire::IpAddr Nic::next_hop(const wire::IpAddr& dst) const {
  if (cfg_.gateway && dst.is_v4() && !cfg_.ips.empty() && cfg_.ips.front().is_v4()) {
    const uint32_t mask = cfg_.prefix_len == 0 ? 0 : ~0u << (32 - cfg_.prefix_len);
    if ((dst.v4_host_order() & mask) != (cfg_.ips.front().v4_host_order() & mask)) return *cfg_.gateway;
  } else if (cfg_.gateway && !dst.is_v4()) {
    return *cfg_.gateway;
  }
  return dst;
}

bool Nic::resolve_neighbor(Qp& qp, Time now) {
  if (is_local_ip(qp.dst_ip)) {
    qp.path.dst_mac = cfg_.mac;
    qp.egress_port = kLoopbackTx;
    qp.neighbor_ok = true;
    return true;
  }
  qp.egress_port = kWirePort;
  const wire::IpAddr hop = next_hop(qp.dst_ip);
  if (auto mac = neighbor(hop)) {
    qp.path.dst_mac = *mac;
    qp.neighbor_ok = true;
    return true;
  }
  qp.neighbor_ok = false;
  if (std::find(waiting_for_arp_.begin(), waiting_for_arp_.end(), &qp) == waiting_for_arp_.end())
    waiting_for_arp_.push_back(&qp);
  if (hop.is_v4()) {
    auto it = arp_pending_.find(hop);
    if (it == arp_pending_.end() || now - it->second >= ms(1)) send_arp_request(hop, now);
  } else {
    log_->warn("{}: no neighbour entry for {}; add it under neighbors in the topology", name(), hop.str());
  }
  if (!arp_timer_.armed()) timers().schedule(arp_timer_, now + ms(1));
  return false;
}

void Nic::send_arp_request(const wire::IpAddr& ip, Time now) {
  const wire::IpAddr* src = nullptr;
  for (const auto& a : cfg_.ips)
    if (a.is_v4()) {
      src = &a;
      break;
    }
  if (src == nullptr) return;
  rte_mbuf* m = new_frame();
  if (m == nullptr) return;
  const uint32_t len = wire::encode_arp({rte_pktmbuf_mtod(m, uint8_t*), dpdk::PacketPool::kMaxFrame},
                                        wire::kArpRequest, cfg_.mac, src->v4_host_order(), wire::MacAddr{},
                                        ip.v4_host_order(), wire::kBroadcastMac);
  rte_pktmbuf_append(m, uint16_t(len));
  arp_pending_[ip] = now;
  counters_[NicCounters::tx_arp]++;
  send_control(m, now);
}

void Nic::on_arp_timer(Time now) {
  auto waiting = std::move(waiting_for_arp_);
  waiting_for_arp_.clear();
  for (Qp* qp : waiting)
    if (resolve_neighbor(*qp, now)) activate(*qp, now);
}

// ------------------------------------------------------------ transmit ----

bool Nic::emit(uint16_t port_index, rte_mbuf* m, Time now) {
  Port* p = port(port_index);
  if (p == nullptr || p->tx_burst(&m, 1, now) != 1) {
    rte_pktmbuf_free(m);
    return false;
  }
  return true;
}

void Nic::send_control(rte_mbuf* m, Time now, uint8_t prio) {
  control_q_.push_back({m, prio});
  if (!pumping_) pump(now);
}

void Nic::activate(Qp& qp, Time now) {
  // An ACK owed by a QP whose data waits for its pacing slot goes now (the
  // wait-list entry goes stale; the data waits again after the ACK).
  if (qp.tx_gate == TxGate::kPacing && qp.resp.ack_pending) qp.tx_gate = TxGate::kNone;
  if (qp.tx_gate != TxGate::kNone) return;
  sched_.ready(qp);
  if (!pumping_) pump(now);
}

void Nic::on_tx_ready(uint16_t port_index, Time now) {
  for (Qp* qp : sched_.take_port(port_index)) sched_.ready(*qp);
  if (!pumping_) pump(now);
}

void Nic::on_pace(Time now) {
  sched_.release_due(now);
  if (!pumping_) pump(now);
}

void Nic::send_control_frames(Time now) {
  // In order, except that a CNP on a priority PFC pauses waits (and what
  // follows it may pass); ARP has no priority.
  Port* wire_port = port(kWirePort);
  for (auto it = control_q_.begin(); it != control_q_.end() && wire_port != nullptr && wire_port->tx_ready(now);) {
    if (it->prio < pause_until_.size() && priority_paused(it->prio, now)) {
      ++it;
      continue;
    }
    emit(kWirePort, it->m, now);
    it = control_q_.erase(it);
  }
}

Time Nic::pace_due(Qp& qp) {
  return qp.pace_bytes == 0 ? qp.pace_from : qp.pace_from + TxScheduler::slot(qp.pace_bytes, cc_flow(qp).rate_bps());
}

TxGate Nic::gate_for(Qp& qp, bool paced, uint16_t out, Time now) {
  if (priority_paused(qp.priority, now)) return TxGate::kPfcPause;
  if (paced && pace_due(qp) > now) return TxGate::kPacing;
  if (!port(out)->tx_ready(now)) return TxGate::kPortBusy;
  return TxGate::kNone;
}

bool Nic::send_one(Qp& qp, bool resp, bool paced, uint16_t out, Time now) {
  rte_mbuf* m = resp ? responder_make_packet(qp, now) : requester_make_packet(qp, now);
  if (m == nullptr) return !(counters_[NicCounters::tx_no_mbuf] > 0 && pool().exhausted());
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  counters_[NicCounters::tx_roce_packets]++;
  counters_[NicCounters::tx_roce_bytes] += len;
  if (paced) {
    // Pacing: this packet takes a slot at the QP's rate from where the last
    // one ended (a late real-time engine may catch up pace_burst_ of them);
    // at line rate the wire paces by itself.
    cc::Flow& flow = cc_flow(qp);
    const bool below_line = flow.rate_bps() < double(port(out)->rate_bps());
    qp.pace_from = below_line ? std::max(pace_due(qp), now - pace_burst_) : now;
    qp.pace_bytes = below_line ? wire_bytes(len) : 0;
    flow.on_sent(len, now);
  }
  emit(out, m, now);
  return true;
}

void Nic::pump(Time now) {
  pumping_ = true;
  send_control_frames(now);
  uint32_t budget = kPumpBudget;
  while (budget > 0) {
    Qp* qp = sched_.take_ready();
    if (qp == nullptr) break;
    if (HostContext* ctx = qp->ctx; ctx != nullptr && (ctx->dead || ctx->memory->gone())) {
      ctx->dead = true;  // its process is gone: nothing more leaves, not even the ACK of a failed write
      continue;
    }
    const bool resp = responder_has_work(*qp);
    if (!resp && !requester_has_work(*qp, now)) continue;
    const uint16_t out = resp ? qp->egress_port : requester_port(*qp);
    if (port(out) == nullptr) continue;  // not connected: nothing can leave
    // Data (requests, READ responses, atomic ACKs) is paced; a bare ACK is not.
    const bool paced = !resp || !qp->resp.tasks.empty();
    switch (gate_for(*qp, paced, out, now)) {
      case TxGate::kPfcPause: sched_.wait_pause(*qp); continue;
      case TxGate::kPacing: sched_.wait_pacing(*qp, pace_due(*qp)); continue;
      case TxGate::kPortBusy: sched_.wait_port(*qp, out); continue;  // on_tx_ready puts it back
      default: break;
    }
    if (!send_one(*qp, resp, paced, out, now)) {
      // Out of buffers: try again a little later.
      sched_.ready_front(*qp);
      timers().schedule(pump_timer_, now + us(1));
      break;
    }
    budget--;
    if (responder_has_work(*qp) || requester_has_work(*qp, now)) sched_.ready(*qp);
  }
  if (sched_.has_ready() && budget == 0 && !pump_timer_.armed()) timers().schedule(pump_timer_, now);
  pumping_ = false;
}

// ---------------------------------------------------- congestion control ----

cc::Flow& Nic::cc_flow(Qp& qp) {
  if (!qp.cc)
    qp.cc = cc_->open({qp.qpn, qp.priority, double(link_rate_bps()), &timers(), &Nic::rate_up_thunk, &qp});
  return *qp.cc;
}

void Nic::rate_up_thunk(void* qp, Time now) {
  Qp& q = *static_cast<Qp*>(qp);
  q.nic->on_rate_up(q, now);
}

void Nic::on_rate_up(Qp& qp, Time now) {
  // A QP waiting at the old rate waits less now.
  if (qp.tx_gate != TxGate::kPacing) return;
  qp.tx_gate = TxGate::kNone;
  const Time due = pace_due(qp);
  if (due > now) {
    sched_.wait_pacing(qp, due);
  } else {
    activate(qp, now);
  }
}

void Nic::on_ce_marked(Qp& qp, Time now) {
  cc::Flow& flow = cc_flow(qp);
  if (!flow.np_enabled()) return;
  if (!flow.on_ce(now)) {
    counters_[NicCounters::np_cnp_suppressed]++;
    return;
  }
  send_cnp(qp, now);
}

void Nic::send_cnp(Qp& qp, Time now) {
  if (!qp.neighbor_ok) return;
  rte_mbuf* m = new_frame();
  if (m == nullptr) return;
  wire::PathHeaders path = qp.path;
  path.dscp = cfg_.cnp_dscp;
  path.ecn = wire::Ecn::kNotEct;
  path.pcp = cfg_.cnp_prio;
  const uint32_t len = wire::encode_cnp({rte_pktmbuf_mtod(m, uint8_t*), dpdk::PacketPool::kMaxFrame}, path,
                                        qp.dest_qpn);
  rte_pktmbuf_append(m, uint16_t(len));
  counters_[NicCounters::np_cnp_sent]++;
  if (qp.egress_port == kWirePort) {
    send_control(m, now, cfg_.cnp_prio);  // ahead of data
  } else {
    emit(qp.egress_port, m, now);  // loopback
  }
}

uint64_t Nic::prio_counter(NicPrioCounters::Id id, int prio, Time now) const {
  const size_t p = size_t(prio);
  if (id != NicPrioCounters::rx_pause_duration) return prio_counters_[p][id];
  // What was granted, less what is still to come.
  const Duration left = pause_until_[p] > now ? pause_until_[p] - now : Duration(0);
  return uint64_t((pause_granted_[p] - left).count() / 1'000'000);
}

std::string prio_counter_name(std::string_view name, int prio) {
  return std::string(name.substr(0, 3)) + "prio" + std::to_string(prio) + "_" + std::string(name.substr(3));
}

void Nic::report_counters(CounterSink& sink) const {
  counters_.report(sink, name());
  const Time now = engine().now();
  for (int p = 0; p < wire::kNumPriorities; p++)
    for (size_t i = 0; i < NicPrioCounters::kCount; i++)
      sink.counter(name(), prio_counter_name(NicPrioCounters::kNames[i], p),
                   prio_counter(NicPrioCounters::Id(i), p, now));
  report_cm_counters(sink);
  for (const auto& [qpn, qp] : qps_) {
    const std::string scope = name() + "/qp" + std::to_string(qpn);
    sink.counter(scope, "retransmitted_packets", qp->req.retransmitted);
    if (qp->cc) qp->cc->report(sink, scope, now);
  }
}

}  // namespace rocemu::nic
