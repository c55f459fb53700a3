// One rank per process (torchrun): the rank's heap segment is exported as a CUDA IPC handle, the peers'
// handles are opened into this process, and from then on the kernel sees the same `segments[]` table as
// in the one-process group: only the pointers' origin differs.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "cuda_group.h"
#include "../one_line.h"

static_assert(sizeof(cudaIpcMemHandle_t) == 64, "the C ABI passes IPC handles as 64 bytes");

namespace hpmoe {
namespace cuda {

std::string CudaGroup::CreateLocal(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd,
                                   uint32_t rank, int device) {
  std::string err = Configure(cfg, counters_fwd, counters_bwd);
  if (!err.empty()) return err;
  if (rank >= cfg.ep) return Format("rank %u outside a group of %u", rank, cfg.ep);
  local_rank_ = int(rank);
  for (RankState& s : ranks_) s.device = device;
  return AllocateRank(rank, device);
}

std::string CudaGroup::ExportHandle(uint8_t* out, size_t size) const {
  if (local_rank_ < 0 || size != sizeof(cudaIpcMemHandle_t))
    return Format("an IPC handle is %zu bytes and exists only for a one-rank-per-process group",
                  sizeof(cudaIpcMemHandle_t));
  cudaSetDevice(ranks_[local_rank_].device);
  cudaIpcMemHandle_t h;
  const cudaError_t e = cudaIpcGetMemHandle(&h, ranks_[local_rank_].segment);
  if (e != cudaSuccess) return Format("cudaIpcGetMemHandle: %s", cudaGetErrorString(e));
  std::memcpy(out, &h, sizeof(h));
  return "";
}

std::string CudaGroup::OpenPeer(uint32_t peer, const uint8_t* handle, size_t size) {
  if (local_rank_ < 0 || peer >= ranks_.size() || int(peer) == local_rank_ || size != sizeof(cudaIpcMemHandle_t))
    return Format("cannot open rank %u's heap here (local rank %d of %zu)", peer, local_rank_, ranks_.size());
  if (ranks_[peer].segment != nullptr) return Format("rank %u's heap is already mapped", peer);
  cudaSetDevice(ranks_[local_rank_].device);
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, sizeof(h));
  void* ptr = nullptr;
  const cudaError_t e = cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) return Format("mapping rank %u's heap (cudaIpcOpenMemHandle): %s", peer, cudaGetErrorString(e));
  ranks_[peer].segment = static_cast<uint8_t*>(ptr);
  ranks_[peer].owned = false;
  for (bool& current : ranks_[local_rank_].device_copy_current) current = false;  // new peer segment address
  return "";
}

}  // namespace cuda
}  // namespace hpmoe
