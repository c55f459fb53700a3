// AIC handlers: the grouped-GEMM tiles through the AscendC Matmul high-level API, used cube-only (the AIC
// runs the worker loop itself, so no AIV client and no message flags). K is whole and every tile spans the
// expert's full width (the SSC's tiling says so); a tile is cut into expert segments by recv_counts.
//   GMM:             out[rows] = in[rows] x W[e]         (GMM1: x W1 -> h;  GMM2: a W2 -> y_expert)
//   GMM_TRANS_B:     out[rows] = in[rows] x W[e]^T       (dA = dY W2^T;  dX = dH W1^T)
//   GMM_WEIGHT_GRAD: dW[e][block] = X_e[:, block]^T dY_e over slots 0..ep-1, rows ascending, fp32 output:
//                    the first segment overwrites, the rest accumulate (IterateAll enAtomic = 1) in order.
#pragma once

#include "kernel_operator.h"
#include "lib/matmul_intf.h"

#include "../runtime/status.h"
#include "kernel_context.h"
#include "kernel_rows.h"

namespace hpmoe {
namespace ascend {

constexpr uint32_t kZeroLineBytes = 4096;  // L1 block of zeros for a weight-gradient block with no rows

template <class T, class C>
using GroupedMatmul = AscendC::Matmul<AscendC::MatmulType<AscendC::TPosition::GM, AscendC::CubeFormat::ND, T>,
                                      AscendC::MatmulType<AscendC::TPosition::GM, AscendC::CubeFormat::ND, T>,
                                      AscendC::MatmulType<AscendC::TPosition::GM, AscendC::CubeFormat::ND, C>>;

template <class T>
HPMOE_DEVICE AscendC::GlobalTensor<T> Gm(__gm__ uint8_t* p) {
  AscendC::GlobalTensor<T> g;
  g.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(p));
  return g;
}

template <class T>
HPMOE_DEVICE int32_t CubeGmmTyped(const KernelContext& ctx, const ssc::SscTask& t, bool trans_b) {
  const ssc::SscTensorRef& in = t.inputs[0];
  const ssc::SscTensorRef& w = t.inputs[1];
  const ssc::SscTensorRef& out = t.outputs[0];
  if (w.slot != ssc::kSlotW1 && w.slot != ssc::kSlotW2) return rt::kErrRegion;
  const ssc::SscConfig& cfg = ctx.cfg();
  const uint32_t kw = w.slot == ssc::kSlotW1 ? cfg.hidden : cfg.inter;  // W is [E, kw, nw]
  const uint32_t nw = ctx.Cols(w.slot);
  const uint32_t k = trans_b ? nw : kw, n = trans_b ? kw : nw;
  if (in.slot >= ssc::kSlotCount || out.slot >= ssc::kSlotCount || in.col_offset != 0 || out.col_offset != 0 ||
      in.cols != k || out.cols != n || ctx.Cols(in.slot) != k || ctx.Cols(out.slot) != n ||
      in.row_offset != out.row_offset || in.rows != out.rows || ctx.DType(out.slot) != ctx.DType(in.slot))
    return rt::kErrRegion;
  GroupedMatmul<T, T> mm;
  mm.Init(nullptr);
  return ForEachExpertSegment(ctx, in.row_offset, in.rows, [&](uint32_t e, uint64_t r0, uint64_t r1) -> int32_t {
    mm.SetOrgShape(int32_t(r1 - r0), int32_t(n), int32_t(k));
    mm.SetSingleShape(int32_t(r1 - r0), int32_t(n), int32_t(k));
    mm.SetTensorA(Gm<T>(ctx.Row(in.slot, r0)), false);
    mm.SetTensorB(Gm<T>(ctx.Slot(w.slot) + uint64_t(e) * kw * nw * sizeof(T)), trans_b);
    mm.IterateAll(Gm<T>(ctx.Row(out.slot, r0)));
    mm.End();
    return 0;
  });
}

template <class T>
HPMOE_DEVICE int32_t CubeWeightGradTyped(const KernelContext& ctx, AscendC::TPipe& pipe,
                                         AscendC::TBuf<AscendC::TPosition::A1>& zeros, const ssc::SscTask& t) {
  const ssc::SscTensorRef& x = t.inputs[0];
  const ssc::SscTensorRef& dy = t.inputs[1];
  const ssc::SscTensorRef& out = t.outputs[0];
  if (out.slot != ssc::kSlotDW1 && out.slot != ssc::kSlotDW2) return rt::kErrRegion;
  const ssc::SscConfig& cfg = ctx.cfg();
  const uint64_t per_expert = out.slot == ssc::kSlotDW1 ? cfg.hidden : cfg.inter, n = ctx.Cols(out.slot);
  const uint64_t e = out.row_offset / per_expert, b0 = out.row_offset % per_expert, wg = out.rows;
  const uint64_t all_rows = uint64_t(cfg.ep) * cfg.recv_rows_per_src;
  if (x.slot >= ssc::kSlotCount || dy.slot >= ssc::kSlotCount || e >= cfg.experts_per_rank ||
      b0 + wg > per_expert || out.col_offset != 0 || out.cols != n || x.col_offset != b0 || x.cols != wg ||
      dy.col_offset != 0 || dy.cols != n || ctx.Cols(dy.slot) != n || x.row_offset != 0 || x.rows != all_rows ||
      dy.row_offset != 0 || dy.rows != all_rows || ctx.DType(out.slot) != ssc::kFP32)
    return rt::kErrRegion;
  __gm__ uint8_t* dw = ctx.Row(out.slot, out.row_offset);
  const uint64_t xe = ctx.ElemBytes(x.slot);
  GroupedMatmul<T, float> mm;
  mm.Init(nullptr);
  bool first = true;
  const int32_t err = ForEachExpertSegment(ctx, 0, all_rows, [&](uint32_t expert, uint64_t r0, uint64_t r1) -> int32_t {
    if (expert != e) return 0;
    // A = X[r0:r1, b0:b0+wg]^T: stored (r1-r0) x h, read transposed with leading dimension h.
    mm.SetOrgShape(int32_t(ctx.Cols(x.slot)), int32_t(n), int32_t(r1 - r0));
    mm.SetSingleShape(int32_t(wg), int32_t(n), int32_t(r1 - r0));
    mm.SetTensorA(Gm<T>(ctx.Row(x.slot, r0) + b0 * xe), true);
    mm.SetTensorB(Gm<T>(ctx.Row(dy.slot, r0)), false);
    mm.IterateAll(Gm<float>(dw), first ? 0 : 1);
    mm.End();
    first = false;
    return 0;
  });
  if (err != 0 || !first) return err;
  // Expert e received no rows at all: its gradient block is zero.
  AscendC::LocalTensor<uint8_t> z = zeros.Get<uint8_t>();
  AscendC::InitConstValue(z, AscendC::InitConstValueParams<uint8_t>{1, uint16_t(kZeroLineBytes / 32), 0, 0});
  AscendC::PipeBarrier<AscendC::PIPE_ALL>();
  const uint64_t bytes = wg * n * 4;
  for (uint64_t off = 0; off < bytes; off += kZeroLineBytes) {
    const uint32_t m = uint32_t(bytes - off < kZeroLineBytes ? bytes - off : kZeroLineBytes);
    AscendC::GlobalTensor<uint8_t> g = Gm<uint8_t>(dw + off);
    AscendC::DataCopyPad(g, z, AscendC::DataCopyExtParams{1, m, 0, 0, 0});
  }
  (void)pipe;
  return 0;
}

HPMOE_DEVICE int32_t CubeGmm(const KernelContext& ctx, const ssc::SscTask& t, bool trans_b) {
  switch (ctx.cfg().dtype) {
    case ssc::kFP32: return CubeGmmTyped<float>(ctx, t, trans_b);
    case ssc::kFP16: return CubeGmmTyped<AscendC::half>(ctx, t, trans_b);
    case ssc::kBF16: return CubeGmmTyped<AscendC::bfloat16_t>(ctx, t, trans_b);
    default: return rt::kErrRegion;
  }
}

HPMOE_DEVICE int32_t CubeWeightGrad(const KernelContext& ctx, AscendC::TPipe& pipe,
                                    AscendC::TBuf<AscendC::TPosition::A1>& zeros, const ssc::SscTask& t) {
  switch (ctx.cfg().dtype) {
    case ssc::kFP32: return CubeWeightGradTyped<float>(ctx, pipe, zeros, t);
    case ssc::kFP16: return CubeWeightGradTyped<AscendC::half>(ctx, pipe, zeros, t);
    case ssc::kBF16: return CubeWeightGradTyped<AscendC::bfloat16_t>(ctx, pipe, zeros, t);
    default: return rt::kErrRegion;
  }
}

}  // namespace ascend
}  // namespace hpmoe
