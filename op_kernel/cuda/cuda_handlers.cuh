// The CUDA backend's Handlers: one member per task type (backend_traits.h), each a block-wide call into
// handlers_{gemm,vector,put}.cuh, wrapped with the per-task trace stamps (global timer, ns) and the fault
// hook that drops one put (tests: a lost message must end in a reported wait timeout, not a hang).
#pragma once

#include "cuda_sync.cuh"
#include "handlers_gemm.cuh"
#include "handlers_put.cuh"
#include "handlers_vector.cuh"
#include "handlers_fused.cuh"

namespace hpmoe {
namespace cuda {

template <class T, bool kFusedSwiglu = false>
class CudaHandlers {
 public:
  __device__ CudaHandlers(const DeviceRank& d, CudaSync& sync, uint8_t* smem) : d_(d), sync_(sync), smem_(smem) {}

  __device__ int32_t EntrySignal(const rt::TaskCall& c) { return Put(c, [&] { return RunEntrySignal(d_, sync_, c); }); }
  __device__ int32_t CountPut(const rt::TaskCall& c) { return Put(c, [&] { return RunCountPut(d_, sync_, c); }); }
  __device__ int32_t DispatchPut(const rt::TaskCall& c) {
    return Put(c, [&] { return RunDispatchPut<T, false>(d_, sync_, c); });
  }
  __device__ int32_t BwdDispatchPut(const rt::TaskCall& c) {
    return Put(c, [&] { return RunDispatchPut<T, true>(d_, sync_, c); });
  }
  __device__ int32_t CombinePut(const rt::TaskCall& c) { return Put(c, [&] { return RunCombinePut(d_, sync_, c); }); }
  __device__ int32_t Gmm(const rt::TaskCall& c) {
    return Traced(c, [&] { return (HPMOE_EXPERIMENT_SKIP & 1) ? 0 : RunGmmLayout<T>(d_, smem_, *c.task, false); });
  }
  __device__ int32_t GmmTransB(const rt::TaskCall& c) {
    return Traced(c, [&] { return (HPMOE_EXPERIMENT_SKIP & 2) ? 0 : RunGmmLayout<T>(d_, smem_, *c.task, true); });
  }
  __device__ int32_t GmmWeightGrad(const rt::TaskCall& c) {
    return Traced(c, [&] { return (HPMOE_EXPERIMENT_SKIP & 4) ? 0 : RunWeightGrad<T>(d_, smem_, *c.task); });
  }
  __device__ int32_t Swiglu(const rt::TaskCall& c) {
    return Traced(c, [&] { return (HPMOE_EXPERIMENT_SKIP & 8) ? 0 : RunSwiglu<T>(d_, smem_, *c.task); });
  }
  __device__ int32_t SwigluGrad(const rt::TaskCall& c) {
    return Traced(c, [&] { return (HPMOE_EXPERIMENT_SKIP & 16) ? 0 : RunSwigluGrad<T>(d_, smem_, *c.task); });
  }
  // Only in the fused instantiation (worker_kernel.cuh); the host launches it for fused SSCs, so the other
  // one never meets these task types (the loader's access table refuses them in unfused files).
  // (A worker of two blocks runs them on block 0 alone: correct, not split.)
  __device__ int32_t GmmSwiglu(const rt::TaskCall& c) {
    if constexpr (!kFusedSwiglu) return rt::kErrRegion;
    else
      return Traced(c, [&] {
        return (HPMOE_EXPERIMENT_SKIP & 1) || WorkerRank() != 0 ? 0 : RunFusedSwiglu<T, false>(d_, smem_, *c.task);
      });
  }
  __device__ int32_t GmmSwigluGrad(const rt::TaskCall& c) {
    if constexpr (!kFusedSwiglu) return rt::kErrRegion;
    else
      return Traced(c, [&] {
        return (HPMOE_EXPERIMENT_SKIP & 2) || WorkerRank() != 0 ? 0 : RunFusedSwiglu<T, true>(d_, smem_, *c.task);
      });
  }
  __device__ int32_t CombineReduce(const rt::TaskCall& c) {
    return Traced(c, [&] { return RunCombineReduce<T>(d_, *c.task); });
  }
  __device__ int32_t BwdCombineReduce(const rt::TaskCall& c) {
    return Traced(c, [&] { return RunBwdCombineReduce<T>(d_, *c.task); });
  }
  __device__ int32_t TopkWeightGrad(const rt::TaskCall& c) {
    return Traced(c, [&] { return RunTopkWeightGrad<T>(d_, *c.task); });
  }
  __device__ int32_t Add(const rt::TaskCall& c) { return Traced(c, [&] { return RunAdd(d_, *c.task); }); }

