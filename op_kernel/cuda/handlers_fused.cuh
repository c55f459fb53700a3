// The fused SwiGLU handlers (kConfigFusedSwiglu; scheduler/hpmoe/graphs.py), built on the TMA tile.
// - GMM_SWIGLU: each 128 x 256 tile of GMM1 multiplies W1's gate columns [q, q + 128) and up columns
//   [I + q, I + q + 128) (the two halves of its B tile, TmaOperand::split), stores its 256 columns as H's
//   interleaved group pair at column 2q (ssc_layout.h, kFusedSwigluGroup) and A's columns [q, q + 128).
// - GMM_SWIGLU_GRAD: each tile of dA = dY W2^T (never stored) reads H's interleaved gate and up of its 256
//   columns into shared memory and writes dH's gate and up columns.
// Both round H and dA to the stored dtype first and compute every element with swiglu_math.cuh, as the unfused
// GMM + SWIGLU (GRAD) tasks do: the outputs are bitwise the unfused schedule's.
#pragma once

#include "../runtime/swiglu_block.h"
#include "handlers_gemm.cuh"
#include "swiglu_math.cuh"

namespace hpmoe {
namespace cuda {

#if HPMOE_GEMM_TMA && !HPMOE_GEMM_WS
constexpr int kFusedGroup = int(ssc::kFusedSwigluGroup);
static_assert(2 * kFusedGroup == kBN, "a GMM tile's columns are one gate group and its up group");

template <class T>
__device__ __forceinline__ uint32_t PackPair(float v0, float v1) {
  return Bits16(FromF<T>(v0)) | (Bits16(FromF<T>(v1)) << 16);
}
template <class T>
__device__ __forceinline__ void UnpackPair(uint32_t bits, float* v) {
  const T* e = reinterpret_cast<const T*>(&bits);
  v[0] = ToF(e[0]);
  v[1] = ToF(e[1]);
}

// A's columns [q, q + 128) of the tile's rows from its H pair as staged by WriteStaged at `base` (gate in
// columns 0..127, up in 128..255, rows Base::kRowBytes apart: the values as H stores them), 16-byte vectors.
template <class T, class Gemm>
__device__ void StoreSwigluFromStaged(uint32_t base, T* a, int64_t lda, int64_t m0, int64_t q, int64_t m_valid) {
  constexpr int kVecs = kFusedGroup / 8;
  for (int i = threadIdx.x; i < kBM * kVecs; i += WorkerThreads()) {
    const int row = i / kVecs, v = i % kVecs;
    if (m0 + row >= m_valid) continue;
    const uint32_t at = base + row * Gemm::kRowBytes + v * 16;
    float g[8], u[8], o[8];
    Unpack8<T>(LoadShared16(at), g);
    Unpack8<T>(LoadShared16(at + kFusedGroup * 2), u);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = SwigluOf(g[e], u[e]);
    Store8(a + (m0 + row) * lda + q + 8 * v, o);
  }
}

template <class T, bool kBKMajor>
__device__ int32_t RunGmmSwigluTiles(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t, const rt::SwigluBlock& blk) {
  const ssc::SscTensorRef& in = t.inputs[0];
  const int64_t inter = d.cfg.inter, k = d.cfg.hidden;
  BlockGemmTma<T, false, kBKMajor> g(smem);
  const void* map_a = d.TensorMap(in.slot, kBoxRows128);
  const void* map_b = d.TensorMap(ssc::kSlotW1, kBKMajor ? kBoxRows256 : kBoxRows64);
  const void* map_half = d.TensorMap(ssc::kSlotW1, kBoxRows128);  // K-major halves: 128 lines each
  T* h = d.Slot<T>(ssc::kSlotH);
  T* a = d.Slot<T>(ssc::kSlotA);
  const int64_t c0 = int64_t(blk.c0), c1 = int64_t(blk.c0 + blk.cols);
  const int32_t err = ForEachExpertSegment(d, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const int64_t m = int64_t(r1 - r0);
    const TmaOperand ta{map_a, 0, int32_t(r0), 0};
    for (int64_t m0 = 0; m0 < m; m0 += kBM) {
      for (int64_t q = c0; q < c1; q += kFusedGroup) {
        const TmaOperand tb{map_b, 0, 0, int32_t(e), int32_t(inter + q), map_half};
        g.Zero();
        g.Accumulate(ta, tb, int32_t(m0), int32_t(q), 0, int32_t(k));
        // H: the pair as it is; then A from the staged (rounded) pair, so the accumulators are dead by then.
        g.Stage(g.smem);
        WorkerSync();
        g.StoreStaged(g.smem, h + r0 * 2 * inter, 2 * inter, m0, 2 * q, m, 2 * q + kBN);
        StoreSwigluFromStaged<T, decltype(g)>(g.smem, a + r0 * inter, inter, m0, q, m);
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // before the copy engine refills the slots
        WorkerSync();
      }
    }
  });
  g.FinishStores();
  return err;
}

// The epilogue of one dA tile (rows m0.. of the segment, dA columns [n0, n0 + 256)): H's interleaved columns
// [2 n0, 2 n0 + 512) of the rows into shared memory; each thread turns its own elements' gate and up into dg and
// du in place; then dH's gate and up columns leave as 16-byte row vectors. h and dh point at the segment's
// first row.
template <class T, class Gemm>
__device__ void SwigluGradEpilogue(const Gemm& g, const T* h, T* dh, int64_t inter, int64_t m0, int64_t n0,
                                   int64_t m_valid, int64_t n_valid) {
  constexpr int kCols = 2 * kBN, kVecs = kCols / 8;
  constexpr uint32_t kRow = kCols * 2 + 16;  // padded: a warp's 4-byte accesses of eight rows hit distinct banks
  static_assert(kBM * kRow <= kStages * kStageBytes, "the H rows fit the stage slots");
  const uint32_t base = g.smem;
  const int64_t ld = 2 * inter, h_end = 2 * n_valid;
  // Copies, not loads through registers: all of a thread's 32 are in flight at once (a register round trip per
  // vector serialised them behind the shared-memory stores).
  for (int i = threadIdx.x; i < kBM * kVecs; i += WorkerThreads()) {
    const int row = i / kVecs, v = i % kVecs;
    const int64_t mm = m0 + row, col = 2 * n0 + 8 * v;
    if (mm < m_valid && col < h_end) CpAsync16(base + row * kRow + v * 16, h + mm * ld + col, true);
  }
  CpAsyncCommit();
  CpAsyncWait<0>();
  WorkerSync();
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, wg = threadIdx.x / 128;
  const int r = lane / 4, t = lane % 4;
  // Fully unrolled: a runtime index into the accumulators would make ptxas serialise every wgmma of the
  // worker kernel (ptxas C7514): with it, op kernels fwd+bwd Mixtral-8x7B 4096 tokens 22.5-23.5 ms against 17.9-18.2,
  // DeepSeek-V3 8192 38.0-38.7 against 33.1-33.2 (one H200, alternating; benchmarks/RESULTS.md, session 8).
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const int col = 8 * j + 2 * t;  // dA column in the tile; its gate at (col / 128) * 256 + col % 128, up + 128
    const uint32_t offset = uint32_t((col / kFusedGroup) * 2 * kFusedGroup + col % kFusedGroup) * 2;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = 64 * wg + 16 * warp + r + 8 * hh;
      const uint32_t gate_at = base + row * kRow + offset, up_at = gate_at + kFusedGroup * 2;
      uint32_t gbits, ubits;
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(gbits) : "r"(gate_at));
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(ubits) : "r"(up_at));
      float gv[2], uv[2], dg[2], du[2];
      UnpackPair<T>(gbits, gv);
      UnpackPair<T>(ubits, uv);
