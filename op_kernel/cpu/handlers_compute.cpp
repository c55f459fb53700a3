#include "handlers_compute.h"

#include <cmath>
#include <cstring>

#include "../runtime/regions.h"
#include "../runtime/routing_plan.h"
#include "../runtime/status.h"
#include "../runtime/swiglu_block.h"
#include "dtype.h"
#include "gemm.h"
#include "row_segments.h"

namespace hpmoe {
namespace cpu {
namespace {

using rt::SameRows;
using ssc::SscTensorRef;

// Rows [r0, r0+m) x cols [c0, c0+n) of `slot` as fp32: the slot itself when it is fp32, else converted
// into `scratch`. Sets *ld to the row stride of the result.
const float* RowsF32(const RankContext& ctx, uint32_t slot, uint64_t r0, uint64_t m, uint64_t c0, uint64_t n,
                     float* scratch, int64_t* ld) {
  const uint64_t cols = ctx.Cols(slot);
  const uint32_t dtype = ctx.DType(slot);
  if (dtype == ssc::kFP32) {
    *ld = int64_t(cols);
    return ctx.Slot<float>(slot) + r0 * cols + c0;
  }
  const uint8_t* base = ctx.Slot(slot);
  const uint64_t es = DTypeBytes(dtype);
  for (uint64_t i = 0; i < m; ++i) LoadF32(base + ((r0 + i) * cols + c0) * es, dtype, n, scratch + i * n);
  *ld = int64_t(n);
  return scratch;
}

// Expert e's matrix of a weight slot as fp32 in the standard orientation ([E, K, N] -> K x N, as x W reads it),
// converted once per launch and worker. Under nn.Linear's layout (stored [E, N, K]) the conversion transposes,
// so both layouts then run the identical GEMM call: bitwise-equal results.
const float* ExpertWeightF32(const RankContext& ctx, WorkerScratch& s, uint32_t slot, uint32_t e) {
  const SlotShape& shape = ctx.layout->slots[slot];
  const uint64_t rows = shape.dims[1], cols = shape.dims[2], kn = rows * cols;
  const bool transposed = (ctx.cfg.flags & ssc::kConfigWeightsTransposed) != 0;
  if (!WeightsConverted(shape.dtype, ctx.cfg.flags)) return ctx.Slot<float>(slot) + e * kn;
  const uint8_t* src = ctx.Slot(slot) + e * kn * DTypeBytes(shape.dtype);
  if (s.cached_weight != src || s.cached_launch != s.launch) {
    if (!transposed) {
      LoadF32(src, shape.dtype, kn, s.weight);
    } else {
      const uint64_t es = DTypeBytes(shape.dtype);
      for (uint64_t i = 0; i < rows; ++i) {  // stored row i (output feature i) -> column i
        LoadF32(src + i * cols * es, shape.dtype, cols, s.b);
        for (uint64_t j = 0; j < cols; ++j) s.weight[j * rows + i] = s.b[j];
      }
    }
    s.cached_weight = src;
    s.cached_launch = s.launch;
  }
  return s.weight;
}

bool FullCols(const RankContext& ctx, const SscTensorRef& r) {
  return r.col_offset == 0 && r.cols == ctx.Cols(r.slot);
}

// Reads token_rows[t][j], checked against the return buffers' rows.
bool TokenRow(const RankContext& ctx, uint64_t t, uint32_t j, uint64_t* row) {
  const int32_t v = ctx.Slot<int32_t>(ssc::kSlotTokenRows)[t * ctx.cfg.topk + j];
  if (v < 0 || uint64_t(v) >= uint64_t(ctx.cfg.ep) * ctx.cfg.recv_rows_per_src) return false;
  *row = uint64_t(v);
  return true;
}

inline float Sigmoid(float g) { return 1.0f / (1.0f + std::exp(-g)); }

// m rows of A = silu(gate) * up (row strides given; out has stride n).
void SwigluRows(uint64_t m, uint64_t n, const float* gv, int64_t ldg, const float* uv, int64_t ldu, float* out) {
  for (uint64_t i = 0; i < m; ++i) {
    const float* g = gv + i * ldg;
    const float* u = uv + i * ldu;
    float* o = out + i * n;
    for (uint64_t c = 0; c < n; ++c) o[c] = g[c] * Sigmoid(g[c]) * u[c];
  }
}

// m rows of dH's gate and up parts from dA and H's gate and up (dg, du have stride n).
void SwigluGradRows(uint64_t m, uint64_t n, const float* gv, int64_t ldg, const float* uv, int64_t ldu,
                    const float* dv, int64_t ldd, float* dgv, float* duv) {
  for (uint64_t i = 0; i < m; ++i) {
    const float* g = gv + i * ldg;
    const float* u = uv + i * ldu;
    const float* d = dv + i * ldd;
    float* dg = dgv + i * n;
    float* du = duv + i * n;
    for (uint64_t c = 0; c < n; ++c) {
      const float sg = Sigmoid(g[c]);
      du[c] = d[c] * g[c] * sg;
      dg[c] = d[c] * u[c] * sg * (1.0f + g[c] * (1.0f - sg));
    }
  }
}

}  // namespace

int32_t RunGmm(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t, bool trans_b) {
  const SscTensorRef& in = t.inputs[0];
  const SscTensorRef& w = t.inputs[1];
  const SscTensorRef& out = t.outputs[0];
  if (w.slot != ssc::kSlotW1 && w.slot != ssc::kSlotW2) return rt::kErrRegion;
  const SlotShape& ws = ctx.layout->slots[w.slot];
  // ExpertWeightF32 gives W[e] in the standard orientation [K, N] (GMM) / [N, K] (GMM_TRANS_B) in both layouts.
  const bool transposed = (ctx.cfg.flags & ssc::kConfigWeightsTransposed) != 0;
  const uint64_t kw = transposed ? ws.dims[2] : ws.dims[1], nw = transposed ? ws.dims[1] : ws.dims[2];
  const uint64_t k = trans_b ? nw : kw, n = trans_b ? kw : nw;
  // The output is a column block [c0, c0 + nb) of the row tile (gmm_split.py), the whole width by default.
  const uint64_t c0 = out.col_offset, nb = out.cols;
  if (in.slot == ssc::kNoSlot || out.slot == ssc::kNoSlot || !FullCols(ctx, in) || ctx.Cols(out.slot) != n ||
      in.cols != k || nb == 0 || c0 + nb > n || !SameRows(in, out))
    return rt::kErrRegion;
  const uint32_t out_dtype = ctx.DType(out.slot);
  const uint64_t es = DTypeBytes(out_dtype);
  return ForEachExpertSegment(ctx, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const uint64_t m = r1 - r0;
    int64_t lda;
    const float* a = RowsF32(ctx, in.slot, r0, m, 0, k, s.a, &lda);
    const float* b = ExpertWeightF32(ctx, s, w.slot, e) + (trans_b ? c0 * nw : c0);  // rows or columns c0..
    float* c = out_dtype == ssc::kFP32 ? reinterpret_cast<float*>(ctx.Row(out.slot, r0)) + c0 : s.out;
    const int64_t ldc = out_dtype == ssc::kFP32 ? int64_t(n) : int64_t(nb);
    GemmRowMajor(int64_t(m), int64_t(nb), int64_t(k), a, lda, b, int64_t(nw), trans_b, c, ldc);
    if (out_dtype == ssc::kFP32) return;
    if (nb == n) {
      StoreF32(s.out, out_dtype, m * n, ctx.Row(out.slot, r0));
    } else {
      for (uint64_t i = 0; i < m; ++i) StoreF32(s.out + i * nb, out_dtype, nb, ctx.Row(out.slot, r0 + i) + c0 * es);
    }
  });
}

// dW[e][b0, b0 + wg)[c0, c0 + nb) = in0[:, b0 + ...]^T in1[:, c0 + ...] over expert e's rows (the columns are the
// whole width unless the compiler split them, wgrad_split.py). Under nn.Linear's layout the compiler swaps the
// operands (task_access.h), so the same code writes rows of dW1t = dH^T X and dW2t = dY^T A. Each output
// element sums the same products in the same order whatever the column block, so a split changes no bits.
int32_t RunWeightGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const SscTensorRef& x = t.inputs[0];
  const SscTensorRef& dy = t.inputs[1];
  const SscTensorRef& out = t.outputs[0];
  if (out.slot != ssc::kSlotDW1 && out.slot != ssc::kSlotDW2) return rt::kErrRegion;
  const SlotShape& os = ctx.layout->slots[out.slot];
  const uint64_t per_expert = os.dims[1], n = os.dims[2];
  const uint64_t e = out.row_offset / per_expert, b0 = out.row_offset % per_expert, wg = out.rows;
  const uint64_t c0 = out.col_offset, nb = out.cols;
  const uint64_t all_rows = uint64_t(ctx.cfg.ep) * ctx.cfg.recv_rows_per_src;
  if (x.slot == ssc::kNoSlot || dy.slot == ssc::kNoSlot || e >= ctx.cfg.experts_per_rank ||
      b0 + wg > per_expert || nb == 0 || c0 + nb > n || x.col_offset != b0 || x.cols != wg ||
      ctx.Cols(dy.slot) != n || dy.col_offset != c0 ||
      dy.cols != nb || x.row_offset != 0 || x.rows != all_rows || dy.row_offset != 0 || dy.rows != all_rows)
    return rt::kErrRegion;
  float* c = ctx.Slot<float>(out.slot) + out.row_offset * n + c0;
  for (uint64_t i = 0; i < wg; ++i) std::memset(c + i * n, 0, nb * sizeof(float));
  // Fixed order: slots 0..ep-1, rows ascending inside each (ForEachExpertSegment's order).
  return ForEachExpertSegment(ctx, 0, all_rows, [&](uint32_t expert, uint64_t r0, uint64_t r1) {
    if (expert != e) return;
    int64_t lda, ldb;
    const float* a = RowsF32(ctx, x.slot, r0, r1 - r0, b0, wg, s.a, &lda);
    const float* b = RowsF32(ctx, dy.slot, r0, r1 - r0, c0, nb, s.b, &ldb);
    GemmAtBAccumulate(int64_t(r1 - r0), int64_t(wg), int64_t(nb), a, lda, b, ldb, c, int64_t(n));
  });
}

