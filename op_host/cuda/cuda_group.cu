#include "cuda_group.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "../../op_kernel/cuda/worker_kernel.cuh"
#include "tensor_maps.h"
#include "../one_line.h"
#include "../worker_report.h"

namespace hpmoe {
namespace cuda {
namespace {

const char* kDirNames[2] = {"fwd", "bwd"};

#define HPMOE_CUDA_TRY(EXPR, WHAT)                                                                   \
  do {                                                                                               \
    const cudaError_t e_ = (EXPR);                                                                   \
    if (e_ != cudaSuccess) return Format("%s: CUDA error %s (%s)", WHAT, cudaGetErrorName(e_), cudaGetErrorString(e_)); \
  } while (0)

template <class T>
const void* KernelFor() {
  return reinterpret_cast<const void*>(&WorkerKernel<T>);
}

const void* Kernel(uint32_t dtype) {
  return dtype == ssc::kFP16 ? KernelFor<__half>() : KernelFor<__nv_bfloat16>();
}

}  // namespace

CudaGroup::~CudaGroup() {
  for (RankState& r : ranks_) {
    cudaSetDevice(r.device);
    if (r.owned) cudaFree(r.segment);
    else if (r.segment != nullptr) cudaIpcCloseMemHandle(r.segment);
    cudaFree(r.fault_counter);
    cudaFree(r.tensor_maps);
    for (int d = 0; d < 2; ++d) {
      cudaFree(r.image[d]);
      cudaFree(r.dev_rank[d]);
      cudaFree(r.reports[d]);
      cudaFree(r.trace[d]);
      if (r.events[d]) cudaEventDestroy(static_cast<cudaEvent_t>(r.events[d]));
    }
    if (r.stream) cudaStreamDestroy(static_cast<cudaStream_t>(r.stream));
  }
}

std::string CudaGroup::Configure(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd) {
  if (cfg.ep == 0 || cfg.ep > kMaxRanks) return Format("ep=%u: the CUDA backend runs 1..%u ranks", cfg.ep, kMaxRanks);
  if (cfg.dtype != ssc::kBF16 && cfg.dtype != ssc::kFP16)
    return "the CUDA backend's GMM tiles run bf16 or fp16 (tensor cores); compile with --dtype bf16 or fp16";
  if (cfg.hidden % 8 || cfg.inter % 8 || cfg.wgrad_tile % 8)
    return Format("hidden=%u, inter=%u and wgrad_tile=%u must be multiples of 8 (16-byte vectors)", cfg.hidden,
                  cfg.inter, cfg.wgrad_tile);
  std::string err = cpu::ComputeHeapLayout(cfg, counters_fwd, counters_bwd, &layout_);
  if (!err.empty()) return err;
  cfg_ = cfg;
  ranks_.resize(cfg.ep);
  return "";
}

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
  cudaStream_t stream;
  HPMOE_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  s.stream = stream;
  for (int d = 0; d < 2; ++d) {
    cudaEvent_t e;
    HPMOE_CUDA_TRY(cudaEventCreate(&e), "cudaEventCreate");
    s.events[d] = e;
  }
  return "";
}

std::string CudaGroup::Create(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd,
                              const std::vector<int>& devices) {
  if (devices.size() != cfg.ep) return Format("%zu GPUs given for ep=%u", devices.size(), cfg.ep);
  std::string err = Configure(cfg, counters_fwd, counters_bwd);
  for (uint32_t r = 0; err.empty() && r < cfg.ep; ++r) err = AllocateRank(r, devices[r]);
  if (!err.empty()) return err;
  for (uint32_t a = 0; a < cfg.ep; ++a) {
    for (uint32_t b = 0; b < cfg.ep; ++b) {
      const int da = ranks_[a].device, db = ranks_[b].device;
      if (da == db) continue;
      int can = 0;
      HPMOE_CUDA_TRY(cudaDeviceCanAccessPeer(&can, da, db), "cudaDeviceCanAccessPeer");
      if (!can) return Format("GPU %d cannot access GPU %d's memory (no P2P): ranks %u and %u", da, db, a, b);
      cudaSetDevice(da);
      const cudaError_t e = cudaDeviceEnablePeerAccess(db, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) HPMOE_CUDA_TRY(e, "cudaDeviceEnablePeerAccess");
      cudaGetLastError();
    }
  }
  return "";
}

std::string CudaGroup::CheckBinding(uint32_t rank, uint32_t direction) const {
  const ssc::SscView& v = ranks_[rank].ssc[direction].view;
  for (uint32_t i = 0; i < v.num_tensors; ++i) {
    const ssc::SscTensor& t = v.tensors[i];
    const cpu::SlotShape& want = layout_.slots[t.slot];
    bool same = t.ndim == want.ndim && t.dtype == want.dtype && t.bytes == want.bytes;
    for (uint32_t d = 0; same && d < t.ndim; ++d) same = t.dims[d] == want.dims[d];
    if (!same) return Format("tensor %s does not match the config's shape/dtype", ssc::SlotName(t.slot));
  }
  return IsLocal(rank) ? CheckCoResidency(rank, direction) : "";
}

std::string CudaGroup::CheckCoResidency(uint32_t rank, uint32_t direction) const {
  const uint32_t workers = cfg_.num_aic + cfg_.num_aiv;  // one block per worker (a pool queue is no worker)
  const int dev = ranks_[rank].device;
  cudaDeviceProp prop;
  HPMOE_CUDA_TRY(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  cudaSetDevice(dev);
  const void* kernel = Kernel(cfg_.dtype);
  HPMOE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kWorkerSmemBytes)),
                 "raising the kernel's shared-memory limit");
  int per_sm = 0;
  HPMOE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, int(kThreads), kWorkerSmemBytes),
                 "occupancy query");
  if (!prop.cooperativeLaunch) return Format("GPU %d does not support cooperative launches", dev);
  const uint64_t capacity = uint64_t(per_sm) * uint64_t(prop.multiProcessorCount);
  if (workers > capacity)
    return Format("the SSC has %u workers (num_aic + num_aiv) but GPU %d (%s) holds %llu co-resident worker blocks "
                  "(%d SMs x %d, %u KB shared memory each); compile with fewer --workers-aic/--workers-aiv",
                  workers, dev, prop.name, (unsigned long long)capacity, prop.multiProcessorCount, per_sm,
                  kWorkerSmemBytes / 1024);
  return "";
}

