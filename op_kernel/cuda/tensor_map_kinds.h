// The TMA boxes the GMM tiles read (block_gemm_tma.cuh), one tensor map per (heap slot, box kind), built on
// the host (op_host/cuda/tensor_maps.cu) and read by the kernel from global memory. Every box is 64
// elements (128 bytes, the 128-byte swizzle's line) wide along the contiguous dimension.
#pragma once

#include <stdint.h>

namespace hpmoe {
namespace cuda {

enum TensorMapBox : uint32_t {
  kBoxRows128 = 0,  // 128 lines: K-major A (rows of 64 K)
  kBoxRows64 = 1,   // 64 lines: one 64-wide block of an MN-major operand (lines = K)
  kBoxRows256 = 2,  // 256 lines: K-major B (GMM_TRANS_B's weight rows)
  // A whole MN-major operand of one K step in one box: the slot viewed as 4-D (64 columns, lines, 64-column
  // groups, experts), box 64 x 64 lines x kBoxGroups groups, landing as the groups' 8 KB blocks one after the
  // other, as kBoxRows64 boxes would. One TMA instruction instead of one per group: the thread that issues them
  // spends about 120 cycles on each (session 25). Encoded only for slots whose width is a multiple of 64, so
  // that a group never runs into the next row; zeroed otherwise (GroupMaps).
  kBoxGroups2 = 3,  // 2 groups: MN-major A (128 wide)
  kBoxGroups4 = 4,  // 4 groups: MN-major B (256 wide)
  kBoxKinds = 5,
};
constexpr uint32_t kBoxLines[kBoxKinds] = {128, 64, 256, 64, 64};
constexpr uint32_t kBoxGroups[kBoxKinds] = {1, 1, 1, 2, 4};
// Whether a slot `cols` wide has its kBoxGroups* maps (this header is read by nvcc only).
__host__ __device__ constexpr bool GroupMaps(uint64_t cols) { return cols % 64 == 0; }
constexpr uint32_t kTensorMapBytes = 128;  // sizeof(CUtensorMap), 64-byte aligned

}  // namespace cuda
}  // namespace hpmoe
