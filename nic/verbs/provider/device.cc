// Device discovery and queries: ibv_get_device_list, ibv_open_device,
// ibv_import_device,
// ibv_query_device/port/gid/pkey and their extended forms.
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "nic/verbs/device_attrs.h"
#include "nic/verbs/provider/provider.h"
#include "nic/verbs/sysfs_tree.h"

using namespace rocemu;
using namespace rocemu::provider;

namespace {

std::once_flag g_device_once;
Device* g_device = nullptr;  // stable for the life of the process

bool warned = false;
void hint(const char* what) {
  if (warned) return;
  warned = true;
  std::fprintf(stderr, "rocemu: %s\n", what);
}

void make_device() {
  const char* node = std::getenv(verbs::kNodeEnv);
  const char* sock = std::getenv(verbs::kSocketEnv);
  if (node == nullptr || sock == nullptr) {
    hint("librocemu-verbs.so is loaded but ROCEMU_NODE/ROCEMU_SOCKET are not set; run the program with "
         "`rocemu exec NODE -- PROGRAM`");
    return;
  }
  auto* d = new Device();
  std::memset(&d->dev, 0, sizeof d->dev);
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", verbs::kDeviceName);
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "%s", verbs::kUverbsName);
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "%s/%s", verbs::kSysfsVerbsRoot, verbs::kUverbsName);
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "%s/%s", verbs::kSysfsIbRoot, verbs::kDeviceName);
  d->node = node;
  d->socket_path = sock;
  g_device = d;
}

void fill_port(const Context& c, ibv_port_attr& a) {
  std::memset(&a, 0, sizeof a);
  a.state = ibv_port_state(c.port.state);
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = ibv_mtu(c.port.active_mtu);
  a.gid_tbl_len = c.info.num_gids;
  a.port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a.max_msg_sz = 0x80000000u;
  a.pkey_tbl_len = 1;
  a.lid = 0;
  a.sm_lid = 0;
  a.max_vl_num = 4;
  const verbs::SpeedWidth sw = verbs::speed_width(c.port.rate_bps);
  a.active_speed = sw.speed;
  a.active_width = sw.width;
  a.phys_state = c.port.state == IBV_PORT_ACTIVE ? 5 : 3;  // LinkUp / Disabled
  a.link_layer = IBV_LINK_LAYER_ETHERNET;
}

void refresh_port(Context& c) {
  verbs::Request req;
  req.op = verbs::Op::kQueryPort;
  verbs::Reply rep;
  if (call(c, req, rep) == 0) c.port = rep.u.port;
}

int query_port_ex(ibv_context* ctx, uint8_t port, ibv_port_attr* attr, size_t len) {
  if (port != 1) return EINVAL;
  Context& c = *Context::of(ctx);
  refresh_port(c);
  ibv_port_attr a;
  fill_port(c, a);
  std::memcpy(attr, &a, std::min(len, sizeof a));
  return 0;
}

void fill_device(const Context& c, ibv_device_attr& a) {
  std::memset(&a, 0, sizeof a);
  std::snprintf(a.fw_ver, sizeof a.fw_ver, "%s", verbs::kFwVer);
  a.node_guid = htobe64(c.info.node_guid);
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = c.info.max_mr_size;
  a.page_size_cap = 0xfffff000;
  a.vendor_id = verbs::kVendorId;  // as Soft-RoCE: perftest and UCX take their generic verbs paths
  a.vendor_part_id = verbs::kVendorPartId;
  a.hw_ver = verbs::kHwVer;
  a.max_qp = int(c.info.max_qp);
  a.max_qp_wr = int(c.info.max_qp_wr);
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SRQ_RESIZE |
                       IBV_DEVICE_N_NOTIFY_CQ | IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_MEM_WINDOW |
                       IBV_DEVICE_MEM_WINDOW_TYPE_2B | IBV_DEVICE_XRC;
  a.max_mw = int(c.info.max_mr);  // as mlx5: both are mkeys
  a.max_sge = int(c.info.max_sge);
  a.max_sge_rd = int(c.info.max_sge);
  a.max_cq = int(c.info.max_cq);
  a.max_cqe = int(c.info.max_cqe);
  a.max_mr = int(c.info.max_mr);
  a.max_pd = 65536;
  a.max_qp_rd_atom = int(c.info.max_qp_rd_atom);
  a.max_res_rd_atom = int(c.info.max_qp_rd_atom * c.info.max_qp);
  a.max_qp_init_rd_atom = int(c.info.max_qp_init_rd_atom);
  a.atomic_cap = IBV_ATOMIC_HCA;
  a.max_srq = int(c.info.max_srq);
  a.max_srq_wr = int(c.info.max_srq_wr);
  a.max_srq_sge = int(c.info.max_sge);
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 16;
  a.phys_port_cnt = 1;
}

