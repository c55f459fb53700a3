// The cube-role handlers: GMM and GMM_TRANS_B (per expert segment of a row tile, K whole, a column block of the
// expert width: the whole width unless the compiler split it, scheduler/hpmoe/gmm_split.py) and GMM_WEIGHT_GRAD
// (dW[e][block] over all rows of expert e, slots 0..ep-1 in order, into DW1/DW2 as the launch's dw_mode asks).
// Region checks mirror the CPU twin's (op_kernel/cpu/handlers_compute.cpp); a mismatch is kErrRegion.
#pragma once

#include <type_traits>

#include "gemm_variant.h"
#ifndef HPMOE_GEMM_STAGED_EPILOGUE
// 1: 16-bit GMM outputs leave through shared memory as 16-byte row vectors (EP 4 fwd+bwd 1-3% faster, GMM in
// the loop 6-10% at EP 1, measured A/B on 4x H200); 0: 4-byte stores straight from the accumulators.
#define HPMOE_GEMM_STAGED_EPILOGUE 1
#endif
#if HPMOE_GEMM_WS
#include "block_gemm_ws.cuh"
#if HPMOE_GEMM_TALL
#include "block_gemm_tall.cuh"
#endif
#elif HPMOE_GEMM_TMA
#include "block_gemm_tma.cuh"
#if HPMOE_GEMM_PAIRS
#include "cluster_pairing.cuh"
#endif
#if HPMOE_CLUSTER_WORKER
#include "block_gemm_paired.cuh"
#endif
#if HPMOE_WGRAD_CHAIN
#include "block_gemm_chain.cuh"
#endif
#if HPMOE_WGRAD_PINGPONG
#include "block_gemm_pingpong.cuh"
#endif
#else
#include "block_gemm_wgmma.cuh"
#endif
#include "../runtime/regions.h"
#include "row_segments.cuh"

