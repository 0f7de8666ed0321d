// What a real NIC's ibv_reg_mr checks when it pins the pages
// (ib_umem_get -> pin_user_pages): every page of the range is mapped in
// the process, readable, and writable if the MR may be written (local or
// remote write, atomics, memory windows). A hole anywhere in the range
// fails registration with EFAULT, not a DMA later.
//
// It reads the process's /proc/<pid>/maps through a directory fd opened
// when the process connected, so a pid reused by another process cannot
// answer for it. Control thread: it never touches the engine's
// HostMemory (whose reads would flush the engine's pending writes).
#pragma once

#include <cstdint>
#include <string_view>

namespace rocemu::verbs {

// True if the access flags make the pages writable (FOLL_WRITE).
bool mr_writable(int access);

// 0, or EFAULT (a page is not mapped or lacks the access), or the errno of
// reading the map (ESRCH: the process is gone).
int check_pinnable(int proc_dir_fd, uint64_t addr, uint64_t length, bool writable);

// The same over the text of a maps file (for tests).
int check_pinnable_in(std::string_view maps, uint64_t addr, uint64_t length, bool writable);

}  // namespace rocemu::verbs