namespace {

// Rows [r0, r0 + m) x columns [off, off + n) of `slot`, rounded from fp32 `src` (row stride n).
void StoreBlock(const RankContext& ctx, uint32_t slot, uint64_t r0, uint64_t m, uint64_t off, uint64_t n,
                const float* src, uint64_t ld = 0) {
  const uint32_t dtype = ctx.DType(slot);
  const uint64_t es = DTypeBytes(dtype);
  for (uint64_t i = 0; i < m; ++i) StoreF32(src + i * (ld ? ld : n), dtype, n, ctx.Row(slot, r0 + i) + off * es);
}

// H's gate (up = false) or up columns of A's block [c0, c0 + n) as fp32 rows of stride n (kConfigFusedSwiglu:
// interleaved groups, swiglu_block.h), the values as stored.
void LoadInterleaved(const RankContext& ctx, uint64_t r0, uint64_t m, uint64_t c0, uint64_t n, bool up, float* dst) {
  const uint32_t dtype = ctx.DType(ssc::kSlotH);
  const uint64_t es = DTypeBytes(dtype), group = ssc::kFusedSwigluGroup;
  for (uint64_t i = 0; i < m; ++i)
    for (uint64_t q = 0; q < n; q += group)
      LoadF32(ctx.Row(ssc::kSlotH, r0 + i) + rt::FusedHCol(c0 + q, up) * es, dtype, group, dst + i * n + q);
}

// Rounds v to `dtype` in place (what storing it and reading it back would give).
void RoundTo(uint32_t dtype, float* v, uint64_t n) {
  if (dtype == ssc::kBF16)
    for (uint64_t i = 0; i < n; ++i) v[i] = Bf16ToF32(F32ToBf16(v[i]));
  else if (dtype == ssc::kFP16)
    for (uint64_t i = 0; i < n; ++i) v[i] = F16ToF32(F32ToF16(v[i]));
}

}  // namespace

