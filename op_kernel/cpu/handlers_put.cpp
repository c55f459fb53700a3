#include "handlers_put.h"

#include <cstring>

#include "../runtime/routing_plan.h"
#include "../runtime/status.h"
#include "dtype.h"
#include "row_segments.h"

namespace hpmoe {
namespace cpu {

using ssc::SscTensorRef;

int32_t PlanEntrySignal(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t, uint32_t invocation,
                        PutPlan* plan) {
  const SscTensorRef& out = t.outputs[0];
  if (out.slot != ssc::kSlotPeerReady || out.rows != 1 || out.cols != 1) return rt::kErrRegion;
  int32_t* value = reinterpret_cast<int32_t*>(s.staging);
  *value = int32_t(invocation);  // the payload is informational; the counter carries the protocol
  plan->src = value;
  plan->dst_rank = out.rank;
  plan->dst = ctx.Slot<int32_t>(out.slot) + out.row_offset * ctx.Cols(out.slot) + out.col_offset;
  plan->bytes = sizeof(int32_t);
  return 0;
}

int32_t PlanCountPut(const RankContext& ctx, const ssc::SscTask& t, PutPlan* plan) {
  const SscTensorRef& in = t.inputs[0];
  const SscTensorRef& out = t.outputs[0];
  if (in.slot != ssc::kSlotSendCounts || out.slot != ssc::kSlotRecvCounts || in.rows != 1 || out.rows != 1 ||
      in.cols != out.cols || out.row_offset != ctx.rank)
    return rt::kErrRegion;
  plan->src = ctx.Slot<int32_t>(in.slot) + in.row_offset * ctx.Cols(in.slot) + in.col_offset;
  plan->dst_rank = out.rank;
  plan->dst = ctx.Slot<int32_t>(out.slot) + out.row_offset * ctx.Cols(out.slot) + out.col_offset;
  plan->bytes = uint64_t(in.cols) * sizeof(int32_t);
  return 0;
}

int32_t PlanDispatchPut(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t, bool backward,
                        PutPlan* plan) {
  const SscTensorRef& rows_ref = t.inputs[backward ? 2 : 1];
  const SscTensorRef& out = t.outputs[0];
  const uint32_t src_slot = backward ? ssc::kSlotDy : ssc::kSlotX;
  const uint32_t dst_slot = backward ? ssc::kSlotRecvDy : ssc::kSlotRecvX;
  const uint64_t C = ctx.cfg.recv_rows_per_src, h = ctx.cfg.hidden, k = ctx.cfg.topk;
  if (t.inputs[0].slot != src_slot || rows_ref.slot != ssc::kSlotSendRows || rows_ref.rows != 1 ||
      out.slot != dst_slot || out.rank != rows_ref.row_offset || out.rows != rows_ref.cols || out.col_offset != 0 ||
      out.cols != h || out.row_offset != ctx.rank * C + rows_ref.col_offset)
    return rt::kErrRegion;
  const int32_t* plan_rows = ctx.Slot<int32_t>(ssc::kSlotSendRows) + rows_ref.row_offset * C + rows_ref.col_offset;
  // Rows up to the chunk's last valid one, its pads (between experts, kConfigExpertAligned) zeroed.
  const bool aligned = (ctx.cfg.flags & ssc::kConfigExpertAligned) != 0;
  const int64_t rows = rt::PlanChunkRows([plan_rows](uint64_t i) { return plan_rows[i]; }, rows_ref.cols,
                                         uint64_t(ctx.cfg.tokens) * k, aligned);
  if (rows < 0) return rt::kErrPlan;
  const uint64_t n = uint64_t(rows);
  const uint32_t dtype = ctx.cfg.dtype;
  const uint64_t row_bytes = h * DTypeBytes(dtype);
  const float* weights = ctx.Slot<float>(ssc::kSlotTopkWeights);
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t* dst = s.staging + i * row_bytes;
    if (plan_rows[i] == -1) {
      std::memset(dst, 0, row_bytes);
      continue;
    }
    const uint64_t tk = uint64_t(plan_rows[i]);
    const uint8_t* src = ctx.Row(src_slot, tk / k);
    if (!backward) {
      std::memcpy(dst, src, row_bytes);
      continue;
    }
    float* row = reinterpret_cast<float*>(s.out);  // dY[t, j] = topk_weights[t, j] * dy[t]
    LoadF32(src, dtype, h, row);
    const float w = weights[tk];
    for (uint64_t c = 0; c < h; ++c) row[c] *= w;
    StoreF32(row, dtype, h, dst);
  }
  plan->src = s.staging;
  plan->dst_rank = out.rank;
  plan->dst = ctx.Row(dst_slot, out.row_offset);
  plan->bytes = n * row_bytes;
  return 0;
}

int32_t PlanCombinePut(const RankContext& ctx, const ssc::SscTask& t, PutPlan* plan) {
  const SscTensorRef& in = t.inputs[0];
  const SscTensorRef& out = t.outputs[0];
  const uint64_t C = ctx.cfg.recv_rows_per_src;
  const uint64_t s = in.row_offset / C;
  if (in.slot == ssc::kNoSlot || out.slot == ssc::kNoSlot || in.rows == 0 || (in.row_offset + in.rows - 1) / C != s ||
      out.rank != s || out.rows != in.rows || out.row_offset != ctx.rank * C + in.row_offset % C ||
      in.col_offset != 0 || out.col_offset != 0 || in.cols != ctx.Cols(in.slot) || out.cols != in.cols ||
      ctx.RowBytes(in.slot) != ctx.RowBytes(out.slot))
    return rt::kErrRegion;
  // Rows up to the region's last valid one (a prefix of a row tile: under kConfigExpertAligned the pads of a
  // larger region ride along, never read by the combine).
  uint64_t valid_end = in.row_offset;
  const int32_t err = ForEachValidRange(ctx, in.row_offset, in.rows, [&](uint64_t, uint64_t r1) { valid_end = r1; });
  if (err != 0) return err;
  const uint64_t n = valid_end - in.row_offset;
  plan->src = ctx.Row(in.slot, in.row_offset);
  plan->dst_rank = out.rank;
  plan->dst = ctx.Row(out.slot, out.row_offset);
  plan->bytes = n * ctx.RowBytes(in.slot);
  return 0;
}

}  // namespace cpu
}  // namespace hpmoe
