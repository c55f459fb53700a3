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

struct RowSegment {
  uint32_t e;
  uint64_t r0, r1;
};

// The first non-empty expert segment inside [row0, row0 + rows) that starts at or after row `from` and whose
// expert `keep` accepts; r0 == r1 when there is none. *err: 0 or kErrCounts.
template <class Keep>
__device__ RowSegment SegmentFrom(const DeviceRank& d, uint64_t row0, uint64_t rows, uint64_t from, Keep&& keep,
                                  int32_t* err) {
  constexpr int32_t kFound = -1;  // ends the walk; not an error code
  RowSegment found{0, 0, 0};
  const int32_t st = rt::ForEachExpertSegment(d.cfg, RecvCounts(d), row0, rows, [&](uint32_t e, uint64_t b, uint64_t t) {
    if (b < from || !keep(e)) return int32_t(0);
    found = RowSegment{e, b, t};
    return kFound;
  });
  *err = st == kFound ? 0 : st;
  return found;
}

// f(segment, the next kept segment or nullptr) for every non-empty expert segment inside [row0, row0 + rows)
// whose expert `keep` accepts, ascending, so that a GMM tile can start loading the next segment's operands
// (BlockGemmTma::Accumulate's `next`). f is called from one place: inlined twice, the tile's accumulators
// would move between registers inside the wgmma pipeline and ptxas would serialise it.
template <class Keep, class F>
__device__ int32_t ForEachSegmentWithNext(const DeviceRank& d, uint64_t row0, uint64_t rows, Keep&& keep, F&& f) {
  int32_t err = 0;
  RowSegment s = SegmentFrom(d, row0, rows, row0, keep, &err);
  while (err == 0 && s.r1 > s.r0) {
    const RowSegment next = SegmentFrom(d, row0, rows, s.r1, keep, &err);
    if (err != 0) break;
    f(s, next.r1 > next.r0 ? &next : static_cast<const RowSegment*>(nullptr));
    s = next;
  }
  return err;
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
