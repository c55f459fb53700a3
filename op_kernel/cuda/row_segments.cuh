// The receive-row walks of op_kernel/runtime/row_segments.h with this backend's count reads: recv_counts are
// written by peers' puts, so they are read through L2 (LoadI32), never a stale L1 line. An L2 round trip per
// local expert, serially, is what a walk must not cost: the count reader loads 32 counts per warp load and
// steps by shuffles, and the weight gradient looks its expert's rows up once per task (ExpertRowsPerSlot); at
// 128 local experts (Qwen3-235B-A22B) the per-tile walk had been most of a weight-gradient tile. Every thread
// of the block computes the same segments (uniform control flow; the handlers are block-wide, so every warp is
// whole). The handlers' bodies return nothing: a walk ends early only on corrupted counts.
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

// rt::ForEachValidRange's count reader for one block: lane e % 32 loads count e once per 32 experts (the walk
// asks for every e in order), so each step is a shuffle, not an L2 round trip. Every lane of every warp calls it.
struct WarpCountReader {
  const DeviceRank& d;
  int32_t mine = 0;
  __device__ int32_t operator()(uint64_t s, uint64_t e) {
    const uint32_t lane = threadIdx.x & 31;
    if (e % 32 == 0) mine = e + lane < d.cfg.experts_per_rank ? LoadI32(SlotCounts(d, s) + e + lane) : 0;
    return __shfl_sync(kFullWarp, mine, int(e % 32));
  }
};

// f(expert, row_begin, row_end) for every non-empty expert segment inside [row0, row0 + rows), ascending: the
// segments, calls and checks of rt::ForEachExpertSegment (every count of each slot visited; the first bad one
// ends the walk after the segments before it), 32 experts at a time. Lane l holds expert c + l of a chunk, a
// warp scan of the spans places the chunk's segments, and only the experts whose segment meets the range reach
// f (by ballot, ascending). The walk one expert at a time kept its state across f, the GEMM tile, so each of
// its steps reloaded that state: a GMM task spent about 85k cycles outside its tiles at 128 local experts
// (Qwen3-235B-A22B, session 33's handler profile). Every warp computes the same values: f is called alike
// on every thread (the handlers are block-wide). f returns nothing: the walk ends early only on bad counts.
template <class F>
__device__ int32_t ForEachExpertSegment(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  const uint64_t C = d.cfg.recv_rows_per_src, E = d.cfg.experts_per_rank, end = row0 + rows;
  if (rows == 0) return 0;
  const uint32_t lane = threadIdx.x & 31;
  for (uint64_t s = row0 / C; s * C < end && s < d.cfg.ep; ++s) {
    const int32_t* counts = SlotCounts(d, s);
    uint64_t seg = s * C;  // where the chunk's first segment starts
    for (uint64_t c = 0; c < E; c += 32) {
      const bool live = c + lane < E;
      const int32_t n = live ? LoadI32(counts + c + lane) : 0;
      const uint64_t span = n < 0 ? 0 : rt::SegmentSpan(d.cfg, uint64_t(n));
      uint64_t before = span;  // inclusive scan of the spans, then exclusive
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const uint64_t v = __shfl_up_sync(kFullWarp, before, o);
        if (lane >= uint32_t(o)) before += v;
      }
      const uint64_t chunk_span = __shfl_sync(kFullWarp, before, 31);
      before -= span;
      const uint64_t start = seg + before, stop = start + uint64_t(n < 0 ? 0 : n);
      const uint32_t bad = __ballot_sync(kFullWarp, live && (n < 0 || stop > (s + 1) * C));
      uint32_t hits =
          __ballot_sync(kFullWarp, live && n > 0 && (start > row0 ? start : row0) < (stop < end ? stop : end));
      if (bad != 0) hits &= (1u << (__ffs(bad) - 1)) - 1;  // the segments before the first bad count
      while (hits != 0) {
        const int l = __ffs(hits) - 1;
        hits &= hits - 1;
        const uint64_t b = __shfl_sync(kFullWarp, start, l), t = __shfl_sync(kFullWarp, stop, l);
        f(uint32_t(c + l), b > row0 ? b : row0, t < end ? t : end);
      }
      if (bad != 0) return rt::kErrCounts;
      seg += chunk_span;
    }
  }
  return 0;
}

// The rows of local expert e in every slot, [rows[2 s], rows[2 s + 1]) for s < ep (the spans of the experts
// below it, rt::SegmentSpan, then its count), with the walk's checks on every count: the weight gradient's K
// ranges, looked up once per task (its tiles each read them; walking all local experts per tile was most of a
// tile at 128 local experts, ncu source counters, Qwen3-235B-A22B).
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
// kConfigExpertAligned one range per expert segment). Once per task (the SwiGLU blocks, the combine puts).
template <class F>
__device__ int32_t ForEachValidRange(const DeviceRank& d, uint64_t row0, uint64_t rows, F&& f) {
  WarpCountReader counts{d};
  return rt::ForEachValidRange(d.cfg, counts, row0, rows, [&](uint64_t b, uint64_t t) {
    f(b, t);
    return int32_t(0);
  });
}

}  // namespace cuda
}  // namespace hpmoe