std::string CudaGroup::Load(uint32_t rank, uint32_t direction, const uint8_t* data, size_t size) {
  if (rank >= ranks_.size() || direction > 1) return Format("rank %u / direction %u out of range", rank, direction);
  ssc::LoadExpect expect;
  expect.config = &cfg_;
  expect.rank = rank;
  expect.direction = direction;
  expect.counter_capacity = layout_.counter_capacity[direction];
  RankState& s = ranks_[rank];
  std::string err = ssc::LoadSsc(data, size, expect, &s.ssc[direction]);
  if (err.empty()) err = CheckBinding(rank, direction);  // tensor records; co-residency on local ranks
  if (!err.empty()) {
    s.ssc[direction].loaded = false;
    return Format("rank %u %s SSC: %s", rank, kDirNames[direction], err.c_str());
  }
  validated_[direction] = false;
  std::vector<const ssc::LoadedSsc*> group;
  for (const RankState& r : ranks_) {
    if (!r.ssc[direction].loaded) return IsLocal(rank) ? Upload(rank, direction) : "";  // group check once all are in
    group.push_back(&r.ssc[direction]);
  }
  err = ssc::ValidateGroup(group.data(), uint32_t(group.size()));
  if (!err.empty()) return err;
  validated_[direction] = true;
  return IsLocal(rank) ? Upload(rank, direction) : "";
}

