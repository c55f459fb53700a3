// One block's share of a GMM task on tensor cores: C (M x N, fp32 accumulate) = A (M x K) * B (K x N) in
// 128 x 128 output tiles, K in 64-deep steps through a 3-stage cp.async pipeline in shared memory, WMMA
// 16x16x16 bf16/fp16 fragments (8 warps, each 64 x 32 of the tile). Operands are strided 2-D views of heap
// slots in either storage order, so one routine serves GMM (A row-major, B row-major), GMM_TRANS_B
// (B = W^T: W stored row-major, read as column-major B) and the weight gradient (A = X^T: X stored
// row-major, read as column-major A), whose K range is a list of row segments accumulated in order.
// Rows/cols outside the valid extents are zero-filled on load and never stored. Each output element's sum
// runs in one fixed order that depends only on the shapes: equal inputs give equal bits.
#pragma once

#include <mma.h>
#include <stdint.h>

#include <type_traits>

namespace hpmoe {
namespace cuda {

constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3;
constexpr int kPad = 8;                          // 16 bytes: keeps rows 16-byte aligned, spreads banks
constexpr int kTileElems = 128 * (kBK + kPad);   // the larger of the two layouts of one operand tile
constexpr int kStageElems = 2 * kTileElems;      // A + B
constexpr int kEpilogueFloats = 8 * 16 * 16;     // one 16x16 fp32 staging fragment per warp
constexpr uint32_t kGemmSmemBytes = kStages * kStageElems * 2 + kEpilogueFloats * 4;

// A matrix stored row-major in global memory: element (r, c) at base[r * ld + c]; rows >= rows_valid and
// cols >= cols_valid read as zero. cols_valid and ld are multiples of 8 (16-byte vectors).
template <class T>
struct Stored {
  const T* base;
  int64_t ld;
  int64_t rows_valid;
  int64_t cols_valid;
};

__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// Copies stored rows [r0, r0 + ROWS) x cols [c0, c0 + COLS) into smem (row stride COLS + kPad).
template <int ROWS, int COLS, class T>
__device__ __forceinline__ void LoadTile(T* smem, const Stored<T>& g, int64_t r0, int64_t c0) {
  constexpr int kVecPerRow = COLS / 8;
  for (int i = threadIdx.x; i < ROWS * kVecPerRow; i += 256) {
    const int r = i / kVecPerRow, c = (i % kVecPerRow) * 8;
    const bool valid = r0 + r < g.rows_valid && c0 + c < g.cols_valid;
    const T* src = valid ? g.base + (r0 + r) * g.ld + c0 + c : g.base;
    CpAsync16(smem + r * (COLS + kPad) + c, src, valid);
  }
}

// A is M x K: row-major storage (m, k), or column-major storage (k, m). B is K x N: row-major (k, n), or
// column-major storage (n, k).
template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemm {
  using ALayout = typename std::conditional<kAColMajor, nvcuda::wmma::col_major, nvcuda::wmma::row_major>::type;
  using BLayout = typename std::conditional<kBColMajor, nvcuda::wmma::col_major, nvcuda::wmma::row_major>::type;
  using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, ALayout>;
  using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, BLayout>;
  using FragC = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

  T* smem;       // kStages * kStageElems
  float* stage;  // kEpilogueFloats
  FragC acc[4][2];

  __device__ explicit BlockGemm(uint8_t* shared)
      : smem(reinterpret_cast<T*>(shared)), stage(reinterpret_cast<float*>(shared + kStages * kStageElems * 2)) {}

  __device__ void Zero() {
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 2; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.0f);
  }

  // Loads K step `kt` (k = k0 + kt*kBK) of the tile at (m0, n0) into pipeline stage s.
  __device__ void LoadStage(int s, const Stored<T>& a, const Stored<T>& b, int64_t m0, int64_t n0, int64_t k) {
    T* sa = smem + s * kStageElems;
    T* sb = sa + kTileElems;
    if (kAColMajor) LoadTile<kBK, kBM>(sa, a, k, m0);
    else LoadTile<kBM, kBK>(sa, a, m0, k);
    if (kBColMajor) LoadTile<kBN, kBK>(sb, b, n0, k);
    else LoadTile<kBK, kBN>(sb, b, k, n0);
  }

  __device__ void ComputeStage(int s) {
    const T* sa = smem + s * kStageElems;
    const T* sb = sa + kTileElems;
    const int warp = threadIdx.x / 32, wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    for (int kk = 0; kk < kBK; kk += 16) {
      FragA fa[4];
      FragB fb[2];
      for (int i = 0; i < 4; ++i) {
        const int m = wm + 16 * i;
        if (kAColMajor) nvcuda::wmma::load_matrix_sync(fa[i], sa + kk * (kBM + kPad) + m, kBM + kPad);
        else nvcuda::wmma::load_matrix_sync(fa[i], sa + m * (kBK + kPad) + kk, kBK + kPad);
      }
      for (int j = 0; j < 2; ++j) {
        const int n = wn + 16 * j;
        if (kBColMajor) nvcuda::wmma::load_matrix_sync(fb[j], sb + n * (kBK + kPad) + kk, kBK + kPad);
        else nvcuda::wmma::load_matrix_sync(fb[j], sb + kk * (kBN + kPad) + n, kBN + kPad);
      }
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) nvcuda::wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
  }

  // acc += A[m0.., k0..k1) * B[k0..k1), ..n0]. A's K coordinate is its storage row (col-major) or column.
  __device__ void Accumulate(const Stored<T>& a, const Stored<T>& b, int64_t m0, int64_t n0, int64_t k0,
                             int64_t k1) {
    const int nk = int((k1 - k0 + kBK - 1) / kBK);
    __syncthreads();  // the previous call's last stage may still be read
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) LoadStage(s, a, b, m0, n0, k0 + int64_t(s) * kBK);
      CpAsyncCommit();
    }
    for (int kt = 0; kt < nk; ++kt) {
      CpAsyncWait<kStages - 2>();
      __syncthreads();
      const int next = kt + kStages - 1;
      if (next < nk) LoadStage(next % kStages, a, b, m0, n0, k0 + int64_t(next) * kBK);
      CpAsyncCommit();
      ComputeStage(kt % kStages);
    }
    CpAsyncWait<0>();
  }

  // Writes the tile at (m0, n0) of C (row stride ldc) for rows < m_valid, cols < n_valid through `store`,
  // which receives (pointer to the first of 8 consecutive outputs, 8 fp32 values).
  template <class OutT, class Store>
  __device__ void Write(OutT* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid,
                        Store&& store) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
    float* st = stage + warp * 256;
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 2; ++j) {
        nvcuda::wmma::store_matrix_sync(st, acc[i][j], 16, nvcuda::wmma::mem_row_major);
        __syncwarp();
        const int r = lane / 2, cc = (lane % 2) * 8;
        const int64_t m = m0 + wm + 16 * i + r, n = n0 + wn + 16 * j + cc;
        if (m < m_valid && n < n_valid) store(c + m * ldc + n, st + r * 16 + cc);
        __syncwarp();
      }
    }
  }
};

}  // namespace cuda
}  // namespace hpmoe
