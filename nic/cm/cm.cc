#include "nic/cm/cm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace rocemu::nic::cm {

// The states of an id, the kernel's rdma_cm and IB CM states merged.
enum class ConnectionManager::State : uint8_t {
  kIdle,           // created, maybe bound
  kAddrQuery,      // waiting for a neighbour entry
  kAddrResolved,
  kRouteResolved,
  kListen,
  kReqSent,        // active: REQ out, waiting for REP
  kRepRcvd,        // active: CONNECT_RESPONSE reported, RTU goes at accept
  kReqRcvd,        // passive: CONNECT_REQUEST reported, waiting for accept or reject
  kRepSent,        // passive: REP out, waiting for RTU
  kEstablished,
  kDreqSent,
  kDisconnected,   // DREQ or DREP exchanged
  kSidrReqSent,    // UD active: SIDR_REQ out
  kUdReady,        // UD: resolved by SIDR_REP, or answered
  kRejected,       // a REJ ended it (or the peer never answered)
};

struct ConnectionManager::Id {
  uint32_t handle = 0;
  uint32_t channel = 0;
  uint64_t uid = 0;
  uint16_t ps = 0;
  uint8_t qp_type = IBV_QPT_RC;
  State state = State::kIdle;
  // addresses
  bool bound = false;
  bool has_device = false;  // bound to (or resolved to) this NIC's address
  wire::IpAddr src_ip{}, dst_ip{};
  uint16_t src_port = 0, dst_port = 0;
  bool dst_set = false;
  uint8_t tos = 0;
  uint8_t ack_timeout = 14;
  int backlog = 0;
  // connection
  uint32_t local_comm_id = 0, remote_comm_id = 0;
  uint32_t qpn = 0, remote_qpn = 0, psn = 0, remote_psn = 0, remote_qkey = 0;
  uint8_t responder_resources = 0, initiator_depth = 0, retry_count = 7, rnr_retry = 7;
  uint8_t path_mtu = IBV_MTU_1024;
  bool srq = false, flow_control = false;
  // MADs: `pending` is resent until its answer comes; `last_reply` answers
  // a duplicate of what it answered.
  std::optional<Mad> pending;
  std::optional<Mad> last_reply;
  int retries = 0;
  Time deadline = Time::max();
  Time addr_deadline = Time::max();
  uint32_t events_reported = 0;
};

namespace cm_cc {

using State = ConnectionManager::State;

// The QP type a REQ asks for, as the kernel reads it (cm_req_get_qp_type):
// transport 0 RC, 1 UC, 3 with extended type 1 XRC (its target side);
// anything else no type (0).
uint8_t req_qp_type(const Mad& m) {
  switch (m.get(req::kTransportType)) {
    case 0: return IBV_QPT_RC;
    case 1: return IBV_QPT_UC;
    case 3: return m.get(req::kExtendedTransportType) == 1 ? uint8_t(IBV_QPT_XRC_RECV) : 0;
    default: return 0;
  }
}

// The kernel's cma_loopback_addr: 127/8 for AF_INET, ::1 only for
// AF_INET6 (ipv6_addr_loopback: ::ffff:127.0.0.1 is none).
bool is_loopback(const wire::IpAddr& ip, ConnectionManager::Family family = ConnectionManager::Family::kAsAddress) {
  using Family = ConnectionManager::Family;
  static const wire::IpAddr v6_loopback = [] {
    wire::IpAddr a;
    a.b[15] = 1;
    return a;
  }();
  const bool inet = family == Family::kInet || (family == Family::kAsAddress && ip.is_v4());
  if (inet) return ip.is_v4() && (ip.v4_host_order() >> 24) == 127;
  return ip == v6_loopback;
}
bool is_any(const wire::IpAddr& ip) {
  static const wire::IpAddr v4_any = wire::IpAddr::v4(0);
  return ip == v4_any || ip == wire::IpAddr{};
}

// The CM's view of an address in the cma_hdr: IPv4 in the last 4 bytes,
// the 12 before zero (not IPv4-mapped).
std::array<uint8_t, 16> cma_addr(const wire::IpAddr& ip) {
  std::array<uint8_t, 16> a{};
  if (ip.is_v4()) std::memcpy(a.data() + 12, ip.b.data() + 12, 4);
  else a = ip.b;
  return a;
}
wire::IpAddr from_cma_addr(const std::array<uint8_t, 16>& a, uint8_t ip_version) {
  if (ip_version == 4) {
    uint32_t v;
    std::memcpy(&v, a.data() + 12, 4);
    return wire::IpAddr::v4(ntohl(v));
  }
  wire::IpAddr ip;
  ip.b = a;
  return ip;
}

void put_sockaddr(sockaddr_in6& out, const wire::IpAddr& ip, uint16_t port) {
  std::memset(&out, 0, sizeof out);
  if (ip.is_v4() || is_any(ip)) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(ip.is_v4() ? ip.v4_host_order() : 0);
  } else {
    out.sin6_family = AF_INET6;
    out.sin6_port = htons(port);
    std::memcpy(&out.sin6_addr, ip.b.data(), 16);
  }
}

bool connected(State s) {
  return s == State::kReqSent || s == State::kRepRcvd || s == State::kReqRcvd || s == State::kRepSent ||
         s == State::kEstablished;
}

constexpr uint32_t kUdpQkey = 0x01234567;  // RDMA_UDP_QKEY

// ucma's: a backlog of 0 (or beyond the maximum) means the maximum.
constexpr int kMaxBacklog = 1024;
int listen_backlog(int asked) { return asked > 0 && asked < kMaxBacklog ? asked : kMaxBacklog; }

// The address vector of the peer at `dst` as librdmacm reads it: a global
// route to its GID (the IPv4-mapped address) from GID index `sgid`.
void peer_ah(ib_uverbs_ah_attr& ah, const wire::IpAddr& dst, uint8_t sgid, uint8_t tos) {
  std::memcpy(ah.grh.dgid, dst.b.data(), 16);
  ah.grh.sgid_index = sgid;
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = tos;
  ah.is_global = 1;
  ah.port_num = 1;
}

}  // namespace cm_cc
using namespace cm_cc;

