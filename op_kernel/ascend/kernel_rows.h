// Row semantics of the handlers (docs/design.md), kernel side: a row region of the ep*C receive-row space is
// visited per slot's valid rows and per local expert segment, from recv_counts. The counts were written by
// peers' DMA, so their cache lines are invalidated before the scalar reads; a negative count or one past
// the bucket is a corrupted exchange and fails the task (never a silent overrun).
#pragma once

#include "kernel_operator.h"

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

// f(expert, row_begin, row_end) for each non-empty expert segment in [row0, row0 + rows), ascending.
template <class F>
HPMOE_DEVICE int32_t ForEachExpertSegment(const KernelContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = ctx.cfg().recv_rows_per_src, E = ctx.cfg().experts_per_rank;
  if (rows == 0) return 0;
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < ctx.cfg().ep; ++s) {
    uint64_t seg = s * C;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = RecvCount(ctx, s, e);
      if (n < 0 || seg + uint64_t(n) > (s + 1) * C) return rt::kErrCounts;
      const uint64_t b = seg > row0 ? seg : row0;
      const uint64_t t = seg + n < end ? seg + n : end;
      if (b < t) {
        const int32_t err = f(uint32_t(e), b, t);
        if (err != 0) return err;
      }
      seg += uint64_t(n);
    }
  }
  return 0;
}

// f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored).
template <class F>
HPMOE_DEVICE int32_t ForEachValidRange(const KernelContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = ctx.cfg().recv_rows_per_src, E = ctx.cfg().experts_per_rank;
  if (rows == 0) return 0;
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < ctx.cfg().ep; ++s) {
    uint64_t valid = 0;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = RecvCount(ctx, s, e);
      if (n < 0) return rt::kErrCounts;
      valid += uint64_t(n);
    }
    if (valid > C) return rt::kErrCounts;
    const uint64_t b = s * C > row0 ? s * C : row0;
    const uint64_t t = s * C + valid < end ? s * C + valid : end;
    if (b < t) {
      const int32_t err = f(b, t);
      if (err != 0) return err;
    }
  }
  return 0;
}

}  // namespace ascend
}  // namespace hpmoe
