// Project-written AscendC stub: the Matmul high-level API as the kernel's AIC uses it (cube-only use, no
// AIV client: the kernel defines ASCENDC_CUBE_ONLY, so no AIC<->AIV message flags are involved).
// Doc pages (asc-devkit, docs/zh/api/SIMD-API/高阶API/矩阵计算/Matmul/...): Matmul使用说明.md, MatmulType.md,
// Init.md, SetOrgShape.md, SetSingleShape.md, SetTensorA.md, SetTensorB.md, IterateAll.md (enAtomic), End.md;
// the Matmul tiling guide (TCubeTiling: baseM/baseN multiples of 16, baseK of one 32-byte block, the L0A/L0B
// (64 KiB) and L0C (128 KiB) capacities with double buffering, L1 queues of depthA1/depthB1 base blocks).
// Rules: Init refuses a null or inconsistent tiling and reserves the object's L1 queues from the pipe (so
// every live Matmul object counts against the 512 KiB L1); a shape past the tiling's singleCore* fails.
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

namespace tiling {
// The leading members of CANN's TCubeTiling (kernel_tiling/kernel_tiling.h), the ones the kernel sets.
struct TCubeTiling {
  int32_t usedCoreNum = 0;
  int32_t M = 0, N = 0, Ka = 0, Kb = 0;
  int32_t singleCoreM = 0, singleCoreN = 0, singleCoreK = 0;
  int32_t baseM = 0, baseN = 0, baseK = 0;
  int32_t depthA1 = 0, depthB1 = 0, stepM = 0, stepN = 0;
  int32_t isBias = 0, transLength = 0, iterateOrder = 0;
  int32_t shareMode = 0, shareL1Size = 0, shareL0CSize = 0, shareUbSize = 0;
  int32_t batchM = 0, batchN = 0, singleBatchM = 0, singleBatchN = 0;
  int32_t stepKa = 0, stepKb = 0;
  int32_t dbL0A = 0, dbL0B = 0, dbL0C = 0;
};
}  // namespace tiling
using tiling::TCubeTiling;

namespace stub {
constexpr int64_t kL0ABytes = 64 * 1024, kL0BBytes = 64 * 1024, kL0CBytes = 128 * 1024;
// "" or what is wrong with `t` for operands of `a_bytes` / `b_bytes` per element (fp32 accumulation in L0C).
inline const char* CheckCubeTiling(const tiling::TCubeTiling& t, int64_t a_bytes, int64_t b_bytes) {
  if (t.baseM <= 0 || t.baseN <= 0 || t.baseK <= 0 || t.baseM % 16 || t.baseN % 16)
    return "Matmul tiling: baseM and baseN must be positive multiples of 16";
  if ((t.baseK * a_bytes) % 32 || (t.baseK * b_bytes) % 32) return "Matmul tiling: baseK must fill whole 32-byte blocks";
  const int64_t db_a = t.dbL0A > 1 ? 2 : 1, db_b = t.dbL0B > 1 ? 2 : 1, db_c = t.dbL0C > 1 ? 2 : 1;
  if (db_a * t.baseM * t.baseK * a_bytes > kL0ABytes) return "Matmul tiling: baseM x baseK exceeds L0A (64 KiB)";
  if (db_b * t.baseK * t.baseN * b_bytes > kL0BBytes) return "Matmul tiling: baseK x baseN exceeds L0B (64 KiB)";
  if (db_c * t.baseM * t.baseN * 4 > kL0CBytes) return "Matmul tiling: baseM x baseN (fp32) exceeds L0C (128 KiB)";
  if (t.stepM <= 0 || t.stepN <= 0 || t.stepKa <= 0 || t.stepKb <= 0 || t.depthA1 < t.stepM * t.stepKa ||
      t.depthB1 < t.stepN * t.stepKb)
    return "Matmul tiling: step*/depth* inconsistent (depthA1 >= stepM*stepKa, depthB1 >= stepN*stepKb)";
  if (t.singleCoreM <= 0 || t.singleCoreN <= 0 || t.singleCoreK <= 0 || t.singleCoreM > t.M || t.singleCoreN > t.N ||
      t.singleCoreK > t.Ka || t.Ka != t.Kb)
    return "Matmul tiling: singleCore shape outside M/N/K";
  return "";
}
}  // namespace stub