ConnectionManager::ConnectionManager(CmConfig cfg, Host& host)
    : cfg_(cfg), host_(host), rng_(cfg.seed), next_comm_id_(uint32_t(rng_())) {}

ConnectionManager::~ConnectionManager() = default;

// ------------------------------------------------------------ channels ----

uint32_t ConnectionManager::open_channel(uint64_t owner, Signal signal) {
  const uint32_t id = next_channel_++;
  channels_[id] = Channel{owner, std::move(signal), {}};
  return id;
}

void ConnectionManager::close_channel(uint32_t channel, Time now) {
  std::vector<Id*> doomed;
  for (auto& [h, id] : ids_)
    if (id->channel == channel) doomed.push_back(id.get());
  for (Id* id : doomed) destroy(*id, now);
  channels_.erase(channel);
}

std::optional<EventResp> ConnectionManager::get_event(uint32_t channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || it->second.events.empty()) return std::nullopt;
  auto [counted_on, ev] = it->second.events.front();
  it->second.events.pop_front();
  if (auto id = ids_.find(counted_on); id != ids_.end()) id->second->events_reported++;
  return ev;
}

void ConnectionManager::queue_event(Id& id, EventResp ev) {
  auto it = channels_.find(id.channel);
  if (it == channels_.end()) return;
  it->second.events.emplace_back(id.handle, ev);
  if (it->second.signal) it->second.signal(1);
}

void ConnectionManager::queue_event(Id& id, uint32_t event, int32_t status) {
  queue_event(id, conn_event(id, event, status, {}));
}

EventResp ConnectionManager::conn_event(const Id& id, uint32_t event, int32_t status,
                                        std::span<const uint8_t> data) const {
  EventResp ev{};
  ev.uid = id.uid;
  ev.id = id.handle;
  ev.event = event;
  ev.status = uint32_t(status);
  auto& c = ev.param.conn;
  c.qp_num = id.remote_qpn;
  c.srq = id.srq;
  c.responder_resources = id.responder_resources;
  c.initiator_depth = id.initiator_depth;
  c.flow_control = id.flow_control;
  c.retry_count = id.retry_count;
  c.rnr_retry_count = id.rnr_retry;
  const size_t n = std::min(data.size(), sizeof c.private_data);
  if (n != 0) std::memcpy(c.private_data, data.data(), n);
  c.private_data_len = uint8_t(n);
  return ev;
}

void ConnectionManager::drop_events(uint32_t id) {
  for (auto& [h, ch] : channels_) {
    const size_t before = ch.events.size();
    std::erase_if(ch.events, [&](const auto& e) { return e.first == id || e.second.id == id; });
    const size_t dropped = before - ch.events.size();
    if (dropped != 0 && ch.signal) ch.signal(-int(dropped));
  }
}

// ----------------------------------------------------------------- ids ----

ConnectionManager::Id* ConnectionManager::find(uint32_t channel, uint32_t id) {
  auto it = ids_.find(id);
  if (it == ids_.end() || it->second->channel != channel) return nullptr;
  return it->second.get();
}

ConnectionManager::Id* ConnectionManager::by_local_comm_id(uint32_t comm_id) {
  for (auto& [h, id] : ids_)
    if (id->local_comm_id == comm_id && id->state != State::kIdle) return id.get();
  return nullptr;
}

ConnectionManager::Id* ConnectionManager::listener_for(uint16_t ps, uint16_t port, const wire::IpAddr& dst) {
  auto it = ports_.find({ps, port});
  if (it == ports_.end()) return nullptr;
  for (uint32_t h : it->second) {
    Id& id = *ids_.at(h);
    if (id.state == State::kListen && (!id.has_device || id.src_ip == dst)) return &id;
  }
  return nullptr;
}

// Whether `listener` takes a request for a QP of `qp_type` now; a request
// it does not take is counted by why.
bool ConnectionManager::accepts_request(const Id& listener, uint8_t qp_type) {
  if (listener.qp_type != 0 && listener.qp_type != qp_type) {
    counters_.qp_type_mismatch++;
    return false;
  }
  if (backlog_full(listener) || ids_.size() >= cfg_.max_ids) {
    counters_.backlog_full++;
    return false;
  }
  return true;
}

bool ConnectionManager::backlog_full(const Id& listener) const {
  auto it = channels_.find(listener.channel);
  if (it == channels_.end()) return true;
  const auto waiting = std::count_if(it->second.events.begin(), it->second.events.end(), [&](const auto& e) {
    return e.first == listener.handle && e.second.event == RDMA_CM_EVENT_CONNECT_REQUEST;
  });
  return waiting >= listener.backlog;
}

int ConnectionManager::create_id(uint32_t channel, uint64_t uid, uint16_t ps, uint8_t qp_type, uint32_t& out) {
  if (!channels_.contains(channel)) return EINVAL;
  if (ids_.size() >= cfg_.max_ids) return ENOMEM;
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB) return EINVAL;
  // The port space decides the QP type but for RDMA_PS_IB (ucma_get_qp_type).
  if (ps == RDMA_PS_TCP) qp_type = IBV_QPT_RC;
  if (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) qp_type = IBV_QPT_UD;
  auto id = std::make_unique<Id>();
  id->handle = next_id_++;
  id->channel = channel;
  id->uid = uid;
  id->ps = ps;
  id->qp_type = qp_type;
  out = id->handle;
  ids_[out] = std::move(id);
  return 0;
}

void ConnectionManager::release_port(Id& id) {
  if (!id.bound) return;
  auto it = ports_.find({id.ps, id.src_port});
  if (it != ports_.end()) {
    std::erase(it->second, id.handle);
    if (it->second.empty()) ports_.erase(it);
  }
  id.bound = false;
}

