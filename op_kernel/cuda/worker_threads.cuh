// The threads that run the worker loop's handlers, and their barrier. In the default build and under
// HPMOE_GEMM_WS=1 they are the whole block (__syncthreads). Under HPMOE_GEMM_WS=2 (roles for the whole launch,
// block_gemm_ws.cuh) they are warpgroups 0-1 only, while warpgroup 2 is the GMM tiles' TMA producer: their
// barrier is then named barrier 1 over 256 threads, and their loops stride by 256, not by blockDim.x.
// The default build keeps __syncthreads and blockDim.x, so its code is unchanged.
#pragma once

#include "gemm_variant.h"
#if HPMOE_CLUSTER_WORKER
#include "cluster_dsmem.cuh"
#endif

namespace hpmoe {
namespace cuda {

constexpr uint32_t kWorkerThreads = HPMOE_GEMM_WS == 2 ? 256 : kThreads;
constexpr uint32_t kBarWorkers = 1;  // named barrier of the worker threads under HPMOE_GEMM_WS=2

__device__ __forceinline__ uint32_t WorkerThreads() { return HPMOE_GEMM_WS == 2 ? kWorkerThreads : blockDim.x; }

__device__ __forceinline__ void WorkerSync() {
#if HPMOE_GEMM_WS == 2
  asm volatile("bar.sync %0, %1;" ::"n"(kBarWorkers), "n"(kWorkerThreads) : "memory");
#else
  __syncthreads();
#endif
}

// WorkerSync that also returns whether any worker thread's pred was non-zero (non-zero if so, as
// __syncthreads_or).
__device__ __forceinline__ int WorkerSyncOr(int pred) {
#if HPMOE_GEMM_WS == 2
  uint32_t any;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, %3, p;\nselp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(any)
      : "r"(uint32_t(pred)), "n"(kBarWorkers), "n"(kWorkerThreads)
      : "memory");
  return int(any);
#else
  return __syncthreads_or(pred);
#endif
}

// The block's share of a worker's task (HPMOE_CLUSTER_WORKER: the worker is a 2-block cluster, and block r of
// it takes part r of every split): its rank in the worker, and its half of an index range [b, e) (block 0 the
// first ceil half). One block per worker: rank 0, the whole range.
__device__ __forceinline__ uint32_t WorkerRank() {
#if HPMOE_CLUSTER_WORKER
  return ClusterRank();
#else
  return 0;
#endif
}
struct Share {
  uint64_t begin, end;
};
__device__ __forceinline__ Share ShareOf(uint64_t b, uint64_t e) {
  if (kBlocksPerWorker == 1) return {b, e};
  const uint64_t mid = b + (e - b + 1) / 2;
  return WorkerRank() == 0 ? Share{b, mid} : Share{mid, e};
}
// After a handler, at cluster scope: both blocks' stores are done before block 0 signals (its release is
// cumulative over them). Nothing with one block per worker (the handler's own barrier does it).
__device__ __forceinline__ void WorkerBlocksSync() {
#if HPMOE_CLUSTER_WORKER
  ClusterSync();
#endif
}

}  // namespace cuda
}  // namespace hpmoe
