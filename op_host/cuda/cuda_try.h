// Shared by the CUDA group's sources (cuda_group.cu, cuda_group_launch.cu, cuda_group_reports.cu): a CUDA call
// that fails returns one line naming what was being done and CUDA's error.
#pragma once

#include <cuda_runtime.h>

#include "../one_line.h"

namespace hpmoe {
namespace cuda {

inline constexpr const char* kDirNames[2] = {"fwd", "bwd"};

#define HPMOE_CUDA_TRY(EXPR, WHAT)                                                                   \
  do {                                                                                               \
    const cudaError_t e_ = (EXPR);                                                                   \
    if (e_ != cudaSuccess) return Format("%s: CUDA error %s (%s)", WHAT, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
  } while (0)

}  // namespace cuda
}  // namespace hpmoe