// A column block of A (swiglu_block.h; the whole width is the block [0, I)): gate and up columns are read as
// two ranges, so a block and the whole width run the same per-element arithmetic (bitwise-equal outputs).
int32_t RunSwiglu(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const uint64_t inter = ctx.cfg.inter;
  rt::SwigluBlock b;
  if (!rt::SwigluBlockOf(t, inter, &b)) return rt::kErrRegion;
  const uint64_t n = b.cols;
  return ForEachValidRange(ctx, b.row0, b.rows, [&](uint64_t r0, uint64_t r1) {
    const uint64_t m = r1 - r0;
    int64_t ldg, ldu;
    const float* gv = RowsF32(ctx, ssc::kSlotH, r0, m, b.c0, n, s.a, &ldg);
    const float* uv = RowsF32(ctx, ssc::kSlotH, r0, m, inter + b.c0, n, s.a + m * n, &ldu);
    SwigluRows(m, n, gv, ldg, uv, ldu, s.out);
    StoreBlock(ctx, ssc::kSlotA, r0, m, b.c0, n, s.out);
  });
}

int32_t RunSwigluGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const uint64_t inter = ctx.cfg.inter;
  rt::SwigluBlock b;
  if (!rt::SwigluGradBlockOf(t, inter, &b)) return rt::kErrRegion;
  const uint64_t n = b.cols;
  return ForEachValidRange(ctx, b.row0, b.rows, [&](uint64_t r0, uint64_t r1) {
    const uint64_t m = r1 - r0;
    int64_t ldg, ldu, ldd;
    const float* gv = RowsF32(ctx, ssc::kSlotH, r0, m, b.c0, n, s.a, &ldg);
    const float* uv = RowsF32(ctx, ssc::kSlotH, r0, m, inter + b.c0, n, s.a + m * n, &ldu);
    const float* dv = RowsF32(ctx, ssc::kSlotDA, r0, m, b.c0, n, s.b, &ldd);
    float* dgv = s.out;
    float* duv = s.out + m * n;
    SwigluGradRows(m, n, gv, ldg, uv, ldu, dv, ldd, dgv, duv);
    StoreBlock(ctx, ssc::kSlotDH, r0, m, b.c0, n, dgv);
    StoreBlock(ctx, ssc::kSlotDH, r0, m, inter + b.c0, n, duv);
  });
}

