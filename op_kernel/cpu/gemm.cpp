#include "gemm.h"

#define EIGEN_DONT_PARALLELIZE  // one worker thread = one core: no nested threading, fixed reduction order
#include <Eigen/Core>

namespace hpmoe {
namespace cpu {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using View = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

}  // namespace

void GemmRowMajor(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                  bool trans_b, float* c, int64_t ldc) {
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

void GemmAtBAccumulate(int64_t r, int64_t m, int64_t n, const float* a, int64_t lda, const float* b, int64_t ldb,
                       float* c, int64_t ldc) {
  ConstView A(a, r, m, Eigen::OuterStride<>(lda));
  ConstView B(b, r, n, Eigen::OuterStride<>(ldb));
  View C(c, m, n, Eigen::OuterStride<>(ldc));
  C.noalias() += A.transpose() * B;
}

}  // namespace cpu
}  // namespace hpmoe
