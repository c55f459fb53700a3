// Project-written AscendC stub: the Matmul high-level API as the kernel's AIC uses it (cube-only use, no
// AIV client: the kernel defines ASCENDC_CUBE_ONLY, so no AIC<->AIV message flags are involved).
// Doc pages (asc-devkit, docs/zh/api/SIMD-API/高阶API/矩阵计算/Matmul/...): Matmul使用说明.md, MatmulType.md,
// Init.md, SetOrgShape.md, SetSingleShape.md, SetTensorA.md, SetTensorB.md, IterateAll.md (enAtomic), End.md.
// Numerics: every output element is one fp32 sum over k ascending (the cube accumulates in fp32 in L0C);
// fp16/bf16 operands are exact in fp32, and a 16-bit C is rounded to nearest even once (the fixpipe), an
// fp32 C with enAtomic = 1 is added to what GM holds. The hardware's k blocking changes the sum's order.
#pragma once

#include <cstdint>
#include <vector>

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
    const A* a = a_.GetPhyAddr();
    const B* b = b_.GetPhyAddr();
    C* out = c.GetPhyAddr();
    for (int32_t i = 0; i < m_; ++i) {
      for (int32_t j = 0; j < n_; ++j) {
        float acc = 0.0f;
        for (int32_t p = 0; p < k_; ++p) {
          const A av = trans_a_ ? a[int64_t(p) * org_m_ + i] : a[int64_t(i) * org_k_ + p];
          const B bv = trans_b_ ? b[int64_t(j) * org_k_ + p] : b[int64_t(p) * org_n_ + j];
          acc += stub::ToFloat(av) * stub::ToFloat(bv);
        }
        C& dst = out[int64_t(i) * org_n_ + j];
        if constexpr (sizeof(C) == 4) {
          if (en_atomic != 0) {
            stub::AddInto(&dst, &acc, 1);
          } else {
            dst = acc;
          }
        } else {
          if (en_atomic != 0) stub::Fail("Matmul atomic accumulation needs an fp32 C");
          dst = stub::FromFloat<C>(acc);
        }
      }
    }
    stub::Log(stub::Op::kMatmulIterateAll, en_atomic, out, uint64_t(m_) * org_n_ * sizeof(C));
  }
  void End() {}

 private:
  GlobalTensor<A> a_;
  GlobalTensor<B> b_;
  bool trans_a_ = false, trans_b_ = false;
  int32_t org_m_ = 0, org_n_ = 0, org_k_ = 0, m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace AscendC