int ConnectionManager::allocate_port(Id& id, uint16_t port) {
  auto clashes = [&](uint16_t p) {
    auto it = ports_.find({id.ps, p});
    if (it == ports_.end()) return false;
    for (uint32_t h : it->second) {
      const Id& other = *ids_.at(h);
      if (!other.has_device || !id.has_device || other.src_ip == id.src_ip) return true;
    }
    return false;
  };
  if (port == 0) {
    for (int tries = 0; tries < 28232; tries++) {
      const uint16_t p = next_ephemeral_;
      next_ephemeral_ = next_ephemeral_ == 60999 ? 32768 : uint16_t(next_ephemeral_ + 1);
      if (!clashes(p)) {
        port = p;
        break;
      }
    }
    if (port == 0) return EADDRNOTAVAIL;
  } else if (clashes(port)) {
    return EADDRINUSE;
  }
  id.src_port = port;
  id.bound = true;
  ports_[{id.ps, port}].push_back(id.handle);
  return 0;
}

int ConnectionManager::bind(uint32_t channel, uint32_t handle, const wire::IpAddr* ip, uint16_t port, Family family) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->bound || id->state != State::kIdle) return EINVAL;
  // A loopback address binds as the wildcard does (the kernel's
  // cma_any_addr): no device, and a listener there hears every address.
  // libfabric's verbs provider binds 127.0.0.1 to learn that much.
  const bool any = ip == nullptr || is_any(*ip) || is_loopback(*ip, family);
  if (!any && *ip != cfg_.ip) return ENODEV;  // not this RDMA device's address
  id->has_device = !any;
  id->src_ip = ip == nullptr ? wire::IpAddr::v4(0) : any ? *ip : cfg_.ip;
  return allocate_port(*id, port);
}

int ConnectionManager::resolve_addr(uint32_t channel, uint32_t handle, const wire::IpAddr* src,
                                    const wire::IpAddr& dst, uint16_t dst_port, uint32_t timeout_ms, Time now) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->state != State::kIdle) return EINVAL;
  if (!id->bound) {
    if (int e = bind(channel, handle, src, 0); e != 0) return e;
  } else if (src != nullptr && !is_any(*src) && *src != id->src_ip && id->has_device) {
    return EINVAL;
  }
  id->dst_ip = is_any(dst) ? cfg_.ip : dst;
  id->dst_port = dst_port;
  id->dst_set = true;
  id->has_device = true;
  id->src_ip = cfg_.ip;
  // RDMA does not run on lo: no GID carries a loopback address.
  if (is_loopback(dst) || !dst.is_v4()) {
    queue_event(*id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
    return 0;
  }
  id->state = State::kAddrQuery;
  id->addr_deadline = now + ms(timeout_ms == 0 ? 2000 : timeout_ms);
  poll_address(*id, now);
  return 0;
}

void ConnectionManager::poll_address(Id& id, Time now) {
  const Host::Reach r = id.dst_ip == cfg_.ip ? Host::Reach::kReachable : host_.reach(id.dst_ip, now);
  if (r == Host::Reach::kReachable) {
    id.state = State::kAddrResolved;
    id.deadline = Time::max();
    queue_event(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  } else if (r == Host::Reach::kUnknown || now >= id.addr_deadline) {
    id.state = State::kIdle;
    id.deadline = Time::max();
    queue_event(id, RDMA_CM_EVENT_ADDR_ERROR, r == Host::Reach::kUnknown ? -ENETUNREACH : -ETIMEDOUT);
  } else {
    id.deadline = std::min(now + cfg_.addr_retry, id.addr_deadline);
  }
}

int ConnectionManager::resolve_route(uint32_t channel, uint32_t handle, Time) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->state != State::kAddrResolved) return EINVAL;
  id->state = State::kRouteResolved;
  id->path_mtu = host_.path_mtu();
  queue_event(*id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return 0;
}

int ConnectionManager::listen(uint32_t channel, uint32_t handle, int backlog) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->state == State::kListen) {
    id->backlog = listen_backlog(backlog);
    return 0;
  }
  if (id->state != State::kIdle) return EINVAL;
  if (!id->bound) {
    if (int e = bind(channel, handle, nullptr, 0); e != 0) return e;
  }
  id->state = State::kListen;
  id->backlog = listen_backlog(backlog);
  return 0;
}

int ConnectionManager::set_tos(uint32_t channel, uint32_t handle, uint8_t tos) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  id->tos = tos;
  return 0;
}

int ConnectionManager::set_ack_timeout(uint32_t channel, uint32_t handle, uint8_t timeout) {
  Id* id = find(channel, handle);
  if (id == nullptr || timeout > 31) return EINVAL;
  id->ack_timeout = timeout;
  return 0;
}

int ConnectionManager::migrate_id(uint32_t channel, uint32_t handle, uint32_t to, uint32_t& events_reported) {
  Id* id = find(channel, handle);
  auto from_it = channels_.find(channel);
  auto to_it = channels_.find(to);
  if (id == nullptr || from_it == channels_.end() || to_it == channels_.end()) return EINVAL;
  if (from_it->second.owner != to_it->second.owner) return EINVAL;
  events_reported = id->events_reported;
  if (to == channel) return 0;  // as the kernel: the same file, nothing moves
  id->channel = to;
  // Its queued events move with it.
  auto& from_q = from_it->second.events;
  int moved = 0;
  for (auto it = from_q.begin(); it != from_q.end();) {
    if (it->first == handle) {
      to_it->second.events.push_back(*it);
      it = from_q.erase(it);
      moved++;
    } else {
      ++it;
    }
  }
  if (moved != 0) {
    if (from_it->second.signal) from_it->second.signal(-moved);
    if (to_it->second.signal) to_it->second.signal(moved);
  }
  events_reported = id->events_reported;
  return 0;
}

int ConnectionManager::destroy_id(uint32_t channel, uint32_t handle, uint32_t& events_reported, Time now) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  events_reported = id->events_reported;
  destroy(*id, now);
  return 0;
}

