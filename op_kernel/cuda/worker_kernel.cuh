// The persistent kernel: one launch per direction, block q runs SSC queue q through the shared worker loop
// (op_kernel/runtime/worker_loop.h, unchanged). Queues 0..num_aic-1 are the cube role (GMM tiles), the rest
// the vector role; the split is the compiled schedule's, not a constant here. All blocks must be
// co-resident (the launcher uses a cooperative launch), since blocks wait on each other's counters.
// It follows the bind kernel (launch_binding.cuh) and, in a forward with a device-built plan, the plan
// kernels (routing_plan.cuh) on the same stream.
#pragma once

#include "../runtime/worker_loop.h"
#include "cuda_handlers.cuh"
#include "launch_binding.cuh"
#if HPMOE_GEMM_PAIRS
#include "cluster_pairing.cuh"
#endif

namespace hpmoe {
namespace cuda {

__device__ __forceinline__ void MarkFailed(const DeviceRank& d) {
  *reinterpret_cast<volatile uint32_t*>(d.host_status) = 1u;  // the host polls it without a sync
  __threadfence_system();
}

// A device-built plan that named an expert outside the group or needs more than C rows per destination:
// nothing runs and no row moves; the output is NaN (never a silently wrong result) and the host reports the
// plan's problem in one line at its next poll.
// One thread: the launch fails before any task runs, reported as worker 0's handler error `detail`.
__device__ __forceinline__ void FailLaunch(const DeviceRank& d, int32_t detail) {
  rt::WorkerReport r{};
  r.status = rt::kHandlerFailed;
  r.rank = d.rank;
  r.event = ssc::kNoEvent;
  r.invocation = d.program.invocation;
  r.detail = detail;
  d.reports[0] = r;
  RaiseAbort(d);
  MarkFailed(d);
}

template <class T>
__device__ void RefusePlan(const DeviceRank& d, uint32_t queue) {
  if (queue == 0 && threadIdx.x == 0 && WorkerRank() == 0) FailLaunch(d, rt::kErrPlan);
  if (d.direction != 0) return;
  T* y = d.Slot<T>(ssc::kSlotY);
  const uint64_t n = uint64_t(d.cfg.tokens) * d.cfg.hidden;
  const T nan = FromF<T>(__int_as_float(0x7fc00000));
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    y[i] = nan;
}

#if HPMOE_CLUSTER_WORKER
__device__ __forceinline__ uint32_t ClusterBlocks() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}
// A kernel of this build launched without 2-block clusters (a tool that drops the launch attribute): no block
// touches a peer; the first block reports it and the group fails.
__device__ inline void RefuseLaunchShape(const DeviceRank& d) {
  if (blockIdx.x == 0 && threadIdx.x == 0) FailLaunch(d, rt::kErrLaunchShape);
}
#endif

// kRunSpeculate (device_rank.cuh): the most rows any rank's routing sends one rank, agreed by every rank
// before any row moves. Block 0 writes this rank's need into every rank's need table; thread 0 of every block
// then waits (bounded, watching the abort word, as CudaSync::Wait) for every rank's entry of this invocation.
// Every block of every rank reads the same entries, so all decide alike. Returns the need, or ~0u when the
// wait failed (the abort is raised or was seen; the launch reports the failure).
__device__ inline uint32_t AgreedNeed(const DeviceRank& d) {
  __shared__ uint32_t agreed;
  if (threadIdx.x == 0) {
    const unsigned long long mine = (static_cast<unsigned long long>(d.program.invocation) << 32) | d.plan_need;
    if (blockIdx.x == 0)
      for (uint32_t p = 0; p < d.cfg.ep; ++p)
        asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(d.NeedEntry(p, d.rank)), "l"(mine) : "memory");
    const uint64_t deadline = GlobalTimerNs() + d.timeout_ns;
    uint32_t need = 0;
    for (uint32_t src = 0; src < d.cfg.ep && need != ~0u; ++src) {
      for (uint32_t spin = 1;; ++spin) {
        unsigned long long e;
        asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(e) : "l"(d.NeedEntry(d.rank, src)) : "memory");
        if (uint32_t(e >> 32) == d.program.invocation) {
          need = need > uint32_t(e) ? need : uint32_t(e);
          break;
        }
        if ((spin & 63) == 0 && (LoadAcquire(d.AbortWord(d.rank)) != 0 || GlobalTimerNs() > deadline)) {
          if (LoadAcquire(d.AbortWord(d.rank)) == 0) RaiseAbort(d);
          need = ~0u;
          break;
        }
      }
    }
    agreed = need;
  }
  __syncthreads();
  return agreed;
}

