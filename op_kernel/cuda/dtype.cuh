// bf16 / fp16 element conversions (round to nearest even, as the CPU twin's dtype.h) and 8-element vector
// loads that bypass L1: data written by another block or rank is read from L2 (ld.global.cg), never a
// stale L1 line.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace hpmoe {
namespace cuda {

__device__ __forceinline__ float ToF(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float ToF(__half v) { return __half2float(v); }
template <class T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half FromF<__half>(float v) { return __float2half_rn(v); }

// One 16-byte vector of 8 elements as fp32, and back (one rounding each).
template <class T>
__device__ __forceinline__ void Unpack8(const uint4& raw, float* out) {
  const T* e = reinterpret_cast<const T*>(&raw);
  for (int i = 0; i < 8; ++i) out[i] = ToF(e[i]);
}
template <class T>
__device__ __forceinline__ uint4 Pack8(const float* in) {
  uint4 raw;
  T* e = reinterpret_cast<T*>(&raw);
  for (int i = 0; i < 8; ++i) e[i] = FromF<T>(in[i]);
  return raw;
}

// 8 consecutive elements (16 bytes, aligned) as fp32.
template <class T>
__device__ __forceinline__ void Load8(const T* p, float* out) {
  Unpack8<T>(__ldcg(reinterpret_cast<const uint4*>(p)), out);
}

template <class T>
__device__ __forceinline__ void Store8(T* p, const float* in) {
  *reinterpret_cast<uint4*>(p) = Pack8<T>(in);
}

// 16 bytes from a shared-space address (staged epilogues, bulk-copied rows).
__device__ __forceinline__ uint4 LoadShared16(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// 16 bytes to global memory as one vector store. nvcc 13 lowers `*(uint4*)p = LoadShared16(a)` to four 4-byte
// generic stores (PTX st.u32 x4, SASS ST.E x4): every staged GMM epilogue wrote its tile with four times the
// store instructions and partial sectors. `p`: 16-byte aligned, in global memory (ours or a peer's).
__device__ __forceinline__ void StoreGlobal16(void* p, uint4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ __forceinline__ void StoreF32x8(float* p, const float* in) {
  reinterpret_cast<float4*>(p)[0] = make_float4(in[0], in[1], in[2], in[3]);
  reinterpret_cast<float4*>(p)[1] = make_float4(in[4], in[5], in[6], in[7]);
}

// Accumulating epilogues (AddStagedRows) on an fp32 or 16-bit OutT: 8 elements at a shared-space address as
// fp32; 8 fp32 values stored as OutT (16-bit: rounded); scalar conversions alike.
template <class OutT>
__device__ __forceinline__ void LoadShared8Out(uint32_t addr, float* out) {
  if constexpr (sizeof(OutT) == 4) {
    const uint4 a = LoadShared16(addr), b = LoadShared16(addr + 16);
    const uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    for (int i = 0; i < 8; ++i) out[i] = __uint_as_float(w[i]);
  } else {
    Unpack8<OutT>(LoadShared16(addr), out);
  }
}
__device__ __forceinline__ void Store8Out(float* p, const float* in) { StoreF32x8(p, in); }
template <class T>
__device__ __forceinline__ void Store8Out(T* p, const float* in) { Store8<T>(p, in); }
__device__ __forceinline__ float ToOut(float v) { return v; }
template <class T>
__device__ __forceinline__ float ToOut(T v) { return ToF(v); }
template <class OutT>
__device__ __forceinline__ OutT FromOut(float v) { return FromF<OutT>(v); }
template <>
__device__ __forceinline__ float FromOut<float>(float v) { return v; }

__device__ __forceinline__ int32_t LoadI32(const int32_t* p) { return __ldcg(p); }
__device__ __forceinline__ float LoadF32(const float* p) { return __ldcg(p); }

}  // namespace cuda
}  // namespace hpmoe