void ConnectionManager::destroy(Id& id, Time now) {
  // A listener's connection requests the program has not fetched go with
  // it, each turned down (the kernel's ucma_cleanup_ctx_events destroys
  // their ids; the IB CM rejects them).
  if (id.state == State::kListen) {
    std::vector<uint32_t> unfetched;
    if (auto ch = channels_.find(id.channel); ch != channels_.end())
      for (const auto& [for_id, ev] : ch->second.events)
        if (for_id == id.handle && ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && ev.id != id.handle)
          unfetched.push_back(ev.id);
    for (uint32_t child : unfetched)
      if (auto it = ids_.find(child); it != ids_.end()) destroy(*it->second, now);
  }
  // What the peer is told (kernel cm.c cm_destroy_id).
  switch (id.state) {
    case State::kReqSent:
      send_rej(id.dst_ip, id.local_comm_id, 0, 0, kRejTimeout, {}, now);
      break;
    case State::kReqRcvd:
    case State::kRepSent:
      if (id.qp_type != IBV_QPT_UD) send_rej(id.dst_ip, id.local_comm_id, id.remote_comm_id, 0, kRejConsumerDefined, {}, now);
      break;
    case State::kRepRcvd:
      send_rej(id.dst_ip, id.local_comm_id, id.remote_comm_id, 1, kRejConsumerDefined, {}, now);
      break;
    case State::kEstablished: {
      Mad m(Attr::kDreq, id.local_comm_id);
      m.set(dreq::kLocalCommId, id.local_comm_id);
      m.set(dreq::kRemoteCommId, id.remote_comm_id);
      m.set(dreq::kRemoteQpn, id.remote_qpn);
      send_once(id.dst_ip, m, now);
      break;
    }
    default:
      break;
  }
  release_port(id);
  const uint32_t handle = id.handle;
  drop_events(handle);
  ids_.erase(handle);
}

// ---------------------------------------------------------- connecting ----

Mad ConnectionManager::make_req(Id& id) {
  Mad m(Attr::kReq, id.local_comm_id);
  m.set(req::kLocalCommId, id.local_comm_id);
  m.set(req::kServiceId, service_id(id.ps, id.dst_port));
  m.set(req::kCaGuid, cfg_.node_guid);
  m.set(req::kQkey, 0);
  m.set(req::kQpn, id.qpn);
  m.set(req::kResponderResources, id.responder_resources);
  m.set(req::kInitiatorDepth, id.initiator_depth);
  m.set(req::kRemoteCmResponseTimeout, 20);
  m.set(req::kTransportType, id.qp_type == IBV_QPT_UC ? 1 : 0);
  m.set(req::kEndToEndFlowControl, id.flow_control);
  m.set(req::kStartingPsn, id.psn);
  m.set(req::kLocalCmResponseTimeout, 20);
  m.set(req::kRetryCount, id.retry_count);
  m.set(req::kPkey, 0xffff);
  m.set(req::kPathMtu, id.path_mtu);
  m.set(req::kRnrRetryCount, id.rnr_retry);
  m.set(req::kMaxCmRetries, 15);
  m.set(req::kSrq, id.srq);
  m.set(req::kLocalLid, 0xffff);
  m.set(req::kRemoteLid, 0xffff);
  m.set_bytes(req::kLocalGid, id.src_ip.b);
  m.set_bytes(req::kRemoteGid, id.dst_ip.b);
  m.set(req::kPacketRate, 0);
  m.set(req::kTrafficClass, id.tos);
  m.set(req::kHopLimit, 64);
  m.set(req::kSl, 0);
  m.set(req::kLocalAckTimeout, id.ack_timeout);
  return m;
}

int ConnectionManager::connect(uint32_t channel, uint32_t handle, const ConnParam& p, Time now) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->state != State::kRouteResolved) return EINVAL;
  const bool ud = id->qp_type == IBV_QPT_UD;
  const size_t room = (ud ? sidr_req::kPrivateData.length : req::kPrivateData.length) - CmaHeader::kSize;
  if (p.private_data.size() > room) return EINVAL;
  id->local_comm_id = next_comm_id_++;
  CmaHeader h;
  h.src_port = id->src_port;
  h.src = cma_addr(id->src_ip);
  h.dst = cma_addr(id->dst_ip);
  std::array<uint8_t, 232> data{};
  h.encode(std::span<uint8_t, CmaHeader::kSize>(data.data(), CmaHeader::kSize));
  if (!p.private_data.empty())
    std::memcpy(data.data() + CmaHeader::kSize, p.private_data.data(), p.private_data.size());
  if (ud) {
    Mad m(Attr::kSidrReq, id->local_comm_id);
    m.set(sidr_req::kRequestId, id->local_comm_id);
    m.set(sidr_req::kPkey, 0xffff);
    m.set(sidr_req::kServiceId, service_id(id->ps, id->dst_port));
    m.set_bytes(sidr_req::kPrivateData, {data.data(), CmaHeader::kSize + p.private_data.size()});
    id->state = State::kSidrReqSent;
    send(*id, m, now, true);
    return 0;
  }
  id->qpn = p.qp_num;
  id->srq = p.srq;
  id->responder_resources = std::min(p.responder_resources, cfg_.max_responder_resources);
  id->initiator_depth = std::min(p.initiator_depth, cfg_.max_initiator_depth);
  id->retry_count = std::min<uint8_t>(p.retry_count, 7);
  id->rnr_retry = std::min<uint8_t>(p.rnr_retry_count, 7);
  id->flow_control = p.flow_control;
  id->psn = uint32_t(rng_()) & 0xffffff;
  Mad m = make_req(*id);
  m.set_bytes(req::kPrivateData, {data.data(), CmaHeader::kSize + p.private_data.size()});
  id->state = State::kReqSent;
  send(*id, m, now, true);
  return 0;
}

