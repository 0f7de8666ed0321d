// A frame whose payload is still in the sender's memory (issue 11: one
// copy per byte instead of two). A NIC that can reach the sender's
// registered pages by load and store for as long as the frame lives (the
// engine's mapping of an MR's pages, nic/verbs/process_memory.h) writes
// only the headers; the payload's place in the mbuf is left unwritten and
// the mbuf names where the bytes are. The receiving NIC copies them
// straight from there into the receiver's memory.
//
// Everything else that looks at the bytes sees real ones: such a frame
// always has kMetaIcrcPending, and dpdk::seal() -- which captures, fault
// stages, external ports, VXLAN and flooding call first -- copies the
// payload in before it computes the ICRC. Code that changes a frame's
// payload or length without sealing (packet trimming) calls materialize().
//
// The memory must outlive the frame: before the engine unmaps memory it
// has lent, it calls materialize_from() on that range, which copies the
// payload into every frame still pointing there.
//
// Only for transports whose send completes when the receiver acknowledged
// the bytes (RC, XRC): the application may not change them before, so
// reading them later reads what a NIC would have read at send time.
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>

namespace rocemu::dpdk {

// The mbuf flag (a DPDK dynamic flag, registered with the first packet
// pool; 0 before, and then no frame is lazy). rte_pktmbuf_alloc clears it.
extern uint64_t g_lazy_payload_flag;

// Below this, copying the payload in costs less than looking up, at the
// receiver, where it is.
inline constexpr uint32_t kLazyMinPayload = 256;

inline bool lazy(const rte_mbuf* m) { return (m->ol_flags & g_lazy_payload_flag) != 0; }

// Makes the `len` bytes at `at` (inside m's data room) stand for the bytes
// at `src`. False (and nothing changed) if lazy frames are off or the
// data room has no room for the note.
bool make_lazy(rte_mbuf* m, uint8_t* at, const uint8_t* src, uint32_t len);

// Copies the payload in; the frame is an ordinary one afterwards.
void materialize_slow(rte_mbuf* m);
inline void materialize(rte_mbuf* m) {
  if (lazy(m)) materialize_slow(m);
}

// Where the bytes [p, p + len) of lazy frame m really are, or nullptr if
// m is not lazy or they are not (wholly) its lazy payload.
const uint8_t* lazy_source(rte_mbuf* m, const uint8_t* p, size_t len);

// Materializes every frame of every packet pool whose payload lies in
// [begin, end). Engine thread (the one that owns the pools' frames).
void materialize_from(const void* begin, const void* end);

// Materializes every lazy frame (nothing to do, and no walk, if no frame
// was made lazy since the last call). Engine thread. Before an error
// completion or a QP's end lets an application reuse memory whose bytes
// frames in flight still point at.
void materialize_all();

// lazy_frames_made() when materialize_all() last walked: every frame
// made lazy up to then has been filled in.
uint64_t lazy_walked_at();
// Walks over the packet pools so far (tests).
uint64_t lazy_walks();

// Frames made lazy and materialized since the process started (tests).
uint64_t lazy_frames_made();
uint64_t lazy_frames_materialized();

}  // namespace rocemu::dpdk