// GMM_SWIGLU (kConfigFusedSwiglu): GMM1 on A's block [c0, c0 + n), W1's gate then up columns, rounded into H's
// interleaved groups; A from H's values as stored, as SWIGLU computes it: bitwise the unfused path.
int32_t RunGmmSwiglu(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const uint64_t inter = ctx.cfg.inter, k = ctx.cfg.hidden;
  const SscTensorRef& in = t.inputs[0];
  rt::SwigluBlock b;
  if (!rt::GmmSwigluBlockOf(t, inter, &b) || !FullCols(ctx, in) || in.cols != k) return rt::kErrRegion;
  const uint64_t c0 = b.c0, n = b.cols, group = ssc::kFusedSwigluGroup;
  return ForEachExpertSegment(ctx, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const uint64_t m = r1 - r0;
    int64_t lda;
    const float* a = RowsF32(ctx, in.slot, r0, m, 0, k, s.a, &lda);
    const float* w1 = ExpertWeightF32(ctx, s, ssc::kSlotW1, e);  // [h, 2I] in both layouts
    for (int up = 0; up < 2; ++up) {
      GemmRowMajor(int64_t(m), int64_t(n), int64_t(k), a, lda, w1 + (up ? inter : 0) + c0, int64_t(2 * inter), false,
                   s.out, int64_t(n));
      for (uint64_t q = 0; q < n; q += group)
        StoreBlock(ctx, ssc::kSlotH, r0, m, rt::FusedHCol(c0 + q, up != 0), group, s.out + q, n);
    }
    LoadInterleaved(ctx, r0, m, c0, n, false, s.a);
    LoadInterleaved(ctx, r0, m, c0, n, true, s.a + m * n);
    SwigluRows(m, n, s.a, int64_t(n), s.a + m * n, int64_t(n), s.out);
    StoreBlock(ctx, ssc::kSlotA, r0, m, c0, n, s.out);
  });
}

