// CudaGroup (cuda_group.h): a rank's launch resources and its launches: co-residency, the weights' and weight
// gradients' bindings, the bind / routing-plan / persistent kernels enqueued on a stream. The only source that
// instantiates the kernels (worker_kernel.cuh, routing_plan.cuh).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "../../op_kernel/cuda/routing_plan.cuh"
#include "../../op_kernel/cuda/worker_kernel.cuh"
#include "cuda_group.h"
#include "cuda_try.h"
#include "tensor_maps.h"

namespace hpmoe {
namespace cuda {
namespace {

template <class T>
const void* KernelFor(bool fused) {
  return fused ? reinterpret_cast<const void*>(&WorkerKernel<T, true>)
               : reinterpret_cast<const void*>(&WorkerKernel<T, false>);
}

// The worker kernel for a config: fused SwiGLU SSCs get the instantiation that holds those handlers.
const void* Kernel(const ssc::SscConfig& cfg) {
  const bool fused = (cfg.flags & ssc::kConfigFusedSwiglu) != 0;
  return cfg.dtype == ssc::kFP16 ? KernelFor<__half>(fused) : KernelFor<__nv_bfloat16>(fused);
}

}  // namespace

std::string CudaGroup::AllocateRank(uint32_t r, int device) {
  int count = 0;
  HPMOE_CUDA_TRY(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  RankState& s = ranks_[r];
  s.device = device;
  if (s.device < 0 || s.device >= count) return Format("rank %u: GPU %d does not exist (%d GPUs)", r, s.device, count);
  HPMOE_CUDA_TRY(cudaSetDevice(s.device), "cudaSetDevice");
  HPMOE_CUDA_TRY(cudaMalloc(&s.segment, layout_.segment_bytes), "allocating a rank's heap segment");
  s.owned = true;
  HPMOE_CUDA_TRY(cudaMemset(s.segment, 0, layout_.segment_bytes), "zeroing a heap segment");
  HPMOE_CUDA_TRY(cudaDeviceSynchronize(), "zeroing a heap segment");  // zero before any peer can map it
  HPMOE_CUDA_TRY(cudaMalloc(&s.fault_counter, sizeof(uint32_t)), "cudaMalloc");
  for (int d = 0; d < 2; ++d) {
    HPMOE_CUDA_TRY(cudaMalloc(&s.epoch[d], sizeof(uint32_t)), "cudaMalloc");
    HPMOE_CUDA_TRY(cudaMemset(s.epoch[d], 0, sizeof(uint32_t)), "cudaMemset");
  }
  const uint64_t chunks = (uint64_t(cfg_.tokens) * cfg_.topk + kPlanChunk - 1) / kPlanChunk;
  HPMOE_CUDA_TRY(cudaMalloc(&s.plan_counts, (chunks ? chunks : 1) * cfg_.ep * cfg_.experts_per_rank * sizeof(uint32_t)),
                 "allocating the routing plan's scratch");
  cudaStream_t stream;
  HPMOE_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.stream = stream;
  for (int d = 0; d < 2; ++d) {
    cudaEvent_t e;
    HPMOE_CUDA_TRY(cudaEventCreate(&e), "cudaEventCreate");
    s.events[d] = e;
    for (void*& k : s.kernel_events[d]) {
      HPMOE_CUDA_TRY(cudaEventCreate(&e), "cudaEventCreate");
      k = e;
    }
  }
  return "";
}

std::string CudaGroup::CheckCoResidency(uint32_t rank, uint32_t direction) const {
  const uint32_t workers = cfg_.num_aic + cfg_.num_aiv;  // a pool queue is no worker
  const uint32_t blocks = workers * kBlocksPerWorker;  // one block per worker, or a 2-block cluster
  const int dev = ranks_[rank].device;
  cudaDeviceProp prop;
  HPMOE_CUDA_TRY(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  cudaSetDevice(dev);
  const void* kernel = Kernel(cfg_);
  HPMOE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kWorkerSmemBytes)),
                 "raising the kernel's shared-memory limit");
  int per_sm = 0;
  HPMOE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(kThreads), kWorkerSmemBytes),
                 "occupancy query");
  if (!prop.cooperativeLaunch) return Format("GPU %d does not support cooperative launches", dev);
  if (HPMOE_GEMM_PAIRS && workers % 2 != 0)
    return Format("the SSC has %u workers (num_aic + num_aiv); this build (HPMOE_GEMM_PAIRS) runs them in 2-block "
                  "clusters and needs an even number", workers);
  const uint64_t capacity = uint64_t(per_sm) * uint64_t(prop.multiProcessorCount);
  if (HPMOE_CLUSTER_WORKER && blocks > capacity)
    return Format("the SSC has %u workers (num_aic + num_aiv); this build (HPMOE_CLUSTER_WORKER) runs each as 2 "
                  "blocks and GPU %d (%s) holds %llu co-resident worker blocks: compile for at most %llu workers",
                  workers, dev, prop.name, (unsigned long long)capacity, (unsigned long long)(capacity / 2));
  if (workers > capacity)
    return Format("the SSC has %u workers (num_aic + num_aiv) but GPU %d (%s) holds %llu co-resident worker blocks "
                  "(%d SMs x %d, %u KB shared memory each); compile with fewer --workers-aic/--workers-aiv",
                  workers, dev, prop.name, (unsigned long long)capacity, prop.multiProcessorCount, per_sm,
                  kWorkerSmemBytes / 1024);
  return "";
}

