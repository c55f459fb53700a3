// SwiGLU and its gradient for one element, in fp32 from the stored 16-bit values: the one definition the vector
// handlers (handlers_vector.cuh) and the fused GMM epilogues (handlers_fused.cuh) share, so that both paths
// compute every element with the same operations (tests/cuda/test_cuda_fused_swiglu.py checks them bitwise).
#pragma once

namespace hpmoe {
namespace cuda {

__device__ __forceinline__ float Sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

__device__ __forceinline__ float SwigluOf(float g, float u) { return g * Sigmoid(g) * u; }

__device__ __forceinline__ void SwigluGradOf(float g, float u, float d, float* dg, float* du) {
  const float sg = Sigmoid(g);
  *du = d * g * sg;
  *dg = d * u * sg * (1.0f + g * (1.0f - sg));
}

}  // namespace cuda
}  // namespace hpmoe