template <class AType, class BType, class CType, class BiasType = CType>
class Matmul {
  using A = typename AType::Type;
  using B = typename BType::Type;
  using C = typename CType::Type;

 public:
  HPMOE_STUB_AIC_ONLY("AscendC::Matmul::Init") void Init(const TCubeTiling* tiling, TPipe* pipe = nullptr) {
    if (tiling == nullptr) stub::Fail("Matmul::Init: the tiling is nullptr (compute a TCubeTiling on the host)");
    const char* bad = stub::CheckCubeTiling(*tiling, sizeof(A), sizeof(B));
    if (*bad != '\0') stub::Fail(bad);
    if (pipe == nullptr) stub::Fail("Matmul::Init without a TPipe (the stub reserves the object's L1 from it)");
    tiling_ = *tiling;
    // The A1/B1 queues: depthA1 base blocks of A, depthB1 of B.
    const uint32_t l1 = uint32_t(tiling->depthA1 * tiling->baseM * tiling->baseK * int64_t(sizeof(A)) +
                                 tiling->depthB1 * tiling->baseK * tiling->baseN * int64_t(sizeof(B)));
    pipe->InitBuffer(l1_, l1);
    init_ = true;
  }
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
  HPMOE_STUB_AIC_ONLY("AscendC::Matmul::IterateAll") void IterateAll(const GlobalTensor<C>& c, uint8_t en_atomic = 0) {
    if (stub::Core().core_type != AIC) stub::Fail("Matmul::IterateAll on a vector core (cube-only use)");
    if (!init_) stub::Fail("Matmul::IterateAll before Init");
    if (m_ > tiling_.singleCoreM || n_ > tiling_.singleCoreN || k_ > tiling_.singleCoreK)
      stub::Fail("Matmul::IterateAll: SetSingleShape exceeds the tiling's singleCoreM/N/K");
    if (en_atomic != 0 && sizeof(C) != 4) stub::Fail("Matmul atomic accumulation needs an fp32 C");
    // Operands as dense fp32: A is m x k (stored k x m when transposed), B as stored.
    const int64_t a_rows = trans_a_ ? k_ : m_, a_cols = trans_a_ ? m_ : k_, a_ld = trans_a_ ? org_m_ : org_k_;
    const int64_t b_rows = trans_b_ ? n_ : k_, b_cols = trans_b_ ? k_ : n_, b_ld = trans_b_ ? org_k_ : org_n_;
    // fp32 operands are used in place (with their leading dimensions); 16-bit ones are widened into copies.
    std::vector<float> a_wide, b_wide, out(size_t(m_) * n_, 0.0f);
    const float* a = Widen(stub::Host(a_.GetPhyAddr()), a_rows, a_cols, a_ld, &a_wide);
    const float* b = Widen(stub::Host(b_.GetPhyAddr()), b_rows, b_cols, b_ld, &b_wide);
    const int64_t lda = a_wide.empty() ? a_ld : a_cols, ldb = b_wide.empty() ? b_ld : b_cols;
    C* dst = stub::Host(c.GetPhyAddr());
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

  TCubeTiling tiling_{};
  bool init_ = false;
  TBuf<TPosition::A1> l1_;
  GlobalTensor<A> a_;
  GlobalTensor<B> b_;
  bool trans_a_ = false, trans_b_ = false;
  int32_t org_m_ = 0, org_n_ = 0, org_k_ = 0, m_ = 0, n_ = 0, k_ = 0;
};

}  // namespace AscendC

using AscendC::tiling::TCubeTiling;
