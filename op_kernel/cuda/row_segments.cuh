// Device twin of op_kernel/cpu/row_segments.h: a row region of the ep*C receive space, intersected with each
// slot's valid rows and split per local expert by the received counts. Every thread of the block computes
// the same segments (uniform control flow); counts come from peers, so they are checked before use.
#pragma once

#include "../runtime/status.h"
#include "device_rank.cuh"
#include "dtype.cuh"

namespace hpmoe {
namespace cuda {

// f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), ascending.
template <class F>
__device__ int32_t ForEachExpertSegment(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = d.cfg.recv_rows_per_src, E = d.cfg.experts_per_rank;
  if (rows == 0) return 0;
  const int32_t* counts = d.Slot<int32_t>(ssc::kSlotRecvCounts);
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < d.cfg.ep; ++s) {
    uint64_t seg = s * C;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = LoadI32(counts + s * E + e);
      if (n < 0 || seg + uint64_t(n) > (s + 1) * C) return rt::kErrCounts;
      const uint64_t b = seg > row0 ? seg : row0;
      const uint64_t t = seg + n < end ? seg + n : end;
      if (b < t) f(uint32_t(e), b, t);
      seg += uint64_t(n);
    }
  }
  return 0;
}

// f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored).
template <class F>
__device__ int32_t ForEachValidRange(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = d.cfg.recv_rows_per_src, E = d.cfg.experts_per_rank;
  if (rows == 0) return 0;
  const int32_t* counts = d.Slot<int32_t>(ssc::kSlotRecvCounts);
  const uint64_t end = row0 + rows;
  for (uint64_t s = row0 / C; s * C < end && s < d.cfg.ep; ++s) {
    uint64_t valid = 0;
    for (uint64_t e = 0; e < E; ++e) {
      const int32_t n = LoadI32(counts + s * E + e);
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

}  // namespace cuda
}  // namespace hpmoe
