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
  kBoxKinds = 3,
};
constexpr uint32_t kBoxLines[kBoxKinds] = {128, 64, 256};
constexpr uint32_t kTensorMapBytes = 128;  // sizeof(CUtensorMap), 64-byte aligned

}  // namespace cuda
}  // namespace hpmoe