 private:
  template <class F>
  __device__ int32_t Traced(const rt::TaskCall& c, F&& f) {
    // The record's address is formed twice, not held across the handler (a live pointer there cost the
    // default kernel 40 bytes more of spills).
    // (A worker of two blocks: block 0 traces.)
    if (d_.trace != nullptr && threadIdx.x == 0 && WorkerRank() == 0) d_.trace[kTraceWords * uint64_t(c.task_id)] = GlobalTimerNs();
#if HPMOE_EXPERIMENT_PROFILE
    // (The type is read before the handler's clock starts, not after it ends, where a load from L2 would count
    // in the next transition's "to the claim".)
    const uint32_t type = c.task->task_type;
    if (threadIdx.x == 0) sync_.ProfileHandlerStart();
    const uint64_t t_body = ProfileClock();
#endif
#if HPMOE_CLUSTER_WORKER
    int32_t err = f();
#else
    const int32_t err = f();
#endif
#if HPMOE_EXPERIMENT_PROFILE
    const uint64_t t_barrier = ProfileClock();
#endif
    WorkerSync();  // every thread's stores are done before the task counts as ended (and triggers)
#if HPMOE_CLUSTER_WORKER
    err = AgreeOnError(err);  // and both blocks' stores, at cluster scope
#endif
#if HPMOE_EXPERIMENT_PROFILE
    if (threadIdx.x == 0) sync_.ProfileHandlerEnd();
    HandlerProfileAdd(type, t_barrier - t_body, ProfileClock() - t_barrier);
#endif
    if (d_.trace != nullptr && threadIdx.x == 0 && WorkerRank() == 0) {
      uint64_t* record = d_.trace + kTraceWords * uint64_t(c.task_id);
      record[1] = GlobalTimerNs();
      record[2] = blockIdx.x / kBlocksPerWorker;  // the worker: it runs queue q and claims for itself (worker_kernel.cuh)
    }
    return err;
  }

#if HPMOE_CLUSTER_WORKER
  // A worker of two blocks, after a handler: the cluster barrier (both blocks' stores before block 0's
  // signals), and one verdict for both (the first non-zero of block 0's and block 1's), so that both leave
  // the loop at the same task. Each block posts its error into the peer's word for this task's parity: the
  // peer can be at most one handler ahead, since each handler ends at this barrier.
  __device__ int32_t AgreeOnError(int32_t err) {
    __shared__ int32_t peer_err[2];
    const uint32_t slot = handled_++ & 1u;
    if (threadIdx.x == 0) StoreRemote(reinterpret_cast<uint32_t*>(&peer_err[slot]), WorkerRank() ^ 1u, uint32_t(err));
    WorkerBlocksSync();
    const int32_t peer = peer_err[slot];
    const int32_t agreed = WorkerRank() == 0 ? (err != 0 ? err : peer) : (peer != 0 ? peer : err);
    return agreed;
  }
  uint32_t handled_ = 0;  // handlers run by this worker (every thread counts alike)
#endif

  template <class F>
  __device__ int32_t Put(const rt::TaskCall& c, F&& f) {
    __shared__ uint32_t drop;
    if (d_.fault_mode == kCudaFaultDropPut) {
      // One count per worker: block 0 counts and tells block 1 (a worker of two blocks).
      if (threadIdx.x == 0 && WorkerRank() == 0) {
        drop = atomicAdd(d_.fault_counter, 1u) + 1 == d_.fault_after;
#if HPMOE_CLUSTER_WORKER
        StoreRemote(&drop, 1, drop);
#endif
      }
      WorkerSync();
      WorkerBlocksSync();
      const bool dropped = drop != 0;
      WorkerSync();
      if (dropped) return 0;  // neither payload nor signal: the consumer's bounded wait must report it
    }
    return Traced(c, f);
  }

  const DeviceRank& d_;
  CudaSync& sync_;
  uint8_t* smem_;
};

}  // namespace cuda
}  // namespace hpmoe