std::string CudaGroup::BindWeights(RankState& s, uint32_t direction, const LaunchSpec& spec, void* binding) {
  LaunchBinding& b = *static_cast<LaunchBinding*>(binding);
  (void)b;  // unused without TMA (the cp.async tiles read bound weights through DeviceRank::Slot)
  const uint32_t slots[2] = {ssc::kSlotW1, ssc::kSlotW2};
  for (int w = 0; w < 2; ++w) {
    const uint64_t base = spec.bound[slots[w]];
    if (base == 0) continue;
#if HPMOE_GEMM_TMA
    if (base % 16 != 0) return Format("%s at 0x%llx is not 16-byte aligned (the copy engine reads it in place)",
                                      ssc::SlotName(slots[w]), (unsigned long long)base);
    if (s.map_base[direction][w] != base) {  // weights rarely move: encode once per address
      const std::string err = EncodeSlotMaps(layout_.slots[slots[w]], reinterpret_cast<const void*>(base),
                                             s.weight_maps[direction][w]);
      if (!err.empty()) return Format("%s: %s", ssc::SlotName(slots[w]), err.c_str());
      s.map_base[direction][w] = base;
    }
    std::memcpy(b.weight_maps[w], s.weight_maps[direction][w], sizeof(b.weight_maps[w]));
#endif
  }
  return BindWeightGradMaps(s, direction, spec, binding);
}

// With HPMOE_WGRAD_CHAIN_TMA_STORE or HPMOE_WGRAD_PINGPONG, weight gradients written in the model dtype to bound
// DW1/DW2 leave by TMA stores (block_gemm_chain.cuh, block_gemm_pingpong.cuh): their maps, in the weights' dtype
// (the heap's DW slots are fp32), encoded once per address like the weights'. Other builds bind none.
std::string CudaGroup::BindWeightGradMaps(RankState& s, uint32_t direction, const LaunchSpec& spec, void* binding) {
  LaunchBinding& b = *static_cast<LaunchBinding*>(binding);
  b.has_dw_maps = 0;
#if HPMOE_GEMM_TMA && ((HPMOE_WGRAD_CHAIN && HPMOE_WGRAD_CHAIN_TMA_STORE) || HPMOE_WGRAD_PINGPONG)
  const uint32_t slots[2] = {ssc::kSlotDW1, ssc::kSlotDW2};
  if (direction != ssc::kBackward || spec.dw_mode != kDwModelDtype) return "";
  for (int w = 0; w < 2; ++w) {
    const uint64_t base = spec.bound[slots[w]];
    if (base == 0 || base % 16 != 0) return "";  // the block stores the tiles itself
    if (s.dw_map_base[w] != base) {
      cpu::SlotShape sh = layout_.slots[slots[w]];
      sh.dtype = layout_.slots[ssc::kSlotW1].dtype;
      uint8_t maps[kBoxKinds][kTensorMapBytes];
      const std::string err = EncodeSlotMaps(sh, reinterpret_cast<const void*>(base), maps);
      if (!err.empty()) return Format("%s: %s", ssc::SlotName(slots[w]), err.c_str());
      std::memcpy(s.dw_maps[w], maps[kBoxRows64], kTensorMapBytes);
      s.dw_map_base[w] = base;
    }
    std::memcpy(b.dw_maps[w], s.dw_maps[w], kTensorMapBytes);
  }
  b.has_dw_maps = 1;
#else
  (void)s, (void)direction, (void)spec;
#endif
  return "";
}

