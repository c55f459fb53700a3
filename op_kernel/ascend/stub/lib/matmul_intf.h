// Project-written AscendC stub: the Matmul high-level API as the kernel's AIC uses it (cube-only use, no
// AIV client: the kernel defines ASCENDC_CUBE_ONLY, so no AIC<->AIV message flags are involved).
// Doc pages (asc-devkit, docs/zh/api/SIMD-API/高阶API/矩阵计算/Matmul/...): Matmul使用说明.md, MatmulType.md,
// Init.md, SetOrgShape.md, SetSingleShape.md, SetTensorA.md, SetTensorB.md, IterateAll.md (enAtomic), End.md.
// Numerics: operands widened to fp32 (exact for fp16/bf16), products summed in fp32 (the cube accumulates
// in fp32 in L0C), a 16-bit C rounded to nearest even once (the fixpipe); enAtomic = 1 adds an fp32 result to
// what GM holds. The stub's cube is the CPU twin's GEMM (op_kernel/cpu/gemm.h, Eigen, blocking fixed by the
// sizes), so the stub-executed kernel and the twin agree bit for bit on every GEMM; the NPU's cube blocks k
// by baseK and so sums in another order (last-bit differences, inside the float64 tolerances).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "../../../cpu/gemm.h"

#include "../stub_copy.h"
#include "../stub_core.h"
#include "../stub_tensor.h"

namespace AscendC {

enum class CubeFormat : int32_t { ND = 0, NZ = 1 };

template <TPosition Pos, CubeFormat Format, class T, bool IsTrans = false>
struct MatmulType {
  using Type = T;
};

struct TCubeTiling {  // host-computed tiling (matmul_tiling::MultiCoreMatmulTiling); the stub reads none of it
  int32_t usedCoreNum = 1;
  int32_t M = 0, N = 0, Ka = 0, Kb = 0;
  int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
  int32_t baseM = 128, baseN = 256, baseK = 64;
};

template <class AType, class BType, class CType, class BiasType = CType>
class Matmul {
  using A = typename AType::Type;
  using B = typename BType::Type;
  using C = typename CType::Type;

 public:
  void Init(const TCubeTiling*, TPipe* = nullptr) {}
  // Leading dimensions: A is orgM x orgK (stored orgK x orgM when transposed), B is orgK x orgN (stored
  // orgN x orgK when transposed), C is m x orgN.
  void SetOrgShape(int32_t org_m, int32_t org_n, int32_t org_k) {
    org_m_ = org_m;
    org_n_ = org_n;
    org_k_ = org_k;
  }
  void SetSingleShape(int32_t m, int32_t n, int32_t k) {
    m_ = m;
    n_ = n;
    k_ = k;
  }
  void SetTensorA(const GlobalTensor<A>& a, bool trans = false) {
    a_ = a;
    trans_a_ = trans;
  }
  void SetTensorB(const GlobalTensor<B>& b, bool trans = false) {
    b_ = b;
    trans_b_ = trans;
  }
  void IterateAll(const GlobalTensor<C>& c, uint8_t en_atomic = 0) {
    if (stub::Core().core_type != AIC) stub::Fail("Matmul::IterateAll on a vector core (cube-only use)");
    if (en_atomic != 0 && sizeof(C) != 4) stub::Fail("Matmul atomic accumulation needs an fp32 C");
    // Operands as dense fp32: A is m x k (stored k x m when transposed), B as stored.
    const int64_t a_rows = trans_a_ ? k_ : m_, a_cols = trans_a_ ? m_ : k_, a_ld = trans_a_ ? org_m_ : org_k_;
    const int64_t b_rows = trans_b_ ? n_ : k_, b_cols = trans_b_ ? k_ : n_, b_ld = trans_b_ ? org_k_ : org_n_;
    // fp32 operands are used in place (with their leading dimensions); 16-bit ones are widened into copies.
    std::vector<float> a_wide, b_wide, out(size_t(m_) * n_, 0.0f);
    const float* a = Widen(a_.GetPhyAddr(), a_rows, a_cols, a_ld, &a_wide);
    const float* b = Widen(b_.GetPhyAddr(), b_rows, b_cols, b_ld, &b_wide);
    const int64_t lda = a_wide.empty() ? a_ld : a_cols, ldb = b_wide.empty() ? b_ld : b_cols;
    C* dst = c.GetPhyAddr();
    if (trans_a_) {
      // A^T B accumulated onto the fp32 C (zeroed first unless enAtomic): one core owns each C block.
      float* cf = reinterpret_cast<float*>(dst);
      if (en_atomic == 0)
        for (int32_t i = 0; i < m_; ++i) std::memset(cf + int64_t(i) * org_n_, 0, size_t(n_) * 4);
      hpmoe::cpu::GemmAtBAccumulate(k_, m_, n_, a, lda, b, ldb, cf, org_n_);
    } else {
      hpmoe::cpu::GemmRowMajor(m_, n_, k_, a, lda, b, ldb, trans_b_, out.data(), n_);
      for (int32_t i = 0; i < m_; ++i) {
        for (int32_t j = 0; j < n_; ++j) {
          C& d = dst[int64_t(i) * org_n_ + j];
          const float v = out[size_t(i) * n_ + j];
          if constexpr (sizeof(C) == 4) {
            if (en_atomic != 0) {
              stub::AddInto(&d, reinterpret_cast<const C*>(&v), 1);
            } else {
              d = stub::FromFloat<C>(v);
            }
          } else {
            d = stub::FromFloat<C>(v);
          }
        }
      }
    }
    stub::Log(stub::Op::kMatmulIterateAll, en_atomic, dst, uint64_t(m_) * org_n_ * sizeof(C));
  }
  void End() {}

 private:
  template <class T>
  static const float* Widen(const T* p, int64_t rows, int64_t cols, int64_t ld, std::vector<float>* wide) {
    if constexpr (sizeof(T) == 4) {
      return reinterpret_cast<const float*>(p);
    } else {
      wide->resize(size_t(rows * cols));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) (*wide)[size_t(i * cols + j)] = stub::ToFloat(p[i * ld + j]);
      return wide->data();
    }
  }

  GlobalTensor<A> a_;
  GlobalTensor<B> b_;
  bool trans_a_ = false, trans_b_ = false;
  int32_t org_m_ = 0, org_n_ = 0, org_k_ = 0, m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace AscendC
