// Handler row semantics (docs/design.md): a row region of the ep*C receive-row space is intersected with
// each slot it touches; only the slot's valid rows [s*C, s*C + sum(recv_counts[s])) are read or written, and
// they are visited per local expert segment (recv_counts[s] prefix sums). Counts come from peers, so they
// are checked here: negative or past the bucket means a corrupted exchange, never a silent overrun.
#pragma once

#include <cstdint>

#include "../runtime/status.h"
#include "rank_context.h"

namespace hpmoe {
namespace cpu {

// Calls f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), in
// ascending row order. Returns 0 or kErrCounts.
template <class F>
int32_t ForEachExpertSegment(const RankContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = ctx.cfg.recv_rows_per_src, E = ctx.cfg.experts_per_rank;
  if (rows == 0) return 0;
  const int32_t* counts = ctx.Slot<int32_t>(ssc::kSlotRecvCounts);
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < ctx.cfg.ep; ++s) {
    uint64_t seg = s * C;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = counts[s * E + e];
      if (n < 0 || seg + uint64_t(n) > (s + 1) * C) return rt::kErrCounts;
      const uint64_t b = seg > row0 ? seg : row0;
      const uint64_t t = seg + n < end ? seg + n : end;
      if (b < t) f(uint32_t(e), b, t);
      seg += uint64_t(n);
    }
  }
  return 0;
}

// Calls f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored).
template <class F>
int32_t ForEachValidRange(const RankContext& ctx, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = ctx.cfg.recv_rows_per_src, E = ctx.cfg.experts_per_rank;
  if (rows == 0) return 0;
  const int32_t* counts = ctx.Slot<int32_t>(ssc::kSlotRecvCounts);
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < ctx.cfg.ep; ++s) {
    uint64_t valid = 0;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = counts[s * E + e];
      if (n < 0) return rt::kErrCounts;
      valid += uint64_t(n);
    }
    if (valid > C) return rt::kErrCounts;
    const uint64_t b = s * C > row0 ? s * C : row0;
    const uint64_t t = s * C + valid < end ? s * C + valid : end;
    if (b < t) f(b, t);
  }
  return 0;
}

}  // namespace cpu
}  // namespace hpmoe