std::string CudaGroup::Enqueue(uint32_t rank, uint32_t direction, void* stream_ptr, const LaunchSpec& spec,
                               const LaunchOptions& o, uint32_t timed) {
  RankState& s = ranks_[rank];
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  HPMOE_CUDA_TRY(cudaSetDevice(s.device), "cudaSetDevice");
  DeviceRank& d = s.host_rank[direction];
  const LaunchOptions& last = s.last_options[direction];
  const bool same_options = last.timeout_ms == o.timeout_ms && last.fault_rank == o.fault_rank &&
                            last.fault_mode == o.fault_mode && last.fault_after == o.fault_after &&
                            last.trace == o.trace;
  if (!s.device_copy_current[direction] || !same_options) {  // never in a steady state (not capturable)
    for (uint32_t p = 0; p < ranks_.size(); ++p) d.segments[p] = ranks_[p].segment;
    d.timeout_ns = o.timeout_ms * 1000000ull;
    d.fault_mode = o.fault_rank == rank ? o.fault_mode : kCudaFaultNone;
    d.fault_after = o.fault_after;
    if (o.trace && s.trace[direction] == nullptr)
      HPMOE_CUDA_TRY(cudaMalloc(&s.trace[direction], kTraceWords * sizeof(uint64_t) * d.program.num_tasks),
                     "cudaMalloc");
    d.trace = o.trace ? s.trace[direction] : nullptr;
    HPMOE_CUDA_TRY(cudaMemcpyAsync(s.dev_rank[direction], &d, sizeof(DeviceRank), cudaMemcpyHostToDevice, stream),
                   "uploading the launch state");
    HPMOE_CUDA_TRY(cudaStreamSynchronize(stream), "uploading the launch state");  // &d is read before it changes
    s.device_copy_current[direction] = true;
    s.last_options[direction] = o;
  }
  if (d.trace) cudaMemsetAsync(d.trace, 0, kTraceWords * sizeof(uint64_t) * d.program.num_tasks, stream);
  if (d.fault_mode != kCudaFaultNone) cudaMemsetAsync(s.fault_counter, 0, sizeof(uint32_t), stream);
  LaunchBinding b{};
  for (uint32_t slot = 0; slot < ssc::kSlotCount; ++slot) {
    if (spec.bound[slot] == 0) continue;
    if (!BindableSlot(slot))
      return Format("slot %s cannot be bound outside the heap (peers write it)", ssc::SlotName(slot));
    b.bound[slot] = reinterpret_cast<uint8_t*>(spec.bound[slot]);
  }
  for (uint32_t slot = 0; slot < ssc::kSlotCount; ++slot)  // placed slots: their fixed addresses
    if (placed_[slot] != 0) b.bound[slot] = reinterpret_cast<uint8_t*>(placed_[slot]);
  const ssc::SscView& view = s.ssc[direction].view;
  for (uint32_t i = 0; i < view.num_tensors; ++i) {  // what this direction touches must exist somewhere
    const uint32_t slot = view.tensors[i].slot;
    if (((external_mask_ >> slot) & 1u) && spec.bound[slot] == 0)
      return Format("slot %s lives outside the heap: a %s launch must bind it", ssc::SlotName(slot),
                    kDirNames[direction]);
  }
  if ((spec.dw_mode & ~(kDwModelDtype | kDwAccumulate)) != 0)
    return Format("dw_mode %u: only bits kDwModelDtype (1) and kDwAccumulate (2) exist", spec.dw_mode);
  if ((spec.dw_mode & kDwAccumulate) && (spec.bound[ssc::kSlotDW1] == 0 || spec.bound[ssc::kSlotDW2] == 0))
    return Format("dw_mode accumulates into DW1/DW2: a launch must bind both (the heap's are not gradients)");
  b.dw_mode = spec.dw_mode;
  b.planned = spec.plan ? 1u : 0u;
  if (spec.run_if > kRunIfOverflow) return Format("run_if %u: only 0..3 exist (RunIf)", spec.run_if);
  if (spec.run_if == kRunSpeculate && (direction != 0 || !spec.plan))
    return "run_if speculate is a forward that builds its routing plan on the device (plan = 1)";
  b.run_if = spec.run_if;
  b.token_begin = spec.token_begin;
  b.token_end = spec.token_end < cfg_.tokens ? spec.token_end : cfg_.tokens;
  if (b.token_begin > b.token_end)
    return Format("tokens [%u, %u) is not a range inside [0, %u)", spec.token_begin, spec.token_end, cfg_.tokens);
  if (spec.need_out != nullptr) {
    void* mapped = nullptr;
    if (cudaHostGetDevicePointer(&mapped, spec.need_out, 0) != cudaSuccess) {
      cudaGetLastError();
      return "need_out is not pinned host memory the device can write (cudaHostAlloc / pin_memory)";
    }
    b.need_out = static_cast<uint32_t*>(mapped);
  }
  std::string err = BindWeights(s, direction, spec, &b);
  if (!err.empty()) return err;
  BindLaunch<<<1, 64, 0, stream>>>(s.dev_rank[direction], b);
  if (spec.plan) {
    const uint64_t n = uint64_t(cfg_.tokens) * cfg_.topk;
    const uint32_t experts = cfg_.ep * cfg_.experts_per_rank;
    PlanArgs a{};
    a.ids = spec.bound[ssc::kSlotTopkIds]
                ? reinterpret_cast<const int32_t*>(spec.bound[ssc::kSlotTopkIds])
                : reinterpret_cast<const int32_t*>(s.segment + layout_.slot_offset[ssc::kSlotTopkIds]);
    a.n = n;
    a.begin = uint64_t(b.token_begin) * cfg_.topk;
    a.end = uint64_t(b.token_end) * cfg_.topk;
    a.ep = cfg_.ep;
    a.experts_per_rank = cfg_.experts_per_rank;
    a.rows_per_src = cfg_.recv_rows_per_src;
    a.align = (cfg_.flags & ssc::kConfigExpertAligned) ? cfg_.tile_m : 1;  // as rt::SegmentSpan aligns
    a.chunks = uint32_t((n + kPlanChunk - 1) / kPlanChunk);
    a.counts = s.plan_counts;
    a.send_counts = reinterpret_cast<int32_t*>(s.segment + layout_.slot_offset[ssc::kSlotSendCounts]);
    a.send_rows = reinterpret_cast<int32_t*>(s.segment + layout_.slot_offset[ssc::kSlotSendRows]);
    a.token_rows = reinterpret_cast<int32_t*>(s.segment + layout_.slot_offset[ssc::kSlotTokenRows]);
    a.rank = s.dev_rank[direction];
    if (a.chunks > 0) {
      PlanCount<<<a.chunks, kPlanThreads, experts * sizeof(uint32_t), stream>>>(a);
      PlanPlace<<<dim3(a.chunks, experts), kPlanThreads, 0, stream>>>(a);
    }
  }
  HPMOE_CUDA_TRY(cudaGetLastError(), "launching the bind / routing plan kernels");
  void* args[] = {&s.dev_rank[direction]};
  void* const* marks = timed ? (stream == s.stream ? s.events : s.kernel_events[direction]) : nullptr;
  if (timed & (kTimedBoth | kTimedStart)) cudaEventRecord(static_cast<cudaEvent_t>(marks[0]), stream);
  // Cooperative: every block co-resident (blocks wait on each other). Through cudaLaunchKernelExC so that the
  // launch can also be captured into a CUDA graph.
  cudaLaunchAttribute coop{};
  coop.id = cudaLaunchAttributeCooperative;
  coop.val.cooperative = 1;
  cudaLaunchConfig_t lc{};
  lc.gridDim = dim3((cfg_.num_aic + cfg_.num_aiv) * kBlocksPerWorker);
  lc.blockDim = dim3(kThreads);
  lc.dynamicSmemBytes = kWorkerSmemBytes;
  lc.stream = stream;
  cudaLaunchAttribute attrs[2] = {coop, {}};
  // 2-block clusters: pool units on the same B run as paired tiles (HPMOE_GEMM_PAIRS, cluster_pairing.cuh), or
  // each worker is a cluster (HPMOE_CLUSTER_WORKER, cuda_sync.cuh).
  constexpr bool kClusters = HPMOE_GEMM_PAIRS || HPMOE_CLUSTER_WORKER;
  if (kClusters) {
    attrs[1].id = cudaLaunchAttributeClusterDimension;
    attrs[1].val.clusterDim.x = 2;
    attrs[1].val.clusterDim.y = attrs[1].val.clusterDim.z = 1;
  }
  lc.attrs = attrs;
  lc.numAttrs = kClusters ? 2 : 1;
  const cudaError_t e = cudaLaunchKernelExC(&lc, Kernel(cfg_), args);
  if (e != cudaSuccess) {
    failed_ = true;
    return Format("rank %u: launching the persistent kernel: %s (%s)", rank, cudaGetErrorName(e), cudaGetErrorString(e));
  }
  if (timed & (kTimedBoth | kTimedEnd)) cudaEventRecord(static_cast<cudaEvent_t>(marks[1]), stream);
#if HPMOE_EXPERIMENT_PROFILE
  ProfilePrintKernel<<<1, 1, 0, stream>>>(direction);  // timing-only builds (tile_profile.cuh)
#endif
  s.last_stream = stream;
  return "";
}