#pragma unroll
      for (int e = 0; e < 2; ++e)
        SwigluGradOf(gv[e], uv[e], ToF(FromF<T>(g.d[4 * j + 2 * hh + e])), &dg[e], &du[e]);
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(gate_at), "r"(PackPair<T>(dg[0], dg[1])) : "memory");
      asm volatile("st.shared.u32 [%0], %1;" ::"r"(up_at), "r"(PackPair<T>(du[0], du[1])) : "memory");
    }
  }
  WorkerSync();
  constexpr int kOut = kBN / 8;  // vectors per row of each half
  for (int i = threadIdx.x; i < kBM * 2 * kOut; i += WorkerThreads()) {
    const int row = i / (2 * kOut), up = (i / kOut) % 2, v = i % kOut;
    const int64_t mm = m0 + row, n = n0 + 8 * v;
    if (mm >= m_valid || n >= n_valid) continue;
    const int col = 8 * v;
    const uint32_t src = base + row * kRow + uint32_t((col / kFusedGroup) * 2 * kFusedGroup + up * kFusedGroup +
                                                      col % kFusedGroup) * 2;
    StoreGlobal16(dh + mm * ld + (up ? inter : 0) + n, LoadShared16(src));
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // before the copy engine refills the slots
  WorkerSync();
}

