// Handler row semantics (docs/design.md), one walk for every backend: a row region of the ep*C receive-row
// space is intersected with each slot it touches; only the slot's valid rows are visited, per local expert
// segment: expert e's rows of slot s start at s*C plus the spans of experts e' < e, a span being
// recv_counts[s][e'] rows, or (kConfigExpertAligned) that rounded up to tile_m, so that every row tile holds
// one expert's rows and the pads between experts hold no data. Counts come from peers, so they are
// checked here: negative or past the bucket means a corrupted exchange, never a silent overrun. Backends differ
// only in how a count is read (plain load, acquire load, cache line invalidated first): `count_at(s, e)`.
#pragma once

#include "../ssc_layout.h"
#include "device.h"
#include "routing_plan.h"
#include "status.h"

namespace hpmoe {
namespace rt {

// Rows a segment of n rows takes in its slot: n, or under kConfigExpertAligned n rounded up to tile_m. In
// 32 bits (n <= C < 2^31, checked by the loader): a 64-bit division is a long call in device code.
HPMOE_DEVICE uint64_t SegmentSpan(const ssc::SscConfig& cfg, uint64_t n) {
  if (!(cfg.flags & ssc::kConfigExpertAligned)) return n;
  return AlignRows(uint32_t(n), cfg.tile_m);
}

// Calls f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), in
// ascending row order; f returns 0 to go on, else the error that ends the walk. Returns 0, kErrCounts or f's.
// count_at(s, e) is called for every local expert of each slot visited, e ascending, so a reader may keep
// state between calls (CUDA's loads 32 counts at a time).
template <class CountAt, class F>
HPMOE_DEVICE int32_t ForEachExpertSegment(const ssc::SscConfig& cfg, CountAt&& count_at, uint64_t row0,
                                          uint64_t rows, F&& f) {
  const uint64_t C = cfg.recv_rows_per_src, E = cfg.experts_per_rank;
  if (rows == 0) return 0;
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < cfg.ep; ++s) {
    uint64_t seg = s * C;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = count_at(s, e);
      if (n < 0 || seg + uint64_t(n) > (s + 1) * C) return kErrCounts;
      const uint64_t b = seg > row0 ? seg : row0;
      const uint64_t t = seg + n < end ? seg + n : end;
      seg += SegmentSpan(cfg, uint64_t(n));  // before the call: less state live across f (a GEMM tile on CUDA)
      if (b < t) {
        const int32_t err = f(uint32_t(e), b, t);
        if (err != 0) return err;
      }
    }
  }
  return 0;
}

// Calls f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored, so one
// range per slot; under kConfigExpertAligned one per expert segment, the pads between them skipped); f
// returns 0 to go on; count_at as for ForEachExpertSegment. Returns 0, kErrCounts or f's error.
template <class CountAt, class F>
HPMOE_DEVICE int32_t ForEachValidRange(const ssc::SscConfig& cfg, CountAt&& count_at, uint64_t row0, uint64_t rows,
                                       F&& f) {
  if (cfg.flags & ssc::kConfigExpertAligned)
    return ForEachExpertSegment(cfg, count_at, row0, rows, [&f](uint32_t, uint64_t b, uint64_t t) { return f(b, t); });
  const uint64_t C = cfg.recv_rows_per_src, E = cfg.experts_per_rank;
  if (rows == 0) return 0;
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < cfg.ep; ++s) {
    uint64_t valid = 0;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = count_at(s, e);
      if (n < 0) return kErrCounts;
      valid += uint64_t(n);
    }
    if (valid > C) return kErrCounts;
    const uint64_t b = s * C > row0 ? s * C : row0;
    const uint64_t t = s * C + valid < end ? s * C + valid : end;
    if (b < t) {
      const int32_t err = f(b, t);
      if (err != 0) return err;
    }
  }
  return 0;
}

}  // namespace rt
}  // namespace hpmoe