// Why no launch of `direction` may start now (empty: it may): the direction, a failed group, SSCs not all
// loaded, a peer's heap not mapped.
std::string CudaGroup::LaunchRefusal(uint32_t direction) const {
  if (direction > 1) return "direction must be 0 (fwd) or 1 (bwd)";
  if (failed_) return "an earlier launch of this group failed; its counters are inconsistent: create a new group";
  if (!validated_[direction]) return Format("the %s SSCs of the group are not all loaded", kDirNames[direction]);
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].segment == nullptr) return Format("rank %u's heap is not mapped in this process (open its IPC handle)", r);
  }
  return "";
}

std::string CudaGroup::KernelMs(uint32_t rank, uint32_t direction, float* ms) {
  if (rank >= ranks_.size() || !IsLocal(rank) || direction > 1) return "no such local rank / direction";
  RankState& s = ranks_[rank];
  cudaSetDevice(s.device);
  cudaEvent_t end = static_cast<cudaEvent_t>(s.kernel_events[direction][1]);
  HPMOE_CUDA_TRY(cudaEventSynchronize(end), "waiting for the timed launch");
  HPMOE_CUDA_TRY(cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(s.kernel_events[direction][0]), end),
                 "reading the timed launch (was the last launch of this direction timed?)");
  return "";
}

