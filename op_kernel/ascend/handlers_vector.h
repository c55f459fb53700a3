// AIV compute handlers in AscendC vector code: SwiGLU and its gradient, the weighted top-k reductions
// (combine, backward combine), the router-weight gradient, ADD. fp32 math, one rounding to the output dtype.
// Element order matches the CPU twin's handlers (op_kernel/cpu/handlers_compute.cpp) operation for
// operation, except the router-weight gradient's dot product (Mul + ReduceSum per chunk, then chunk sums).
#pragma once

#include "kernel_operator.h"

#include "../runtime/regions.h"
#include "../runtime/routing_plan.h"
#include "../runtime/status.h"
#include "kernel_context.h"
#include "kernel_rows.h"
#include "vector_io.h"

namespace hpmoe {
namespace ascend {

using rt::SameRows;
using ssc::SscTensorRef;

HPMOE_DEVICE bool FullCols(const KernelContext& ctx, const __gm__ SscTensorRef& r) {
  return r.slot < ssc::kSlotCount && r.col_offset == 0 && r.cols == ctx.Cols(r.slot);
}

// s = 1 / (1 + exp(-g)) into `s` (the twin's Sigmoid, instruction by instruction).
HPMOE_DEVICE void Sigmoid(const AscendC::LocalTensor<float>& s, const AscendC::LocalTensor<float>& g, uint32_t n) {
  AscendC::Muls(s, g, -1.0f, n);
  AscendC::Exp(s, s, n);
  AscendC::Adds(s, s, 1.0f, n);
  AscendC::Reciprocal(s, s, n);
}

HPMOE_DEVICE int32_t VecSwiglu(const KernelContext& ctx, const VectorBuffers& b, const __gm__ ssc::SscTask& t) {
  const __gm__ SscTensorRef& h = t.inputs[0];
  const __gm__ SscTensorRef& out = t.outputs[0];
  const uint32_t inter = ctx.cfg().inter;
  if (h.slot != ssc::kSlotH || !FullCols(ctx, h) || h.cols != 2 * inter || !FullCols(ctx, out) ||
      out.cols != inter || !SameRows(h, out))
    return rt::kErrRegion;
  const uint32_t hd = ctx.DType(h.slot), od = ctx.DType(out.slot), he = ctx.ElemBytes(h.slot);
  return ForEachValidRange(ctx, h.row_offset, h.rows, [&](uint64_t r0, uint64_t r1) -> int32_t {
    for (uint64_t r = r0; r < r1; ++r) {
      for (uint32_t c0 = 0; c0 < inter; c0 += kVecChunk) {
        const uint32_t n = inter - c0 < kVecChunk ? inter - c0 : kVecChunk;
        auto g = b.F(0), u = b.F(1), s = b.F(2);
        LoadF32(b, g, ctx.Row(h.slot, r) + uint64_t(c0) * he, hd, n);
        LoadF32(b, u, ctx.Row(h.slot, r) + uint64_t(inter + c0) * he, hd, n);
        Sigmoid(s, g, n);
        AscendC::Mul(s, g, s, n);  // g * sigmoid(g)
        AscendC::Mul(s, s, u, n);  // * up
        StoreF32(b, ctx.Row(out.slot, r) + uint64_t(c0) * ctx.ElemBytes(out.slot), s, od, n);
        Barrier();  // the next chunk's loads overwrite raw / s while MTE3 may still be reading them
      }
    }
    return 0;
  });
}

HPMOE_DEVICE int32_t VecSwigluGrad(const KernelContext& ctx, const VectorBuffers& b, const __gm__ ssc::SscTask& t) {
  const __gm__ SscTensorRef& da = t.inputs[0];
  const __gm__ SscTensorRef& h = t.inputs[1];
  const __gm__ SscTensorRef& out = t.outputs[0];
  const uint32_t inter = ctx.cfg().inter;
  if (da.slot == ssc::kNoSlot || h.slot != ssc::kSlotH || !FullCols(ctx, da) || da.cols != inter ||
      !FullCols(ctx, h) || !FullCols(ctx, out) || out.cols != 2 * inter || !SameRows(da, out) || !SameRows(h, out))
    return rt::kErrRegion;
  const uint32_t hd = ctx.DType(h.slot), dd = ctx.DType(da.slot), od = ctx.DType(out.slot);
  const uint32_t he = ctx.ElemBytes(h.slot), de = ctx.ElemBytes(da.slot), oe = ctx.ElemBytes(out.slot);
  return ForEachValidRange(ctx, out.row_offset, out.rows, [&](uint64_t r0, uint64_t r1) -> int32_t {
    for (uint64_t r = r0; r < r1; ++r) {
      for (uint32_t c0 = 0; c0 < inter; c0 += kVecChunk) {
        const uint32_t n = inter - c0 < kVecChunk ? inter - c0 : kVecChunk;
        auto g = b.F(0), u = b.F(1), d = b.F(2), s = b.F(3), x = b.F(4), y = b.F(5);
        LoadF32(b, g, ctx.Row(h.slot, r) + uint64_t(c0) * he, hd, n);
        LoadF32(b, u, ctx.Row(h.slot, r) + uint64_t(inter + c0) * he, hd, n);
        LoadF32(b, d, ctx.Row(da.slot, r) + uint64_t(c0) * de, dd, n);
        Sigmoid(s, g, n);
        AscendC::Mul(x, d, g, n);  // d_up = d * g * s
        AscendC::Mul(x, x, s, n);
        StoreF32(b, ctx.Row(out.slot, r) + uint64_t(inter + c0) * oe, x, od, n);
        Barrier();
        AscendC::Mul(x, d, u, n);  // d_gate = d * u * s * (1 + g * (1 - s))
        AscendC::Mul(x, x, s, n);
        AscendC::Muls(y, s, -1.0f, n);
        AscendC::Adds(y, y, 1.0f, n);
        AscendC::Duplicate(d, 1.0f, n);
        AscendC::MulAddDst(d, g, y, n);
        AscendC::Mul(x, x, d, n);
        StoreF32(b, ctx.Row(out.slot, r) + uint64_t(c0) * oe, x, od, n);
        Barrier();
      }
    }
    return 0;
  });
}

// token_rows[t][j], checked against the return buffers' rows.
HPMOE_DEVICE bool TokenRow(const KernelContext& ctx, uint64_t t, uint32_t j, uint64_t* row) {
  const int32_t v = ReadGm(ctx.Slot<int32_t>(ssc::kSlotTokenRows) + t * ctx.cfg().topk + j);
  if (v < 0 || uint64_t(v) >= uint64_t(ctx.cfg().ep) * ctx.cfg().recv_rows_per_src) return false;
  *row = uint64_t(v);
  return true;
}

// The tokens of a reduction task that this launch writes (KernelTiling::token_begin/end: a pass of the
// speculative bucket reduces only the tokens its plan routed).
HPMOE_DEVICE rt::TokenSpan RoutedTokens(const KernelContext& ctx, const __gm__ SscTensorRef& out) {
  return rt::RoutedTokens(out.row_offset, out.rows, ctx.tiling->token_begin, ctx.tiling->token_end);
}

// out[t] = sum_j w(t, j) * ret[token_rows[t][j]], j ascending, fp32 (Axpy per j).
HPMOE_DEVICE int32_t VecReduceTokens(const KernelContext& ctx, const VectorBuffers& b, const __gm__ SscTensorRef& ret,
                                     const __gm__ SscTensorRef& rows_ref, const __gm__ SscTensorRef& out, bool weighted) {
  const uint32_t h = ctx.cfg().hidden, k = ctx.cfg().topk;
  if (ret.slot == ssc::kNoSlot || !FullCols(ctx, ret) || ret.cols != h || rows_ref.slot != ssc::kSlotTokenRows ||
      !FullCols(ctx, rows_ref) || !FullCols(ctx, out) || out.cols != h || !SameRows(rows_ref, out))
    return rt::kErrRegion;
  const uint32_t rd = ctx.DType(ret.slot), re = ctx.ElemBytes(ret.slot);
  const __gm__ float* weights = ctx.Slot<float>(ssc::kSlotTopkWeights);
  const rt::TokenSpan span = RoutedTokens(ctx, out);
  for (uint64_t tok = span.begin; tok < span.end; ++tok) {
    for (uint32_t c0 = 0; c0 < h; c0 += kVecChunk) {
      const uint32_t n = h - c0 < kVecChunk ? h - c0 : kVecChunk;
      auto acc = b.F(0), v = b.F(1);
      AscendC::Duplicate(acc, 0.0f, n);
      for (uint32_t j = 0; j < k; ++j) {
        uint64_t row;
        if (!TokenRow(ctx, tok, j, &row)) return rt::kErrPlan;
        LoadF32(b, v, ctx.Row(ret.slot, row) + uint64_t(c0) * re, rd, n);
        const float w = weighted ? ReadGm(weights + tok * k + j) : 1.0f;
        AscendC::Axpy(acc, v, w, n);
        Barrier();
      }
      StoreF32(b, ctx.Row(out.slot, tok) + uint64_t(c0) * ctx.ElemBytes(out.slot), acc, ctx.DType(out.slot), n);
      Barrier();
    }
  }
  return 0;
}

HPMOE_DEVICE int32_t VecCombineReduce(const KernelContext& ctx, const VectorBuffers& b, const __gm__ ssc::SscTask& t) {
  if (t.inputs[1].slot != ssc::kSlotTopkWeights || !SameRows(t.inputs[1], t.outputs[0])) return rt::kErrRegion;
  return VecReduceTokens(ctx, b, t.inputs[0], t.inputs[2], t.outputs[0], true);
}

HPMOE_DEVICE int32_t VecBwdCombineReduce(const KernelContext& ctx, const VectorBuffers& b, const __gm__ ssc::SscTask& t) {
  return VecReduceTokens(ctx, b, t.inputs[0], t.inputs[1], t.outputs[0], false);
}

// d topk_weights[t, j] = <ret_y[token_rows[t, j]], dy[t]> in fp32.
HPMOE_DEVICE int32_t VecTopkWeightGrad(const KernelContext& ctx, const VectorBuffers& b, const __gm__ ssc::SscTask& t) {
  const __gm__ SscTensorRef& dy = t.inputs[0];
  const __gm__ SscTensorRef& ret = t.inputs[1];
  const __gm__ SscTensorRef& rows_ref = t.inputs[2];
  const __gm__ SscTensorRef& out = t.outputs[0];
  const uint32_t h = ctx.cfg().hidden, k = ctx.cfg().topk;
  if (dy.slot != ssc::kSlotDy || !SameRows(dy, out) || ret.slot != ssc::kSlotRetY || !FullCols(ctx, ret) ||
      rows_ref.slot != ssc::kSlotTokenRows || !SameRows(rows_ref, out) || out.slot != ssc::kSlotDTopkWeights ||
      !FullCols(ctx, out))
    return rt::kErrRegion;
  const uint32_t rd = ctx.DType(ret.slot), re = ctx.ElemBytes(ret.slot);
  const uint32_t yd = ctx.DType(dy.slot), ye = ctx.ElemBytes(dy.slot);
  auto a = b.F(0), g = b.F(1), work = b.F(2), part = b.F(3), dots = b.F(4);
  const rt::TokenSpan span = RoutedTokens(ctx, out);
  for (uint64_t tok = span.begin; tok < span.end; ++tok) {
    for (uint32_t j = 0; j < k; ++j) {
      uint64_t row;
      if (!TokenRow(ctx, tok, j, &row)) return rt::kErrPlan;
      float dot = 0.0f;
      for (uint32_t c0 = 0; c0 < h; c0 += kVecChunk) {
        const uint32_t n = h - c0 < kVecChunk ? h - c0 : kVecChunk;
        LoadF32(b, a, ctx.Row(ret.slot, row) + uint64_t(c0) * re, rd, n);
        LoadF32(b, g, ctx.Row(dy.slot, tok) + uint64_t(c0) * ye, yd, n);
        AscendC::Mul(a, a, g, n);
        AscendC::ReduceSum(part, a, work, n);
        Barrier();
        dot += part.GetValue(0);
      }
      dots.SetValue(j, dot);
    }
    Barrier();
    UbToGm(reinterpret_cast<__gm__ uint8_t*>(ctx.Slot<float>(out.slot) + tok * k), dots.ReinterpretCast<uint8_t>(),
           k * 4);
    Barrier();
  }
  return 0;
}

// out = in0 + in1 over three equal-shaped local regions (fp32 math, one rounding).
HPMOE_DEVICE int32_t VecAdd(const KernelContext& ctx, const VectorBuffers& b, const __gm__ ssc::SscTask& t) {
  const __gm__ SscTensorRef* r[3] = {&t.inputs[0], &t.inputs[1], &t.outputs[0]};
  for (const __gm__ SscTensorRef* x : r) {
    if (x->slot >= ssc::kSlotCount || (x->flags & (ssc::kRefRemote | ssc::kRefRowsDynamic | ssc::kRefGather)) != 0 ||
        x->rank != ctx.tiling->rank || x->rows != r[2]->rows || x->cols != r[2]->cols ||
        uint64_t(x->col_offset) + x->cols > ctx.Cols(x->slot) || ctx.DType(x->slot) == ssc::kINT32)
      return rt::kErrRegion;
  }
  for (uint32_t i = 0; i < r[2]->rows; ++i) {
    for (uint32_t c0 = 0; c0 < r[2]->cols; c0 += kVecChunk) {
      const uint32_t n = r[2]->cols - c0 < kVecChunk ? r[2]->cols - c0 : kVecChunk;
      auto x = b.F(0), y = b.F(1);
      auto at = [&](const __gm__ SscTensorRef& q) {
        return ctx.Row(q.slot, uint64_t(q.row_offset) + i) + uint64_t(q.col_offset + c0) * ctx.ElemBytes(q.slot);
      };
      LoadF32(b, x, at(*r[0]), ctx.DType(r[0]->slot), n);
      LoadF32(b, y, at(*r[1]), ctx.DType(r[1]->slot), n);
      AscendC::Add(x, x, y, n);
      StoreF32(b, at(*r[2]), x, ctx.DType(r[2]->slot), n);
      Barrier();
    }
  }
  return 0;
}

}  // namespace ascend
}  // namespace hpmoe
