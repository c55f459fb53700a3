#include "gemm.h"

#include <cstring>
#include <vector>

#define EIGEN_DONT_PARALLELIZE  // one worker thread = one core: no nested threading, fixed reduction order
#include <Eigen/Core>

namespace hpmoe {
namespace cpu {
namespace {

// Eigen's GEMM kernel takes rows in blocks of mr; rows past the last whole block go through narrower kernels
// (and a single row through the matrix-vector path), which sum K in other orders. With m always a multiple of
// mr, a row's result depends only on its own values, not on m or its place in the tile: expert-aligned and
// unaligned receive slots give the same bits (tests/runtime/test_expert_aligned_twin.py).
constexpr int64_t kRowBlock = Eigen::internal::gebp_traits<float, float>::mr;
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using View = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

}  // namespace

void GemmRowMajor(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                  bool trans_b, float* c, int64_t ldc) {
  if (m % kRowBlock != 0) {  // padded to whole row blocks (kRowBlock), through scratch
    const int64_t padded = (m + kRowBlock - 1) / kRowBlock * kRowBlock;
    thread_local std::vector<float> pa, pc;
    pa.assign(size_t(padded) * k, 0.0f);
    pc.resize(size_t(padded) * n);
    for (int64_t i = 0; i < m; ++i) std::memcpy(pa.data() + i * k, a + i * lda, size_t(k) * sizeof(float));
    GemmRowMajor(padded, n, k, pa.data(), k, b, ldb, trans_b, pc.data(), n);
    for (int64_t i = 0; i < m; ++i) std::memcpy(c + i * ldc, pc.data() + i * n, size_t(n) * sizeof(float));
    return;
  }
  ConstView A(a, m, k, Eigen::OuterStride<>(lda));
  View C(c, m, n, Eigen::OuterStride<>(ldc));
  if (trans_b) {
    ConstView B(b, n, k, Eigen::OuterStride<>(ldb));
    C.noalias() = A * B.transpose();
  } else {
    ConstView B(b, k, n, Eigen::OuterStride<>(ldb));
    C.noalias() = A * B;
  }
}

// Fixed order per element: c += a[r][i] * b[r][j] for r ascending, one rounded multiply and one rounded add
// each (this file builds with -ffp-contract=off), whatever the element's position in the block or the
// operands' roles. So the weight gradient of nn.Linear's layout, dW^T = B^T A, is bitwise the transpose of
// dW = A^T B (tests/runtime/test_weight_layout.py). Register tiles of kTi x kTj keep the loads few.
void GemmAtBAccumulate(int64_t r, int64_t m, int64_t n, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc) {
  constexpr int64_t kTi = 8, kTj = 16;
  for (int64_t i0 = 0; i0 < m; i0 += kTi) {
    const int64_t ti = m - i0 < kTi ? m - i0 : kTi;
    for (int64_t j0 = 0; j0 < n; j0 += kTj) {
      const int64_t tj = n - j0 < kTj ? n - j0 : kTj;
      if (ti == kTi && tj == kTj) {
        float acc[kTi][kTj];
        for (int64_t i = 0; i < kTi; ++i)
          for (int64_t j = 0; j < kTj; ++j) acc[i][j] = c[(i0 + i) * ldc + j0 + j];
        for (int64_t k = 0; k < r; ++k) {
          const float* ak = a + k * lda + i0;
          const float* bk = b + k * ldb + j0;
          for (int64_t i = 0; i < kTi; ++i)
            for (int64_t j = 0; j < kTj; ++j) acc[i][j] += ak[i] * bk[j];
        }
        for (int64_t i = 0; i < kTi; ++i)
          for (int64_t j = 0; j < kTj; ++j) c[(i0 + i) * ldc + j0 + j] = acc[i][j];
        continue;
      }
      for (int64_t i = 0; i < ti; ++i) {  // edge tiles: the same operations, element by element
        for (int64_t j = 0; j < tj; ++j) {
          float acc = c[(i0 + i) * ldc + j0 + j];
          for (int64_t k = 0; k < r; ++k) acc += a[k * lda + i0 + i] * b[k * ldb + j0 + j];
          c[(i0 + i) * ldc + j0 + j] = acc;
        }
      }
    }
  }
}

}  // namespace cpu
}  // namespace hpmoe