std::string CudaGroup::Upload(uint32_t rank, uint32_t direction) {
  RankState& s = ranks_[rank];
  const ssc::LoadedSsc& l = s.ssc[direction];
  const uint8_t* host = l.bytes.data;
  const size_t size = l.bytes.size;
  HPMOE_CUDA_TRY(cudaSetDevice(s.device), "cudaSetDevice");
  cudaFree(s.image[direction]);
  cudaFree(s.reports[direction]);
  cudaFree(s.trace[direction]);
  s.trace[direction] = nullptr;
  HPMOE_CUDA_TRY(cudaMalloc(&s.image[direction], size), "allocating the SSC image");
  HPMOE_CUDA_TRY(cudaMemcpy(s.image[direction], host, size, cudaMemcpyHostToDevice), "uploading the SSC");
  HPMOE_CUDA_TRY(cudaMalloc(&s.reports[direction], l.program.num_queues * sizeof(rt::WorkerReport)), "cudaMalloc");
  if (s.dev_rank[direction] == nullptr)
    HPMOE_CUDA_TRY(cudaMalloc(&s.dev_rank[direction], sizeof(DeviceRank)), "cudaMalloc");
  // The program's pointers, rebased from the host image onto the device copy.
  auto rebase = [&](const void* p) { return s.image[direction] + (static_cast<const uint8_t*>(p) - host); };
  DeviceRank& d = s.host_rank[direction];
  d = DeviceRank{};
  d.program = l.program;
  d.program.tasks = reinterpret_cast<const ssc::SscTask*>(rebase(l.program.tasks));
  d.program.events = reinterpret_cast<const ssc::SscEvent*>(rebase(l.program.events));
  d.program.queues = reinterpret_cast<const ssc::SscQueue*>(rebase(l.program.queues));
  d.program.entries = reinterpret_cast<const uint32_t*>(rebase(l.program.entries));
  if (l.program.pool != nullptr) d.program.pool = reinterpret_cast<const ssc::SscQueue*>(rebase(l.program.pool));
  d.cfg = cfg_;
  d.rank = rank;
  d.direction = direction;
  for (uint32_t r = 0; r < ranks_.size(); ++r) d.segments[r] = ranks_[r].segment;
  for (uint32_t i = 0; i < ssc::kSlotCount; ++i) {
    const cpu::SlotShape& sh = layout_.slots[i];
    d.slots[i] = SlotInfo{layout_.slot_offset[i], sh.rows, sh.cols, sh.dtype, sh.ndim == 3 ? sh.dims[1] : 0u};
  }
  d.counter_offset = layout_.counter_offset[direction];
#if HPMOE_GEMM_TMA
  if (s.tensor_maps == nullptr) {
    const std::string err = BuildTensorMaps(layout_, s.segment, &s.tensor_maps);
    if (!err.empty()) return err;
  }
#endif
  d.tensor_maps = s.tensor_maps;
  d.reports = s.reports[direction];
  d.fault_counter = s.fault_counter;
  return "";
}

std::string CudaGroup::Write(uint32_t rank, uint32_t slot, const void* src, uint64_t bytes) {
  if (rank >= ranks_.size() || !IsLocal(rank) || slot >= ssc::kSlotCount || bytes != layout_.slots[slot].bytes)
    return Format("write of %llu bytes to rank %u slot %u does not match the layout (or the rank is not in this process)",
                  (unsigned long long)bytes, rank, slot);
  cudaSetDevice(ranks_[rank].device);
  HPMOE_CUDA_TRY(cudaMemcpy(ranks_[rank].segment + layout_.slot_offset[slot], src, bytes, cudaMemcpyDefault),
                 "writing a slot");
  return "";
}

std::string CudaGroup::Read(uint32_t rank, uint32_t slot, void* dst, uint64_t bytes) {
  if (rank >= ranks_.size() || !IsLocal(rank) || slot >= ssc::kSlotCount || bytes != layout_.slots[slot].bytes)
    return Format("read of %llu bytes from rank %u slot %u does not match the layout (or the rank is not in this process)",
                  (unsigned long long)bytes, rank, slot);
  cudaSetDevice(ranks_[rank].device);
  HPMOE_CUDA_TRY(cudaMemcpy(dst, ranks_[rank].segment + layout_.slot_offset[slot], bytes, cudaMemcpyDefault),
                 "reading a slot");
  return "";
}

