// SwiGLU and its gradient for one element, in fp32 from the stored 16-bit values: the one definition the vector
// handlers (handlers_vector.cuh) and the fused GMM epilogues (handlers_fused.cuh) share, so that both paths
// compute every element with the same operations (tests/cuda/test_cuda_fused_swiglu.py checks them bitwise).
#pragma once

namespace hpmoe {
namespace cuda {

// exp as one SFU ex2 (__expf) and the reciprocal as one SFU rcp (__fdividef), not expf's range reduction and
// an IEEE division: at 8 warps per SM a SwiGLU task is bound by these instructions, not by its bytes (one H200,
// Mixtral-8x7B experts: a 128 x 14336 task took 870 us with either way of loading its rows, 515 us with these;
// docs/cuda.md, "SwiGLU on the SFU"). Relative error under 2e-5 for |g| < 88 (__expf: 2 + 1.2 |x| ulp), far
// below the bf16/fp16 rounding that follows. g < -88: exp overflows, the reciprocal of inf is 0, silu(g) = -0.
__device__ __forceinline__ float Sigmoid(float g) { return __fdividef(1.0f, 1.0f + __expf(-g)); }

__device__ __forceinline__ float SwigluOf(float g, float u) { return g * Sigmoid(g) * u; }

__device__ __forceinline__ void SwigluGradOf(float g, float u, float d, float* dg, float* du) {
  const float sg = Sigmoid(g);
  *du = d * g * sg;
  *dg = d * u * sg * (1.0f + g * (1.0f - sg));
}

}  // namespace cuda
}  // namespace hpmoe