// GMM_SWIGLU_GRAD (kConfigFusedSwiglu): dA = dY W2[e]^T on A's block, rounded as the unfused path stores it, then
// SWIGLU_GRAD's arithmetic with H's interleaved gate and up into dH's two halves: bitwise the unfused path.
int32_t RunGmmSwigluGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const uint64_t inter = ctx.cfg.inter, k = ctx.cfg.hidden;
  const SscTensorRef& dy = t.inputs[0];
  rt::SwigluBlock b;
  if (!rt::GmmSwigluGradBlockOf(t, inter, &b) || !FullCols(ctx, dy) || dy.cols != k) return rt::kErrRegion;
  const uint64_t c0 = b.c0, n = b.cols;
  return ForEachExpertSegment(ctx, dy.row_offset, dy.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) {
    const uint64_t m = r1 - r0;
    int64_t lda;
    const float* a = RowsF32(ctx, dy.slot, r0, m, 0, k, s.a, &lda);
    const float* w2 = ExpertWeightF32(ctx, s, ssc::kSlotW2, e);  // [I, h] in both layouts: rows c0.. are dA's columns
    GemmRowMajor(int64_t(m), int64_t(n), int64_t(k), a, lda, w2 + c0 * k, int64_t(k), true, s.b, int64_t(n));
    RoundTo(ctx.DType(ssc::kSlotDH), s.b, m * n);
    LoadInterleaved(ctx, r0, m, c0, n, false, s.a);
    LoadInterleaved(ctx, r0, m, c0, n, true, s.a + m * n);
    SwigluGradRows(m, n, s.a, int64_t(n), s.a + m * n, int64_t(n), s.b, int64_t(n), s.out, s.out + m * n);
    StoreBlock(ctx, ssc::kSlotDH, r0, m, c0, n, s.out);
    StoreBlock(ctx, ssc::kSlotDH, r0, m, inter + c0, n, s.out + m * n);
  });
}

namespace {

// out[t] = sum_j scale(t, j) * ret[token_rows[t][j]] over a token tile, j ascending, fp32 accumulation.
template <class Scale>
int32_t ReduceTokens(const RankContext& ctx, WorkerScratch& s, const SscTensorRef& ret, const SscTensorRef& rows_ref,
                     const SscTensorRef& out, Scale&& scale) {
  const uint64_t h = ctx.cfg.hidden, k = ctx.cfg.topk;
  if (ret.slot == ssc::kNoSlot || !FullCols(ctx, ret) || ret.cols != h || rows_ref.slot != ssc::kSlotTokenRows ||
      !FullCols(ctx, rows_ref) || !FullCols(ctx, out) || out.cols != h || !SameRows(rows_ref, out))
    return rt::kErrRegion;
  const uint32_t dtype = ctx.DType(ret.slot);
  const uint64_t es = DTypeBytes(dtype);
  const rt::TokenSpan span = rt::RoutedTokens(out.row_offset, out.rows, ctx.token_begin, ctx.token_end);
  for (uint64_t tok = span.begin; tok < span.end; ++tok) {
    float* acc = s.out;
    std::memset(acc, 0, h * sizeof(float));
    for (uint32_t j = 0; j < k; ++j) {
      uint64_t row;
      if (!TokenRow(ctx, tok, j, &row)) return rt::kErrPlan;
      LoadF32(ctx.Slot(ret.slot) + row * h * es, dtype, h, s.a);
      const float w = scale(tok, j);
      for (uint64_t c = 0; c < h; ++c) acc[c] += w * s.a[c];
    }
    StoreF32(acc, ctx.DType(out.slot), h, ctx.Row(out.slot, tok));
  }
  return 0;
}

}  // namespace

int32_t RunCombineReduce(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const SscTensorRef& w = t.inputs[1];
  if (w.slot != ssc::kSlotTopkWeights || !SameRows(w, t.outputs[0])) return rt::kErrRegion;
  const float* weights = ctx.Slot<float>(ssc::kSlotTopkWeights);
  const uint64_t k = ctx.cfg.topk;
  return ReduceTokens(ctx, s, t.inputs[0], t.inputs[2], t.outputs[0],
                      [&](uint64_t tok, uint32_t j) { return weights[tok * k + j]; });
}

int32_t RunBwdCombineReduce(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  return ReduceTokens(ctx, s, t.inputs[0], t.inputs[1], t.outputs[0], [](uint64_t, uint32_t) { return 1.0f; });
}

