// The CUDA backend's Sync: event counters in global memory with release/acquire ordering at system scope
// (peers' counters are reached through peer pointers over NVLink), bounded waits, and put_mem_signal as a
// block-wide copy into the peer's segment followed by one release add on its counter.
//
// The worker loop runs in every thread of a block in lockstep. Thread 0 spins and signals; the others meet
// it at __syncthreads, which orders their payload stores before thread 0's release (release is cumulative)
// and thread 0's acquire before their loads.
#pragma once

#include "../runtime/backend_traits.h"
#include "device_rank.cuh"
#include "tile_profile.cuh"
#include "worker_threads.cuh"

namespace hpmoe {
namespace cuda {

__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Experiment (-DHPMOE_SYNC_GPU_SCOPE=1, not the default): at EP 1 every counter lives on this GPU and only its
// blocks touch it, so gpu-scope acquire and release order the task payloads as well as the system scope does,
// which the other ranks (peer GPUs, or processes sharing one) need. Measured in session 19 (one H200, four
// rounds at Mixtral-8x22B and 8x7B, 4096 tokens): no difference in the kernels' time, so the system-scope fence
// in each signal is not a cost worth a second protocol (docs/cuda.md, "Time between tasks").
#ifndef HPMOE_SYNC_GPU_SCOPE
#define HPMOE_SYNC_GPU_SCOPE 0
#endif
__device__ __forceinline__ uint32_t LoadAcquireGpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void AddReleaseGpu(uint32_t* p, uint32_t v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void AddRelease(uint32_t* p, uint32_t v) {
  asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Marks the group failed (first failure wins on each rank) so that every other worker stops at its next wait.
__device__ __forceinline__ void RaiseAbort(const DeviceRank& d) {
  for (uint32_t r = 0; r < d.cfg.ep; ++r) atomicCAS(d.AbortWord(r), 0u, d.rank + 1);
  __threadfence_system();
}

// n 16-byte vectors from s to o, this thread taking every stride-th from tid; HPMOE_COPY_IN_FLIGHT loads in
// flight per thread before their stores (one at a time held a vector block to about 7 GB/s of puts; 8
// against 4: DeepSeek-V3 experts at 8192 tokens, EP 1, fwd+bwd kernels 33.38 / 33.17 -> 32.98 / 32.70 ms,
// alternating A/B on one H200, the local dispatch puts being the start of each direction).
#ifndef HPMOE_COPY_IN_FLIGHT
#define HPMOE_COPY_IN_FLIGHT 8
#endif
__device__ __forceinline__ void CopyVectors(uint4* o, const uint4* s, uint64_t n, uint32_t tid, uint32_t stride) {
  constexpr uint32_t kInFlight = HPMOE_COPY_IN_FLIGHT;
  uint64_t i = tid;
  for (; i + (kInFlight - 1) * uint64_t(stride) < n; i += kInFlight * uint64_t(stride)) {
    uint4 v[kInFlight];
#pragma unroll
    for (uint32_t u = 0; u < kInFlight; ++u) v[u] = __ldcg(s + i + u * stride);
#pragma unroll
    for (uint32_t u = 0; u < kInFlight; ++u) o[i + u * stride] = v[u];
  }
  for (; i < n; i += stride) o[i] = __ldcg(s + i);
}

// Copies `bytes` from src to dst with the whole block: 16-byte vectors when both are aligned; loads from L2
// (the payload was written by another block).
// (A worker of two blocks: this block's half, ShareOf.)
__device__ __forceinline__ void BlockCopy(void* dst, const void* src, uint64_t bytes) {
  if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src) | bytes) & 15) == 0) {
    const Share v = ShareOf(0, bytes / 16);
    CopyVectors(reinterpret_cast<uint4*>(dst) + v.begin, reinterpret_cast<const uint4*>(src) + v.begin,
                v.end - v.begin, threadIdx.x, WorkerThreads());
    return;
  }
  const Share b = ShareOf(0, bytes);
  const uint8_t* s = reinterpret_cast<const uint8_t*>(src);
  uint8_t* o = reinterpret_cast<uint8_t*>(dst);
  for (uint64_t i = b.begin + threadIdx.x; i < b.end; i += WorkerThreads()) o[i] = s[i];
}

