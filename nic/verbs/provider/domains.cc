// Thread domains and parent domains (ibv_alloc_td, ibv_alloc_parent_domain),
// as mlx5 has them: a parent domain stands in for its PD everywhere one is
// taken, and the memory the provider places for a queue made through it --
// the rings it shares with the engine, the only memory of a queue the NIC
// reaches -- goes where the domain's allocator says.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "nic/verbs/provider/provider.h"

using namespace rocemu;
using namespace rocemu::provider;

namespace {

Pd* domain(ibv_pd* pd) { return reinterpret_cast<Pd*>(pd); }

ibv_td* alloc_td(ibv_context* context, ibv_td_init_attr* attr) {
  // No comp_mask bit is defined (mlx5_alloc_td).
  if (context == nullptr || attr == nullptr || attr->comp_mask != 0) {
    errno = EINVAL;
    return nullptr;
  }
  auto* t = new Td();
  t->td.context = context;
  return &t->td;
}

int dealloc_td(ibv_td* td) {
  auto* t = reinterpret_cast<Td*>(td);
  if (t->domains.load() != 0) return EBUSY;
  delete t;
  return 0;
}

// As mlx5_alloc_parent_domain: a PD is required (and not a parent domain
// itself), no unknown comp_mask bit; allocators come as a pair.
ibv_pd* alloc_parent_domain(ibv_context* context, ibv_parent_domain_init_attr* attr) {
  constexpr uint32_t kKnown = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
  if (context == nullptr || attr == nullptr || attr->pd == nullptr || attr->pd->context != context ||
      domain(attr->pd)->protection != nullptr || (attr->comp_mask & ~kKnown) != 0 ||
      (attr->td != nullptr && attr->td->context != context) ||
      ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) && (attr->alloc == nullptr || attr->free == nullptr))) {
    errno = EINVAL;
    return nullptr;
  }
  Pd* pd = domain(attr->pd);
  auto* p = new Pd();
  p->pd.context = context;
  p->pd.handle = p->handle = pd->handle;
  p->protection = pd;
  p->td = reinterpret_cast<Td*>(attr->td);
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
    p->alloc = attr->alloc;
    p->free = attr->free;
  }
  if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT) p->pd_context = attr->pd_context;
  pd->users++;
  if (p->td != nullptr) p->td->domains++;
  return &p->pd;
}

}  // namespace

namespace rocemu::provider {

void init_domain_ops(Context& c) {
  c.vctx.alloc_td = alloc_td;
  c.vctx.dealloc_td = dealloc_td;
  c.vctx.alloc_parent_domain = alloc_parent_domain;
}

// ibv_dealloc_pd of a parent domain: EBUSY while anything made through it
// lives (the man page: destroy them first); it then leaves its PD and TD.
int dealloc_parent_domain(Pd* p) {
  if (p->users.load() != 0) return EBUSY;
  p->protection->users--;
  if (p->td != nullptr) p->td->domains--;
  delete p;
  return 0;
}

void hold_domain(ibv_pd* pd) {
  if (domain(pd)->protection != nullptr) domain(pd)->users++;
}

void release_domain(ibv_pd* pd) {
  if (domain(pd)->protection != nullptr) domain(pd)->users--;
}

// The allocator gives the address range (page-aligned, a whole number of
// pages: the alignment asked for); the engine's shared memory is mapped
// over it, and at the end plain zeroed memory again before it goes back.
void* map_queue(ibv_pd* pd, int fd, size_t bytes, uint64_t resource_type, bool& external) {
  external = false;
  Pd* p = domain(pd);
  if (p->alloc == nullptr) return map_fd(fd, bytes);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + page - 1) & ~(page - 1);
  void* at = p->alloc(pd, p->pd_context, len, page, resource_type);
  if (at == IBV_ALLOCATOR_USE_DEFAULT) return map_fd(fd, bytes);
  if (at == nullptr || reinterpret_cast<uintptr_t>(at) % page != 0) {
    if (at != nullptr) p->free(pd, p->pd_context, at, resource_type);
    close(fd);
    errno = at == nullptr ? ENOMEM : EINVAL;
    return nullptr;
  }
  void* m = mmap(at, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    p->free(pd, p->pd_context, at, resource_type);
    errno = ENOMEM;
    return nullptr;
  }
  external = true;
  return m;
}

void unmap_queue(ibv_pd* pd, void* map, size_t bytes, uint64_t resource_type, bool external) {
  if (!external) {
    munmap(map, bytes);
    return;
  }
  Pd* p = domain(pd);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + page - 1) & ~(page - 1);
  mmap(map, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  p->free(pd, p->pd_context, map, resource_type);
}

}  // namespace rocemu::provider