// The epilogue's H rows into L2 while the tile's K loop runs: up to kBM rows of `cols` elements, 128-byte lines.
template <class T>
__device__ __forceinline__ void PrefetchRowsL2(const T* p, int64_t ld, int64_t rows, int64_t cols) {
  const int lines = int(cols * int64_t(sizeof(T)) / 128);
  const int64_t n = (rows < kBM ? rows : kBM) * lines;
  for (int64_t i = threadIdx.x; i < n; i += WorkerThreads())
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p + (i / lines) * ld + (i % lines) * (128 / sizeof(T))));
}

template <class T, bool kBKMajor>
__device__ int32_t RunGmmSwigluGradTiles(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t,
                                         const rt::SwigluBlock& blk) {
  const ssc::SscTensorRef& dy = t.inputs[0];
  const int64_t inter = d.cfg.inter, k = d.cfg.hidden;
  BlockGemmTma<T, false, kBKMajor> g(smem);
  const void* map_a = d.TensorMap(dy.slot, kBoxRows128);
  const void* map_b = d.TensorMap(ssc::kSlotW2, kBKMajor ? kBoxRows256 : kBoxRows64);
  const T* h = d.Slot<T>(ssc::kSlotH);
  T* dh = d.Slot<T>(ssc::kSlotDH);
  const int64_t c0 = int64_t(blk.c0), c1 = int64_t(blk.c0 + blk.cols);
  const int32_t err = ForEachExpertSegment(d, dy.row_offset, dy.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const int64_t m = int64_t(r1 - r0);
    const TmaOperand ta{map_a, 0, int32_t(r0), 0};
    const TmaOperand tb{map_b, 0, 0, int32_t(e)};  // W2[e]: dA's columns are its rows (K-major) or columns
    for (int64_t m0 = 0; m0 < m; m0 += kBM) {
      for (int64_t n0 = c0; n0 < c1; n0 += kBN) {
        PrefetchRowsL2(h + (r0 + m0) * 2 * inter + 2 * n0, 2 * inter, m - m0, 2 * (c1 - n0 < kBN ? c1 - n0 : kBN));
        g.Zero();
        g.Accumulate(ta, tb, int32_t(m0), int32_t(n0), 0, int32_t(k));
        SwigluGradEpilogue<T>(g, h + r0 * 2 * inter, dh + r0 * 2 * inter, inter, m0, n0, m, c1);
      }
    }
  });
  g.FinishStores();
  return err;
}
#endif

// W1 (forward) and W2 (backward) are read as RunGmmLayout reads them: K-major B under nn.Linear's layout for
// GMM1, under today's layout for the activation gradient. kGrad: GMM_SWIGLU_GRAD, else GMM_SWIGLU.
template <class T, bool kGrad>
__device__ int32_t RunFusedSwiglu(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t) {
  rt::SwigluBlock blk;
  const ssc::SscTensorRef& in = t.inputs[0];  // recv_x or recv_dy rows, h wide
  const bool ok = kGrad ? rt::GmmSwigluGradBlockOf(t, d.cfg.inter, &blk) : rt::GmmSwigluBlockOf(t, d.cfg.inter, &blk);
  if (!ok || !FullCols(d, in) || in.cols != d.cfg.hidden) return rt::kErrRegion;
#if HPMOE_GEMM_TMA && !HPMOE_GEMM_WS
  const bool b_k_major = kGrad != ((d.cfg.flags & ssc::kConfigWeightsTransposed) != 0);
  if constexpr (kGrad)
    return b_k_major ? RunGmmSwigluGradTiles<T, true>(d, smem, t, blk) : RunGmmSwigluGradTiles<T, false>(d, smem, t, blk);
  else
    return b_k_major ? RunGmmSwigluTiles<T, true>(d, smem, t, blk) : RunGmmSwigluTiles<T, false>(d, smem, t, blk);
#else
  return rt::kErrRegion;  // the fused tiles are built on the TMA tile only (the default build)
#endif
}

}  // namespace cuda
}  // namespace hpmoe