Mad ConnectionManager::make_rep(Id& id) {
  Mad m(Attr::kRep, id.local_comm_id);
  m.set(rep::kLocalCommId, id.local_comm_id);
  m.set(rep::kRemoteCommId, id.remote_comm_id);
  m.set(rep::kQkey, 0);
  m.set(rep::kQpn, id.qpn);
  m.set(rep::kStartingPsn, id.psn);
  m.set(rep::kResponderResources, id.responder_resources);
  m.set(rep::kInitiatorDepth, id.initiator_depth);
  m.set(rep::kTargetAckDelay, 15);
  m.set(rep::kEndToEndFlowControl, id.flow_control);
  m.set(rep::kRnrRetryCount, id.rnr_retry);
  m.set(rep::kSrq, id.srq);
  m.set(rep::kCaGuid, cfg_.node_guid);
  return m;
}

int ConnectionManager::accept(uint32_t channel, uint32_t handle, uint64_t uid, const ConnParam* p, Time now) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (p == nullptr) {
    // The active side's QP is ready: RTU.
    if (id->state != State::kRepRcvd) return EINVAL;
    Mad m(Attr::kRtu, id->local_comm_id);
    m.set(rtu::kLocalCommId, id->local_comm_id);
    m.set(rtu::kRemoteCommId, id->remote_comm_id);
    send_once(id->dst_ip, m, now);
    id->last_reply = m;
    id->state = State::kEstablished;
    return 0;
  }
  if (id->state != State::kReqRcvd) return EINVAL;
  if (uid != 0) id->uid = uid;
  if (id->qp_type == IBV_QPT_UD) {
    if (p->private_data.size() > sidr_rep::kPrivateData.length) return EINVAL;
    Mad m(Attr::kSidrRep, id->remote_comm_id);
    m.set(sidr_rep::kRequestId, id->remote_comm_id);
    m.set(sidr_rep::kStatus, 0);
    m.set(sidr_rep::kQpn, p->qp_num);
    m.set(sidr_rep::kServiceId, service_id(id->ps, id->src_port));
    m.set(sidr_rep::kQkey, p->qkey != 0 ? p->qkey : kUdpQkey);
    m.set_bytes(sidr_rep::kPrivateData, p->private_data);
    send_once(id->dst_ip, m, now);
    id->last_reply = m;
    id->state = State::kUdReady;
    return 0;
  }
  if (p->private_data.size() > rep::kPrivateData.length) return EINVAL;
  id->qpn = p->qp_num;
  id->srq = p->srq;
  id->responder_resources = std::min(p->responder_resources, cfg_.max_responder_resources);
  id->initiator_depth = std::min(p->initiator_depth, cfg_.max_initiator_depth);
  id->rnr_retry = std::min<uint8_t>(p->rnr_retry_count, 7);
  id->flow_control = p->flow_control;
  Mad m = make_rep(*id);
  m.set_bytes(rep::kPrivateData, p->private_data);
  id->state = State::kRepSent;
  send(*id, m, now, true);
  return 0;
}

int ConnectionManager::reject(uint32_t channel, uint32_t handle, std::span<const uint8_t> data, Time now) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->state != State::kReqRcvd) return EINVAL;
  if (id->qp_type == IBV_QPT_UD) {
    Mad m(Attr::kSidrRep, id->remote_comm_id);
    m.set(sidr_rep::kRequestId, id->remote_comm_id);
    m.set(sidr_rep::kStatus, kSidrReject);
    m.set_bytes(sidr_rep::kPrivateData, data);
    send_once(id->dst_ip, m, now);
  } else {
    send_rej(id->dst_ip, id->local_comm_id, id->remote_comm_id, 0, kRejConsumerDefined, data, now);
  }
  id->state = State::kRejected;
  return 0;
}

int ConnectionManager::disconnect(uint32_t channel, uint32_t handle, Time now) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  if (id->state == State::kEstablished || id->state == State::kRepSent) {
    Mad m(Attr::kDreq, id->local_comm_id);
    m.set(dreq::kLocalCommId, id->local_comm_id);
    m.set(dreq::kRemoteCommId, id->remote_comm_id);
    m.set(dreq::kRemoteQpn, id->remote_qpn);
    id->state = State::kDreqSent;
    send(*id, m, now, true);
    return 0;
  }
  // Already disconnected by the peer, or never connected: nothing to send.
  return connected(id->state) || id->state == State::kDisconnected || id->state == State::kDreqSent ? 0 : EINVAL;
}

int ConnectionManager::notify(uint32_t channel, uint32_t handle, uint32_t event, Time) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  // The passive QP received before the RTU did: the connection is up.
  if (event == IBV_EVENT_COMM_EST && id->state == State::kRepSent) {
    stop_retries(*id);
    id->state = State::kEstablished;
    queue_event(*id, RDMA_CM_EVENT_ESTABLISHED, 0);
  }
  return 0;
}

// ------------------------------------------------------------ queries ----

int ConnectionManager::init_qp_attr(uint32_t channel, uint32_t handle, uint32_t state, ib_uverbs_qp_attr& out) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  std::memset(&out, 0, sizeof out);
  const bool ud = id->qp_type == IBV_QPT_UD;
  out.qp_state = state;
  out.port_num = 1;
  switch (state) {
    case IBV_QPS_INIT:
      out.pkey_index = 0;
      out.qp_attr_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (ud) {
        out.qkey = kUdpQkey;
        out.qp_attr_mask |= IBV_QP_QKEY;
      } else {
        // Before the connection no remote access (cma_ib_init_qp_attr),
        // then what the negotiated resources allow (cm_init_qp_init_attr).
        if (connected(id->state))
          out.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
                                (id->responder_resources != 0 ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC : 0);
        out.qp_attr_mask |= IBV_QP_ACCESS_FLAGS;
      }
      return 0;
    case IBV_QPS_RTR:
      out.qp_attr_mask = IBV_QP_STATE;
      if (ud) return 0;
      if (!connected(id->state)) return EINVAL;
      out.qp_attr_mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                          IBV_QP_MIN_RNR_TIMER;
      peer_ah(out.ah_attr, id->dst_ip, cfg_.sgid_index, id->tos);
      out.path_mtu = id->path_mtu;
      out.dest_qp_num = id->remote_qpn;
      out.rq_psn = id->psn;
      out.max_dest_rd_atomic = id->responder_resources;
      out.min_rnr_timer = 0;
      return 0;
    case IBV_QPS_RTS:
      out.qp_attr_mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
      if (ud) return 0;
      if (!connected(id->state)) return EINVAL;
      out.qp_attr_mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      out.sq_psn = id->remote_psn;
      out.timeout = id->ack_timeout;
      out.retry_cnt = id->retry_count;
      out.rnr_retry = id->rnr_retry;
      out.max_rd_atomic = id->initiator_depth;
      return 0;
    default:
      return EINVAL;
  }
}

