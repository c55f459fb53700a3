// The vector-role compute handlers: SwiGLU and its gradient on a column block of a row tile's valid rows,
// the weighted top-k reductions over a token tile (j ascending, fp32, one rounding), the router-weight
// gradient (one warp per token; for each (t, j) lanes sum fixed column strides, then a fixed butterfly), and
// ADD. 8-element vectors throughout (the launcher requires h, I and wgrad_tile to be multiples of 8).
#pragma once

#include "../runtime/fast_divmod.h"
#include "../runtime/routing_plan.h"
#include "../runtime/swiglu_block.h"
#include "handlers_gemm.cuh"
#include "swiglu_math.cuh"
#if HPMOE_GEMM_TMA
#include "bulk_stream.cuh"
#endif
// SwiGLU and its gradient read their rows by bulk copies into shared memory (1, with the TMA tile) or by
// loads into registers (0; the cp.async build always). Whole rows take the same time either way (one H200,
// Mixtral-8x7B experts: 869 / 873 us a task), but 0 spills 1.6 KB in the worker kernel and its step was
// 4-8% slower (session 18): kept as the comparison.
#ifndef HPMOE_SWIGLU_STREAM
#define HPMOE_SWIGLU_STREAM HPMOE_GEMM_TMA
#endif
#if HPMOE_SWIGLU_STREAM && !HPMOE_GEMM_TMA
#error "HPMOE_SWIGLU_STREAM=1 needs the TMA tile's shared-memory layout (HPMOE_GEMM_TMA=1)"
#endif

