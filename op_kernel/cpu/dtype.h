// fp16 / bf16 <-> fp32 conversions of the CPU twin: round-to-nearest-even, bit-exact and branch-light, so
// results do not depend on compiler flags or on which instructions the host has. The Python side
// (scheduler/hpmoe/runtime/dtypes.py) rounds inputs with the same rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../ssc_layout.h"

namespace hpmoe {
namespace cpu {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float Bf16ToF32(uint16_t h) { return BitsFloat(uint32_t(h) << 16); }

inline uint16_t F32ToBf16(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x40u);  // NaN stays a quiet NaN
  x += 0x7FFFu + ((x >> 16) & 1u);
  return uint16_t(x >> 16);
}

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    const float v = float(mant) * (1.0f / 16777216.0f);  // subnormal: mant * 2^-24
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7F800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t F32ToF16(float f) {  // after F. Giesen's float_to_half_fast3_rtne
  uint32_t u = FloatBits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t out;
  if (u >= (127u + 16u) << 23) {
    out = u > 0x7F800000u ? 0x7E00u : 0x7C00u;
  } else if (u < 113u << 23) {
    const float magic = BitsFloat(126u << 23);  // 0.5f aligns the 10 mantissa bits at the bottom
    out = uint16_t(FloatBits(BitsFloat(u) + magic) - (126u << 23));
  } else {
    const uint32_t odd = (u >> 13) & 1u;
    u += 0xC8000FFFu + odd;  // rebias exponent (15 - 127) and round half to even
    out = uint16_t(u >> 13);
  }
  return uint16_t(out | (sign >> 16));
}

inline size_t DTypeBytes(uint32_t dtype) { return dtype == ssc::kFP16 || dtype == ssc::kBF16 ? 2 : 4; }

// n elements of an activation dtype (fp32/fp16/bf16) to fp32 and back.
inline void LoadF32(const void* src, uint32_t dtype, size_t n, float* dst) {
  if (dtype == ssc::kFP32) {
    std::memcpy(dst, src, n * 4);
  } else if (dtype == ssc::kBF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = Bf16ToF32(s[i]);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (size_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
  }
}

inline void StoreF32(const float* src, uint32_t dtype, size_t n, void* dst) {
  if (dtype == ssc::kFP32) {
    std::memcpy(dst, src, n * 4);
  } else if (dtype == ssc::kBF16) {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = F32ToBf16(src[i]);
  } else {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (size_t i = 0; i < n; ++i) d[i] = F32ToF16(src[i]);
  }
}

}  // namespace cpu
}  // namespace hpmoe
