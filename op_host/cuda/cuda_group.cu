// CudaGroup (cuda_group.h): the group's state: configuration, heap segments and slots, SSCs loaded through the
// shared validating loader and uploaded. Launches are in cuda_group_launch.cu, failure reports and traces in
// cuda_group_reports.cu.
#include "cuda_group.h"

#include <cuda_runtime.h>

#include "cuda_try.h"
#include "tensor_maps.h"

namespace hpmoe {
namespace cuda {

CudaGroup::~CudaGroup() {
  for (RankState& r : ranks_) {
    cudaSetDevice(r.device);
    if (r.owned) cudaFree(r.segment);
    else if (r.segment != nullptr) cudaIpcCloseMemHandle(r.segment);
    cudaFree(r.fault_counter);
    cudaFree(r.tensor_maps);
    cudaFree(r.plan_counts);
    for (int d = 0; d < 2; ++d) {
      cudaFree(r.image[d]);
      cudaFree(r.dev_rank[d]);
      cudaFree(r.reports[d]);
      cudaFree(r.trace[d]);
      cudaFree(r.epoch[d]);
      if (r.events[d]) cudaEventDestroy(static_cast<cudaEvent_t>(r.events[d]));
      for (void* e : r.kernel_events[d])
        if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
    }
    if (r.stream) cudaStreamDestroy(static_cast<cudaStream_t>(r.stream));
  }
  if (host_status_ != nullptr) cudaFreeHost(host_status_);
}

std::string CudaGroup::SetExternalSlots(uint32_t mask) {
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) {
    if (((mask >> s) & 1u) && !BindableSlot(s))
      return Format("slot %s cannot live outside the heap (peers write it)", ssc::SlotName(s));
  }
  if (mask >> ssc::kSlotCount) return Format("external slot mask 0x%x names slots past %u", mask, ssc::kSlotCount);
  external_mask_ = mask;
  return "";
}

std::string CudaGroup::SetPlacedSlots(const uint64_t* addresses) {
  placed_mask_ = 0;
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) {
    placed_[s] = addresses != nullptr ? addresses[s] : 0;
    if (placed_[s] == 0) continue;
    if (placed_[s] % 16) return Format("slot %s placed at 0x%llx: not 16-byte aligned (the copy engine reads it)",
                                       ssc::SlotName(s), (unsigned long long)placed_[s]);
    placed_mask_ |= 1u << s;
  }
  return "";
}

std::string CudaGroup::Configure(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd) {
  if (cfg.ep == 0 || cfg.ep > kMaxRanks) return Format("ep=%u: the CUDA backend runs 1..%u ranks", cfg.ep, kMaxRanks);
  if (cfg.dtype != ssc::kBF16 && cfg.dtype != ssc::kFP16)
    return "the CUDA backend's GMM tiles run bf16 or fp16 (tensor cores); compile with --dtype bf16 or fp16";
  if (cfg.hidden % 8 || cfg.inter % 8 || cfg.wgrad_tile % 8)
    return Format("hidden=%u, inter=%u and wgrad_tile=%u must be multiples of 8 (16-byte vectors)", cfg.hidden,
                  cfg.inter, cfg.wgrad_tile);
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) {
    if (!((placed_mask_ >> s) & 1u)) continue;
    if (!PlaceableSlot(s, cfg.ep))
      return Format("slot %s cannot be placed outside the heap at ep=%u (saved for backward, or peers write it)",
                    ssc::SlotName(s), cfg.ep);
    if ((external_mask_ >> s) & 1u) return Format("slot %s is both external and placed", ssc::SlotName(s));
  }
  std::string err =
      cpu::ComputeHeapLayout(cfg, counters_fwd, counters_bwd, &layout_, external_mask_ | placed_mask_);
  if (!err.empty()) return err;
  cfg_ = cfg;
  ranks_.resize(cfg.ep);
  HPMOE_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&host_status_), cfg.ep * sizeof(uint32_t),
                               cudaHostAllocMapped | cudaHostAllocPortable), "allocating the mapped status words");
  for (uint32_t r = 0; r < cfg.ep; ++r) host_status_[r] = 0;
  return "";
}