#if HPMOE_CLUSTER_WORKER
// A worker that is a 2-block cluster (gemm_variant.h): block 0 waits on the events and claims; block 1 follows
// its posts in these words of block 1's shared memory, each (sequence number << 32) | value: the status of
// block 0's n-th wait, and its n-th claim. Block 1 then runs every task block 0 runs, and fails where block 0
// fails, so that neither is ever left alone at a cluster barrier or a multicast.
__shared__ unsigned long long g_worker_wait_post, g_worker_claim_post;
__device__ __forceinline__ void InitWorkerPosts() {
  if (threadIdx.x == 0) g_worker_wait_post = g_worker_claim_post = 0;
}
#endif

#if HPMOE_GEMM_PAIRS
__device__ inline uint32_t ClaimInRounds(const DeviceRank& d, uint32_t* claim_counter);  // cluster_pairing.cuh
#endif

class CudaSync {
 public:
  __device__ explicit CudaSync(const DeviceRank& d) : d_(d) {}

  __device__ int32_t Wait(uint32_t event, uint32_t target, rt::WaitResult* seen) {
    __shared__ int32_t status;
    __shared__ uint32_t counter;
    __shared__ int32_t detail;
    const uint64_t t_enter = ProfileClock();  // timing-only builds (tile_profile.cuh)
    if (HPMOE_EXPERIMENT_PROFILE && threadIdx.x == 0) marks_.WaitEnter(t_enter);
    bool unmet = false;
#if HPMOE_CLUSTER_WORKER
    if (WorkerRank() != 0) {  // block 1: block 0's verdict on this wait
      if (threadIdx.x == 0) {
        status = int32_t(FollowPost(&g_worker_wait_post, ++waits_));
        counter = 0;
        detail = 0;
        __threadfence();  // the task's inputs, published to block 0's acquire, before this block's reads
      }
    } else
#endif
    if (threadIdx.x == 0) {
      const uint32_t* c = d_.Counter(d_.rank, event);
      uint32_t v = LoadCounter(c);
      int32_t st = rt::kOk, det = 0;
      unmet = !rt::CounterReached(v, target);
      if (unmet) {
        const uint64_t deadline = GlobalTimerNs() + d_.timeout_ns;
        for (uint32_t spin = 1;; ++spin) {
          v = LoadCounter(c);
          if (rt::CounterReached(v, target)) break;
          if ((spin & 63) == 0) {
            const uint32_t abort = LoadAcquire(d_.AbortWord(d_.rank));
            if (abort != 0) {
              st = rt::kAborted;
              det = int32_t(abort) - 1;
              break;
            }
            if (GlobalTimerNs() > deadline) {
              st = rt::kWaitTimeout;
              RaiseAbort(d_);
              break;
            }
          }
        }
      }
      status = st;
      counter = v;
      detail = det;
#if HPMOE_CLUSTER_WORKER
      StoreRemoteRelease64(&g_worker_wait_post, 1, (uint64_t(++waits_) << 32) | uint32_t(st));
#endif
    }
    WorkerSync();
    const int32_t st = status;
    seen->counter = counter;
    seen->detail = detail;
    WorkerSync();
    if (HPMOE_EXPERIMENT_PROFILE && threadIdx.x == 0)
      marks_.WaitEnd(t_enter, d_.program.events[event].op_id, blockIdx.x / kBlocksPerWorker < d_.cfg.num_aic, unmet);
    return st;
  }

  __device__ void Signal(uint32_t rank, uint32_t event) {
    const uint64_t t_enter = ProfileClock();
    WorkerSync();  // (a worker of two blocks: the handler's cluster barrier ordered block 1's work before this)
    if (threadIdx.x == 0 && WorkerRank() == 0) AddCounter(d_.Counter(rank, event), 1u);
    if (HPMOE_EXPERIMENT_PROFILE && threadIdx.x == 0) SyncProfileAdd(kSyncSignal, ProfileClock() - t_enter);
  }

