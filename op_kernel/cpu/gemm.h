// fp32 matrix products of the CPU twin GMM tiles (blocked, through Eigen's GEMM kernels). Row-major, with
// leading dimensions. A row's reduction order depends only on n and k (gemm.cpp pads m to whole row blocks), so
// equal inputs give bitwise-equal rows wherever they sit.
#pragma once

#include <cstdint>

namespace hpmoe {
namespace cpu {

// C[m,n] = A[m,k] * B[k,n]            (trans_b = false; B row-major k x n, ldb >= n)
// C[m,n] = A[m,k] * B[n,k]^T          (trans_b = true;  B row-major n x k, ldb >= k)
void GemmRowMajor(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                  bool trans_b, float* c, int64_t ldc);

// C[m,n] += A[r,m]^T * B[r,n]  (weight gradients: reduction over the r rows, never split; per element in r
// order, so the result does not depend on the element's place in the block or on which operand is A)
void GemmAtBAccumulate(int64_t r, int64_t m, int64_t n, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc);

}  // namespace cpu
}  // namespace hpmoe
