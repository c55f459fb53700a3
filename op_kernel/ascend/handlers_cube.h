// AIC handlers: the grouped-GEMM tiles through the AscendC Matmul high-level API, used cube-only (the AIC
// runs the worker loop itself, so no AIV client and no message flags). K is whole and every tile spans the
// expert's full width (the SSC's tiling says so); a tile is cut into expert segments by recv_counts.
//   GMM:             out[rows] = in[rows] x W[e]         (GMM1: x W1 -> h;  GMM2: a W2 -> y_expert)
//   GMM_TRANS_B:     out[rows] = in[rows] x W[e]^T       (dA = dY W2^T;  dX = dH W1^T)
//   GMM_WEIGHT_GRAD: dW[e][block] = X_e[:, block]^T dY_e over slots 0..ep-1, rows ascending, fp32 output:
//                    the first segment overwrites, the rest accumulate (IterateAll enAtomic = 1) in order.
// Only the AIC build instantiates this file's code (AscendHandlers calls it under ASCEND_IS_AIC).
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

HPMOE_DEVICE TCubeTiling ToCubeTiling(const GemmTiling& g) {
  TCubeTiling t{};
  t.usedCoreNum = g.usedCoreNum, t.M = g.M, t.N = g.N, t.Ka = g.Ka, t.Kb = g.Kb;
  t.singleCoreM = g.singleCoreM, t.singleCoreN = g.singleCoreN, t.singleCoreK = g.singleCoreK;
  t.baseM = g.baseM, t.baseN = g.baseN, t.baseK = g.baseK, t.depthA1 = g.depthA1, t.depthB1 = g.depthB1;
  t.stepM = g.stepM, t.stepN = g.stepN, t.isBias = g.isBias, t.transLength = g.transLength;
  t.iterateOrder = g.iterateOrder, t.stepKa = g.stepKa, t.stepKb = g.stepKb;
  t.dbL0A = g.dbL0A, t.dbL0B = g.dbL0B, t.dbL0C = g.dbL0C;
  return t;
}

// The AIC's Matmul objects for activation type T: created once per core, each Init'ed once with its GEMM
// kind's tiling (only the kinds of this launch's direction, so their L1 queues fit together).
template <class T>
class CubeUnit {
 public:
  HPMOE_DEVICE void Init(const KernelContext& ctx, AscendC::TPipe& pipe) {
    pipe.InitBuffer(zeros_, kZeroLineBytes);
    const bool fwd = ctx.tiling->direction == ssc::kForward;
    for (uint32_t k = 0; k < kGemmDW1; ++k) {
      if ((k == kGemmUp || k == kGemmDown) != fwd) continue;
      const TCubeTiling t = ToCubeTiling(ctx.tiling->gemm[k]);
      mm_[k].Init(&t, &pipe);
    }
    if (!fwd) {
      for (uint32_t k = 0; k < 2; ++k) {
        const TCubeTiling t = ToCubeTiling(ctx.tiling->gemm[kGemmDW1 + k]);
        wgrad_[k].Init(&t, &pipe);
      }
    }
  }