namespace hpmoe {
namespace cuda {

#if HPMOE_GEMM_WS
constexpr uint32_t kWorkerSmemBytes = kGemmWsSmemBytes;
#if HPMOE_GEMM_TALL
static_assert(kTallSmemBytes <= kWorkerSmemBytes, "the tall tile's stages fit the worker's shared memory");
#endif
#elif HPMOE_GEMM_TMA && HPMOE_WGRAD_CHAIN
constexpr uint32_t kWorkerSmemBytes = kGemmChainSmemBytes;
#elif HPMOE_GEMM_TMA
constexpr uint32_t kWorkerSmemBytes = kGemmTmaSmemBytes;
#else
constexpr uint32_t kWorkerSmemBytes = kGemmSmemBytes;
#endif

__device__ __forceinline__ bool FullCols(const DeviceRank& d, const ssc::SscTensorRef& r) {
  return r.slot < ssc::kSlotCount && r.col_offset == 0 && r.cols == d.slots[r.slot].cols;
}
using rt::SameRows;

template <class T>
struct StoreRounded {
  __device__ void operator()(T* p, float v0, float v1) const {
    T pair[2] = {FromF<T>(v0), FromF<T>(v1)};
    *reinterpret_cast<uint32_t*>(p) = *reinterpret_cast<const uint32_t*>(pair);
  }
};
struct StoreFp32 {
  __device__ void operator()(float* p, float v0, float v1) const { *reinterpret_cast<float2*>(p) = make_float2(v0, v1); }
};
// Weight gradients written, or added to a framework's gradient buffer (kDwAccumulate; the flag is uniform, so
// one instantiation of the epilogue serves both): the sum is old + dW rounded to T, as BlockGemm::AddStagedRows
// (the staged epilogue, which the default tile uses; this one serves the others). Each element is read and
// written by one thread once per launch (K whole in one task), so the sum is deterministic.
// OutT: T (a gradient in the model dtype) or float.
template <class T, class OutT>
struct StoreGrad {
  bool add;
  __device__ void operator()(OutT* p, float v0, float v1) const {
    if (add) {
      v0 = ToOut(p[0]) + ToF(FromF<T>(v0));
      v1 = ToOut(p[1]) + ToF(FromF<T>(v1));
    }
    if constexpr (sizeof(OutT) == 4) StoreFp32{}(p, v0, v1);
    else StoreRounded<T>{}(p, v0, v1);
  }
};

// The weight-gradient tile's epilogue as dw_mode asks (device_rank.cuh): rounded to the model dtype (a
// framework's gradient: the one rounding, here) or fp32, written or added. `write(ptr, store)` is the tile's
// accumulator-to-global write, `first` the task's first output element (row_offset * ld). Addresses are
// formed here, not held across the task's GEMM loop (fewer live registers).
template <class T, class Write>
__device__ __forceinline__ void WriteWeightGrad(const DeviceRank& d, uint32_t slot, uint64_t first, Write&& write) {
  const bool add = (d.dw_mode & kDwAccumulate) != 0;
  if (d.dw_mode & kDwModelDtype) write(d.Slot<T>(slot) + first, StoreGrad<T, T>{add});
  else write(d.Slot<float>(slot) + first, StoreGrad<T, float>{add});
}

#if HPMOE_GEMM_WS
// The GMM tasks' tile in the roles of HPMOE_GEMM_WS: the 128 x 256 tile, or the tall 256 x 192 one.
#if HPMOE_GEMM_TALL
template <class T, bool kTransB>
using GmmTileWs = BlockGemmTall<T, kTransB>;
#else
template <class T, bool kTransB>
using GmmTileWs = BlockGemmWs<T, false, kTransB>;
#endif

// A GMM task's tiles in one of the warp-specialised roles (RunGmm has checked the task): every tile, ascending
// by expert segment, row tile and column tile; kProducer issues their K steps (one thread), else the consumers
// multiply and store them.
template <class T, bool kTransB, bool kProducer, class Gemm>
__device__ int32_t GmmTilesWs(const DeviceRank& d, Gemm& g, const ssc::SscTask& t) {
  constexpr bool kTall = Gemm::kTileM != kBM;
  const ssc::SscTensorRef& in = t.inputs[0];
  const ssc::SscTensorRef& w = t.inputs[1];
  const ssc::SscTensorRef& out = t.outputs[0];
  const int64_t kw = d.slots[w.slot].dim1, nw = d.slots[w.slot].cols;
  const int64_t k = kTransB ? nw : kw, n = kTransB ? kw : nw;
  const int64_t c0 = out.col_offset, c1 = int64_t(out.col_offset) + out.cols;
  const void* map_a = d.TensorMap(in.slot, kBoxRows128);
  // The tall tile's K-major B step is a 128-line and a 64-line box (BlockGemmTall::IssueLoads).
  const void* map_b = d.TensorMap(w.slot, kTransB ? (kTall ? kBoxRows128 : kBoxRows256) : kBoxRows64);
  const void* map_b_half = kTall && kTransB ? d.TensorMap(w.slot, kBoxRows64) : nullptr;
  T* y = d.Slot<T>(out.slot);
  const bool issuer = g.Issuer();
  return ForEachExpertSegment(d, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const int64_t m = int64_t(r1 - r0);
    for (int64_t m0 = 0; m0 < m; m0 += Gemm::kTileM) {
      for (int64_t n0 = c0; n0 < c1; n0 += Gemm::kTileN) {
        if constexpr (kProducer) {
          // Rows past the segment are the next expert's (or zero-filled): they only reach rows never stored.
          if (issuer)
            g.Produce({map_a, 0, int32_t(r0), 0}, {map_b, 0, 0, int32_t(e), 0, map_b_half}, int32_t(m0), int32_t(n0),
                      0, int32_t(k));
        } else {
          g.Zero();
          g.template Consume<false>(0, int32_t(k));
          if constexpr (kTall || HPMOE_GEMM_STAGED_EPILOGUE) g.WriteStaged(y + r0 * n, n, m0, n0, m, c1);
          else g.Write(y + r0 * n, n, m0, n0, m, c1, StoreRounded<T>{});
        }
      }
    }
  });
}
#endif

template <class T, bool kTransB>
__device__ int32_t RunGmm(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t) {
  const ssc::SscTensorRef& in = t.inputs[0];
  const ssc::SscTensorRef& w = t.inputs[1];
  const ssc::SscTensorRef& out = t.outputs[0];
  if (w.slot != ssc::kSlotW1 && w.slot != ssc::kSlotW2) return rt::kErrRegion;
  const int64_t kw = d.slots[w.slot].dim1, nw = d.slots[w.slot].cols;
  const int64_t k = kTransB ? nw : kw, n = kTransB ? kw : nw;
  // Output columns [c0, c1): a block starts on a 16-byte boundary (16-byte row vectors in the epilogue).
  const int64_t c0 = out.col_offset, c1 = int64_t(out.col_offset) + out.cols;
  if (!FullCols(d, in) || out.slot >= ssc::kSlotCount || d.slots[out.slot].cols != uint64_t(n) || in.cols != k ||
      out.cols == 0 || c1 > n || (c0 % 8) != 0 || !SameRows(in, out))
    return rt::kErrRegion;
  const T* x = d.Slot<T>(in.slot);
  T* y = d.Slot<T>(out.slot);
  const T* weights = d.Slot<T>(w.slot);
#if HPMOE_GEMM_WS
  (void)x, (void)weights, (void)y;
  GmmTileWs<T, kTransB> g(smem);
  return RunWarpSpecialised(
      g, kTransB ? kWsJobGmmKMajorB : kWsJobGmm, &t, [&] { return GmmTilesWs<T, kTransB, true>(d, g, t); },
      [&] { return GmmTilesWs<T, kTransB, false>(d, g, t); });
#elif HPMOE_GEMM_TMA
  const void* map_a = d.TensorMap(in.slot, kBoxRows128);
  const void* map_a64 = d.TensorMap(in.slot, kBoxRows64);
  const void* map_b = d.TensorMap(w.slot, kTransB ? kBoxRows256 : kBoxRows64);
  // Every tile of the task: expert segment, row tile, column tile. Paired (HPMOE_GEMM_PAIRS), the peer block
  // walks the same tiles on the same B: one m0 on both (in.rows is one row tile), the same n0 and K.
#if !HPMOE_CLUSTER_WORKER
  auto walk = [&](auto& g, auto paired) {
    constexpr bool kPaired = decltype(paired)::value;
    return ForEachExpertSegment(d, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
      const int64_t m = int64_t(r1 - r0);
      // Rows past the segment are the next expert's (or zero-filled): they only reach rows that are not stored.
      // A segment's last piece of at most 64 rows is multiplied by one warpgroup (Accumulate's m_live).
      const TmaOperand a{map_a, 0, int32_t(r0), 0, 0, map_a64};
      TmaOperand b{map_b, 0, 0, int32_t(e)};  // W[e]: the 3-D map bounds K (GMM) or N (TRANS_B) per expert
      if ((kPaired || HPMOE_EXPERIMENT_HALF_B == 2) && kTransB) b.half_map = d.TensorMap(w.slot, kBoxRows128);
      for (int64_t m0 = 0; m0 < (kPaired ? int64_t(in.rows) : m); m0 += kBM) {
        for (int64_t n0 = c0; n0 < c1; n0 += kBN) {
          const uint64_t t_tile = ProfileClock();
          g.Zero();
          if constexpr (kPaired) g.AccumulatePaired(a, b, int32_t(m0), int32_t(n0), 0, int32_t(k));
          else g.Accumulate(a, b, int32_t(m0), int32_t(n0), 0, int32_t(k), int32_t(m - m0 < kBM ? m - m0 : kBM));
#if HPMOE_GEMM_STAGED_EPILOGUE && HPMOE_GEMM_ASYNC_EPILOGUE
          g.WriteStagedAsync(y + r0 * n, n, m0, n0, m, c1);
#elif HPMOE_GEMM_STAGED_EPILOGUE
          g.WriteStaged(y + r0 * n, n, m0, n0, m, c1);
#else
          g.Write(y + r0 * n, n, m0, n0, m, c1, StoreRounded<T>{});
#endif
          if (HPMOE_EXPERIMENT_PROFILE) ProfileAdd(g.kProfileKind, kPhaseWhole, ProfileClock() - t_tile);
        }
      }
    });
  };
#endif
#if HPMOE_CLUSTER_WORKER
  // A worker of two blocks: each segment's 128-row tiles in pairs, block r multiplying tile 2 i + r of pair i
  // on the same B (multicast, BlockGemmPaired); an odd last tile's column tiles dealt between the blocks.
  // Every tile's products are the solo tile's: bitwise the one-block worker's outputs.
  BlockGemmPaired<T, false, kTransB> g(smem);
  const uint32_t rank = WorkerRank();
  return ForEachExpertSegment(d, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const int64_t m = int64_t(r1 - r0), tiles = (m + kBM - 1) / kBM;
    const TmaOperand a{map_a, 0, int32_t(r0), 0, 0, map_a64};
    TmaOperand b{map_b, 0, 0, int32_t(e)};
    if (kTransB) b.half_map = d.TensorMap(w.slot, kBoxRows128);  // each block's 128 lines of a K-major B tile
    for (int64_t pair = 0; pair + 2 <= tiles; pair += 2) {
      const int64_t m0 = (pair + rank) * kBM;
      for (int64_t n0 = c0; n0 < c1; n0 += kBN) {
        g.Zero();
        if (HPMOE_CLUSTER_NO_MULTICAST)  // diagnostic: the same deal, each block loading its own B
          g.Accumulate(a, b, int32_t(m0), int32_t(n0), 0, int32_t(k), int32_t(m - m0 < kBM ? m - m0 : kBM));
        else
          g.AccumulatePaired(a, b, int32_t(m0), int32_t(n0), 0, int32_t(k));
        g.WriteStaged(y + r0 * n, n, m0, n0, m, c1);
      }
    }
    if (tiles % 2 == 1) {
      const int64_t m0 = (tiles - 1) * kBM;
      for (int64_t n0 = c0 + rank * kBN; n0 < c1; n0 += kBlocksPerWorker * kBN) {
        g.Zero();
        g.Accumulate(a, b, int32_t(m0), int32_t(n0), 0, int32_t(k), int32_t(m - m0));
        g.WriteStaged(y + r0 * n, n, m0, n0, m, c1);
      }
    }
  });
