// Can the persistent worker kernel run as 2-CTA clusters? (docs/cuda.md, "2-CTA clusters"). On one GPU:
//  1. cudaOccupancyMaxActiveClusters for clusters of 2 blocks of the worker's shape (256 threads, the GMM tile's
//     dynamic shared memory): 66 on an H100/H200 would leave every SM one block;
//  2. a launch with both the cooperative and the cluster-dimension attributes: accepted, and every block
//     co-resident (a grid-wide counter each block waits on, bounded by a clock so a refusal cannot hang);
//     distributed shared memory works (each block reads its peer's word after barrier.cluster);
//  3. host time per launch (enqueue only) and GPU time per launch of an empty kernel, for: neither attribute,
//     cooperative alone, cluster alone, both.
// Built by CMake (build/op_host/cuda/hpmoe_cluster_probe), or: nvcc -std=c++17 -arch=sm_90a -O2 -Iop_kernel/cuda
//   benchmarks/cuda_cluster_probe.cu -o build/op_host/cuda/hpmoe_cluster_probe
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include "gemm_variant.h"
#include "block_gemm_tma.cuh"

#define CHECK(x)                                                                  \
  do {                                                                            \
    const cudaError_t e_ = (x);                                                   \
    if (e_ != cudaSuccess) {                                                      \
      std::printf("FAIL %s: %s\n", #x, cudaGetErrorString(e_));                   \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

constexpr int kThreads = hpmoe::cuda::kThreads;
constexpr uint32_t kSmem = hpmoe::cuda::kGemmTmaSmemBytes;  // the default build's kWorkerSmemBytes

// mode 1: grid-wide arrival count (co-residency) + DSMEM exchange with the peer; mode 0: nothing.
__global__ void Probe(int mode, unsigned* arrived, int* bad, long long spin_limit) {
  extern __shared__ __align__(16) unsigned char smem[];
  if (mode == 0) return;
  unsigned* word = reinterpret_cast<unsigned*>(smem);
  if (threadIdx.x == 0) *word = blockIdx.x * 7 + 1;
  if (threadIdx.x == 0) {
    atomicAdd(arrived, 1u);
    const long long t0 = clock64();
    while (atomicAdd(arrived, 0u) < gridDim.x) {
      if (clock64() - t0 > spin_limit) {  // not every block resident: report, do not hang
        atomicAdd(bad, 1);
        break;
      }
    }
  }
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
  if (threadIdx.x == 0) {
    uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(word)), remote, v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank ^ 1u));
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote));
    const unsigned peer = blockIdx.x ^ 1u;
    if (v != peer * 7 + 1) atomicAdd(bad, 1);
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

static cudaError_t Launch(int blocks, bool coop, bool cluster, int mode, unsigned* arrived, int* bad,
                          long long spin, cudaStream_t stream = nullptr) {
  cudaLaunchAttribute attr[2];
  int n = 0;
  if (coop) {
    attr[n].id = cudaLaunchAttributeCooperative;
    attr[n++].val.cooperative = 1;
  }
  if (cluster) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = 2;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t lc = {};
  lc.gridDim = dim3(blocks);
  lc.blockDim = dim3(kThreads);
  lc.dynamicSmemBytes = kSmem;
  lc.stream = stream;
  lc.attrs = attr;
  lc.numAttrs = n;
  void* args[] = {&mode, &arrived, &bad, &spin};
  return cudaLaunchKernelExC(&lc, reinterpret_cast<const void*>(Probe), args);
}

int main() {
  int dev = 0, sms = 0, clock_khz = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
  CHECK(cudaFuncSetAttribute(Probe, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  CHECK(cudaFuncSetAttribute(Probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 0));
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Probe, kThreads, kSmem));
  const int blocks = (sms * per_sm) & ~1;
  cudaLaunchAttribute ca;
  ca.id = cudaLaunchAttributeClusterDimension;
  ca.val.clusterDim.x = 2;
  ca.val.clusterDim.y = ca.val.clusterDim.z = 1;
  cudaLaunchConfig_t oc = {};
  oc.gridDim = dim3(blocks);
  oc.blockDim = dim3(kThreads);
  oc.dynamicSmemBytes = kSmem;
  oc.attrs = &ca;
  oc.numAttrs = 1;
  int clusters = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(Probe), &oc));
  std::printf("SMs %d, blocks per SM %d at %u B shared, max active 2-block clusters %d (need %d)\n", sms, per_sm,
              kSmem, clusters, blocks / 2);

  unsigned* arrived;
  int* bad;
  CHECK(cudaMalloc(&arrived, 4));
  CHECK(cudaMalloc(&bad, 4));
  const long long spin = 2000LL * clock_khz;  // 2 s
  for (int coop = 0; coop < 2; ++coop) {
    CHECK(cudaMemset(arrived, 0, 4));
    CHECK(cudaMemset(bad, 0, 4));
    const cudaError_t e = Launch(blocks, coop, true, 1, arrived, bad, spin);
    const cudaError_t s = e == cudaSuccess ? cudaDeviceSynchronize() : e;
    int h_bad = -1;
    if (s == cudaSuccess) CHECK(cudaMemcpy(&h_bad, bad, 4, cudaMemcpyDeviceToHost));
    std::printf("cluster 2x1x1%s, %d blocks: launch %s, run %s, failed checks %d\n", coop ? " + cooperative" : "",
                blocks, cudaGetErrorString(e), cudaGetErrorString(s), h_bad);
    if (s != cudaSuccess) cudaGetLastError();
  }

  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  const char* names[4] = {"plain", "cooperative", "cluster", "cooperative + cluster"};
  for (int rep = 0; rep < 2; ++rep)
    for (int v = 0; v < 4; ++v) {
      constexpr int kN = 200;
      CHECK(cudaStreamSynchronize(st));
      CHECK(cudaEventRecord(a, st));
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kN; ++i) CHECK(Launch(blocks, v & 1, v & 2, 0, arrived, bad, 0, st));
      const double host_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kN;
      CHECK(cudaEventRecord(b, st));
      CHECK(cudaEventSynchronize(b));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, a, b));
      std::printf("round %d %-22s host %.1f us/launch, GPU %.1f us/launch\n", rep, names[v], host_us, 1000 * ms / kN);
    }
  return 0;
}
