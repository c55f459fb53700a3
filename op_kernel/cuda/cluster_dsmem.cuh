// Cluster primitives shared by the 2-block cluster builds (HPMOE_GEMM_PAIRS: paired pool units,
// cluster_pairing.cuh; HPMOE_CLUSTER_WORKER: a worker that is a 2-block cluster, cluster_worker.cuh): the
// block's rank in its cluster, the cluster barrier, and words in the peer block's shared memory (distributed
// shared memory, `mapa`), stored with release and loaded with acquire at cluster scope.
#pragma once

#include <stdint.h>

namespace hpmoe {
namespace cuda {

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of both blocks; orders each block's earlier work (shared and global memory: release/acquire
// at cluster scope) before the peer's later work.
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ uint32_t SharedAddr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
// The address of `local` (a __shared__ variable: the same offset in every block) in block `rank` of the cluster.
__device__ __forceinline__ uint32_t Remote(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(SharedAddr(local)), "r"(rank));
  return remote;
}
__device__ __forceinline__ void StoreRemote(uint32_t* local, uint32_t rank, uint32_t v) {
  asm volatile("st.relaxed.cluster.shared::cluster.u32 [%0], %1;" ::"r"(Remote(local, rank)), "r"(v) : "memory");
}
// The last store of a message: release, so the peer's acquire of this word sees the stores before it.
__device__ __forceinline__ void StoreRemoteRelease(uint32_t* local, uint32_t rank, uint32_t v) {
  asm volatile("st.release.cluster.shared::cluster.u32 [%0], %1;" ::"r"(Remote(local, rank)), "r"(v) : "memory");
}
__device__ __forceinline__ void StoreRemoteRelease64(unsigned long long* local, uint32_t rank, unsigned long long v) {
  asm volatile("st.release.cluster.shared::cluster.u64 [%0], %1;" ::"r"(Remote(local, rank)), "l"(v) : "memory");
}
__device__ __forceinline__ uint32_t LoadAcquireCluster(const uint32_t* local) {
  uint32_t v;
  asm volatile("ld.acquire.cluster.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(SharedAddr(local)) : "memory");
  return v;
}
__device__ __forceinline__ unsigned long long LoadAcquireCluster64(const unsigned long long* local) {
  unsigned long long v;
  asm volatile("ld.acquire.cluster.shared::cta.u64 %0, [%1];" : "=l"(v) : "r"(SharedAddr(local)) : "memory");
  return v;
}

}  // namespace cuda
}  // namespace hpmoe