int ConnectionManager::query_route(uint32_t channel, uint32_t handle, rdma_ucm_query_route_resp& out) {
  Id* id = find(channel, handle);
  if (id == nullptr) return EINVAL;
  std::memset(&out, 0, sizeof out);
  put_sockaddr(out.src_addr, id->src_ip, id->src_port);
  put_sockaddr(out.dst_addr, id->dst_set ? id->dst_ip : wire::IpAddr::v4(0), id->dst_port);
  if (!id->has_device) return 0;
  out.node_guid = htobe64(cfg_.node_guid);
  out.port_num = 1;
  out.ibdev_index = 0;  // the provider's ibv_get_device_index
  ib_user_path_rec& r = out.ib_route[0];
  std::memcpy(r.sgid, id->src_ip.b.data(), 16);
  if (id->dst_set) std::memcpy(r.dgid, id->dst_ip.b.data(), 16);
  r.pkey = htobe16(0xffff);
  const bool routed = id->state != State::kIdle && id->state != State::kAddrQuery && id->state != State::kAddrResolved &&
                      id->state != State::kListen;
  if (!routed) return 0;
  out.num_paths = 1;
  r.dlid = htobe16(0xffff);
  r.slid = htobe16(0xffff);
  r.reversible = 1;
  r.mtu = id->path_mtu;
  r.hop_limit = 64;
  r.traffic_class = id->tos;
  r.numb_path = 1;
  r.mtu_selector = 2;
  r.rate_selector = 2;
  r.packet_life_time_selector = 2;
  r.packet_life_time = 16;
  return 0;
}

// ---------------------------------------------------------------- MADs ----

void ConnectionManager::send_once(const wire::IpAddr& dst, const Mad& mad, Time now) {
  counters_.mads_sent++;
  host_.send_mad(dst, mad, now);
}

void ConnectionManager::send(Id& id, Mad mad, Time now, bool expect_reply) {
  send_once(id.dst_ip, mad, now);
  if (!expect_reply) return;
  id.pending = mad;
  id.retries = 0;
  id.deadline = now + cfg_.mad_timeout;
}

void ConnectionManager::stop_retries(Id& id) {
  id.pending.reset();
  id.deadline = Time::max();
}

void ConnectionManager::send_rej(const wire::IpAddr& dst, uint32_t local, uint32_t remote, uint8_t msg,
                                 uint16_t reason, std::span<const uint8_t> data, Time now) {
  Mad m(Attr::kRej, local);
  m.set(rej::kLocalCommId, local);
  m.set(rej::kRemoteCommId, remote);
  m.set(rej::kMessageRejected, msg);
  m.set(rej::kReason, reason);
  m.set_bytes(rej::kPrivateData, data);
  send_once(dst, m, now);
}

void ConnectionManager::on_mad(const wire::IpAddr& src, const Mad& mad, Time now) {
  counters_.mads_received++;
  switch (mad.attr()) {
    case Attr::kReq: return on_req(src, mad, now);
    case Attr::kRep: return on_rep(mad, now);
    case Attr::kRtu: return on_rtu(mad, now);
    case Attr::kRej: return on_rej(mad, now);
    case Attr::kDreq: return on_dreq(src, mad, now);
    case Attr::kDrep: return on_drep(mad, now);
    case Attr::kMra: return on_mra(mad, now);
    case Attr::kSidrReq: return on_sidr_req(src, mad, now);
    case Attr::kSidrRep: return on_sidr_rep(mad, now);
  }
  counters_.mads_dropped++;
}

// A passive side's id for a request to `listener`, waiting for the
// program's accept or reject.
std::unique_ptr<ConnectionManager::Id> ConnectionManager::new_child(const Id& listener, uint16_t port,
                                                                   const wire::IpAddr& src, uint16_t src_port) {
  auto c = std::make_unique<Id>();
  c->handle = next_id_++;
  c->channel = listener.channel;
  c->ps = listener.ps;
  c->qp_type = listener.qp_type;
  c->state = State::kReqRcvd;
  c->has_device = true;
  c->src_ip = cfg_.ip;
  c->src_port = port;
  c->dst_ip = src;
  c->dst_port = src_port;
  c->dst_set = true;
  return c;
}

