// The shared row walk (op_kernel/runtime/row_segments.h) over the CPU twin's heap: counts are plain loads (the
// worker loop's acquire wait already ordered them), and the handlers' visitors cannot fail.
#pragma once

#include <cstdint>

#include "../runtime/row_segments.h"
#include "rank_context.h"

namespace hpmoe {
namespace cpu {

inline auto RecvCountReader(const RankContext& ctx) {
  const int32_t* counts = ctx.Slot<int32_t>(ssc::kSlotRecvCounts);
  const uint64_t E = ctx.cfg.experts_per_rank;
  return [counts, E](uint64_t s, uint64_t e) { return counts[s * E + e]; };
}

// Calls f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), in
// ascending row order. Returns 0 or kErrCounts.
template <class F>
int32_t ForEachExpertSegment(const RankContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  return rt::ForEachExpertSegment(ctx.cfg, RecvCountReader(ctx), row0, rows,
                                  [&f](uint32_t e, uint64_t b, uint64_t t) { f(e, b, t); return int32_t(0); });
}

// Calls f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored).
template <class F>
int32_t ForEachValidRange(const RankContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  return rt::ForEachValidRange(ctx.cfg, RecvCountReader(ctx), row0, rows,
                               [&f](uint64_t b, uint64_t t) { f(b, t); return int32_t(0); });
}

}  // namespace cpu
}  // namespace hpmoe
