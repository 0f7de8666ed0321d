// The RDMA connection manager of one NIC, as the kernel's rdma_cm and IB CM
// together give it to librdmacm (the ucma ABI is translated in ucma.cc):
// ids bound to IP addresses and ports of a port space, address and route
// resolution, listeners, and connections set up and torn down with CM MADs
// on QP1 (REQ/REP/RTU, REJ, DREQ/DREP; SIDR_REQ/SIDR_REP for UD), each
// resent on its timeout. Events queue on channels (one per
// /dev/infiniband/rdma_cm open) until the application fetches them.
//
// Pure protocol code: every call takes `now`; MADs leave, neighbours are
// asked for and channels are woken through the Host the NIC provides, and
// the NIC calls on_timer() when next_deadline() comes.
#pragma once

#include <netinet/in.h>  // before the kernel header: glibc owns the in6 structs
#include <rdma/rdma_user_cm.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <vector>

#include "common/engine/time.h"
#include "common/wire/ip.h"
#include "nic/cm/mad.h"

namespace rocemu::nic::cm {

// What the CM needs of its NIC.
class Host {
 public:
  virtual ~Host() = default;
  enum class Reach { kReachable, kPending, kUnknown };
  // Whether `ip` can be sent to now (a neighbour entry, or a local
  // address); kPending asks for it (ARP) and the CM asks again later.
  virtual Reach reach(const wire::IpAddr& ip, Time now) = 0;
  virtual void send_mad(const wire::IpAddr& dst, const Mad& mad, Time now) = 0;
  // The largest path MTU now (enum ibv_mtu): the port's active MTU.
  virtual uint8_t path_mtu() = 0;
};

struct CmConfig {
  uint64_t node_guid = 0;          // host order
  wire::IpAddr ip;                 // the NIC's IPv4 address (IPv4-mapped)
  uint8_t sgid_index = 0;          // its RoCEv2 GID
  uint8_t max_responder_resources = 16;
  uint8_t max_initiator_depth = 16;
  // MAD timeouts and retries (kernel cma.c: CMA_CM_RESPONSE_TIMEOUT 20 and
  // a packet life time of 16 give 2 * 2^8 + 2^12 ms; 15 retries).
  Duration mad_timeout = ms(4608);
  int max_mad_retries = 15;
  Duration addr_retry = ms(10);    // how often the neighbour table is looked at while resolving
  uint64_t seed = 1;               // PSNs and communication IDs
  size_t max_ids = 65536;          // ids of all programs together: create_id gives ENOMEM beyond
};

using EventResp = rdma_ucm_event_resp;

// enum rdma_cm_event_type (librdmacm's rdma_cma.h; the kernel ABI values).
enum : uint32_t {
  RDMA_CM_EVENT_ADDR_RESOLVED,
  RDMA_CM_EVENT_ADDR_ERROR,
  RDMA_CM_EVENT_ROUTE_RESOLVED,
  RDMA_CM_EVENT_ROUTE_ERROR,
  RDMA_CM_EVENT_CONNECT_REQUEST,
  RDMA_CM_EVENT_CONNECT_RESPONSE,
  RDMA_CM_EVENT_CONNECT_ERROR,
  RDMA_CM_EVENT_UNREACHABLE,
  RDMA_CM_EVENT_REJECTED,
  RDMA_CM_EVENT_ESTABLISHED,
  RDMA_CM_EVENT_DISCONNECTED,
  RDMA_CM_EVENT_DEVICE_REMOVAL,
  RDMA_CM_EVENT_MULTICAST_JOIN,
  RDMA_CM_EVENT_MULTICAST_ERROR,
  RDMA_CM_EVENT_ADDR_CHANGE,
  RDMA_CM_EVENT_TIMEWAIT_EXIT,
};

class ConnectionManager {
 public:
  ConnectionManager(CmConfig cfg, Host& host);
  ~ConnectionManager();

  // ---- channels ----
  // `signal(+n)` when n events were queued, `signal(-n)` when n queued
  // events went away unfetched. `owner` is the process: ids move only
  // between channels of one owner.
  using Signal = std::function<void(int)>;
  uint32_t open_channel(uint64_t owner, Signal signal);
  // Destroys the channel's ids (as the kernel does when the file closes).
  void close_channel(uint32_t channel, Time now);
  // The oldest event of the channel, counted as reported on its id.
  std::optional<EventResp> get_event(uint32_t channel);