std::string CudaGroup::Launch(uint32_t rank, uint32_t direction, void* stream, const LaunchSpec& spec,
                              const LaunchOptions& options, uint32_t timed) {
  if (direction <= 1 && (rank >= ranks_.size() || !IsLocal(rank)))
    return Format("rank %u is not a rank of this process", rank);
  if (timed & ~(kTimedBoth | kTimedStart | kTimedEnd))
    return Format("timed = %u: must be 0, or %u (both marks), %u (start only), %u (end only)", timed, kTimedBoth,
                  kTimedStart, kTimedEnd);
  const std::string refused = LaunchRefusal(direction);
  return refused.empty() ? Enqueue(rank, direction, stream, spec, options, timed) : refused;
}

std::string CudaGroup::Run(uint32_t direction, const LaunchOptions& o) {
  const std::string refused = LaunchRefusal(direction);
  if (!refused.empty()) return refused;
  // All ranks' kernels are in flight together: each waits on its peers' signals.
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (!IsLocal(r)) continue;
    RankState& s = ranks_[r];
    LaunchSpec spec;
    spec.plan = o.plan && direction == 0;  // the routing plan from TOPK_IDS, on the device
    const std::string err = Enqueue(r, direction, s.stream, spec, o, kTimedBoth);
    if (!err.empty()) return err;
  }
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (!IsLocal(r)) continue;
    RankState& s = ranks_[r];
    cudaSetDevice(s.device);
    HPMOE_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(s.stream)), "running the persistent kernel");
    cudaEventElapsedTime(&s.last_ms, static_cast<cudaEvent_t>(s.events[0]), static_cast<cudaEvent_t>(s.events[1]));
  }
  return Poll();
}

}  // namespace cuda
}  // namespace hpmoe