std::string CudaGroup::Create(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd,
                              const std::vector<int>& devices) {
  if (devices.size() != cfg.ep) return Format("%zu GPUs given for ep=%u", devices.size(), cfg.ep);
  if (placed_mask_ && cfg.ep > 1) return "placed slots need a group with one rank in this process";
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
  // Written only by a worker that fails; the group is unusable after that, so zeroed once here.
  HPMOE_CUDA_TRY(cudaMemset(s.reports[direction], 0, l.program.num_queues * sizeof(rt::WorkerReport)), "cudaMemset");
  if (s.dev_rank[direction] == nullptr) {
    HPMOE_CUDA_TRY(cudaMalloc(&s.dev_rank[direction], sizeof(DeviceRank)), "cudaMalloc");
    // Zeroed: FailureReport reads both directions' launch state, and a direction not launched yet must read as
    // "not planned" rather than as whatever the allocation held (a garbage plan_bad named a bogus topk_ids entry).
    HPMOE_CUDA_TRY(cudaMemset(s.dev_rank[direction], 0, sizeof(DeviceRank)), "cudaMemset");
  }
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
    const std::string err = BuildTensorMaps(layout_, s.segment, placed_, &s.tensor_maps);
    if (!err.empty()) return err;
  }
#endif
  d.tensor_maps = s.tensor_maps;
  d.reports = s.reports[direction];
  d.fault_counter = s.fault_counter;
  d.epoch = s.epoch[direction];
  void* status = nullptr;
  HPMOE_CUDA_TRY(cudaHostGetDevicePointer(&status, host_status_ + rank, 0), "mapping the status word");
  d.host_status = static_cast<uint32_t*>(status);
  s.device_copy_current[direction] = false;  // copied by the next launch
  return "";
}

std::string CudaGroup::Write(uint32_t rank, uint32_t slot, const void* src, uint64_t bytes) {
  if (slot < ssc::kSlotCount && (((external_mask_ | placed_mask_) >> slot) & 1u))
    return Format("slot %s lives outside this group's heap (bound per launch, or placed): nothing to write", ssc::SlotName(slot));
  if (rank >= ranks_.size() || !IsLocal(rank) || slot >= ssc::kSlotCount || bytes != layout_.slots[slot].bytes)
    return Format("write of %llu bytes to rank %u slot %u does not match the layout (or the rank is not in this process)",
                  (unsigned long long)bytes, rank, slot);
  cudaSetDevice(ranks_[rank].device);
  HPMOE_CUDA_TRY(cudaMemcpy(ranks_[rank].segment + layout_.slot_offset[slot], src, bytes, cudaMemcpyDefault),
                 "writing a slot");
  return "";
}

std::string CudaGroup::Read(uint32_t rank, uint32_t slot, void* dst, uint64_t bytes) {
  if (slot < ssc::kSlotCount && (((external_mask_ | placed_mask_) >> slot) & 1u))
    return Format("slot %s lives outside this group's heap (bound per launch, or placed): nothing to read", ssc::SlotName(slot));
  if (rank >= ranks_.size() || !IsLocal(rank) || slot >= ssc::kSlotCount || bytes != layout_.slots[slot].bytes)
    return Format("read of %llu bytes from rank %u slot %u does not match the layout (or the rank is not in this process)",
                  (unsigned long long)bytes, rank, slot);
  cudaSetDevice(ranks_[rank].device);
  HPMOE_CUDA_TRY(cudaMemcpy(dst, ranks_[rank].segment + layout_.slot_offset[slot], bytes, cudaMemcpyDefault),
                 "reading a slot");
  return "";
}

}  // namespace cuda
}  // namespace hpmoe
