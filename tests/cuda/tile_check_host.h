// Host side shared by the standalone GPU tile checks (paired_tile_check.cu, wgrad_pingpong_check.cu): the
// device and driver they need, CUDA errors as one line, and tensor maps of a row-major bf16 matrix as the
// runtime's 3-D maps see a slot (op_host/cuda/tensor_maps.cu). Each line starts with the check's name.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace tile_check {

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline const char* g_name = "tile check";  // the prefix of every line

inline bool Ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::printf("%s: %s failed: %s\n", g_name, what, cudaGetErrorString(e));
  return false;
}

// A row-major [rows, cols] bf16 matrix as one slot ("expert") of a 3-D map, boxes of 64 columns x `lines`
// rows, 128-byte swizzle.
inline bool Map(EncodeTiled encode, void* base, uint64_t rows, uint64_t cols, uint32_t lines, CUtensorMap* out) {
  const cuuint64_t dims[3] = {cols, rows, 1}, strides[2] = {cols * 2, cols * 2 * rows};
  const cuuint32_t box[3] = {64, lines, 1}, elem[3] = {1, 1, 1};
  return encode(out, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, base, dims, strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Mean ms of kReps more calls of `launch` (CUDA events around them); `wait(what)` waits for the device the
// check's way and reports a failure. False on a failure.
template <class Launch, class Wait>
bool TimeLaunches(Launch launch, Wait wait, float* ms) {
  constexpr int kReps = 20;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  for (int i = 0; i < kReps; ++i) launch();
  cudaEventRecord(e1);
  const bool ok = wait("timed launches") && Ok(cudaEventSynchronize(e1), "timed launches");
  if (ok) cudaEventElapsedTime(ms, e0, e1);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (ok) *ms /= kReps;
  return ok;
}

// A Hopper GPU (device 0, its properties in *prop) and the driver's tensor-map encoder, or the exit code the
// check returns without them (2: no such GPU, a skip; 1: the driver lacks the encoder), the reason printed.
inline int Setup(const char* name, cudaDeviceProp* prop, EncodeTiled* encode) {
  g_name = name;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("%s: no CUDA device\n", name);
    return 2;
  }
  cudaGetDeviceProperties(prop, 0);
  if (prop->major < 9) {
    std::printf("%s: needs a Hopper GPU (sm_90), found sm_%d%d\n", name, prop->major, prop->minor);
    return 2;
  }
  void* p = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      p == nullptr) {
    std::printf("%s: the driver has no cuTensorMapEncodeTiled\n", name);
    return 1;
  }
  *encode = reinterpret_cast<EncodeTiled>(p);
  return 0;
}

}  // namespace tile_check
