// TMA tensor maps of one rank's heap slots for the GMM tiles (op_kernel/cuda/block_gemm_tma.cuh): one per
// (slot, box kind) of every 16-bit slot, encoded with cuTensorMapEncodeTiled and uploaded to device memory.
#pragma once

#include <cstdint>
#include <string>

#include "../../op_kernel/cpu/heap_layout.h"
#include "../../op_kernel/cuda/tensor_map_kinds.h"

namespace hpmoe {
namespace cuda {

// Encodes the maps of `segment` (a device pointer with `layout`; slot s at placed[s] where that is non-zero)
// into a new device buffer *out (cudaFree it). "" or one line naming what failed.
std::string BuildTensorMaps(const cpu::HeapLayout& layout, const uint8_t* segment, const uint64_t* placed,
                            uint8_t** out);

// The kBoxKinds maps of one slot of shape `sh` whose data is at `base` (any device address, e.g. a bound
// framework tensor), into out[box]. Only for slots with HasTensorMaps.
std::string EncodeSlotMaps(const cpu::SlotShape& sh, const void* base, uint8_t (*out)[kTensorMapBytes]);
bool HasTensorMaps(const cpu::SlotShape& sh);

}  // namespace cuda
}  // namespace hpmoe