// kFusedSwiglu: the instantiation for SSCs with kConfigFusedSwiglu, the only one that holds the fused
// handlers. ptxas assigns registers per function, and the fused epilogues' demand raised the default kernel's
// spills (260 -> 1512 bytes of stores) into its vector loops: Qwen3-30B-A3B's backward 3.6 -> 5.8 ms.
template <class T, bool kFusedSwiglu>
__device__ __forceinline__ void RunWorker(const DeviceRank& d, uint8_t* smem) {
  const uint32_t queue = blockIdx.x / kBlocksPerWorker;  // a worker of two blocks: the cluster's queue
  if (queue >= d.program.num_queues || d.skip) return;
  if (d.planned && d.plan_bad != kNoBadId) {
    RefusePlan<T>(d, queue);
    return;
  }
  if (d.run_if == kRunSpeculate) {
    const uint32_t need = AgreedNeed(d);
    if (need == ~0u) {
      if (threadIdx.x == 0) MarkFailed(d);
      return;
    }
    if (queue == 0 && threadIdx.x == 0) {
      if (d.need_out != nullptr) *reinterpret_cast<volatile uint32_t*>(d.need_out) = need;  // the host grows C
      // Overflowed: nothing ran and no row moved; the launch gives its invocation back (the next launch of
      // this direction takes the same number) and marks the heap, which runs the passes enqueued behind it.
      const bool overflowed = need > d.cfg.recv_rows_per_src;
      if (overflowed) *d.epoch = d.program.invocation - 1;
      *d.OverflowWord() = overflowed ? 1u : 0u;
    }
    if (need > d.cfg.recv_rows_per_src) return;
  }
  if (d.planned && d.plan_need > d.cfg.recv_rows_per_src) {
    RefusePlan<T>(d, queue);
    return;
  }
  AcquireBoundMaps(d);
#if HPMOE_GEMM_WS == 2
  // Roles for the whole launch (block_gemm_ws.cuh): warpgroup 2 issues the GMM tiles' loads, 0-1 run the rest.
  if (threadIdx.x == 0) WsInitPipeline<T>(smem);
  __syncthreads();  // the block's last: from here on the workers meet at WorkerSync
  if (threadIdx.x >= kWorkerThreads) {
    SetMaxRegsDec<kWsProducerRegs>();
    WsProducerLoop([&](uint32_t kind, const void* task, uint32_t pipe) { return ProduceWsJob<T>(d, smem, kind, task, pipe); });
    SetMaxRegsInc<kWsBaseRegs>();  // the workers gave theirs back before the exit job
    return;
  }
  SetMaxRegsInc<kWsConsumerRegs>();
#endif
  CudaSync sync(d);
  CudaHandlers<T, kFusedSwiglu> handlers(d, sync, smem);
  rt::WorkerReport* report = threadIdx.x == 0 && WorkerRank() == 0 ? &d.reports[queue] : nullptr;
  const BlockStamp stamp = ProfileBlockBegin();  // timing-only builds (tile_profile.cuh)
  const int32_t st = rt::RunWorkerQueue(d.program, queue, sync, handlers, report);
  ProfileBlockEnd(stamp);
#if HPMOE_GEMM_WS == 2
  SetMaxRegsDec<kWsBaseRegs>();  // a closed region: ptxas allocates it at its budget
  WsPost(kWsJobExit, nullptr);  // whatever the status: the producer sleeps until told
#endif
  // A handler failure stops the group; a timeout already did (CudaSync::Wait), an abort was caused by another.
  if (st != rt::kOk && st != rt::kAborted && st != rt::kWaitTimeout && threadIdx.x == 0) RaiseAbort(d);
  if (st != rt::kOk && threadIdx.x == 0) MarkFailed(d);
}

template <class T, bool kFusedSwiglu>
__global__ void __launch_bounds__(kThreads, 1) WorkerKernel(const DeviceRank* __restrict__ rank) {
  extern __shared__ __align__(128) uint8_t smem[];
#if HPMOE_GEMM_PAIRS  // 2-block clusters: no block reads its peer's shared memory before or after both are here
  InitPairs(*rank);
  ClusterSync();
  RunWorker<T, kFusedSwiglu>(*rank, smem);
  ClusterSync();
#elif HPMOE_CLUSTER_WORKER  // the same for a worker of two blocks (cluster_worker posts, cuda_sync.cuh)
  if (ClusterBlocks() != kBlocksPerWorker) {  // launched without its clusters: a report, never a bad address
    RefuseLaunchShape(*rank);
    return;
  }
  InitWorkerPosts();
  ClusterSync();
  RunWorker<T, kFusedSwiglu>(*rank, smem);
  ClusterSync();
#else
  RunWorker<T, kFusedSwiglu>(*rank, smem);
#endif
#if HPMOE_GEMM_TMA && HPMOE_WGRAD_CHAIN
  FinishChainStores();
#endif
}

}  // namespace cuda
}  // namespace hpmoe