#else
#if HPMOE_GEMM_PAIRS
  if (PairedWithPeer(d, t)) {  // the peer block runs the same B beside this unit
    const int32_t st = CommitPair(d);
    if (st != rt::kOk) return st;
    if (threadIdx.x == 0) PairProfileAdd(kPairTiled);
    BlockGemmPaired<T, false, kTransB> g(smem);
    return walk(g, std::true_type{});
  }
#endif
  BlockGemmTma<T, false, kTransB> g(smem);
  const int32_t err = walk(g, std::false_type{});
  g.FinishStores();
  return err;
#endif  // HPMOE_CLUSTER_WORKER
#else
  BlockGemm<T, false, kTransB> g(smem);
  return ForEachExpertSegment(d, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const int64_t m = int64_t(r1 - r0);
    const Stored<T> a{x + r0 * k, k, m, k};
    // W[e] is kw x nw row-major: B itself (GMM), or B^T read as column-major (GMM_TRANS_B: rows n, cols k).
    const Stored<T> b{weights + int64_t(e) * kw * nw, nw, kw, nw};
    for (int64_t m0 = 0; m0 < m; m0 += kBM) {
      for (int64_t n0 = c0; n0 < c1; n0 += kBN) {
        g.Zero();
        g.Accumulate(a, b, m0, n0, 0, k);
        g.Write(y + r0 * n, n, m0, n0, m, c1, StoreRounded<T>{});
      }
    }
  });
