// The "nic" node kind of topology files.
//
//   h1:
//     kind: nic
//     mac: 02:00:00:00:00:01       # default: derived from the node's position
//     ip: 10.0.0.1                 # or ips: [10.0.0.1, fd00::1]
//     prefix: 24                   # IPv4 subnet of the first address
//     gateway: 10.0.0.254          # off-subnet destinations go to its MAC
//     neighbors: {10.0.0.2: 02:00:00:00:00:02}
//     loss_recovery: go-back-n     # or selective-repeat
//     sr_window: 512               # selective repeat: packets in flight
//     traffic_class: 106           # used when a QP sets 0 (DSCP 26, ECT(0))
//     ecn: true                    # data is ECN-capable
//     trim_dscp: 11                # DSCP of packets a switch trimmed
//     cnp_dscp: 48                 # CNPs the NIC sends (mlx5 roce_np)
//     cnp_802p_prio: 6
//     cc: dcqcn                    # congestion control: none, dcqcn, or a mapping
//                                  # with a profile and mlx5 knobs (nic/cc/cc_config.h)
//     vlan: 100                    # tag frames with this VID (PCP = priority)
//     max_qp_rd_atom: 16           # device caps ibv_query_device reports and the NIC
//     max_qp_init_rd_atom: 16      # enforces (mlx5's values by default; rxe reports
//     max_sge: 16                  # 128 READs/atomics each way): also max_qp_wr,
//                                  # max_cqe, max_qp, max_mr
#pragma once

#include "common/config/topology.h"

namespace rocemu::nic {

void register_nic_kind(NodeKindRegistry& reg);

}  // namespace rocemu::nic