int query_device_ex(ibv_context* ctx, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
  if (input != nullptr && input->comp_mask != 0) return EINVAL;
  ibv_device_attr_ex a{};
  fill_device(*Context::of(ctx), a.orig_attr);
  // The 64-bit set the kernel reports: the 32 bits above and what does not fit there.
  a.device_cap_flags_ex = uint32_t(a.orig_attr.device_cap_flags) | verbs::kDeviceCapAtomicWrite;
  a.max_dm_size = 0;
  std::memcpy(attr, &a, std::min(attr_size, sizeof a));
  return 0;
}

void close_context_files(Context* c) {
  if (c->db != nullptr) munmap(c->db, c->db_bytes);
  if (c->wake_fd >= 0) close(c->wake_fd);
  if (c->sock >= 0) close(c->sock);
  delete c;
}

// A context on a connection of its own to the engine: `req` is kHello
// (ibv_open_device: the reply brings the doorbell page, the wake-up
// eventfd and the command file) or kImportContext with the command file
// `cmd_fd` (ibv_import_device: the same without the command file, which
// the caller holds and the context now owns).
ibv_context* attach_context(verbs::Request& req, int cmd_fd) {
  auto* c = new Context();
  std::memset(&c->vctx, 0, sizeof c->vctx);
  c->device = g_device;
  c->sock = connect_engine(g_device->socket_path);
  if (c->sock < 0) {
    hint(("cannot reach the rocemu engine at " + g_device->socket_path + ": " + std::strerror(errno)).c_str());
    delete c;
    errno = ENODEV;
    return nullptr;
  }
  // Only an engine of this user (or root) gets to read and write this
  // process's memory: the kernel says who is at the other end.
  ucred cred{};
  socklen_t cred_len = sizeof cred;
  if (getsockopt(c->sock, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0 ||
      (cred.uid != geteuid() && cred.uid != 0)) {
    hint(("refusing the engine at " + g_device->socket_path + ": it runs as uid " + std::to_string(cred.uid) +
          ", not this user or root")
             .c_str());
    close_context_files(c);
    errno = EACCES;
    return nullptr;
  }
  // The engine reads and writes registered memory of this process (as a
  // NIC DMAs) and opens it at hello; where Yama restricts ptrace, allow it
  // explicitly first.
  prctl(PR_SET_PTRACER, cred.pid, 0, 0, 0);
  const bool hello = req.op == verbs::Op::kHello;
  verbs::Reply rep;
  std::vector<int> fds;
  const int err = call(*c, req, rep, hello ? std::vector<int>{} : std::vector<int>{cmd_fd}, &fds);
  if (err != 0 || fds.size() != (hello ? 3u : 2u)) {
    for (int f : fds) close(f);
    if (err == ENODEV) hint(("the engine has no node named '" + g_device->node + "'").c_str());
    close_context_files(c);
    errno = err != 0 ? err : EPROTO;
    return nullptr;
  }
  c->engine_pid = cred.pid;  // the kernel's word, not the message's
  c->info = rep.u.hello.device;
  c->port = rep.u.hello.port;
  c->db_bytes = rep.u.hello.doorbell_bytes;
  c->db = static_cast<verbs::DoorbellPage*>(map_fd(fds[0], c->db_bytes));
  c->wake_fd = fds[1];
  if (c->db == nullptr) {
    if (hello) close(fds[2]);
    close_context_files(c);
    errno = ENOMEM;
    return nullptr;
  }
  ibv_context& ctx = c->vctx.context;
  ctx.device = &g_device->dev;
  ctx.cmd_fd = hello ? fds[2] : cmd_fd;
  ctx.async_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  c->vctx.query_port = query_port_ex;
  c->vctx.query_device_ex = query_device_ex;
  init_context_ops(*c);
  init_domain_ops(*c);
  return &ctx;
}

}  // namespace