void ConnectionManager::on_req(const wire::IpAddr& src, const Mad& m, Time now) {
  const uint32_t remote_comm_id = uint32_t(m.get(req::kLocalCommId));
  // A REQ sent again: answer with what was answered.
  for (auto& [h, id] : ids_) {
    if (id->remote_comm_id != remote_comm_id || id->dst_ip != src || id->qp_type == IBV_QPT_UD) continue;
    if (id->state == State::kRepSent && id->pending) send_once(src, *id->pending, now);
    return;
  }
  const uint64_t sid = m.get(req::kServiceId);
  const auto hdr = CmaHeader::decode(m.bytes(req::kPrivateData));
  Id* listener = nullptr;
  if ((sid >> 32) == 0 && hdr) listener = listener_for(service_ps(sid), service_port(sid), from_cma_addr(hdr->dst, hdr->ip_version));
  if (listener == nullptr) {
    counters_.no_listener++;
    send_rej(src, next_comm_id_++, remote_comm_id, 0, kRejInvalidServiceId, {}, now);
    return;
  }
  // A listener hears requests for its own QP type only, or any if its
  // type is 0 (the kernel's cma_ib_check_req_qp_type); as many wait
  // unfetched as the backlog allows (ucma's). Otherwise the consumer turns
  // the request down.
  const uint8_t qp_type = cm_cc::req_qp_type(m);
  if (!accepts_request(*listener, qp_type)) {
    send_rej(src, next_comm_id_++, remote_comm_id, 0, kRejConsumerDefined, {}, now);
    return;
  }
  auto child = new_child(*listener, service_port(sid), src, hdr->src_port);
  Id& c = *child;
  c.qp_type = qp_type;  // the request's (cma_ib_new_conn_id), whatever a type-0 listener's
  c.local_comm_id = next_comm_id_++;
  c.remote_comm_id = remote_comm_id;
  c.remote_qpn = uint32_t(m.get(req::kQpn));
  c.remote_psn = uint32_t(m.get(req::kStartingPsn));
  c.psn = uint32_t(rng_()) & 0xffffff;
  // The peer's view turned around (cm.c cm_format_req_event).
  c.responder_resources = uint8_t(m.get(req::kInitiatorDepth));
  c.initiator_depth = uint8_t(m.get(req::kResponderResources));
  c.retry_count = uint8_t(m.get(req::kRetryCount));
  c.rnr_retry = uint8_t(m.get(req::kRnrRetryCount));
  c.flow_control = m.get(req::kEndToEndFlowControl) != 0;
  c.srq = m.get(req::kSrq) != 0;
  // An IBA MTU above the port's is clamped to it; anything else is kept,
  // and the QP's RTR refuses it as a RoCE driver does (the kernel's CM
  // takes the field as it comes).
  const auto mtu = uint8_t(m.get(req::kPathMtu));
  c.path_mtu = mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? std::min(mtu, host_.path_mtu()) : mtu;
  c.tos = uint8_t(m.get(req::kTrafficClass));
  c.ack_timeout = uint8_t(m.get(req::kLocalAckTimeout));
  EventResp ev = conn_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, m.bytes(req::kPrivateData).subspan(CmaHeader::kSize));
  ev.uid = listener->uid;
  ids_[c.handle] = std::move(child);
  queue_event(*listener, ev);  // counted on the listener, as the kernel does
}

void ConnectionManager::on_rep(const Mad& m, Time now) {
  Id* id = by_local_comm_id(uint32_t(m.get(rep::kRemoteCommId)));
  if (id == nullptr) return;
  if (id->state == State::kEstablished && id->last_reply) {
    send_once(id->dst_ip, *id->last_reply, now);  // our RTU was lost
    return;
  }
  if (id->state != State::kReqSent) return;
  stop_retries(*id);
  id->remote_comm_id = uint32_t(m.get(rep::kLocalCommId));
  id->remote_qpn = uint32_t(m.get(rep::kQpn));
  id->remote_psn = uint32_t(m.get(rep::kStartingPsn));
  id->initiator_depth = std::min(id->initiator_depth, uint8_t(m.get(rep::kResponderResources)));
  id->responder_resources = std::min(id->responder_resources, uint8_t(m.get(rep::kInitiatorDepth)));
  id->rnr_retry = uint8_t(m.get(rep::kRnrRetryCount));
  id->state = State::kRepRcvd;
  queue_event(*id, conn_event(*id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, m.bytes(rep::kPrivateData)));
}

void ConnectionManager::on_rtu(const Mad& m, Time) {
  Id* id = by_local_comm_id(uint32_t(m.get(rtu::kRemoteCommId)));
  if (id == nullptr || id->state != State::kRepSent) return;
  stop_retries(*id);
  id->state = State::kEstablished;
  queue_event(*id, conn_event(*id, RDMA_CM_EVENT_ESTABLISHED, 0, m.bytes(rtu::kPrivateData)));
}

void ConnectionManager::on_rej(const Mad& m, Time) {
  Id* id = by_local_comm_id(uint32_t(m.get(rej::kRemoteCommId)));
  if (id == nullptr) return;
  if (id->state != State::kReqSent && id->state != State::kRepSent && id->state != State::kRepRcvd) return;
  stop_retries(*id);
  const uint16_t reason = uint16_t(m.get(rej::kReason));
  id->state = State::kRejected;
  queue_event(*id, conn_event(*id, RDMA_CM_EVENT_REJECTED, reason, m.bytes(rej::kPrivateData)));
}