#endif
}

// nn.Linear's layout (kConfigWeightsTransposed) stores W[e] as [N, K]: a GMM reads it as K-major B, which is
// exactly GMM_TRANS_B's path on today's layout, and GMM_TRANS_B reads it as MN-major B, GMM's path.
template <class T>
__device__ int32_t RunGmmLayout(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t, bool trans_b) {
  const bool b_k_major = trans_b != ((d.cfg.flags & ssc::kConfigWeightsTransposed) != 0);
  return b_k_major ? RunGmm<T, true>(d, smem, t) : RunGmm<T, false>(d, smem, t);
}

#if HPMOE_WGRAD_STORE_OUT_OF_LINE
// BlockGemm::StoreStaged as a call (HPMOE_WGRAD_STORE_OUT_OF_LINE): the store loop gets registers of its own, and
// the caller's live values are saved around the call, not spilled and reloaded inside the loop.
template <class T>
__device__ __noinline__ void StoreStagedOutOfLine(uint32_t base, T* c, int64_t ldc, int64_t m0, int64_t n0,
                                                  int64_t m_valid, int64_t n_valid) {
  BlockGemm<T, true, false>::template StoreStaged<kBN, HPMOE_WGRAD_STORE_OUT_OF_LINE_BATCH>(base, c, ldc, m0, n0,
                                                                                          m_valid, n_valid);
}
#endif

