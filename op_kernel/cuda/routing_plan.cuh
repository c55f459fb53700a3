// The routing plan phase on the GPU (docs/design.md, "The routing plan phase"): the plan of
// op_kernel/runtime/routing_plan.h (the CPU twin's serial form, which this must equal bit for bit), built by
// two small kernels on the launch's stream before the persistent kernel, from topk_ids in device memory.
//   PlanCount: per chunk of kPlanChunk (t*k + j), a histogram over global experts -> counts[chunk][expert];
//              out-of-range ids lower DeviceRank::plan_bad. Entries outside the launch's tokens (a pass of
//              the speculative bucket) are not routed: their token_rows become -1.
//   PlanPlace: per (chunk, expert) block, the rows of that expert in that chunk, in ascending t*k + j: a
//              block-wide scan of per-thread match counts places each at its row in the destination slot
//              (first row of the expert in its slot + rows of the expert in earlier chunks + the scan); the
//              first row is the sum of the lower experts' rows, each rounded up to `align` (1, or tile_m under
//              kConfigExpertAligned, whose pads between experts the chunk-0 blocks fill with -1).
// Stable and deterministic (no atomics decide an order); rows past C are not written (plan_need > C
// fails the launch before any row moves).
#pragma once

#include "../runtime/routing_plan.h"
#include "device_rank.cuh"

namespace hpmoe {
namespace cuda {

constexpr uint32_t kPlanThreads = 256;
constexpr uint32_t kPlanPerThread = 8;
constexpr uint32_t kPlanChunk = kPlanThreads * kPlanPerThread;

struct PlanArgs {
  const int32_t* ids;  // [T * k]
  uint64_t n;          // T * k
  uint64_t begin, end; // the entries this launch routes: its tokens [token_begin, token_end) times k
  uint32_t ep, experts_per_rank, rows_per_src, chunks;
  uint32_t align;      // an expert's first row in its slot is a multiple of this (routing_plan.h PlanShape)
  uint32_t* counts;    // [chunks][ep * E]
  int32_t* send_counts;
  int32_t* send_rows;
  int32_t* token_rows;
  DeviceRank* rank;    // plan_bad, plan_need
};

// Dynamic shared memory: ep * E uint32.
__global__ void __launch_bounds__(kPlanThreads) PlanCount(const PlanArgs a) {
  extern __shared__ uint32_t hist[];
  if (a.rank->skip) return;  // a conditional launch that does nothing (launch_binding.cuh)
  const uint32_t experts = a.ep * a.experts_per_rank;
  for (uint32_t g = threadIdx.x; g < experts; g += blockDim.x) hist[g] = 0;
  __syncthreads();
  const uint64_t begin = uint64_t(blockIdx.x) * kPlanChunk;
  const uint64_t end = begin + kPlanChunk < a.n ? begin + kPlanChunk : a.n;
  for (uint64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    if (i < a.begin || i >= a.end) {
      a.token_rows[i] = -1;
      continue;
    }
    const int32_t g = a.ids[i];
    if (g < 0 || uint32_t(g) >= experts) atomicMin(&a.rank->plan_bad, (unsigned long long)i);
    else atomicAdd(&hist[g], 1u);
  }
  __syncthreads();
  for (uint32_t g = threadIdx.x; g < experts; g += blockDim.x) a.counts[uint64_t(blockIdx.x) * experts + g] = hist[g];
}

// Exclusive prefix of `v` over the block (kPlanThreads threads) and the block total.
__device__ __forceinline__ uint32_t BlockExclusiveScan(uint32_t v, uint32_t* total) {
  __shared__ uint32_t warp_sum[kPlanThreads / 32];
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  uint32_t incl = v;
  for (uint32_t o = 1; o < 32; o <<= 1) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  uint32_t before = 0, all = 0;
  for (uint32_t w = 0; w < kPlanThreads / 32; ++w) {
    if (w < warp) before += warp_sum[w];
    all += warp_sum[w];
  }
  __syncthreads();
  *total = all;
  return before + incl - v;
}

// Sum of `v` over the block (every thread gets it).
__device__ __forceinline__ uint64_t BlockSum(uint64_t v) {
  __shared__ uint64_t part[kPlanThreads / 32];
  for (uint32_t o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  uint64_t s = 0;
  for (uint32_t w = 0; w < kPlanThreads / 32; ++w) s += part[w];
  __syncthreads();
  return s;
}

// Grid: (chunks, ep * E).
__global__ void __launch_bounds__(kPlanThreads) PlanPlace(const PlanArgs a) {
  if (a.rank->skip) return;
  const uint32_t experts = a.ep * a.experts_per_rank, g = blockIdx.y, chunk = blockIdx.x;
  const uint32_t dest = g / a.experts_per_rank, local = g % a.experts_per_rank, C = a.rows_per_src;
  const uint32_t first = dest * a.experts_per_rank;
  // Rows of lower local experts of the same destination (all chunks, each expert's rounded up to `align`), of
  // this expert in earlier chunks, and of this expert overall.
  uint64_t lower = 0, earlier = 0, own = 0;
  for (uint32_t l = threadIdx.x; l < local; l += blockDim.x) {  // adjacent threads, adjacent experts
    uint64_t rows = 0;
    for (uint32_t c = 0; c < a.chunks; ++c) rows += a.counts[uint64_t(c) * experts + first + l];
    lower += rt::AlignRows(uint32_t(rows), a.align);  // rows <= T*k < 2^31
  }
  for (uint32_t c = threadIdx.x; c < a.chunks; c += blockDim.x) {
    const uint32_t v = a.counts[uint64_t(c) * experts + g];
    own += v;
    if (c < chunk) earlier += v;
  }
  lower = BlockSum(lower);
  earlier = BlockSum(earlier);
  own = BlockSum(own);
  if (chunk == 0) {
    if (threadIdx.x == 0) a.send_counts[g] = int32_t(own);
    const uint64_t end = lower + rt::AlignRows(uint32_t(own), a.align);  // pads before the next expert
    for (uint64_t i = lower + own + threadIdx.x; i < end && i < C; i += blockDim.x)
      a.send_rows[uint64_t(dest) * C + i] = -1;
    if (local + 1 == a.experts_per_rank) {  // the destination's total: the bucket it needs, pads after it
      if (threadIdx.x == 0) atomicMax(&a.rank->plan_need, uint32_t(end));
      for (uint64_t i = end + threadIdx.x; i < C; i += blockDim.x) a.send_rows[uint64_t(dest) * C + i] = -1;
    }
  }
  if (a.counts[uint64_t(chunk) * experts + g] == 0) return;
  const uint64_t begin = uint64_t(chunk) * kPlanChunk + uint64_t(threadIdx.x) * kPlanPerThread;
  int32_t id[kPlanPerThread];
  uint32_t mine = 0;
#pragma unroll
  for (uint32_t q = 0; q < kPlanPerThread; ++q) {
    id[q] = begin + q >= a.begin && begin + q < a.end ? a.ids[begin + q] : -1;
    mine += id[q] == int32_t(g);
  }
  uint32_t total;
  uint64_t pos = lower + earlier + BlockExclusiveScan(mine, &total);
#pragma unroll
  for (uint32_t q = 0; q < kPlanPerThread; ++q) {
    if (id[q] != int32_t(g)) continue;
    if (pos < C) {
      a.send_rows[uint64_t(dest) * C + pos] = int32_t(begin + q);
      a.token_rows[begin + q] = int32_t(uint64_t(dest) * C + pos);
    } else {
      a.token_rows[begin + q] = -1;
    }
    ++pos;
  }
}

}  // namespace cuda
}  // namespace hpmoe