std::string CudaGroup::Run(uint32_t direction, const LaunchOptions& o) {
  if (direction > 1) return "direction must be 0 (fwd) or 1 (bwd)";
  if (failed_) return "an earlier launch of this group failed; its counters are inconsistent: create a new group";
  if (!validated_[direction]) return Format("the %s SSCs of the group are not all loaded", kDirNames[direction]);
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (ranks_[r].segment == nullptr) return Format("rank %u's heap is not mapped in this process (open its IPC handle)", r);
  }
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (!IsLocal(r)) continue;
    RankState& s = ranks_[r];
    cudaStream_t stream = static_cast<cudaStream_t>(s.stream);
    HPMOE_CUDA_TRY(cudaSetDevice(s.device), "cudaSetDevice");
    DeviceRank& d = s.host_rank[direction];
    for (uint32_t p = 0; p < ranks_.size(); ++p) d.segments[p] = ranks_[p].segment;
    d.program.invocation = ++s.invocations[direction];
    d.timeout_ns = o.timeout_ms * 1000000ull;
    d.fault_mode = o.fault_rank == r ? o.fault_mode : kCudaFaultNone;
    d.fault_after = o.fault_after;
    if (o.trace && s.trace[direction] == nullptr)
      HPMOE_CUDA_TRY(cudaMalloc(&s.trace[direction], 2 * sizeof(uint64_t) * d.program.num_tasks), "cudaMalloc");
    d.trace = o.trace ? s.trace[direction] : nullptr;
    if (d.trace) cudaMemsetAsync(d.trace, 0, 2 * sizeof(uint64_t) * d.program.num_tasks, stream);
    cudaMemsetAsync(s.fault_counter, 0, sizeof(uint32_t), stream);
    cudaMemsetAsync(d.reports, 0, d.program.num_queues * sizeof(rt::WorkerReport), stream);
    cudaMemcpyAsync(s.dev_rank[direction], &d, sizeof(DeviceRank), cudaMemcpyHostToDevice, stream);
  }
  // All ranks' kernels are in flight together: each waits on its peers' signals.
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (!IsLocal(r)) continue;
    RankState& s = ranks_[r];
    cudaStream_t stream = static_cast<cudaStream_t>(s.stream);
    cudaSetDevice(s.device);
    void* args[] = {&s.dev_rank[direction]};
    cudaEventRecord(static_cast<cudaEvent_t>(s.events[0]), stream);
    const cudaError_t e = cudaLaunchCooperativeKernel(Kernel(cfg_.dtype), dim3(cfg_.num_aic + cfg_.num_aiv),
                                                      dim3(kThreads), args, kWorkerSmemBytes, stream);
    if (e != cudaSuccess) {
      failed_ = true;
      return Format("rank %u: launching the persistent kernel: %s (%s)", r, cudaGetErrorName(e), cudaGetErrorString(e));
    }
    cudaEventRecord(static_cast<cudaEvent_t>(s.events[1]), stream);
  }
  std::string first;
  uint32_t failures = 0;
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (!IsLocal(r)) continue;
    RankState& s = ranks_[r];
    cudaSetDevice(s.device);
    HPMOE_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(s.stream)), "running the persistent kernel");
    cudaEventElapsedTime(&s.last_ms, static_cast<cudaEvent_t>(s.events[0]), static_cast<cudaEvent_t>(s.events[1]));
    const DeviceRank& d = s.host_rank[direction];
    std::vector<rt::WorkerReport> reports(d.program.num_queues);
    HPMOE_CUDA_TRY(cudaMemcpy(reports.data(), d.reports, reports.size() * sizeof(rt::WorkerReport),
                              cudaMemcpyDeviceToHost), "reading worker reports");
    for (const rt::WorkerReport& w : reports) {
      if (w.status == rt::kOk) continue;
      ++failures;
      // The root cause first: a timeout or handler failure rather than a worker that was told to stop.
      if (first.empty() || (w.status != rt::kAborted && first.find("stopped after") != std::string::npos))
        first = FormatWorkerReport(w, cfg_.num_aic);
    }
  }
  if (failures == 0) return "";
  failed_ = true;
  if (failures > 1) first += Format(" (+%u more workers stopped)", failures - 1);
  return first;
}

std::string CudaGroup::ReadTrace(uint32_t rank, uint32_t direction, uint64_t* out) {
  if (rank >= ranks_.size() || !IsLocal(rank) || direction > 1 || ranks_[rank].trace[direction] == nullptr)
    return "no trace was recorded for this rank and direction (run with trace on)";
  cudaSetDevice(ranks_[rank].device);
  HPMOE_CUDA_TRY(cudaMemcpy(out, ranks_[rank].trace[direction],
                            2 * sizeof(uint64_t) * ranks_[rank].ssc[direction].program.num_tasks,
                            cudaMemcpyDeviceToHost), "reading the trace");
  return "";
}

}  // namespace cuda
}  // namespace hpmoe