// f(begin, end) for each non-empty K segment of a weight-gradient task (expert e's rows of source slot s,
// [k_rows[2 s], k_rows[2 s + 1]), ExpertRowsPerSlot), slots in order. Returns 0. (The slot count is read
// from d per segment, not held in a register across the caller's K loops.)
template <class F>
__device__ __forceinline__ int32_t ForEachKSegment(const DeviceRank& d, const uint64_t* k_rows, F&& f) {
  for (uint32_t s = 0; s < d.cfg.ep; ++s)
    if (k_rows[2 * s] < k_rows[2 * s + 1]) f(int32_t(k_rows[2 * s]), int32_t(k_rows[2 * s + 1]));
  return int32_t(0);
}

#if HPMOE_GEMM_WS
// A weight-gradient task's tiles in one of the warp-specialised roles (RunWeightGrad has checked the task and
// looked up k_rows, expert e's row segment per source slot): every tile, ascending by row and column tile,
// each over the segments in slot order; kProducer issues their K steps (one thread), else the consumers
// multiply and store them (16-byte row vectors through the staging buffer where dW is written in T).
template <class T, bool kProducer>
__device__ int32_t WeightGradTilesWs(const DeviceRank& d, BlockGemmWs<T, true, false>& g, const ssc::SscTask& t,
                                     const uint64_t* k_rows) {
  const ssc::SscTensorRef& out = t.outputs[0];
  const uint64_t per_expert = d.slots[out.slot].dim1, n = d.slots[out.slot].cols;
  const int64_t b0 = int64_t(out.row_offset % per_expert), wg = out.rows;
  const int64_t c0 = out.col_offset, c1 = int64_t(out.col_offset) + out.cols;
  // X^T: boxes of 64 columns (from b0) x 64 rows (K); dY: 64 columns x 64 rows.
  const TmaOperand ta{d.TensorMap(t.inputs[0].slot, kBoxRows64), int32_t(b0), 0, 0};
  const TmaOperand tb{d.TensorMap(t.inputs[1].slot, kBoxRows64), 0, 0, 0};
  const bool issuer = g.Issuer();
  for (int64_t m0 = 0; m0 < wg; m0 += kBM) {
    for (int64_t n0 = c0; n0 < c1; n0 += kBN) {
      if (!kProducer) g.Zero();
      ForEachKSegment(d, k_rows, [&](int32_t r0, int32_t r1) {
        if constexpr (kProducer) {
          if (issuer) g.Produce(ta, tb, int32_t(m0), int32_t(n0), r0, r1);
        } else {
          g.template Consume<true>(r0, r1);
        }
      });
      if constexpr (!kProducer) {
        const uint64_t first = uint64_t(out.row_offset) * n;
        if (HPMOE_GEMM_STAGED_EPILOGUE && d.dw_mode == kDwModelDtype) {
          g.WriteStaged(d.Slot<T>(out.slot) + first, int64_t(n), m0, n0, wg, c1);
        } else {
          WriteWeightGrad<T>(d, out.slot, first, [&](auto* c, auto store) {
            g.Write(c, int64_t(n), m0, n0, wg, c1, store);
          });
        }
      }
    }
  }
  return 0;
}

