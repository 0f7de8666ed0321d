#include "nic/verbs/ucma.h"

#include <arpa/inet.h>

#include <cerrno>
#include <cstring>

#include "nic/verbs/ucma_abi.h"

namespace rocemu::verbs {
namespace ucma_cc {

using nic::cm::ConnectionManager;

// The command struct of type T behind the header (zero beyond what came).
template <typename T>
T command_of(std::span<const uint8_t> cmd, const rdma_ucm_cmd_hdr& hdr) {
  T t{};
  const size_t have = std::min<size_t>({cmd.size() - sizeof hdr, hdr.in, sizeof t});
  std::memcpy(&t, cmd.data() + sizeof hdr, have);
  return t;
}

template <typename T>
void respond(UcmaResponse& out, uint64_t address, const T& resp, const rdma_ucm_cmd_hdr& hdr) {
  out.address = address;
  const size_t n = std::min<size_t>(hdr.out, sizeof resp);
  out.bytes.assign(reinterpret_cast<const uint8_t*>(&resp), reinterpret_cast<const uint8_t*>(&resp) + n);
}

// An IPv4 address and port from a sockaddr (IPv4, or IPv4-mapped IPv6);
// false for anything else. Family 0: no address.
struct SockAddr {
  bool present = false;
  wire::IpAddr ip;
  uint16_t port = 0;
  ConnectionManager::Family family = ConnectionManager::Family::kAsAddress;
};
bool parse_sockaddr(const void* raw, SockAddr& out) {
  sa_family_t family;
  std::memcpy(&family, raw, sizeof family);
  if (family == 0) return true;
  if (family == AF_INET) {
    sockaddr_in in;
    std::memcpy(&in, raw, sizeof in);
    out = {true, wire::IpAddr::v4(ntohl(in.sin_addr.s_addr)), ntohs(in.sin_port), ConnectionManager::Family::kInet};
    return true;
  }
  if (family == AF_INET6) {
    sockaddr_in6 in6;
    std::memcpy(&in6, raw, sizeof in6);
    out.present = true;
    std::memcpy(out.ip.b.data(), &in6.sin6_addr, 16);
    out.port = ntohs(in6.sin6_port);
    out.family = ConnectionManager::Family::kInet6;
    return true;
  }
  return false;
}

ConnectionManager::ConnParam conn_param(const rdma_ucm_conn_param& c) {
  ConnectionManager::ConnParam p;
  p.qp_num = c.qp_num;
  p.qkey = c.qkey;
  p.private_data.assign(c.private_data, c.private_data + std::min<size_t>(c.private_data_len, sizeof c.private_data));
  p.srq = c.srq != 0;
  p.responder_resources = c.responder_resources;
  p.initiator_depth = c.initiator_depth;
  p.flow_control = c.flow_control != 0;
  p.retry_count = c.retry_count;
  p.rnr_retry_count = c.rnr_retry_count;
  return p;
}

int set_option(ConnectionManager& cm, uint32_t channel, const rdma_ucm_set_option& o, std::span<const uint8_t> value) {
  if (value.size() < o.optlen) return EINVAL;
  if (o.level == RDMA_OPTION_ID) {
    switch (o.optname) {
      case RDMA_OPTION_ID_TOS:
        if (o.optlen != 1) return EINVAL;
        return cm.set_tos(channel, o.id, value[0]);
      case RDMA_OPTION_ID_ACK_TIMEOUT:
        if (o.optlen != 1) return EINVAL;
        return cm.set_ack_timeout(channel, o.id, value[0]);
      case RDMA_OPTION_ID_REUSEADDR:
      case RDMA_OPTION_ID_AFONLY:
        return o.optlen == sizeof(int) ? 0 : EINVAL;
      default:
        return ENOSYS;
    }
  }
  return ENOSYS;  // RDMA_OPTION_IB_PATH: routes are resolved here
}

}  // namespace ucma_cc
using namespace ucma_cc;

int serve_ucma(nic::Nic& nic, uint32_t channel, std::span<const uint8_t> cmd, UcmaResponse& out, Time now) {
  rdma_ucm_cmd_hdr hdr;
  if (cmd.size() < sizeof hdr) return EINVAL;
  std::memcpy(&hdr, cmd.data(), sizeof hdr);
  if (sizeof hdr + hdr.in > cmd.size()) return EINVAL;
  if (hdr.out < ucma_min_out(hdr.cmd)) return ENOSPC;
  return nic.with_cm(now, [&](ConnectionManager& cm) -> int {
    switch (hdr.cmd) {
      case RDMA_USER_CM_CMD_CREATE_ID: {
        auto c = command_of<rdma_ucm_create_id>(cmd, hdr);
        rdma_ucm_create_id_resp r{};
        if (int e = cm.create_id(channel, c.uid, c.ps, c.qp_type, r.id); e != 0) return e;
        respond(out, c.response, r, hdr);
        return 0;
      }
      case RDMA_USER_CM_CMD_DESTROY_ID: {
        auto c = command_of<rdma_ucm_destroy_id>(cmd, hdr);
        rdma_ucm_destroy_id_resp r{};
        if (int e = cm.destroy_id(channel, c.id, r.events_reported, now); e != 0) return e;
        respond(out, c.response, r, hdr);
        return 0;
      }
      case RDMA_USER_CM_CMD_BIND_IP: {
        auto c = command_of<rdma_ucm_bind_ip>(cmd, hdr);
        SockAddr a;
        if (!parse_sockaddr(&c.addr, a) || !a.present) return EAFNOSUPPORT;
        return cm.bind(channel, c.id, &a.ip, a.port, a.family);
      }
      case RDMA_USER_CM_CMD_BIND:  // AF_IB: not offered
        return EAFNOSUPPORT;
      case RDMA_USER_CM_CMD_RESOLVE_IP: {
        auto c = command_of<rdma_ucm_resolve_ip>(cmd, hdr);
        SockAddr src, dst;
        if (!parse_sockaddr(&c.src_addr, src) || !parse_sockaddr(&c.dst_addr, dst) || !dst.present)
          return EAFNOSUPPORT;
        return cm.resolve_addr(channel, c.id, src.present ? &src.ip : nullptr, dst.ip, dst.port, c.timeout_ms, now);
      }
      case RDMA_USER_CM_CMD_RESOLVE_ROUTE: {
        auto c = command_of<rdma_ucm_resolve_route>(cmd, hdr);
        return cm.resolve_route(channel, c.id, now);
      }
      case RDMA_USER_CM_CMD_QUERY_ROUTE: {
        auto c = command_of<rdma_ucm_query>(cmd, hdr);
        rdma_ucm_query_route_resp r{};
        if (int e = cm.query_route(channel, c.id, r); e != 0) return e;
        respond(out, c.response, r, hdr);
        return 0;
      }
      case RDMA_USER_CM_CMD_CONNECT: {
        auto c = command_of<rdma_ucm_connect>(cmd, hdr);
        if (!c.conn_param.valid) return EINVAL;
        return cm.connect(channel, c.id, conn_param(c.conn_param), now);
      }
      case RDMA_USER_CM_CMD_LISTEN: {
        auto c = command_of<rdma_ucm_listen>(cmd, hdr);
        return cm.listen(channel, c.id, int(c.backlog));
      }
      case RDMA_USER_CM_CMD_ACCEPT: {
        auto c = command_of<rdma_ucm_accept>(cmd, hdr);
        if (!c.conn_param.valid) return cm.accept(channel, c.id, c.uid, nullptr, now);
        const auto p = conn_param(c.conn_param);
        return cm.accept(channel, c.id, c.uid, &p, now);
      }
      case RDMA_USER_CM_CMD_REJECT: {
        auto c = command_of<rdma_ucm_reject>(cmd, hdr);
        return cm.reject(channel, c.id,
                         {c.private_data, std::min<size_t>(c.private_data_len, sizeof c.private_data)}, now);
      }
      case RDMA_USER_CM_CMD_DISCONNECT: {
        auto c = command_of<rdma_ucm_disconnect>(cmd, hdr);
        return cm.disconnect(channel, c.id, now);
      }
      case RDMA_USER_CM_CMD_INIT_QP_ATTR: {
        auto c = command_of<rdma_ucm_init_qp_attr>(cmd, hdr);
        ib_uverbs_qp_attr r{};
        if (int e = cm.init_qp_attr(channel, c.id, c.qp_state, r); e != 0) return e;
        respond(out, c.response, r, hdr);
        return 0;
      }
      case RDMA_USER_CM_CMD_GET_EVENT: {
        auto c = command_of<rdma_ucm_get_event>(cmd, hdr);
        auto ev = cm.get_event(channel);
        if (!ev) return EAGAIN;  // the provider waits on the channel's eventfd
        respond(out, c.response, *ev, hdr);
        return 0;
      }
      case RDMA_USER_CM_CMD_SET_OPTION: {
        auto c = command_of<rdma_ucm_set_option>(cmd, hdr);
        return set_option(cm, channel, c, cmd.subspan(sizeof hdr + hdr.in));
      }
      case RDMA_USER_CM_CMD_NOTIFY: {
        auto c = command_of<rdma_ucm_notify>(cmd, hdr);
        return cm.notify(channel, c.id, c.event, now);
      }
      case RDMA_USER_CM_CMD_MIGRATE_ID: {
        // Written on the channel the id goes to; `fd` names the one it is
        // on (the provider put that channel's engine id there).
        auto c = command_of<rdma_ucm_migrate_id>(cmd, hdr);
        rdma_ucm_migrate_resp r{};
        if (int e = cm.migrate_id(c.fd, c.id, channel, r.events_reported); e != 0) return e;
        respond(out, c.response, r, hdr);
        return 0;
      }
      default:  // QUERY, RESOLVE_ADDR (AF_IB), multicast
        return ENOSYS;
    }
  });
}

}  // namespace rocemu::verbs
