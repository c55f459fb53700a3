// AIV put handlers: ENTRY_SIGNAL, COUNT_PUT, DISPATCH_PUT / BWD_DISPATCH_PUT (gather through the send_rows
// plan, payload straight into the expert rank's receive slot), COMBINE_PUT. Each ends in put_mem_signal:
// payload DMA, PipeBarrier<PIPE_ALL>, then the atomic counter add on the destination (AscendSync).
#pragma once

#include "kernel_operator.h"

#include "../runtime/program.h"
#include "../runtime/routing_plan.h"
#include "../runtime/status.h"
#include "ascend_sync.h"
#include "handlers_vector.h"
#include "kernel_rows.h"
#include "vector_io.h"

namespace hpmoe {
namespace ascend {

HPMOE_DEVICE int32_t PutEntrySignal(const KernelContext& ctx, const VectorBuffers& b, AscendSync& sync,
                                    const rt::TaskCall& c) {
  const __gm__ SscTensorRef& out = c.task->outputs[0];
  if (out.slot != ssc::kSlotPeerReady || out.rows != 1 || out.cols != 1) return rt::kErrRegion;
  AscendC::LocalTensor<int32_t> v = b.F(0).ReinterpretCast<int32_t>();
  v.SetValue(0, int32_t(c.invocation));  // informational payload; the counter carries the protocol
  Barrier();
  __gm__ int32_t* dst = ctx.Slot<int32_t>(out.slot) + uint64_t(out.row_offset) * ctx.Cols(out.slot) + out.col_offset;
  UbToGm(ctx.Remote(dst, out.rank), v.ReinterpretCast<uint8_t>(), 4);
  sync.PutMemSignal(nullptr, c.signal_rank, nullptr, 0, c.signal_event, 1);
  return 0;
}

HPMOE_DEVICE int32_t PutCounts(const KernelContext& ctx, AscendSync& sync, const rt::TaskCall& c) {
  const __gm__ SscTensorRef& in = c.task->inputs[0];
  const __gm__ SscTensorRef& out = c.task->outputs[0];
  if (in.slot != ssc::kSlotSendCounts || out.slot != ssc::kSlotRecvCounts || in.rows != 1 || out.rows != 1 ||
      in.cols != out.cols || out.row_offset != ctx.tiling->rank)
    return rt::kErrRegion;
  const __gm__ int32_t* src = ctx.Slot<int32_t>(in.slot) + uint64_t(in.row_offset) * ctx.Cols(in.slot) + in.col_offset;
  __gm__ int32_t* dst = ctx.Slot<int32_t>(out.slot) + uint64_t(out.row_offset) * ctx.Cols(out.slot) + out.col_offset;
  sync.PutMemSignal(src, out.rank, dst, uint64_t(in.cols) * 4, c.signal_event, 1);
  return 0;
}

// Forward: x rows; backward: topk_weights[t, j] * dy[t] rows (Muls in fp32, one rounding).
HPMOE_DEVICE int32_t PutDispatch(const KernelContext& ctx, const VectorBuffers& b, AscendSync& sync,
                                 const rt::TaskCall& c, bool backward) {
  const __gm__ ssc::SscTask& t = *c.task;
  const __gm__ SscTensorRef& rows_ref = t.inputs[backward ? 2 : 1];
  const __gm__ SscTensorRef& out = t.outputs[0];
  const uint32_t src_slot = backward ? ssc::kSlotDy : ssc::kSlotX;
  const uint32_t dst_slot = backward ? ssc::kSlotRecvDy : ssc::kSlotRecvX;
  const uint64_t C = ctx.cfg().recv_rows_per_src, h = ctx.cfg().hidden, k = ctx.cfg().topk;
  if (t.inputs[0].slot != src_slot || rows_ref.slot != ssc::kSlotSendRows || rows_ref.rows != 1 ||
      out.slot != dst_slot || out.rank != rows_ref.row_offset || out.rows != rows_ref.cols || out.col_offset != 0 ||
      out.cols != h || out.row_offset != ctx.tiling->rank * C + rows_ref.col_offset)
    return rt::kErrRegion;
  const __gm__ int32_t* plan = ctx.Slot<int32_t>(ssc::kSlotSendRows) + rows_ref.row_offset * C + rows_ref.col_offset;
  // Rows up to the chunk's last valid one; pads (between experts, kConfigExpertAligned) are skipped.
  const bool aligned = (ctx.cfg().flags & ssc::kConfigExpertAligned) != 0;
  const int64_t rows = rt::PlanChunkRows([plan](uint64_t i) { return ReadGm(plan + i); }, rows_ref.cols,
                                         uint64_t(ctx.cfg().tokens) * k, aligned);
  if (rows < 0) return rt::kErrPlan;
  const uint32_t n = uint32_t(rows);
  const uint32_t dtype = ctx.cfg().dtype, es = ctx.ElemBytes(src_slot);
  const __gm__ float* weights = ctx.Slot<float>(ssc::kSlotTopkWeights);
  __gm__ uint8_t* remote = ctx.Remote(ctx.Row(dst_slot, out.row_offset), out.rank);
  for (uint32_t i = 0; i < n; ++i) {
    if (ReadGm(plan + i) == -1) continue;  // a pad between experts
    const uint64_t tk = uint64_t(ReadGm(plan + i));
    const __gm__ uint8_t* src = ctx.Row(src_slot, tk / k);
    __gm__ uint8_t* dst = remote + uint64_t(i) * h * es;
    if (!backward) {
      for (uint64_t off = 0; off < h * es; off += kCopyChunkBytes)
        sync.CopyChunk(dst + off, src + off, uint32_t(h * es - off < kCopyChunkBytes ? h * es - off : kCopyChunkBytes));
      continue;
    }
    const float w = ReadGm(weights + tk);
    for (uint32_t c0 = 0; c0 < h; c0 += kVecChunk) {
      const uint32_t m = uint32_t(h) - c0 < kVecChunk ? uint32_t(h) - c0 : kVecChunk;
      auto v = b.F(0);
      LoadF32(b, v, src + uint64_t(c0) * es, dtype, m);
      AscendC::Muls(v, v, w, m);
      StoreF32(b, dst + uint64_t(c0) * es, v, dtype, m);
      Barrier();
    }
  }
  sync.PutMemSignal(nullptr, c.signal_rank, nullptr, 0, c.signal_event, 1);  // barrier, then the signal
  return 0;
}

// The region's rows up to its last valid one back to the source rank's return slot (a prefix of a row tile;
// under kConfigExpertAligned a larger region's pads ride along, never read by the combine).
HPMOE_DEVICE int32_t PutCombine(const KernelContext& ctx, AscendSync& sync, const rt::TaskCall& c) {
  const __gm__ SscTensorRef& in = c.task->inputs[0];
  const __gm__ SscTensorRef& out = c.task->outputs[0];
  const uint64_t C = ctx.cfg().recv_rows_per_src;
  const uint64_t s = in.row_offset / C;
  if (in.slot == ssc::kNoSlot || out.slot == ssc::kNoSlot || in.rows == 0 || (in.row_offset + in.rows - 1) / C != s ||
      out.rank != s || out.rows != in.rows || out.row_offset != ctx.tiling->rank * C + in.row_offset % C ||
      in.col_offset != 0 || out.col_offset != 0 || in.cols != ctx.Cols(in.slot) || out.cols != in.cols ||
      ctx.RowBytes(in.slot) != ctx.RowBytes(out.slot))
    return rt::kErrRegion;
  uint64_t valid_end = in.row_offset;
  const int32_t err = ForEachValidRange(ctx, in.row_offset, in.rows, [&](uint64_t, uint64_t r1) -> int32_t {
    valid_end = r1;
    return 0;
  });
  if (err != 0) return err;
  const uint64_t n = valid_end - in.row_offset;
  sync.PutMemSignal(ctx.Row(in.slot, in.row_offset), out.rank, ctx.Row(out.slot, out.row_offset),
                    n * ctx.RowBytes(in.slot), c.signal_event, 1);
  return 0;
}

}  // namespace ascend
}  // namespace hpmoe
