// Memory of the CPU twin: one segment per rank, all segments back to back in one mapping (POSIX shared
// memory across rank processes, or plain memory when ranks are thread groups). Every rank uses the same
// layout, so a buffer sits at the same offset in every segment: a peer's copy of a local symmetric address is
// `addr - segment(me) + segment(peer)`, the way ACLSHMEM and NVSHMEM translate symmetric addresses.
//   [control block][slot 0]...[slot 25][fwd counters][bwd counters]
// Slots hold every tensor of the op (inputs, weights, workspace, outputs) so a launcher in another process
// can fill inputs and read outputs; counters sit kCounterStrideBytes apart.
#pragma once

#include <cstdint>
#include <string>

#include "../ssc_layout.h"

namespace hpmoe {
namespace cpu {

constexpr uint32_t kControlMagic = 0x5450434Du;  // "MCPT"
constexpr uint64_t kControlBytes = 4096;
constexpr uint64_t kSegmentAlign = 4096;

struct alignas(64) ControlBlock {
  uint32_t magic;
  uint32_t ep;
  uint64_t segment_bytes;
  alignas(64) uint32_t abort_rank_plus1;  // 0, or 1 + the rank whose worker failed first (group-wide)
  alignas(64) uint32_t invocations[2];    // launches of the fwd / bwd SSC on this rank so far (epoch n - 1)
  // The group's window nonce (host-agreed, the same on every rank): the AscendC kernel's first-launch
  // handshake (op_kernel/ascend/window_setup.h). The twin never reads it; the ascendc-cpu runner draws it.
  alignas(64) uint64_t window_nonce;
};
// The second half of the control page: one 32-byte hello block per rank for the AscendC kernel's first-launch
// handshake (op_kernel/ascend/window_setup.h); the twin leaves it alone.
constexpr uint64_t kHandshakeOffset = kControlBytes / 2;
constexpr uint64_t kHandshakeBlockBytes = 32;
static_assert(sizeof(ControlBlock) <= kHandshakeOffset, "control block outgrew its half page");

struct SlotShape {
  uint32_t ndim;
  uint32_t dims[ssc::kMaxTensorDims];
  uint32_t dtype;
  uint64_t rows;  // 2-D view: all dims but the last
  uint64_t cols;
  uint64_t bytes;
};

struct HeapLayout {
  SlotShape slots[ssc::kSlotCount];
  uint64_t slot_offset[ssc::kSlotCount];
  uint64_t counter_offset[2];    // by ssc::Direction
  uint32_t counter_capacity[2];  // counters reserved per direction (the largest event count of any rank)
  uint64_t segment_bytes;
};

// Shapes of every slot for `cfg` (mirrors scheduler/hpmoe/graphs.py; the loader checks each SSC tensor
// record against them) and their offsets. Returns "" or a one-line error.
// external_mask: bit s set = slot s lives outside the segment (a launch binds it; CUDA backend): no bytes.
std::string ComputeHeapLayout(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd,
                              HeapLayout* layout, uint32_t external_mask = 0);

}  // namespace cpu
}  // namespace hpmoe
