// Project-written AscendC stub: the vector (AIV) instructions the kernel uses, count form.
// Doc pages (asc-devkit, docs/zh/api/SIMD-API/基础API/矢量计算/...): Add.md, Mul.md, Muls.md, Adds.md, Exp.md,
// Reciprocal.md, Axpy.md (dst = src * scalar + dst), MulAddDst.md (dst = src0 * src1 + dst), Duplicate.md, Cast.md (RoundMode: CAST_NONE widens,
// CAST_RINT rounds to nearest even), ReduceSum.md.
// Numerics: fp32 element-wise in IEEE single precision (the hardware's Exp/Reciprocal are approximations of
// these; results on an NPU will differ in the last bits). ReduceSum adds pairwise (halving the vector each
// step), which is an order the stub chose; the hardware's order is not documented bit for bit.
#pragma once

#include <cmath>
#include <cstdint>

#include "stub_core.h"
#include "stub_tensor.h"

namespace AscendC {

enum class RoundMode : int32_t { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

namespace stub {
inline void CheckVectorCore() {
  if (Core().core_type != AIV) Fail("vector instruction issued on an AIC (the cube core has no vector unit)");
}
// A vector instruction reads its sources and writes its destination on the V pipe (stub_pipe.h); every
// operand must be in UB.
template <class T>
inline void VecRead(const LocalTensor<T>& t, uint64_t n, const char* api) {
  if (!IsUb(t.GetPosition())) Fail("vector instruction operand outside UB (VECIN/VECOUT/VECCALC)");
  PipeAccess(kPipeV, false, t.GetPhyAddr(), n * sizeof(T), api);
}
template <class T>
inline void VecWrite(const LocalTensor<T>& t, uint64_t n, const char* api) {
  if (!IsUb(t.GetPosition())) Fail("vector instruction operand outside UB (VECIN/VECOUT/VECCALC)");
  PipeAccess(kPipeV, true, t.GetPhyAddr(), n * sizeof(T), api);
}
}  // namespace stub

template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Add") inline void Add(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::Add");
  stub::VecRead(b, n, "AscendC::Add");
  stub::VecWrite(dst, n, "AscendC::Add");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = a.GetPhyAddr()[i] + b.GetPhyAddr()[i];
}
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Mul") inline void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::Mul");
  stub::VecRead(b, n, "AscendC::Mul");
  stub::VecWrite(dst, n, "AscendC::Mul");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = a.GetPhyAddr()[i] * b.GetPhyAddr()[i];
}
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Muls") inline void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& a, T s, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::Muls");
  stub::VecWrite(dst, n, "AscendC::Muls");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = a.GetPhyAddr()[i] * s;
}
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Adds") inline void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& a, T s, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::Adds");
  stub::VecWrite(dst, n, "AscendC::Adds");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = a.GetPhyAddr()[i] + s;
}
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Exp") inline void Exp(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::Exp");
  stub::VecWrite(dst, n, "AscendC::Exp");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = std::exp(a.GetPhyAddr()[i]);
}
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Reciprocal") inline void Reciprocal(const LocalTensor<T>& dst, const LocalTensor<T>& a, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::Reciprocal");
  stub::VecWrite(dst, n, "AscendC::Reciprocal");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = T(1) / a.GetPhyAddr()[i];
}
template <class T, class U>
HPMOE_STUB_AIV_ONLY("AscendC::Axpy") inline void Axpy(const LocalTensor<T>& dst, const LocalTensor<U>& src, U s, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(src, n, "AscendC::Axpy");
  stub::VecRead(dst, n, "AscendC::Axpy");
  stub::VecWrite(dst, n, "AscendC::Axpy");
  T* d = dst.GetPhyAddr();
  const U* x = src.GetPhyAddr();
  for (int32_t i = 0; i < n; ++i) d[i] += s * x[i];
}
template <class T, class U>
HPMOE_STUB_AIV_ONLY("AscendC::MulAddDst") inline void MulAddDst(const LocalTensor<T>& dst, const LocalTensor<U>& a, const LocalTensor<U>& b, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(a, n, "AscendC::MulAddDst");
  stub::VecRead(b, n, "AscendC::MulAddDst");
  stub::VecRead(dst, n, "AscendC::MulAddDst");
  stub::VecWrite(dst, n, "AscendC::MulAddDst");
  T* d = dst.GetPhyAddr();
  for (int32_t i = 0; i < n; ++i) d[i] += a.GetPhyAddr()[i] * b.GetPhyAddr()[i];
}
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::Duplicate") inline void Duplicate(const LocalTensor<T>& dst, T v, int32_t n) {
  stub::CheckVectorCore();
  stub::VecWrite(dst, n, "AscendC::Duplicate");
  for (int32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = v;
}

template <class D, class S>
HPMOE_STUB_AIV_ONLY("AscendC::Cast") inline void Cast(const LocalTensor<D>& dst, const LocalTensor<S>& src, RoundMode mode, uint32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(src, n, "AscendC::Cast");
  stub::VecWrite(dst, n, "AscendC::Cast");
  const bool narrowing = sizeof(D) < sizeof(S);
  if (narrowing && mode != RoundMode::CAST_RINT) stub::Fail("Cast: the stub narrows with CAST_RINT only");
  if (!narrowing && mode != RoundMode::CAST_NONE) stub::Fail("Cast: the stub widens with CAST_NONE only");
  for (uint32_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = stub::FromFloat<D>(stub::ToFloat(src.GetPhyAddr()[i]));
}

// dst[0] = sum of src[0..n); `work` (n elements) is overwritten.
template <class T>
HPMOE_STUB_AIV_ONLY("AscendC::ReduceSum") inline void ReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<T>& work, int32_t n) {
  stub::CheckVectorCore();
  stub::VecRead(src, n, "AscendC::ReduceSum");
  stub::VecRead(work, n, "AscendC::ReduceSum");
  stub::VecWrite(work, n, "AscendC::ReduceSum");
  stub::VecWrite(dst, 1, "AscendC::ReduceSum");
  T* w = work.GetPhyAddr();
  for (int32_t i = 0; i < n; ++i) w[i] = src.GetPhyAddr()[i];
  for (int32_t len = n; len > 1;) {
    const int32_t half = (len + 1) / 2;
    for (int32_t i = 0; i + half < len; ++i) w[i] = w[i] + w[i + half];
    len = half;
  }
  dst.GetPhyAddr()[0] = n > 0 ? w[0] : T(0);
}

}  // namespace AscendC
