// The persistent kernel: one launch per direction, block q runs SSC queue q through the shared worker loop
// (op_kernel/runtime/worker_loop.h, unchanged). Queues 0..num_aic-1 are the cube role (GMM tiles), the rest
// the vector role; the split is the compiled schedule's, not a constant here. All blocks must be
// co-resident (the launcher uses a cooperative launch), since blocks wait on each other's counters.
#pragma once

#include "../runtime/worker_loop.h"
#include "cuda_handlers.cuh"

namespace hpmoe {
namespace cuda {

template <class T>
__global__ void __launch_bounds__(kThreads, 1) WorkerKernel(const DeviceRank* __restrict__ rank) {
  extern __shared__ __align__(128) uint8_t smem[];
  const DeviceRank& d = *rank;
  const uint32_t queue = blockIdx.x;
  if (queue >= d.program.num_queues) return;
  CudaSync sync(d);
  CudaHandlers<T> handlers(d, sync, smem);
  rt::WorkerReport* report = threadIdx.x == 0 ? &d.reports[queue] : nullptr;
  const int32_t st = rt::RunWorkerQueue(d.program, queue, sync, handlers, report);
  // A handler failure stops the group; a timeout already did (CudaSync::Wait), an abort was caused by another.
  if (st != rt::kOk && st != rt::kAborted && st != rt::kWaitTimeout && threadIdx.x == 0) RaiseAbort(d);
}

}  // namespace cuda
}  // namespace hpmoe
