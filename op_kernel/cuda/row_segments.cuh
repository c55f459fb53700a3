// The shared receive-row walk (op_kernel/runtime/row_segments.h) with this backend's count reader: recv_counts
// are written by peers' puts, so they are read through L2 (LoadI32), never a stale L1 line. Every thread of
// the block computes the same segments (uniform control flow). The handlers' bodies return nothing: a walk
// ends early only on corrupted counts (rt::kErrCounts).
#pragma once

#include "../runtime/row_segments.h"
#include "device_rank.cuh"
#include "dtype.cuh"

namespace hpmoe {
namespace cuda {

struct RecvCountReader {
  const int32_t* counts;
  uint64_t experts;
  __device__ int32_t operator()(uint64_t slot, uint64_t expert) const { return LoadI32(counts + slot * experts + expert); }
};

__device__ __forceinline__ RecvCountReader RecvCounts(const DeviceRank& d) {
  return {d.Slot<int32_t>(ssc::kSlotRecvCounts), d.cfg.experts_per_rank};
}

// f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), ascending.
template <class F>
__device__ int32_t ForEachExpertSegment(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  return rt::ForEachExpertSegment(d.cfg, RecvCounts(d), row0, rows, [&](uint32_t e, uint64_t b, uint64_t t) {
    f(e, b, t);
    return int32_t(0);
  });
}

// f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored).
template <class F>
__device__ int32_t ForEachValidRange(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  return rt::ForEachValidRange(d.cfg, RecvCounts(d), row0, rows, [&](uint64_t b, uint64_t t) {
    f(b, t);
    return int32_t(0);
  });
}

}  // namespace cuda
}  // namespace hpmoe