  HPMOE_DEVICE int32_t Gmm(const KernelContext& ctx, const __gm__ ssc::SscTask& t, bool trans_b) {
    const __gm__ ssc::SscTensorRef& in = t.inputs[0];
    const __gm__ ssc::SscTensorRef& w = t.inputs[1];
    const __gm__ ssc::SscTensorRef& out = t.outputs[0];
    if (w.slot != ssc::kSlotW1 && w.slot != ssc::kSlotW2) return rt::kErrRegion;
    const ssc::SscConfig& cfg = ctx.cfg();
    const uint32_t kw = w.slot == ssc::kSlotW1 ? cfg.hidden : cfg.inter;  // W is [E, kw, nw]
    const uint32_t nw = ctx.Cols(w.slot);
    const uint32_t k = trans_b ? nw : kw, n = trans_b ? kw : nw;
    if (in.slot >= ssc::kSlotCount || out.slot >= ssc::kSlotCount || in.col_offset != 0 || out.col_offset != 0 ||
        in.cols != k || out.cols != n || ctx.Cols(in.slot) != k || ctx.Cols(out.slot) != n ||
        in.row_offset != out.row_offset || in.rows != out.rows || ctx.DType(out.slot) != ctx.DType(in.slot))
      return rt::kErrRegion;
    const uint32_t kind = trans_b ? (w.slot == ssc::kSlotW2 ? kGemmDA : kGemmDX) : (w.slot == ssc::kSlotW1 ? kGemmUp : kGemmDown);
    if ((kind == kGemmUp || kind == kGemmDown) != (ctx.tiling->direction == ssc::kForward)) return rt::kErrRegion;
    GroupedMatmul<T, T>& mm = mm_[kind];
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

  HPMOE_DEVICE int32_t WeightGrad(const KernelContext& ctx, const __gm__ ssc::SscTask& t) {
    const __gm__ ssc::SscTensorRef& x = t.inputs[0];
    const __gm__ ssc::SscTensorRef& dy = t.inputs[1];
    const __gm__ ssc::SscTensorRef& out = t.outputs[0];
    if (out.slot != ssc::kSlotDW1 && out.slot != ssc::kSlotDW2) return rt::kErrRegion;
    const ssc::SscConfig& cfg = ctx.cfg();
    const uint64_t per_expert = out.slot == ssc::kSlotDW1 ? cfg.hidden : cfg.inter, n = ctx.Cols(out.slot);
    const uint64_t e = out.row_offset / per_expert, b0 = out.row_offset % per_expert, wg = out.rows;
    const uint64_t all_rows = uint64_t(cfg.ep) * cfg.recv_rows_per_src;
    if (x.slot >= ssc::kSlotCount || dy.slot >= ssc::kSlotCount || e >= cfg.experts_per_rank ||
        b0 + wg > per_expert || out.col_offset != 0 || out.cols != n || x.col_offset != b0 || x.cols != wg ||
        dy.col_offset != 0 || dy.cols != n || ctx.Cols(dy.slot) != n || x.row_offset != 0 || x.rows != all_rows ||
        dy.row_offset != 0 || dy.rows != all_rows || ctx.DType(out.slot) != ssc::kFP32 ||
        ctx.tiling->direction != ssc::kBackward)
      return rt::kErrRegion;
    __gm__ uint8_t* dw = ctx.Row(out.slot, out.row_offset);
    const uint64_t xe = ctx.ElemBytes(x.slot);
    GroupedMatmul<T, float>& mm = wgrad_[out.slot == ssc::kSlotDW1 ? 0 : 1];
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
    return ZeroBlock(dw, wg * n * 4);
  }

 private:
  // Expert e received no rows at all: its gradient block is zero. An L1 block of zeros (InitConstValue,
  // 16-bit: the documented types) goes to GM by DataCopy (A1 -> GM, the 910B path); the host checked that
  // every block is a whole number of 32-byte blocks.
  HPMOE_DEVICE int32_t ZeroBlock(__gm__ uint8_t* dw, uint64_t bytes) {
    if (bytes % 32 != 0) return rt::kErrRegion;
    AscendC::LocalTensor<uint16_t> z = zeros_.template Get<uint16_t>();
    AscendC::InitConstValue(z, AscendC::InitConstValueParams<uint16_t>{1, uint16_t(kZeroLineBytes / 32), 0, 0});
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();
    for (uint64_t off = 0; off < bytes; off += kZeroLineBytes) {
      const uint32_t m = uint32_t(bytes - off < kZeroLineBytes ? bytes - off : kZeroLineBytes);
      AscendC::GlobalTensor<uint16_t> g = Gm<uint16_t>(dw + off);
      AscendC::DataCopy(g, z, m / 2);
    }
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();
    return 0;
  }

  GroupedMatmul<T, T> mm_[kGemmDW1];     // kGemmUp .. kGemmDX
  GroupedMatmul<T, float> wgrad_[2];     // kGemmDW1, kGemmDW2
  AscendC::TBuf<AscendC::TPosition::A1> zeros_;
};

}  // namespace ascend
}  // namespace hpmoe