extern "C" {

#undef ibv_get_device_list
ibv_device** ibv_get_device_list(int* num_devices) {
  std::call_once(g_device_once, make_device);
  // A fresh array each call, of the same device (librdmacm frees its own).
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (list == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  int n = 0;
  if (g_device != nullptr) {
    const int fd = connect_engine(g_device->socket_path);
    if (fd < 0) {
      const std::string msg = "no rocemu engine at " + g_device->socket_path +
                              " (start one with `rocemu up`, then run programs with `rocemu exec NODE -- ...`)";
      hint(msg.c_str());
    } else {
      close(fd);
      list[n++] = &g_device->dev;
    }
  }
  if (num_devices != nullptr) *num_devices = n;
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device != nullptr ? device->name : nullptr; }

int ibv_get_device_index(ibv_device* device) { return device != nullptr ? 0 : -1; }

__be64 ibv_get_device_guid(ibv_device* device) {
  // Without a context the GUID comes from a short query of the engine.
  if (device == nullptr) return 0;
  ibv_context* ctx = ibv_open_device(device);
  if (ctx == nullptr) return 0;
  const __be64 guid = htobe64(Context::of(ctx)->info.node_guid);
  ibv_close_device(ctx);
  return guid;
}

ibv_context* ibv_open_device(ibv_device* device) {
  if (device == nullptr || g_device == nullptr || device != &g_device->dev) {
    errno = ENODEV;
    return nullptr;
  }
  verbs::Request req;
  req.op = verbs::Op::kHello;
  std::snprintf(req.u.hello.node, sizeof req.u.hello.node, "%s", g_device->node.c_str());
  req.u.hello.pid = getpid();
  return attach_context(req, -1);
}

// The context another process opened, shared through its cmd_fd (the
// engine's command file, handed over with SCM_RIGHTS or dup): the engine
// lets in whoever holds that file. As libibverbs: an fd that is not open
// is EINVAL, a character device (a uverbs device of another provider, or
// anything else) ENODEV, and a file that is no context's command file
// EINVAL (the engine's answer). The context takes the fd and closes it
// at ibv_close_device.
ibv_context* ibv_import_device(int cmd_fd) {
  std::call_once(g_device_once, make_device);
  struct stat st {};
  if (fstat(cmd_fd, &st) != 0) {
    errno = EINVAL;
    return nullptr;
  }
  if (S_ISCHR(st.st_mode) || g_device == nullptr) {
    errno = ENODEV;
    return nullptr;
  }
  verbs::Request req;
  req.op = verbs::Op::kImportContext;
  return attach_context(req, cmd_fd);
}

int ibv_close_device(ibv_context* context) {
  if (context == nullptr) return EINVAL;
  Context* c = Context::of(context);
  // Leave the context first, and wait for the engine to say it has: it
  // frees whatever is left and stops reaching this process's memory but
  // for the MRs' pages on memfds, which it goes on reaching while other
  // processes share the context (as the kernel keeps an MR's pages
  // pinned). Those pages then stay where they are; they go back to
  // private memory only if the engine said it reaches them no more.
  verbs::Request req;
  req.op = verbs::Op::kLeave;
  verbs::Reply rep;
  // Kept only when the engine said others share the context: an engine
  // that is gone or does not answer reaches nothing the program would
  // miss, and moved-back pages behave as private memory again
  // (MADV_DONTNEED zero-fills, mremap grows them).
  const bool released = call(*c, req, rep, {}, nullptr) != 0 || rep.u.left.still_shared == 0;
  munmap(c->db, c->db_bytes);
  close(c->wake_fd);
  close(c->sock);
  // MRs left registered: the ibv_mr objects go, as the device's other
  // objects would.
  for (Mr* m : c->mrs) {
    if (released) unshare_pages(m->pages);
    else keep_pages(m->pages);
    delete m;
  }
  if (context->async_fd >= 0) close(context->async_fd);
  if (context->cmd_fd >= 0) close(context->cmd_fd);
  pthread_mutex_destroy(&context->mutex);
  delete c;
  return 0;
}

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  if (context == nullptr || device_attr == nullptr) return EINVAL;
  fill_device(*Context::of(context), *device_attr);
  return 0;
}

// The exported symbol takes the 48-byte compat layout: fill up to flags.
#undef ibv_query_port
int ibv_query_port(ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* port_attr) {
  if (context == nullptr || port_attr == nullptr) return EINVAL;
  if (port_num != 1) return EINVAL;
  Context& c = *Context::of(context);
  refresh_port(c);
  ibv_port_attr a;
  fill_port(c, a);
  std::memcpy(port_attr, &a, offsetof(ibv_port_attr, port_cap_flags2));
  return 0;
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (context == nullptr || gid == nullptr || port_num != 1) return -1;
  const Context& c = *Context::of(context);
  if (index < 0 || index >= c.info.num_gids) return -1;
  std::memcpy(gid->raw, c.info.gids[index].raw, 16);
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index, ibv_gid_entry* entry,
                      uint32_t flags, size_t entry_size) {
  if (context == nullptr || entry == nullptr || port_num != 1 || flags != 0) return EINVAL;
  const Context& c = *Context::of(context);
  // Beyond the table: EINVAL, as the kernel's rdma_get_gid_attr answers
  // (ENODATA is for an empty entry inside it; this table has none).
  if (gid_index >= c.info.num_gids) return EINVAL;
  ibv_gid_entry e{};
  std::memcpy(e.gid.raw, c.info.gids[gid_index].raw, 16);
  e.gid_index = gid_index;
  e.port_num = port_num;
  e.gid_type = c.info.gids[gid_index].type;
  e.ndev_ifindex = 0;
  std::memcpy(entry, &e, std::min(entry_size, sizeof e));
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries, uint32_t flags,
                             size_t entry_size) {
  if (context == nullptr || entries == nullptr || flags != 0 || max_entries == 0) return -EINVAL;
  const Context& c = *Context::of(context);
  // The array must hold every valid entry, or the call fails (the man
  // page; the kernel's rdma_query_gid_table answers -EINVAL).
  if (max_entries < c.info.num_gids) return -EINVAL;
  size_t n = 0;
  for (; n < c.info.num_gids; n++) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<char*>(entries) + n * entry_size);
    _ibv_query_gid_ex(context, 1, uint32_t(n), e, 0, entry_size);
  }
  return ssize_t(n);
}

// IBVERBS_PRIVATE_34, used by ibv_devinfo -v. Its enum ibv_gid_type_sysfs
// lives in the private driver.h: 0 = IB/RoCE v1, 1 = RoCE v2.
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  if (context == nullptr || type == nullptr || port_num != 1) return -1;
  const Context& c = *Context::of(context);
  if (index >= c.info.num_gids) return -1;
  *type = c.info.gids[index].type == IBV_GID_TYPE_ROCE_V1 ? 0 : 1;
  return 0;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (context == nullptr || pkey == nullptr || port_num != 1 || index != 0) return -1;
  *pkey = htobe16(0xffff);
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (context == nullptr || port_num != 1) return -1;
  return be16toh(pkey) == 0xffff ? 0 : -1;
}

}  // extern "C"
