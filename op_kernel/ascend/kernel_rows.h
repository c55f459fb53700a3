// Row semantics of the handlers (docs/design.md), kernel side: a row region of the ep*C receive-row space is
// visited per slot's valid rows and per local expert segment, from recv_counts. The counts were written by
// peers' DMA, so their cache lines are invalidated before the scalar reads; a negative count or one past
// the bucket is a corrupted exchange and fails the task (never a silent overrun).
#pragma once

#include "kernel_operator.h"

#include "../runtime/row_segments.h"
#include "../runtime/status.h"
#include "kernel_context.h"

namespace hpmoe {
namespace ascend {

// recv_counts[s][e] through a freshly invalidated cache line.
HPMOE_DEVICE int32_t RecvCount(const KernelContext& ctx, uint64_t s, uint64_t e) {
  AscendC::GlobalTensor<int32_t> counts;
  counts.SetGlobalBuffer(ctx.Slot<int32_t>(ssc::kSlotRecvCounts) + s * ctx.cfg().experts_per_rank + e);
  AscendC::DataCacheCleanAndInvalid<int32_t, AscendC::CacheLine::SINGLE_CACHE_LINE,
                                    AscendC::DcciDst::CACHELINE_OUT>(counts);
  return counts.GetValue(0);
}

// f(expert, row_begin, row_end) for each non-empty expert segment in [row0, row0 + rows), ascending; f returns
// 0 to go on (the shared walk, op_kernel/runtime/row_segments.h).
template <class F>
HPMOE_DEVICE int32_t ForEachExpertSegment(const KernelContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  return rt::ForEachExpertSegment(ctx.cfg(), [&ctx](uint64_t s, uint64_t e) { return RecvCount(ctx, s, e); },
                                  row0, rows, f);
}

// f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored).
template <class F>
HPMOE_DEVICE int32_t ForEachValidRange(const KernelContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  return rt::ForEachValidRange(ctx.cfg(), [&ctx](uint64_t s, uint64_t e) { return RecvCount(ctx, s, e); },
                               row0, rows, f);
}

}  // namespace ascend
}  // namespace hpmoe