  // ---- ids (each returns 0 or an errno value) ----
  int create_id(uint32_t channel, uint64_t uid, uint16_t ps, uint8_t qp_type, uint32_t& id);
  // How many events the id reported (librdmacm waits for as many acks).
  int destroy_id(uint32_t channel, uint32_t id, uint32_t& events_reported, Time now);
  int migrate_id(uint32_t channel, uint32_t id, uint32_t to_channel, uint32_t& events_reported);
  // The address family an address came in: the kernel tells loopback
  // addresses by it (cma_loopback_addr), and an IPv4-mapped IPv6 address
  // looks the same as the IPv4 one here. kAsAddress: IPv4 if mapped.
  enum class Family : uint8_t { kAsAddress, kInet, kInet6 };
  int bind(uint32_t channel, uint32_t id, const wire::IpAddr* ip, uint16_t port, Family family = Family::kAsAddress);
  // `src`: nullptr for any. ADDR_RESOLVED or ADDR_ERROR follows.
  int resolve_addr(uint32_t channel, uint32_t id, const wire::IpAddr* src, const wire::IpAddr& dst, uint16_t dst_port,
                   uint32_t timeout_ms, Time now);
  int resolve_route(uint32_t channel, uint32_t id, Time now);
  int listen(uint32_t channel, uint32_t id, int backlog);
  struct ConnParam {
    uint32_t qp_num = 0;
    uint32_t qkey = 0;
    std::vector<uint8_t> private_data;
    bool srq = false;
    uint8_t responder_resources = 0, initiator_depth = 0;
    bool flow_control = false;
    uint8_t retry_count = 7, rnr_retry_count = 7;
  };
  int connect(uint32_t channel, uint32_t id, const ConnParam& p, Time now);
  // Passive side: REP (or SIDR_REP); active side without `p`: RTU.
  int accept(uint32_t channel, uint32_t id, uint64_t uid, const ConnParam* p, Time now);
  int reject(uint32_t channel, uint32_t id, std::span<const uint8_t> private_data, Time now);
  int disconnect(uint32_t channel, uint32_t id, Time now);
  int set_tos(uint32_t channel, uint32_t id, uint8_t tos);
  int set_ack_timeout(uint32_t channel, uint32_t id, uint8_t timeout);
  // The QP attributes for moving the id's QP to `state` (rdma_init_qp_attr).
  int init_qp_attr(uint32_t channel, uint32_t id, uint32_t state, ib_uverbs_qp_attr& out);
  int query_route(uint32_t channel, uint32_t id, rdma_ucm_query_route_resp& out);
  int query_addr(uint32_t channel, uint32_t id, rdma_ucm_query_addr_resp& out);
  int notify(uint32_t channel, uint32_t id, uint32_t event, Time now);

  // ---- wire ----
  void on_mad(const wire::IpAddr& src, const Mad& mad, Time now);
  Time next_deadline() const;
  void on_timer(Time now);

  // ---- introspection ----
  size_t ids() const { return ids_.size(); }
  size_t listening() const;
  struct Counters {
    uint64_t mads_sent = 0, mads_received = 0, mads_resent = 0, mads_dropped = 0;
    uint64_t no_listener = 0;  // REQs and SIDR_REQs for a service nobody listens on
    uint64_t qp_type_mismatch = 0;  // REQs and SIDR_REQs turned down: another QP type than the listener's
    uint64_t backlog_full = 0;      // REQs and SIDR_REQs turned down: the listener's backlog (or the id table) full
  };
  const Counters& counters() const { return counters_; }

  enum class State : uint8_t;
  struct Id;

 private:
  struct Channel {
    uint64_t owner = 0;
    Signal signal;
    std::deque<std::pair<uint32_t, EventResp>> events;  // (id, event)
  };

  Id* find(uint32_t channel, uint32_t id);
  Id* by_local_comm_id(uint32_t comm_id);
  Id* listener_for(uint16_t ps, uint16_t port, const wire::IpAddr& dst);
  bool backlog_full(const Id& listener) const;
  bool accepts_request(const Id& listener, uint8_t qp_type);
  void queue_event(Id& id, uint32_t event, int32_t status);
  void queue_event(Id& id, EventResp ev);
  void drop_events(uint32_t id);
  void send(Id& id, Mad mad, Time now, bool expect_reply);
  void send_once(const wire::IpAddr& dst, const Mad& mad, Time now);
  void stop_retries(Id& id);
  void release_port(Id& id);
  int allocate_port(Id& id, uint16_t port);
  void destroy(Id& id, Time now);
  std::unique_ptr<Id> new_child(const Id& listener, uint16_t port, const wire::IpAddr& src, uint16_t src_port);
  Mad make_req(Id& id);
  Mad make_rep(Id& id);
  void send_rej(const wire::IpAddr& dst, uint32_t local, uint32_t remote, uint8_t msg, uint16_t reason,
                std::span<const uint8_t> data, Time now);
  EventResp conn_event(const Id& id, uint32_t event, int32_t status, std::span<const uint8_t> data) const;

  // MAD handlers, one per attribute.
  void on_req(const wire::IpAddr& src, const Mad& m, Time now);
  void on_rep(const Mad& m, Time now);
  void on_rtu(const Mad& m, Time now);
  void on_rej(const Mad& m, Time now);
  void on_dreq(const wire::IpAddr& src, const Mad& m, Time now);
  void on_drep(const Mad& m, Time now);
  void on_mra(const Mad& m, Time now);
  void on_sidr_req(const wire::IpAddr& src, const Mad& m, Time now);
  void on_sidr_rep(const Mad& m, Time now);
  void on_retry_exhausted(Id& id, Time now);
  void poll_address(Id& id, Time now);

  CmConfig cfg_;
  Host& host_;
  std::mt19937_64 rng_;
  std::map<uint32_t, Channel> channels_;
  std::map<uint32_t, std::unique_ptr<Id>> ids_;
  std::map<std::pair<uint16_t, uint16_t>, std::vector<uint32_t>> ports_;  // (ps, port) -> ids bound there
  uint32_t next_channel_ = 1;
  uint32_t next_id_ = 1;
  uint32_t next_comm_id_;
  uint16_t next_ephemeral_ = 32768;
  Counters counters_;
};

}  // namespace rocemu::nic::cm