void ConnectionManager::on_dreq(const wire::IpAddr& src, const Mad& m, Time now) {
  Id* id = by_local_comm_id(uint32_t(m.get(dreq::kRemoteCommId)));
  auto drep_for = [&](uint32_t local, uint32_t remote) {
    Mad r(Attr::kDrep, local);
    r.set(drep::kLocalCommId, local);
    r.set(drep::kRemoteCommId, remote);
    return r;
  };
  if (id == nullptr) {
    // Nobody here any more: a DREP all the same, so the peer stops asking.
    send_once(src, drep_for(uint32_t(m.get(dreq::kRemoteCommId)), uint32_t(m.get(dreq::kLocalCommId))), now);
    return;
  }
  if (id->state == State::kDisconnected) {
    if (id->last_reply) send_once(src, *id->last_reply, now);
    return;
  }
  if (id->state != State::kEstablished && id->state != State::kRepSent && id->state != State::kDreqSent) return;
  stop_retries(*id);
  const Mad r = drep_for(id->local_comm_id, id->remote_comm_id);
  send_once(id->dst_ip, r, now);
  id->last_reply = r;
  id->state = State::kDisconnected;
  queue_event(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

void ConnectionManager::on_drep(const Mad& m, Time) {
  Id* id = by_local_comm_id(uint32_t(m.get(drep::kRemoteCommId)));
  if (id == nullptr || id->state != State::kDreqSent) return;
  stop_retries(*id);
  id->state = State::kDisconnected;
  queue_event(*id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

void ConnectionManager::on_mra(const Mad& m, Time now) {
  Id* id = by_local_comm_id(uint32_t(m.get(mra::kRemoteCommId)));
  if (id == nullptr || !id->pending) return;
  // The peer needs longer: wait its service timeout on top of ours.
  const int t = int(m.get(mra::kServiceTimeout));
  const Duration extra = t >= 8 ? ms(int64_t(1) << (t - 8)) : Duration(0);
  id->deadline = now + cfg_.mad_timeout + extra;
}

void ConnectionManager::on_sidr_req(const wire::IpAddr& src, const Mad& m, Time now) {
  const uint32_t request_id = uint32_t(m.get(sidr_req::kRequestId));
  for (auto& [h, id] : ids_) {
    if (id->qp_type != IBV_QPT_UD || id->remote_comm_id != request_id || id->dst_ip != src) continue;
    if (id->last_reply) send_once(src, *id->last_reply, now);
    return;
  }
  const uint64_t sid = m.get(sidr_req::kServiceId);
  const auto hdr = CmaHeader::decode(m.bytes(sidr_req::kPrivateData));
  Id* listener = nullptr;
  if ((sid >> 32) == 0 && hdr) listener = listener_for(service_ps(sid), service_port(sid), from_cma_addr(hdr->dst, hdr->ip_version));
  // Nobody listening: unsupported. A listener that is not UD, or has no
  // room: the new id is destroyed, which rejects (the kernel's
  // cm_destroy_id in IB_CM_SIDR_REQ_RCVD).
  if (listener == nullptr || !accepts_request(*listener, IBV_QPT_UD)) {
    if (listener == nullptr) counters_.no_listener++;
    Mad r(Attr::kSidrRep, request_id);
    r.set(sidr_rep::kRequestId, request_id);
    r.set(sidr_rep::kStatus, listener == nullptr ? kSidrUnsupported : kSidrReject);
    r.set(sidr_rep::kServiceId, sid);
    send_once(src, r, now);
    return;
  }
  auto child = new_child(*listener, service_port(sid), src, hdr->src_port);
  Id& c = *child;
  c.remote_comm_id = request_id;
  EventResp ev{};
  ev.uid = listener->uid;
  ev.id = c.handle;
  ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
  auto& ud = ev.param.ud;
  const auto data = m.bytes(sidr_req::kPrivateData).subspan(CmaHeader::kSize);
  const size_t n = std::min(data.size(), sizeof ud.private_data);
  if (n != 0) std::memcpy(ud.private_data, data.data(), n);
  ud.private_data_len = uint8_t(n);
  peer_ah(ud.ah_attr, src, cfg_.sgid_index, 0);
  ids_[c.handle] = std::move(child);
  queue_event(*listener, ev);
}

void ConnectionManager::on_sidr_rep(const Mad& m, Time) {
  Id* id = by_local_comm_id(uint32_t(m.get(sidr_rep::kRequestId)));
  if (id == nullptr || id->state != State::kSidrReqSent) return;
  stop_retries(*id);
  const uint8_t status = uint8_t(m.get(sidr_rep::kStatus));
  EventResp ev{};
  ev.uid = id->uid;
  ev.id = id->handle;
  if (status != 0) {
    id->state = State::kRejected;
    ev.event = RDMA_CM_EVENT_UNREACHABLE;
    ev.status = status;
    queue_event(*id, ev);
    return;
  }
  id->state = State::kUdReady;
  ev.event = RDMA_CM_EVENT_ESTABLISHED;
  auto& ud = ev.param.ud;
  ud.qp_num = uint32_t(m.get(sidr_rep::kQpn));
  ud.qkey = uint32_t(m.get(sidr_rep::kQkey));
  const auto data = m.bytes(sidr_rep::kPrivateData);
  if (!data.empty()) std::memcpy(ud.private_data, data.data(), data.size());
  ud.private_data_len = uint8_t(data.size());
  peer_ah(ud.ah_attr, id->dst_ip, cfg_.sgid_index, id->tos);
  queue_event(*id, ev);
}

// -------------------------------------------------------------- timers ----

size_t ConnectionManager::listening() const {
  return size_t(std::count_if(ids_.begin(), ids_.end(), [](const auto& e) { return e.second->state == State::kListen; }));
}

Time ConnectionManager::next_deadline() const {
  Time t = Time::max();
  for (const auto& [h, id] : ids_) t = std::min(t, id->deadline);
  return t;
}

void ConnectionManager::on_timer(Time now) {
  std::vector<Id*> due;
  for (auto& [h, id] : ids_)
    if (id->deadline <= now) due.push_back(id.get());
  for (Id* id : due) {
    if (id->state == State::kAddrQuery) {
      poll_address(*id, now);
      continue;
    }
    if (!id->pending) {
      id->deadline = Time::max();
      continue;
    }
    if (id->retries >= cfg_.max_mad_retries) {
      on_retry_exhausted(*id, now);
      continue;
    }
    id->retries++;
    counters_.mads_resent++;
    send_once(id->dst_ip, *id->pending, now);
    id->deadline = now + cfg_.mad_timeout;
  }
}

void ConnectionManager::on_retry_exhausted(Id& id, Time now) {
  stop_retries(id);
  switch (id.state) {
    case State::kReqSent:
      send_rej(id.dst_ip, id.local_comm_id, 0, 0, kRejTimeout, {}, now);
      [[fallthrough]];
    case State::kRepSent:
    case State::kSidrReqSent:
      id.state = State::kRejected;
      queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
      break;
    case State::kDreqSent:
      id.state = State::kDisconnected;
      queue_event(id, RDMA_CM_EVENT_DISCONNECTED, -ETIMEDOUT);
      break;
    default:
      break;
  }
}

}  // namespace rocemu::nic::cm
