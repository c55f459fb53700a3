// The receive-row walks of op_kernel/runtime/row_segments.h (the same segments, in the same order, the same
// kErrCounts on a corrupted count) with this backend's count reads: recv_counts are written by peers' puts, so
// they are read through L2 (LoadI32), never a stale L1 line. An L2 round trip per local expert, serially, is
// what a walk must not cost: ForEachExpertSegment loads 32 counts per warp load and steps by shuffles, and the
// weight gradient looks its expert's rows up once per task (ExpertRowsPerSlot); at 128 local experts
// (Qwen3-235B-A22B) the per-tile walk had been most of a weight-gradient tile. Every thread of the block
// computes the same segments (uniform control flow; the handlers are block-wide, so every warp is whole).
// The handlers' bodies return nothing: a walk ends early only on corrupted counts.
#pragma once

#include "../runtime/row_segments.h"
#include "../runtime/status.h"
#include "device_rank.cuh"
#include "dtype.cuh"

namespace hpmoe {
namespace cuda {

constexpr unsigned kFullWarp = 0xffffffffu;
__device__ __forceinline__ const int32_t* SlotCounts(const DeviceRank& d, uint64_t s) {
  return d.Slot<int32_t>(ssc::kSlotRecvCounts) + s * d.cfg.experts_per_rank;
}

// f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), ascending.
// The walk itself is serial (few live registers: it wraps the GEMM tiles), but lane e % 32 loads count e once
// per 32 experts, so each step is a shuffle, not an L2 round trip.
template <class F>
__device__ int32_t ForEachExpertSegment(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = d.cfg.recv_rows_per_src, E = d.cfg.experts_per_rank;
  if (rows == 0) return 0;
  const uint64_t end = row0 + rows;
  const uint32_t lane = threadIdx.x & 31;
  for (uint64_t s = row0 / C; s * C < end && s < d.cfg.ep; ++s) {
    const int32_t* counts = SlotCounts(d, s);
    uint64_t seg = s * C;
    int32_t mine = 0;
    for (uint64_t e = 0; e < E; ++e) {
      if (e % 32 == 0) mine = e + lane < E ? LoadI32(counts + e + lane) : 0;
      const int32_t n = __shfl_sync(kFullWarp, mine, int(e % 32));
      if (n < 0 || seg + uint64_t(n) > (s + 1) * C) return rt::kErrCounts;
      const uint64_t b = seg > row0 ? seg : row0;
      const uint64_t t = seg + n < end ? seg + n : end;
      seg += rt::SegmentSpan(d.cfg, uint64_t(n));  // before the call: less live across the GEMM tiles in f
      if (b < t) f(uint32_t(e), b, t);
    }
  }
  return 0;
}

// The rows of local expert e in every slot, [rows[2 s], rows[2 s + 1]) for s < ep (the spans of the experts
// below it, rt::SegmentSpan, then its count), with the walk's checks on every count: the weight gradient's K ranges, looked up once per task (its tiles each read them; walking all
// local experts per tile was most of a tile at 128 local experts, ncu source counters, Qwen3-235B-A22B).
// Warp-parallel (lane l sums the counts of experts l, l + 32, ...): every thread calls it and computes the
// same values, thread 0 stores them (`rows` is shared memory; the caller's barrier follows). Returns 0 or
// kErrCounts, the same on every thread.
__device__ __forceinline__ int32_t ExpertRowsPerSlot(const DeviceRank& d, uint64_t e, uint64_t* rows) {
  const uint64_t C = d.cfg.recv_rows_per_src, E = d.cfg.experts_per_rank;
  const uint32_t lane = threadIdx.x & 31;
  for (uint64_t s = 0; s < d.cfg.ep; ++s) {
    const int32_t* counts = SlotCounts(d, s);
    uint64_t below = 0, all = 0, own = 0;
    bool bad = false;
    for (uint64_t x = lane; x < E; x += 32) {
      const int32_t n = LoadI32(counts + x);
      bad |= n < 0;
      const uint64_t v = n < 0 ? 0 : uint64_t(n), span = rt::SegmentSpan(d.cfg, v);
      all += span;
      below += x < e ? span : 0;
      own += x == e ? v : 0;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      all += __shfl_xor_sync(kFullWarp, all, o);
      below += __shfl_xor_sync(kFullWarp, below, o);
      own += __shfl_xor_sync(kFullWarp, own, o);
    }
    if (__any_sync(kFullWarp, bad) || all > C) return rt::kErrCounts;
    if (threadIdx.x == 0) {
      rows[2 * s] = s * C + below;
      rows[2 * s + 1] = s * C + below + own;
    }
  }
  return 0;
}

// f(row_begin, row_end) for each slot's valid part of the region (expert boundaries ignored; under
// kConfigExpertAligned one range per expert segment). Once per task (the SwiGLU blocks, the combine puts): the
// shared walk as it is.
struct RecvCountReader {
  const int32_t* counts;
  uint64_t experts;
  __device__ int32_t operator()(uint64_t slot, uint64_t expert) const { return LoadI32(counts + slot * experts + expert); }
};

template <class F>
__device__ int32_t ForEachValidRange(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  const RecvCountReader counts{d.Slot<int32_t>(ssc::kSlotRecvCounts), d.cfg.experts_per_rank};
  return rt::ForEachValidRange(d.cfg, counts, row0, rows, [&](uint64_t b, uint64_t t) {
    f(b, t);
    return int32_t(0);
  });
}

}  // namespace cuda
}  // namespace hpmoe
