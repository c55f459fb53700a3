// The stub's HCCL windows (the CPU twin's heap segments, one per rank) as HCCL hands them to an MC2 op:
// filled with garbage. HCCL allocates the windows when the communicator is created and does not promise
// their contents (nor does any MC2 guide; ops-transformer's MoeDistribute* kernels keep their own state
// flags in the window), so a kernel that assumes zeroed counters, abort word or buffers must fail here.
// What stays: the control block's host fields (magic, ep, sizes, invocation counts, the group's window
// nonce), which on CANN live on the host, not in the window.
#pragma once

#include <cstdint>

namespace hpmoe {
namespace ascend {

// The garbage word at byte `offset` (a multiple of 8) of rank `rank`'s window: deterministic, so a test can
// put the same garbage into the CPU twin's heap.
uint64_t WindowGarbageWord(uint32_t rank, uint64_t offset);

// Fills [from, to) of every rank's window with its garbage (from, to: multiples of 8).
void FillWindowGarbage(void* base, uint32_t ep, uint64_t segment_bytes, uint64_t from, uint64_t to);

// What the stub does when it creates the windows: garbage in the abort line and everything from the
// handshake blocks on, and a fresh random nonce in every rank's control block (the value a group agrees on).
void CreateStubWindows(void* base, uint32_t ep, uint64_t segment_bytes);

}  // namespace ascend
}  // namespace hpmoe