int32_t RunTopkWeightGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const SscTensorRef& dy = t.inputs[0];
  const SscTensorRef& ret = t.inputs[1];
  const SscTensorRef& rows_ref = t.inputs[2];
  const SscTensorRef& out = t.outputs[0];
  const uint64_t h = ctx.cfg.hidden, k = ctx.cfg.topk;
  if (dy.slot != ssc::kSlotDy || !SameRows(dy, out) || ret.slot != ssc::kSlotRetY || !FullCols(ctx, ret) ||
      rows_ref.slot != ssc::kSlotTokenRows || !SameRows(rows_ref, out) || out.slot != ssc::kSlotDTopkWeights ||
      !FullCols(ctx, out))
    return rt::kErrRegion;
  const uint32_t dtype = ctx.DType(ret.slot);
  const uint64_t es = DTypeBytes(dtype);
  float* dw = ctx.Slot<float>(out.slot);
  const rt::TokenSpan span = rt::RoutedTokens(out.row_offset, out.rows, ctx.token_begin, ctx.token_end);
  for (uint64_t tok = span.begin; tok < span.end; ++tok) {
    LoadF32(ctx.Row(ssc::kSlotDy, tok), dtype, h, s.b);
    for (uint32_t j = 0; j < k; ++j) {
      uint64_t row;
      if (!TokenRow(ctx, tok, j, &row)) return rt::kErrPlan;
      LoadF32(ctx.Slot(ret.slot) + row * h * es, dtype, h, s.a);
      float dot = 0.0f;
      for (uint64_t c = 0; c < h; ++c) dot += s.a[c] * s.b[c];
      dw[tok * k + j] = dot;
    }
  }
  return 0;
}

namespace {

// A region RunAdd accepts: a local, contiguous, exact region of an activation-dtype slot, inside the slot.
bool PlainRegion(const RankContext& ctx, const SscTensorRef& r) {
  if (r.slot >= ssc::kSlotCount || ctx.layout->slots[r.slot].ndim == 0) return false;
  if ((r.flags & (ssc::kRefRemote | ssc::kRefRowsDynamic | ssc::kRefGather)) != 0 || r.rank != ctx.rank) return false;
  const uint32_t d = ctx.DType(r.slot);
  if (d != ssc::kFP32 && d != ssc::kFP16 && d != ssc::kBF16) return false;
  return uint64_t(r.row_offset) + r.rows <= ctx.Rows(r.slot) && uint64_t(r.col_offset) + r.cols <= ctx.Cols(r.slot);
}

inline uint8_t* RegionRow(const RankContext& ctx, const SscTensorRef& r, uint64_t i) {
  return ctx.Row(r.slot, r.row_offset + i) + uint64_t(r.col_offset) * DTypeBytes(ctx.DType(r.slot));
}

}  // namespace

int32_t RunAdd(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t) {
  const SscTensorRef& a = t.inputs[0];
  const SscTensorRef& b = t.inputs[1];
  const SscTensorRef& out = t.outputs[0];
  if (!PlainRegion(ctx, a) || !PlainRegion(ctx, b) || !PlainRegion(ctx, out) || a.rows != out.rows ||
      b.rows != out.rows || a.cols != out.cols || b.cols != out.cols)
    return rt::kErrRegion;
  const uint64_t n = out.cols;
  const uint32_t da = ctx.DType(a.slot), db = ctx.DType(b.slot), dout = ctx.DType(out.slot);
  const bool all_fp32 = da == ssc::kFP32 && db == ssc::kFP32 && dout == ssc::kFP32;
  for (uint64_t i = 0; i < out.rows; ++i) {
    const uint8_t* pa = RegionRow(ctx, a, i);
    const uint8_t* pb = RegionRow(ctx, b, i);
    uint8_t* po = RegionRow(ctx, out, i);
    if (all_fp32) {  // same fp32 math without the staging copies
      const float* fa = reinterpret_cast<const float*>(pa);
      const float* fb = reinterpret_cast<const float*>(pb);
      float* fo = reinterpret_cast<float*>(po);
      for (uint64_t c = 0; c < n; ++c) fo[c] = fa[c] + fb[c];
      continue;
    }
    LoadF32(pa, da, n, s.a);
    LoadF32(pb, db, n, s.b);
    for (uint64_t c = 0; c < n; ++c) s.out[c] = s.a[c] + s.b[c];
    StoreF32(s.out, dout, n, po);
  }
  return 0;
}

}  // namespace cpu
}  // namespace hpmoe
