// One block's share of a GMM task on tensor cores: C (M x N, fp32 accumulate) = A (M x K) * B (K x N) in
// kBM x kBN output tiles, K in kBK-deep steps through a kStages cp.async pipeline in shared memory, fragments
// loaded with ldmatrix and multiplied with mma.sync m16n8k16 (bf16/fp16 in, fp32 out); 8 warps, each
// 64 x (kBN/4) of the tile. Operands are strided 2-D views of heap slots in either storage order, so one
// routine serves GMM (A row-major, B row-major), GMM_TRANS_B (B = W^T: W stored row-major, read as
// column-major B) and the weight gradient (A = X^T: X stored row-major, read as column-major A), whose K
// range is a list of row segments accumulated in order. Rows/cols outside the valid extents are zero-filled
// on load and never stored. Each output's sum runs in one fixed order set by the shapes alone: equal inputs
// give equal bits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#ifndef HPMOE_GEMM_BN
#define HPMOE_GEMM_BN 256  // 128 x 256 block tiles measured faster than 128 x 128 on H100 and H200
#endif
#ifndef HPMOE_GEMM_STAGES
#define HPMOE_GEMM_STAGES 3
#endif

namespace hpmoe {
namespace cuda {

constexpr int kBM = 128, kBN = HPMOE_GEMM_BN, kBK = 64, kStages = HPMOE_GEMM_STAGES;
constexpr int kPad = 8;  // 16 bytes: rows stay 16-byte aligned and 8 consecutive rows hit distinct banks
constexpr int kMaxI(int a, int b) { return a > b ? a : b; }
constexpr int kATileElems = kMaxI(kBM * (kBK + kPad), kBK * (kBM + kPad));
constexpr int kBTileElems = kMaxI(kBK * (kBN + kPad), kBN * (kBK + kPad));
constexpr int kStageElems = kATileElems + kBTileElems;
constexpr uint32_t kGemmSmemBytes = kStages * kStageElems * 2;
constexpr int kWarpN = kBN / 4;     // warp tile: 64 x kWarpN
constexpr int kNJ = kWarpN / 8;     // n8 fragments per warp
static_assert(kBN == 128 || kBN == 256, "block tile N: 128 or 256");

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

template <bool kTrans>
__device__ __forceinline__ void LdMatrixX4(uint32_t* r, const void* smem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

template <class T>
__device__ __forceinline__ void Mma16816(float* c, const uint32_t* a, const uint32_t* b);
template <>
__device__ __forceinline__ void Mma16816<__nv_bfloat16>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <>
__device__ __forceinline__ void Mma16816<__half>(float* c, const uint32_t* a, const uint32_t* b) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Copies stored rows [r0, r0 + ROWS) x cols [c0, c0 + COLS) into smem (row stride COLS + kPad). Each thread
// owns one 16-byte column and every (256 / vectors-per-row)-th row, so its addresses are one pointer walk.
template <int ROWS, int COLS, class T>
__device__ __forceinline__ void LoadTile(T* smem, const Stored<T>& g, int64_t r0, int64_t c0) {
  constexpr int kVecPerRow = COLS / 8, kRowStep = 256 / kVecPerRow, kIters = ROWS / kRowStep;
  static_assert(256 % kVecPerRow == 0 && ROWS % kRowStep == 0, "tile shape");
  const int c = (threadIdx.x % kVecPerRow) * 8, r = threadIdx.x / kVecPerRow;
  const bool col_ok = c0 + c < g.cols_valid;
  const int64_t rows_left = g.rows_valid - r0 - r;  // rows r + j*kRowStep < rows_left are valid
  const T* src = g.base + (r0 + r) * g.ld + c0 + c;
  T* dst = smem + r * (COLS + kPad) + c;
#pragma unroll
  for (int j = 0; j < kIters; ++j) {
    const bool valid = col_ok && j * kRowStep < rows_left;
    CpAsync16(dst + j * kRowStep * (COLS + kPad), valid ? src + j * kRowStep * g.ld : g.base, valid);
  }
}

// A is M x K: row-major storage (m, k), or column-major storage (k, m). B is K x N: row-major (k, n), or
// column-major storage (n, k).
template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemm {
  T* smem;
  float acc[4][kNJ][4];

  __device__ explicit BlockGemm(uint8_t* shared) : smem(reinterpret_cast<T*>(shared)) {}

  __device__ void Zero() {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < kNJ; ++j)
#pragma unroll
        for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.0f;
  }

  __device__ void LoadStage(int s, const Stored<T>& a, const Stored<T>& b, int64_t m0, int64_t n0, int64_t k) {
    T* sa = smem + s * kStageElems;
    T* sb = sa + kATileElems;
    if (kAColMajor) LoadTile<kBK, kBM>(sa, a, k, m0);
    else LoadTile<kBM, kBK>(sa, a, m0, k);
    if (kBColMajor) LoadTile<kBN, kBK>(sb, b, n0, k);
    else LoadTile<kBK, kBN>(sb, b, k, n0);
  }

  __device__ void ComputeStage(int s) {
    const T* sa = smem + s * kStageElems;
    const T* sb = sa + kATileElems;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * kWarpN;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      uint32_t fa[4][4], fb[kNJ][2];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = wm + 16 * i;
        if (kAColMajor)  // storage [k][m]: transposed 8x8 loads give the row-major A fragment
          LdMatrixX4<true>(fa[i], sa + (kk + (lane % 8) + 8 * (lane / 16)) * (kBM + kPad) + m + 8 * ((lane / 8) % 2));
        else
          LdMatrixX4<false>(fa[i], sa + (m + lane % 16) * (kBK + kPad) + kk + 8 * (lane / 16));
      }
#pragma unroll
      for (int j = 0; j < kNJ; j += 2) {  // one x4 load = two n8 fragments
        const int n = wn + 8 * j;
        uint32_t r[4];
        if (kBColMajor)  // storage [n][k]
          LdMatrixX4<false>(r, sb + (n + (lane % 8) + 8 * (lane / 16)) * (kBK + kPad) + kk + 8 * ((lane / 8) % 2));
        else  // storage [k][n]
          LdMatrixX4<true>(r, sb + (kk + (lane % 8) + 8 * ((lane / 8) % 2)) * (kBN + kPad) + n + 8 * (lane / 16));
        fb[j][0] = r[0];
        fb[j][1] = r[1];
        fb[j + 1][0] = r[2];
        fb[j + 1][1] = r[3];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < kNJ; ++j) Mma16816<T>(acc[i][j], fa[i], fb[j]);
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

  // Writes the tile at (m0, n0) of C (row stride ldc) for rows < m_valid, cols < n_valid (a multiple of 8)
  // through store(pointer to 2 consecutive outputs, v0, v1), straight from the accumulator registers.
  template <class OutT, class Store>
  __device__ void Write(OutT* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid,
                        Store&& store) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * kWarpN, g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < kNJ; ++j) {
        const int64_t n = n0 + wn + 8 * j + 2 * t;
        if (n >= n_valid) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t m = m0 + wm + 16 * i + g + 8 * h;
          if (m < m_valid) store(c + m * ldc + n, acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        }
      }
    }
  }
};

}  // namespace cuda
}  // namespace hpmoe