namespace hpmoe {
namespace cuda {

// Vectors per thread whose loads are issued before any is used, where rows are read from registers (the
// cp.async build; the TMA build streams them, bulk_stream.cuh): a vector block is latency-bound. Eight
// measured slower than four with the GMM tiles running beside them (Mixtral-8x7B experts at 4096 tokens, one
// H200 trace: SwiGLU 0.91 -> 1.25 ms, its gradient 1.45 -> 1.68 ms per 128-row tile; the kernel's spill
// stores 912 -> 1448 bytes).
constexpr int kVecUnroll = 4;

__device__ __forceinline__ uint4 LoadRaw(const void* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }

// The 8-element vectors of rows [r0, r1) x `vecs` vectors per row, in batches of kVecUnroll per thread:
// body(at) where at(q, &row, &col) gives the row and first column of vector q of this thread's batch and
// returns whether it exists (recomputed at each use rather than held: the kernel's spill stores 1000 -> 912
// bytes).
// Every vector is visited once (element-wise work: the order changes no result). The vector count fits 31 bits
// (FastDivmod's range): SwigluBlockOf refuses a larger block (rt::VectorsFit31).
template <class Body>
__device__ __forceinline__ void ForEachVecBatch(uint64_t r0, uint64_t r1, uint32_t vecs, Body&& body) {
  const uint32_t n = uint32_t((r1 - r0) * vecs);
  const rt::FastDivmod per_row(vecs);
  for (uint32_t base = threadIdx.x; base < n; base += kVecUnroll * WorkerThreads()) {
    body([=](int q, uint64_t& row, uint64_t& col) {
      const uint32_t i = base + q * WorkerThreads();
      uint32_t j, v;
      per_row.DivMod(i, &j, &v);
      row = r0 + j;
      col = uint64_t(v) * 8;
      return i < n;
    });
  }
}

// SwiGLU of one 8-element vector: a = silu(g) * u, in fp32 from the stored 16-bit values, one rounding.
template <class T>
__device__ __forceinline__ void SwigluVec(const uint4& g, const uint4& u, T* a) {
  float gf[8], uf[8], o[8];
  Unpack8<T>(g, gf);
  Unpack8<T>(u, uf);
  for (int e = 0; e < 8; ++e) o[e] = SwigluOf(gf[e], uf[e]);
  Store8(a, o);
}

// Its gradient: dg and du of one vector from g, u and da.
template <class T>
__device__ __forceinline__ void SwigluGradVec(const uint4& g, const uint4& u, const uint4& dv, T* dg_out, T* du_out) {
  float gf[8], uf[8], dvf[8], dg[8], du[8];
  Unpack8<T>(g, gf);
  Unpack8<T>(u, uf);
  Unpack8<T>(dv, dvf);
  for (int e = 0; e < 8; ++e) SwigluGradOf(gf[e], uf[e], dvf[e], &dg[e], &du[e]);
  Store8(dg_out, dg);
  Store8(du_out, du);
}

#if HPMOE_SWIGLU_STREAM
// Every vector of a stage of StreamRows: f(j, v, slot offset) for row j of the stage and vector v of it. A stage
// of several rows holds whole rows, so w is the block's width and `row_vecs` divides by its vectors (RowVecs);
// a stage of one row (perhaps a piece of it) needs no division.
template <class F>
__device__ __forceinline__ void ForEachStagedVec(uint32_t rows, uint32_t w, const rt::FastDivmod& row_vecs, F&& f) {
  for (uint32_t i = threadIdx.x; i < rows * (w / 8); i += WorkerThreads()) {
    uint32_t j = 0, v = i;
    if (rows > 1) row_vecs.DivMod(i, &j, &v);
    f(j, v, j * w * 2 + v * 16);
  }
}
// The divisor ForEachStagedVec takes for a block `cols` wide, built once a task (building it costs a division).
__device__ __forceinline__ rt::FastDivmod RowVecs(uint64_t cols) { return rt::FastDivmod(uint32_t(cols / 8)); }
#endif

// A column block of A (rt::SwigluBlock: the whole width is the block [0, I)); blocks start and end on
// 8-element vectors (act_n_block and I are multiples of 8). The same vectors get the same arithmetic in any
// block and either path, so a split schedule's outputs are bitwise the whole width's.
template <class T>
__device__ int32_t RunSwiglu(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t) {
  const uint64_t inter = d.cfg.inter;
  rt::SwigluBlock b;
  if (!rt::SwigluBlockOf(t, inter, &b) || b.c0 % 8 != 0 || b.cols % 8 != 0) return rt::kErrRegion;
  const T* hs = d.Slot<T>(ssc::kSlotH) + b.c0;  // gate at hs[r * 2I + c], up at hs[r * 2I + I + c]
  T* as = d.Slot<T>(ssc::kSlotA) + b.c0;
#if HPMOE_SWIGLU_STREAM
  const rt::FastDivmod row_vecs = RowVecs(b.cols);
#endif
  return ForEachValidRange(d, b.row0, b.rows, [&](uint64_t v0, uint64_t v1) {
    const Share mine = ShareOf(v0, v1);  // a worker of two blocks: this block's rows
    const uint64_t r0 = mine.begin, r1 = mine.end;
    if (kBlocksPerWorker > 1 && r0 == r1) return;
#if HPMOE_SWIGLU_STREAM
    // Gate and up rows through shared memory by bulk copies (bulk_stream.cuh).
    StreamRows<2>(smem, RowPieces(uint32_t(r1 - r0), uint32_t(b.cols)),
                  [&](int i, uint32_t j) { return hs + (r0 + j) * 2 * inter + i * inter; },
                  [&](uint32_t r, uint32_t rows, uint32_t c0, uint32_t w, auto slot) {
                    ForEachStagedVec(rows, w, row_vecs, [&](uint32_t j, uint32_t v, uint32_t off) {
                      SwigluVec<T>(LoadShared16(slot(0) + off), LoadShared16(slot(1) + off),
                                   as + (r0 + r + j) * inter + c0 + v * 8);
                    });
                  });
#else
    // kVecUnroll vectors per thread per pass: their loads are all issued before any is used (latency-bound
    // otherwise: two 16-byte loads in flight per thread moved about 7 GB/s per block).
    (void)smem;
    ForEachVecBatch(r0, r1, uint32_t(b.cols / 8), [&](auto at) {
      uint4 g[kVecUnroll], u[kVecUnroll];
      uint64_t r, c;
#pragma unroll
      for (int q = 0; q < kVecUnroll; ++q) {
        if (!at(q, r, c)) continue;
        g[q] = LoadRaw(hs + r * 2 * inter + c);
        u[q] = LoadRaw(hs + r * 2 * inter + inter + c);
      }
#pragma unroll
      for (int q = 0; q < kVecUnroll; ++q)
        if (at(q, r, c)) SwigluVec<T>(g[q], u[q], as + r * inter + c);
    });
#endif
  });
}

template <class T>
__device__ int32_t RunSwigluGrad(const DeviceRank& d, uint8_t* smem, const ssc::SscTask& t) {
  const uint64_t inter = d.cfg.inter;
  rt::SwigluBlock b;
  if (!rt::SwigluGradBlockOf(t, inter, &b) || b.c0 % 8 != 0 || b.cols % 8 != 0) return rt::kErrRegion;
  const T* hs = d.Slot<T>(ssc::kSlotH) + b.c0;
  const T* das = d.Slot<T>(ssc::kSlotDA) + b.c0;
  T* dhs = d.Slot<T>(ssc::kSlotDH) + b.c0;
#if HPMOE_SWIGLU_STREAM
  const rt::FastDivmod row_vecs = RowVecs(b.cols);
#endif
  return ForEachValidRange(d, b.row0, b.rows, [&](uint64_t v0, uint64_t v1) {
    const Share mine = ShareOf(v0, v1);  // a worker of two blocks: this block's rows
    const uint64_t r0 = mine.begin, r1 = mine.end;
    if (kBlocksPerWorker > 1 && r0 == r1) return;
#if HPMOE_SWIGLU_STREAM
    StreamRows<3>(smem, RowPieces(uint32_t(r1 - r0), uint32_t(b.cols)),
                  [&](int i, uint32_t j) {
                    return i < 2 ? hs + (r0 + j) * 2 * inter + i * inter : das + (r0 + j) * inter;
                  },
                  [&](uint32_t r, uint32_t rows, uint32_t c0, uint32_t w, auto slot) {
                    ForEachStagedVec(rows, w, row_vecs, [&](uint32_t j, uint32_t v, uint32_t off) {
                      T* dg = dhs + (r0 + r + j) * 2 * inter + c0 + v * 8;
                      SwigluGradVec<T>(LoadShared16(slot(0) + off), LoadShared16(slot(1) + off),
                                       LoadShared16(slot(2) + off), dg, dg + inter);
                    });
                  });
#else
    (void)smem;
    ForEachVecBatch(r0, r1, uint32_t(b.cols / 8), [&](auto at) {
      uint4 g[kVecUnroll], u[kVecUnroll], dv[kVecUnroll];
      uint64_t r, c;
#pragma unroll
      for (int q = 0; q < kVecUnroll; ++q) {
        if (!at(q, r, c)) continue;
        g[q] = LoadRaw(hs + r * 2 * inter + c);
        u[q] = LoadRaw(hs + r * 2 * inter + inter + c);
        dv[q] = LoadRaw(das + r * inter + c);
      }
#pragma unroll
      for (int q = 0; q < kVecUnroll; ++q)
        if (at(q, r, c)) SwigluGradVec<T>(g[q], u[q], dv[q], dhs + r * 2 * inter + c, dhs + r * 2 * inter + inter + c);
    });
#endif
  });
}

// token_rows[t][j], checked against the return buffers' rows: the block splits the entries and agrees on the
// verdict (every thread of the block calls this).
__device__ __forceinline__ bool TokenRowsValid(const DeviceRank& d, uint64_t t0, uint64_t tokens) {
  const int32_t* rows = d.Slot<int32_t>(ssc::kSlotTokenRows);
  const int64_t limit = int64_t(d.cfg.ep) * d.cfg.recv_rows_per_src;
  int bad = 0;
  for (uint64_t i = t0 * d.cfg.topk + threadIdx.x; i < (t0 + tokens) * d.cfg.topk; i += WorkerThreads()) {
    const int32_t v = rows[i];
    bad |= v < 0 || v >= limit;
  }
  return !WorkerSyncOr(bad);
}

// The tokens of a reduction task that this launch routed (a pass of the speculative bucket routes only
// [token_begin, token_end); the other tokens' outputs are left as they are).
__device__ __forceinline__ rt::TokenSpan RoutedTokens(const DeviceRank& d, const ssc::SscTensorRef& out) {
  return rt::RoutedTokens(out.row_offset, out.rows, d.token_begin, d.token_end);
}

// out[t] = sum_j scale[t*k + j] * ret[token_rows[t][j]] (scale == nullptr: 1), j ascending, fp32.
template <class T>
__device__ int32_t ReduceTokens(const DeviceRank& d, const ssc::SscTensorRef& ret, const ssc::SscTensorRef& rows_ref,
                                const ssc::SscTensorRef& out, const float* scale) {
  const uint64_t h = d.cfg.hidden, k = d.cfg.topk;
  if (!FullCols(d, ret) || ret.cols != h || rows_ref.slot != ssc::kSlotTokenRows || !FullCols(d, rows_ref) ||
      !FullCols(d, out) || out.cols != h || !SameRows(rows_ref, out))
    return rt::kErrRegion;
  const rt::TokenSpan routed = RoutedTokens(d, out);
  const Share span = ShareOf(routed.begin, routed.end);  // (a worker of two blocks: this block's tokens)
  if (!TokenRowsValid(d, span.begin, span.end - span.begin)) return rt::kErrPlan;
  const T* rs = d.Slot<T>(ret.slot);
  const int32_t* rows = d.Slot<int32_t>(ssc::kSlotTokenRows);
  T* os = d.Slot<T>(out.slot);
  const uint64_t vecs = h / 8;
  // A batch of the k rows is loaded before any is summed (a forward reduction task took 472 us with one load
  // in flight per thread, 476 with four, 384 with eight, EP 4 traces); the sum still runs j ascending. Eight
  // raise the kernel's spill stores from 84 to 352 bytes, with no measured effect on the GMM tiles. Bulk
  // copies of the rows' 4 KB pieces through shared memory (bulk_stream.cuh, four stages) measured slower:
  // 0.61 against 0.51 ms per 64-token task at h 7168 (the issuing thread reads each stage's row indices).
  constexpr uint32_t kBatch = 8;
  // A task is one token tile: its vector count fits FastDivmod's 31 bits (refused otherwise, never wrapped).
  const uint64_t n = (span.end - span.begin) * vecs;
  if (n >= (uint64_t(1) << 31)) return rt::kErrRegion;
  const rt::FastDivmod per_token{uint32_t(vecs)};
  for (uint32_t i = threadIdx.x; i < uint32_t(n); i += WorkerThreads()) {
    uint32_t q, r;
    per_token.DivMod(i, &q, &r);
    const uint64_t tok = span.begin + q, c = uint64_t(r) * 8;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (uint64_t j0 = 0; j0 < k; j0 += kBatch) {
      uint4 raw[kBatch];
#pragma unroll
      for (uint32_t u = 0; u < kBatch; ++u)
        if (j0 + u < k) raw[u] = LoadRaw(rs + uint64_t(rows[tok * k + j0 + u]) * h + c);
#pragma unroll
      for (uint32_t u = 0; u < kBatch; ++u) {
        if (j0 + u >= k) break;
        float v[8];
        Unpack8<T>(raw[u], v);
        const float w = scale ? scale[tok * k + j0 + u] : 1.0f;
        for (int q = 0; q < 8; ++q) acc[q] += w * v[q];
      }
    }
    Store8(os + tok * h + c, acc);
  }
  return 0;
}

template <class T>
__device__ int32_t RunCombineReduce(const DeviceRank& d, const ssc::SscTask& t) {
  const ssc::SscTensorRef& w = t.inputs[1];
  if (w.slot != ssc::kSlotTopkWeights || !SameRows(w, t.outputs[0])) return rt::kErrRegion;
  return ReduceTokens<T>(d, t.inputs[0], t.inputs[2], t.outputs[0], d.Slot<float>(ssc::kSlotTopkWeights));
}

template <class T>
__device__ int32_t RunBwdCombineReduce(const DeviceRank& d, const ssc::SscTask& t) {
  return ReduceTokens<T>(d, t.inputs[0], t.inputs[1], t.outputs[0], nullptr);
}

template <class T>
__device__ int32_t RunTopkWeightGrad(const DeviceRank& d, const ssc::SscTask& t) {
  const ssc::SscTensorRef& dy = t.inputs[0];
  const ssc::SscTensorRef& ret = t.inputs[1];
  const ssc::SscTensorRef& rows_ref = t.inputs[2];
  const ssc::SscTensorRef& out = t.outputs[0];
  const uint64_t h = d.cfg.hidden, k = d.cfg.topk;
  if (dy.slot != ssc::kSlotDy || !SameRows(dy, out) || ret.slot != ssc::kSlotRetY || !FullCols(d, ret) ||
      rows_ref.slot != ssc::kSlotTokenRows || !SameRows(rows_ref, out) || out.slot != ssc::kSlotDTopkWeights ||
      !FullCols(d, out))
    return rt::kErrRegion;
  const rt::TokenSpan routed = RoutedTokens(d, out);
  const Share span = ShareOf(routed.begin, routed.end);  // (a worker of two blocks: this block's tokens)
  if (!TokenRowsValid(d, span.begin, span.end - span.begin)) return rt::kErrPlan;
  const T* dys = d.Slot<T>(ssc::kSlotDy);
  const T* rs = d.Slot<T>(ssc::kSlotRetY);
  const int32_t* rows = d.Slot<int32_t>(ssc::kSlotTokenRows);
  float* dw = d.Slot<float>(ssc::kSlotDTopkWeights);
  const uint32_t warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = WorkerThreads() / 32;
  // One warp per token and up to kJ of its k rows at a time, so dy's row is read once for them, not once per
  // (t, j) (DeepSeek-V3 experts at 8192 tokens: 0.73 ms per 64-token task, 93 block-ms at the start of the
  // backward, one H200 trace). Each (t, j)'s sum is unchanged: lane strides ascending, then the butterfly.
  constexpr uint32_t kJ = 8;  // rows per pass: their vectors and dy's are loaded before any is summed
  for (uint64_t tok = span.begin + warp; tok < span.end; tok += warps) {
    const T* b = dys + tok * h;
    for (uint64_t j0 = 0; j0 < k; j0 += kJ) {
      const uint32_t nj = uint32_t(k - j0 < kJ ? k - j0 : kJ);
      const T* a[kJ];
      float sum[kJ];
#pragma unroll
      for (uint32_t u = 0; u < kJ; ++u) {
        a[u] = u < nj ? rs + uint64_t(rows[tok * k + j0 + u]) * h : rs;
        sum[u] = 0.0f;
      }
      for (uint64_t c = lane * 8; c < h; c += 32 * 8) {
        uint4 ra[kJ];
        const uint4 rb = LoadRaw(b + c);
#pragma unroll
        for (uint32_t u = 0; u < kJ; ++u)
          if (u < nj) ra[u] = LoadRaw(a[u] + c);
        float vb[8];
        Unpack8<T>(rb, vb);
#pragma unroll
        for (uint32_t u = 0; u < kJ; ++u) {
          if (u >= nj) break;
          float va[8];
          Unpack8<T>(ra[u], va);
          for (int q = 0; q < 8; ++q) sum[u] += va[q] * vb[q];
        }
      }
#pragma unroll
      for (uint32_t u = 0; u < kJ; ++u) {
        if (u >= nj) break;
        float v = sum[u];
        for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
        if (lane == 0) dw[tok * k + j0 + u] = v;
      }
    }
  }
  return 0;
}

// ADD over three equal-shaped local regions of activation-dtype slots (fp32 math, one rounding). Rare
// (microbenchmarks only): plain element loop.
__device__ __forceinline__ float LoadAny(const DeviceRank& d, uint32_t slot, uint64_t idx) {
  const uint32_t dt = d.slots[slot].dtype;
  const uint8_t* base = d.Slot(slot);
  if (dt == ssc::kFP32) return __ldcg(reinterpret_cast<const float*>(base) + idx);
  if (dt == ssc::kFP16) return ToF(reinterpret_cast<const __half*>(base)[idx]);
  return ToF(reinterpret_cast<const __nv_bfloat16*>(base)[idx]);
}
__device__ __forceinline__ void StoreAny(const DeviceRank& d, uint32_t slot, uint64_t idx, float v) {
  const uint32_t dt = d.slots[slot].dtype;
  uint8_t* base = d.Slot(slot);
  if (dt == ssc::kFP32) reinterpret_cast<float*>(base)[idx] = v;
  else if (dt == ssc::kFP16) reinterpret_cast<__half*>(base)[idx] = FromF<__half>(v);
  else reinterpret_cast<__nv_bfloat16*>(base)[idx] = FromF<__nv_bfloat16>(v);
}
__device__ __forceinline__ bool PlainRegion(const DeviceRank& d, const ssc::SscTensorRef& r) {
  if (r.slot >= ssc::kSlotCount || (r.flags & (ssc::kRefRemote | ssc::kRefRowsDynamic | ssc::kRefGather)) != 0 ||
      r.rank != d.rank)
    return false;
  const uint32_t dt = d.slots[r.slot].dtype;
  return dt != ssc::kINT32 && uint64_t(r.row_offset) + r.rows <= d.slots[r.slot].rows &&
         uint64_t(r.col_offset) + r.cols <= d.slots[r.slot].cols;
}

__device__ int32_t RunAdd(const DeviceRank& d, const ssc::SscTask& t) {
  const ssc::SscTensorRef& a = t.inputs[0];
  const ssc::SscTensorRef& b = t.inputs[1];
  const ssc::SscTensorRef& out = t.outputs[0];
  if (!PlainRegion(d, a) || !PlainRegion(d, b) || !PlainRegion(d, out) || a.rows != out.rows || b.rows != out.rows ||
      a.cols != out.cols || b.cols != out.cols)
    return rt::kErrRegion;
  if (WorkerRank() != 0) return 0;  // a worker of two blocks: block 0 does it all (rare)
  for (uint64_t i = threadIdx.x; i < uint64_t(out.rows) * out.cols; i += WorkerThreads()) {
    const uint64_t r = i / out.cols, c = i % out.cols;
    const float va = LoadAny(d, a.slot, (a.row_offset + r) * d.slots[a.slot].cols + a.col_offset + c);
    const float vb = LoadAny(d, b.slot, (b.row_offset + r) * d.slots[b.slot].cols + b.col_offset + c);
    StoreAny(d, out.slot, (out.row_offset + r) * d.slots[out.slot].cols + out.col_offset + c, va + vb);
  }
  return 0;
}

}  // namespace cuda
}  // namespace hpmoe