// WS=2's producer warpgroup: one posted job's loads (WsProducerLoop), the kernels' pipeline position `pipe`
// before and after. The job's task passed the workers' checks before they posted it.
template <class T>
__device__ uint32_t ProduceWsJob(const DeviceRank& d, uint8_t* smem, uint32_t kind, const void* task, uint32_t pipe) {
  const ssc::SscTask& t = *static_cast<const ssc::SscTask*>(task);
  auto run = [&](auto& g, auto&& walk) {
    g.SetPipe(pipe);
    walk();
    return g.Pipe();
  };
  if (kind == kWsJobWeightGrad) {
    BlockGemmWs<T, true, false> g(smem);
    return run(g, [&] { WeightGradTilesWs<T, true>(d, g, t, WsBox().k_rows); });
  }
  if (kind == kWsJobGmmKMajorB) {
    GmmTileWs<T, true> g(smem);
    return run(g, [&] { GmmTilesWs<T, true, true>(d, g, t); });
  }
  GmmTileWs<T, false> g(smem);
  return run(g, [&] { GmmTilesWs<T, false, true>(d, g, t); });
}
#endif

// In0 and in1 are X and dY (dW = X^T dY), or, under nn.Linear's layout, dY and X (dW^T = dY^T X): the compiler
// swaps the operands (task_access.h), so the tile is the same.
template <class T>
__device__ int32_t RunWeightGrad(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t) {
  const ssc::SscTensorRef& x = t.inputs[0];
  const ssc::SscTensorRef& dy = t.inputs[1];
  const ssc::SscTensorRef& out = t.outputs[0];
  if (out.slot != ssc::kSlotDW1 && out.slot != ssc::kSlotDW2) return rt::kErrRegion;
  const uint64_t per_expert = d.slots[out.slot].dim1, n = d.slots[out.slot].cols;
  const uint64_t e = out.row_offset / per_expert, b0 = out.row_offset % per_expert, wg = out.rows;
  // Output columns [c0, c1): the whole width unless the compiler split it (wgrad_split.py); dY is read on the
  // same columns. A block starts on a 16-byte boundary (16-byte row vectors in the epilogue).
  const uint64_t c0 = out.col_offset, c1 = uint64_t(out.col_offset) + out.cols;
  const uint64_t all_rows = uint64_t(d.cfg.ep) * d.cfg.recv_rows_per_src;
  if (x.slot >= ssc::kSlotCount || dy.slot >= ssc::kSlotCount || d.slots[dy.slot].cols != n ||
      e >= d.cfg.experts_per_rank || b0 + wg > per_expert || out.cols == 0 || c1 > n || (c0 % 8) != 0 ||
      dy.col_offset != c0 || dy.cols != out.cols || x.col_offset != b0 || x.cols != wg || x.row_offset != 0 ||
      x.rows != all_rows || dy.row_offset != 0 || dy.rows != all_rows || (b0 % 8) != 0)
    return rt::kErrRegion;
  // K = expert e's rows of slots 0..ep-1, in that order (the CPU twin's order): looked up once per task.
  __shared__ uint64_t k_rows[2 * kMaxRanks];
#if HPMOE_GEMM_WS
  static_assert(2 * kMaxRanks <= kWsMaxSegments, "the WS=2 mailbox holds every segment");
#endif
  const int32_t rows_err = ExpertRowsPerSlot(d, e, k_rows);
  if (rows_err != 0) return rows_err;
  WorkerSync();
  auto segments = [&](auto&& f) { return ForEachKSegment(d, k_rows, f); };
#if HPMOE_GEMM_WS
  (void)segments;
  BlockGemmWs<T, true, false> g(smem);
  return RunWarpSpecialised(
      g, kWsJobWeightGrad, &t, [&] { return WeightGradTilesWs<T, true>(d, g, t, k_rows); },
      [&] { return WeightGradTilesWs<T, false>(d, g, t, k_rows); }, k_rows, int(d.cfg.ep));
#else
#if HPMOE_GEMM_TMA
#if HPMOE_CLUSTER_WORKER
  BlockGemmPaired<T, true, false> g(smem);  // (its solo tile is BlockGemmTma's)
#else
  BlockGemmTma<T, true, false> g(smem);
#endif
  // X^T: boxes of 64 columns (from b0) x 64 rows (K); dY: 64 columns x 64 rows. The segment's K end is
  // inside both tensors, so the tile zeroes the lines past it (BlockGemmTma::ZeroKTail).
  // Timing experiment 4 (wrong results): every unit of an expert reads the first X^T slab.
  const TmaOperand ta{d.TensorMap(x.slot, kBoxRows64), HPMOE_EXPERIMENT_DW == 4 ? 0 : int32_t(b0), 0, 0};
  const TmaOperand tb{d.TensorMap(dy.slot, kBoxRows64), 0, 0, 0};
#else
  const int64_t ldx = int64_t(d.slots[x.slot].cols);
  const T* xs = d.Slot<T>(x.slot) + b0;
  const T* dys = d.Slot<T>(dy.slot);
  BlockGemm<T, true, false> g(smem);
#endif
#if HPMOE_WGRAD_CHAIN
  if (d.dw_mode == kDwModelDtype) {  // written in T (not added to a buffer): the unit as one pipeline
    WeightGradChain<T> chain(smem, k_rows, int(d.cfg.ep), int32_t(wg), int32_t(c0), int32_t(c1));
    if (chain.steps_per_tile > 0) {  // (an expert with no rows: zero tiles, below)
      const TmaOperand store{d.has_dw_maps ? &d.dw_maps[out.slot == ssc::kSlotDW2][0] : nullptr, 0, int32_t(b0),
                             int32_t(e)};
      chain.Run(ta, tb, d.Slot<T>(out.slot) + uint64_t(out.row_offset) * n, int64_t(n), store);
      return 0;
    }
  }
#endif
#if HPMOE_WGRAD_PINGPONG
  if (d.dw_mode == kDwModelDtype) {  // written in T (not added to a buffer), few K steps: warpgroups in turns
    WeightGradPingPong<T> pp(smem, k_rows, int(d.cfg.ep), int32_t(wg), int32_t(c0), int32_t(c1));
    if (pp.steps_per_tile > 0 && pp.steps_per_tile <= kPpMaxSteps) {  // (no rows: zero tiles, below)
      // Whole tiles leave by TMA stores where the launch bound dW maps (BindWeightGradMaps).
      const TmaOperand store{d.has_dw_maps ? &d.dw_maps[out.slot == ssc::kSlotDW2][0] : nullptr, 0, int32_t(b0),
                             int32_t(e)};
      pp.Run(ta, tb, d.Slot<T>(out.slot) + uint64_t(out.row_offset) * n, int64_t(n), store);
      return 0;
    }
  }
#endif
  int32_t err = 0;
#if HPMOE_CLUSTER_WORKER
  // A worker of two blocks: a unit of whole 256-row pairs splits by rows (block r: rows 128 r of each pair)
  // on the same dY columns, multicast (BlockGemmPaired); any other unit deals its column tiles (block r:
  // tiles r, r + 2, ...).
  const bool row_pairs = wg % (2 * kBM) == 0;
  const int64_t m_first = row_pairs ? WorkerRank() * kBM : 0, m_step = row_pairs ? 2 * kBM : kBM;
  const int64_t n_first = int64_t(c0) + (row_pairs ? 0 : WorkerRank() * kBN), n_step = row_pairs ? kBN : 2 * kBN;
#else
  constexpr int64_t m_first = 0, m_step = kBM, n_step = kBN;
  const int64_t n_first = int64_t(c0);
#endif
  for (int64_t m0 = m_first; m0 < int64_t(wg) && err == 0; m0 += m_step) {
    for (int64_t n0 = n_first; n0 < int64_t(c1) && err == 0; n0 += n_step) {
      const uint64_t t_tile = ProfileClock();
      g.Zero();
      err = segments([&](int32_t r0, int32_t r1) {
#if HPMOE_CLUSTER_WORKER
        if (row_pairs && !HPMOE_CLUSTER_NO_MULTICAST) g.AccumulatePaired(ta, tb, int32_t(m0), int32_t(n0), r0, r1);
        else g.Accumulate(ta, tb, int32_t(m0), int32_t(n0), r0, r1);
#elif HPMOE_GEMM_TMA
        // Timing experiment 5 (wrong results): every tile reads the first dY column slab.
        g.Accumulate(ta, tb, int32_t(m0), HPMOE_EXPERIMENT_DW == 5 ? 0 : int32_t(n0), int32_t(r0), int32_t(r1));
#else
        const Stored<T> a{xs, ldx, int64_t(r1), int64_t(wg)};
        const Stored<T> b{dys, int64_t(n), int64_t(r1), int64_t(n)};
        g.Accumulate(a, b, m0, n0, int64_t(r0), int64_t(r1));
#endif
      });
      if (err != 0) break;
      // Bound to a framework's gradient in the model dtype: the one rounding, here. The TMA build writes it as
      // 16-byte row vectors through shared memory, like the GMM tiles (the same FromF rounding, the same
      // bits): with K as short as an expert's rows the epilogue is a large share of a tile (Mixtral-8x7B
      // experts at 4096 tokens, fwd+bwd kernels 25.8 -> 24.4 ms against 4-byte stores from the accumulators;
      // issuing the next tile's first loads before the epilogue as well measured the same, 24.5 ms; one
      // H200, benchmarks/RESULTS.md).
      if (HPMOE_EXPERIMENT_DW == 1) continue;  // timing experiment: no epilogue (block_gemm_tma.cuh)
#if HPMOE_GEMM_TMA && HPMOE_GEMM_STAGED_EPILOGUE && HPMOE_GEMM_ASYNC_EPILOGUE
      if (d.dw_mode == kDwModelDtype) {
        g.WriteStagedAsync(d.Slot<T>(out.slot) + uint64_t(out.row_offset) * n, int64_t(n), m0, n0, int64_t(wg),
                           int64_t(c1), HPMOE_DW_EVICT_FIRST);
        continue;
      }
#endif
#if HPMOE_GEMM_STAGED_EPILOGUE
      if (d.dw_mode & (kDwModelDtype | kDwAccumulate)) {  // staged: written in T, or added (AddStagedRows)
        const uint64_t first = uint64_t(out.row_offset) * n;
        g.WriteStagedBy([&] {
          if (!(d.dw_mode & kDwAccumulate)) {
#if HPMOE_WGRAD_STORE_BY_COPIES
            g.StoreStagedByCopies(g.smem, d.Slot<T>(out.slot) + first, int64_t(n), m0, n0, int64_t(wg), int64_t(c1),
                                  HPMOE_DW_EVICT_FIRST);
#elif HPMOE_WGRAD_STORE_OUT_OF_LINE
            StoreStagedOutOfLine(g.smem, d.Slot<T>(out.slot) + first, int64_t(n), m0, n0, int64_t(wg), int64_t(c1));
#else
            g.StoreStaged(g.smem, d.Slot<T>(out.slot) + first, int64_t(n), m0, n0, int64_t(wg), int64_t(c1));
#endif
          }
          else if (d.dw_mode & kDwModelDtype)
            g.AddStagedRows(d.Slot<T>(out.slot) + first, int64_t(n), m0, n0, int64_t(wg), int64_t(c1));
          else
            g.AddStagedRows(d.Slot<float>(out.slot) + first, int64_t(n), m0, n0, int64_t(wg), int64_t(c1));
        });
        if (HPMOE_EXPERIMENT_PROFILE) ProfileAdd(g.kProfileKind, kPhaseWhole, ProfileClock() - t_tile);
        continue;
      }
#endif
      WriteWeightGrad<T>(d, out.slot, uint64_t(out.row_offset) * n, [&](auto* c, auto store) {
        g.Write(c, int64_t(n), m0, n0, int64_t(wg), int64_t(c1), store);
      });
      if (HPMOE_EXPERIMENT_PROFILE) ProfileAdd(g.kProfileKind, kPhaseWhole, ProfileClock() - t_tile);
    }
  }
#if HPMOE_GEMM_TMA
  g.FinishStores();
#endif
  return err;
#endif
}

}  // namespace cuda
}  // namespace hpmoe