  // Pool claims (kConfigClaimPool): thread 0 fetch-adds the rank's claim counter (counter num_events; the
  // claimed task's own waits order its reads), the block gets the value through shared memory.
  __device__ uint32_t Claim() {
    __shared__ uint32_t claimed;
    const uint64_t t_enter = ProfileClock();
    if (HPMOE_EXPERIMENT_PROFILE && threadIdx.x == 0) marks_.ClaimEnter(t_enter);
#if HPMOE_GEMM_PAIRS  // the two blocks of a cluster claim in rounds (cluster_pairing.cuh)
    if (threadIdx.x == 0) claimed = ClaimInRounds(d_, d_.Counter(d_.rank, d_.program.num_events));
#elif HPMOE_CLUSTER_WORKER  // block 0 claims for the worker and posts it to block 1
    if (threadIdx.x == 0 && WorkerRank() == 0) {
      claimed = atomicAdd(d_.Counter(d_.rank, d_.program.num_events), 1u);
      StoreRemoteRelease64(&g_worker_claim_post, 1, (uint64_t(++claims_) << 32) | claimed);
    } else if (threadIdx.x == 0) {
      const rt::SscProgram& p = d_.program;
      const uint64_t post = FollowPost(&g_worker_claim_post, ++claims_, true);
      // No post (block 0 is gone: the launch failed): a claim past the pool ends block 1's loop.
      claimed = post != kNoPost ? uint32_t(post) : (p.invocation - 1u) * (p.num_pool + p.claimers) + p.num_pool;
    }
#else
    if (threadIdx.x == 0) claimed = atomicAdd(d_.Counter(d_.rank, d_.program.num_events), 1u);
#endif
    WorkerSync();
    const uint32_t k = claimed;
    WorkerSync();  // every thread has read it before the next claim writes it
    if (HPMOE_EXPERIMENT_PROFILE && threadIdx.x == 0) marks_.ClaimEnd(t_enter);
    return k;
  }

  // Profile builds, thread 0: a handler started or ended (tile_profile.cuh, TransitionMarks).
  __device__ void ProfileHandlerStart() { marks_.HandlerStart(); }
  __device__ void ProfileHandlerEnd() { marks_.HandlerEnd(); }

  // `dst` is the symmetric (local-layout) address; the payload lands in dst_rank's segment. src == nullptr
  // with bytes == 0 signals a payload the handler already wrote through Peer() (gathered rows).
  __device__ void PutMemSignal(const void* src, uint32_t dst_rank, void* dst, uint64_t bytes, uint32_t event,
                               uint32_t value) {
    if (bytes != 0) BlockCopy(d_.Peer(dst_rank, static_cast<uint8_t*>(dst)), src, bytes);
    WorkerSync();
    WorkerBlocksSync();  // a worker of two blocks: both halves of the payload are written
    if (threadIdx.x == 0 && WorkerRank() == 0 && event != ssc::kNoEvent) AddCounter(d_.Counter(dst_rank, event), value);
  }

 private:
#if HPMOE_CLUSTER_WORKER
  static constexpr uint64_t kNoPost = ~0ull;
  // Block 1, thread 0: block 0's post number `seq` in `word`: its value (the low 32 bits), or, where block 0
  // has posted past it, 0 (a wait's kOk: block 0 posts again only after a wait that passed). The wait watches
  // no abort word: block 0 posts every wait's verdict, failures included, and returns from each wait within the
  // group's timeout, so block 1 gives up (kWaitTimeout, or kNoPost for a claim) only after twice that.
  __device__ uint64_t FollowPost(const unsigned long long* word, uint32_t seq, bool claim = false) {
    const uint64_t deadline = GlobalTimerNs() + 2 * d_.timeout_ns;
    for (uint32_t spin = 1;; ++spin) {
      const unsigned long long v = LoadAcquireCluster64(word);
      const uint32_t posted = uint32_t(v >> 32);
      // (A claim is never posted past: the task after it ends at a cluster barrier before the next claim.)
      if (int32_t(posted - seq) >= 0) return posted == seq ? uint64_t(uint32_t(v)) : claim ? kNoPost : 0;
      if ((spin & 63) == 0 && GlobalTimerNs() > deadline) {
        RaiseAbort(d_);
        return claim ? kNoPost : uint64_t(uint32_t(rt::kWaitTimeout));
      }
    }
  }
  uint32_t waits_ = 0, claims_ = 0;  // thread 0's count of the worker's waits and claims
#endif
  // Event counters: system scope (peers), or gpu scope at EP 1 under HPMOE_SYNC_GPU_SCOPE (above).
  __device__ bool GpuScope() const { return HPMOE_SYNC_GPU_SCOPE && d_.cfg.ep == 1; }
  __device__ uint32_t LoadCounter(const uint32_t* c) const { return GpuScope() ? LoadAcquireGpu(c) : LoadAcquire(c); }
  __device__ void AddCounter(uint32_t* c, uint32_t v) const {
    if (GpuScope()) AddReleaseGpu(c, v);
    else AddRelease(c, v);
  }

  const DeviceRank& d_;
  TransitionMarks marks_;  // profile builds only (empty otherwise)
};

}  // namespace cuda
}  // namespace hpmoe
