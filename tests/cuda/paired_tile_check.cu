// GPU check of the paired TMA tile (op_kernel/cuda/block_gemm_paired.cuh), run by tests/cuda/test_paired_tile.py:
// C = A B over M x N, each block one 128-row band, in 2-block clusters that share every B tile by multicast,
// against the same tile run solo (bitwise) and a float64 reference on the host. Both B orders the GMM tasks
// use: MN-major (GMM: B is [K, N]) and K-major (GMM_TRANS_B: B is W^T with W [N, K]). K is not a multiple of
// 64, so the last step reads past K (the copy engine's zero fill). Prints one line per case; exit 0 iff all pass.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <random>
#include <type_traits>
#include <vector>

#include "gemm_variant.h"
#include "block_gemm_paired.cuh"
#include "tile_check_host.h"

using namespace hpmoe::cuda;
using tile_check::EncodeTiled;
using tile_check::Map;
using tile_check::Ok;
using T = __nv_bfloat16;

namespace {

// The check's shape: 4 row bands (2 clusters), 2 column tiles, 10 K steps (the last partial). --bench: one
// band per SM (66 clusters on an H200), 16 column tiles, K = 4096: the tile's own rate, solo against paired.
int M = 512, N = 512, K = 600;

#if HPMOE_GEMM_WS == 2
constexpr uint32_t kTileSmemBytes = kGemmWsSmemBytes;
#else
constexpr uint32_t kTileSmemBytes = kGemmTmaSmemBytes;
#endif

template <bool kTransB, bool kPaired>
__global__ void __launch_bounds__(kThreads, 1) TileKernel(const void* map_a, const void* map_b, const void* map_b_half,
                                                          T* c, int32_t M, int32_t N, int32_t K) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const TmaOperand a{map_a, 0, 0, 0};
  const TmaOperand b{map_b, 0, 0, 0, 0, map_b_half};
  const int32_t m0 = int32_t(blockIdx.x) * kBM;
#if HPMOE_GEMM_WS == 2
  // Built with HPMOE_GEMM_WS=2 (hpmoe_ws_paired_tile_check): the tiles in the roles of the whole launch, as the
  // worker kernel runs them (block_gemm_ws.cuh): threads 256.. produce (one issues), 0..255 consume, each role
  // with its setmaxnreg budget; the pipeline lives across the band's tiles. Solo: BlockGemmWs; paired:
  // BlockGemmWsPaired, the producer owning the cross-block refills.
  using Gemm = std::conditional_t<kPaired, BlockGemmWsPaired<T, false, kTransB>, BlockGemmWs<T, false, kTransB>>;
  if (threadIdx.x == 0) WsInitPipeline<T>(smem, (kPaired ? 2 : 1) * kWsConsumerWarps);
  __syncthreads();
  if constexpr (kPaired) ClusterSync();  // the peer's barriers are initialised before any copy or arrival
  Gemm g(smem);
  if (g.Producer()) {
    SetMaxRegsDec<kWsProducerRegs>();
    if (g.Issuer())
      for (int32_t n0 = 0; n0 < N; n0 += kBN) {
        if constexpr (kPaired) g.ProducePaired(a, b, m0, n0, 0, K);
        else g.Produce(a, b, m0, n0, 0, K);
      }
    NamedBarrier<kBarRegsBack, kThreads>();  // asleep until the consumers gave theirs back (block_gemm_ws.cuh)
    SetMaxRegsInc<kWsBaseRegs>();
  } else {
    SetMaxRegsInc<kWsConsumerRegs>();
    for (int32_t n0 = 0; n0 < N; n0 += kBN) {
      g.Zero();
      if constexpr (kPaired) g.ConsumePaired(0, K);
      else g.template Consume<false>(0, K);
      g.WriteStaged(c, N, m0, n0, M, N);
    }
    SetMaxRegsDec<kWsBaseRegs>();
    NamedBarrierArrive<kBarRegsBack, kThreads>();
  }
  if constexpr (kPaired) ClusterSync();  // no remote arrival meets an exited block
#else
  if constexpr (kPaired) {
    BlockGemmPaired<T, false, kTransB> g(smem);
    for (int32_t n0 = 0; n0 < N; n0 += kBN) {
      g.Zero();
      g.AccumulatePaired(a, b, m0, n0, 0, K);
      g.WriteStaged(c, N, m0, n0, M, N);
    }
  } else {
    BlockGemmTma<T, false, kTransB> g(smem);
    for (int32_t n0 = 0; n0 < N; n0 += kBN) {
      g.Zero();
      g.Accumulate(a, b, m0, n0, 0, K);
      g.WriteStaged(c, N, m0, n0, M, N);
    }
  }
#endif
}

// A launch of `blocks` tile blocks in clusters of `cluster` (the attribute lives in `attr`, which must outlive
// the launch).
cudaLaunchConfig_t TileLaunch(int blocks, unsigned cluster, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kTileSmemBytes;
  *attr = {};
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = cluster;
  attr->val.clusterDim.y = attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

template <bool kTransB, bool kPaired>
bool Launch(const CUtensorMap* maps, T* c, float* ms = nullptr) {
  auto kernel = TileKernel<kTransB, kPaired>;
  if (!Ok(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kTileSmemBytes), "smem attribute"))
    return false;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = TileLaunch(M / kBM, kPaired ? 2 : 1, &attr);
  if (!Ok(cudaLaunchKernelEx(&cfg, kernel, static_cast<const void*>(&maps[0]), static_cast<const void*>(&maps[1]),
                             static_cast<const void*>(&maps[2]), c, M, N, K),
          "launch"))
    return false;
  if (!Ok(cudaDeviceSynchronize(), kPaired ? "paired tile kernel" : "solo tile kernel")) return false;
  if (ms == nullptr) return true;
  return tile_check::TimeLaunches(
      [&] {
        cudaLaunchKernelEx(&cfg, kernel, static_cast<const void*>(&maps[0]), static_cast<const void*>(&maps[1]),
                           static_cast<const void*>(&maps[2]), c, M, N, K);
      },
      [](const char*) { return true; }, ms);
}

float ToF(T v) { return __bfloat162float(v); }

template <bool kTransB>
bool Case(EncodeTiled encode, std::mt19937& rng, bool bench) {
  const char* name = kTransB ? "K-major B (GMM_TRANS_B)" : "MN-major B (GMM)";
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> a(size_t(M) * K), b(size_t(K) * N);  // b: [K, N], or W [N, K] for kTransB
  for (auto& v : a) v = __float2bfloat16(dist(rng));
  for (auto& v : b) v = __float2bfloat16(dist(rng));
  T *da, *db, *dc_solo, *dc_pair;
  CUtensorMap* dmaps;
  const size_t c_bytes = size_t(M) * N * sizeof(T);
  if (!Ok(cudaMalloc(&da, a.size() * 2), "cudaMalloc") || !Ok(cudaMalloc(&db, b.size() * 2), "cudaMalloc") ||
      !Ok(cudaMalloc(&dc_solo, c_bytes), "cudaMalloc") || !Ok(cudaMalloc(&dc_pair, c_bytes), "cudaMalloc") ||
      !Ok(cudaMalloc(&dmaps, 3 * sizeof(CUtensorMap)), "cudaMalloc"))
    return false;
  cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dc_solo, 0xff, c_bytes);  // NaN bits: a row or column the tile did not write fails the checks
  cudaMemset(dc_pair, 0xff, c_bytes);
  CUtensorMap maps[3];
  std::memset(maps, 0, sizeof(maps));
  bool mapped = Map(encode, da, M, K, kBoxLines[kBoxRows128], &maps[0]);
  if (kTransB)
    mapped = mapped && Map(encode, db, N, K, kBoxLines[kBoxRows256], &maps[1]) &&
             Map(encode, db, N, K, kBoxLines[kBoxRows128], &maps[2]);
  else
    mapped = mapped && Map(encode, db, K, N, kBoxLines[kBoxRows64], &maps[1]);
  if (!mapped) {
    std::printf("paired tile: cuTensorMapEncodeTiled failed\n");
    return false;
  }
  cudaMemcpy(dmaps, maps, sizeof(maps), cudaMemcpyHostToDevice);
  float solo_ms = 0, pair_ms = 0;
  if (!Launch<kTransB, false>(dmaps, dc_solo, bench ? &solo_ms : nullptr) ||
      !Launch<kTransB, true>(dmaps, dc_pair, bench ? &pair_ms : nullptr))
    return false;
  if (bench) {
    const double flop = 2.0 * M * N * K;
    std::printf("paired tile bench %s, M %d N %d K %d: solo %.3f ms (%.0f TFLOP/s), paired %.3f ms (%.0f TFLOP/s)\n",
                name, M, N, K, solo_ms, flop / solo_ms / 1e9, pair_ms, flop / pair_ms / 1e9);
  }
  std::vector<T> solo(size_t(M) * N), pair(size_t(M) * N);
  cudaMemcpy(solo.data(), dc_solo, c_bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(pair.data(), dc_pair, c_bytes, cudaMemcpyDeviceToHost);
  const bool bitwise = std::memcmp(solo.data(), pair.data(), c_bytes) == 0;
  // Against float64, relative to max(|ref|, sqrt(K)) (unit normals: |C| ~ sqrt(K) = 24.5, so near-zero sums
  // are measured on that scale): the bf16 output's rounding is at most half an ulp, 2^-9 relative; fp32 sums
  // of 600 products add about 600 * 2^-24. Tolerance: one ulp, 2^-8.
  double worst = 0.0;
  for (int m = 0; m < M && !bench; ++m) {  // (--bench: the bitwise comparison only)
    for (int n = 0; n < N; ++n) {
      double ref = 0.0;
      for (int k = 0; k < K; ++k)
        ref += double(ToF(a[size_t(m) * K + k])) * ToF(kTransB ? b[size_t(n) * K + k] : b[size_t(k) * N + n]);
      const double err = std::fabs(double(ToF(pair[size_t(m) * N + n])) - ref) / std::fmax(std::fabs(ref), std::sqrt(double(K)));
      worst = std::isnan(err) ? INFINITY : std::fmax(worst, err);
    }
  }
  const bool close = worst < 1.0 / 256;
  std::printf("paired tile %s: bitwise equal to solo %s, max rel err vs float64 %.2e (tol 2^-8) %s\n", name,
              bitwise ? "yes" : "NO", worst, close ? "ok" : "FAIL");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc_solo);
  cudaFree(dc_pair);
  cudaFree(dmaps);
  return bitwise && close;
}

}  // namespace

int main(int argc, char** argv) {
  const bool bench = argc > 1 && std::strcmp(argv[1], "--bench") == 0;
  cudaDeviceProp prop{};
  EncodeTiled encode = nullptr;
  if (const int code = tile_check::Setup("paired tile", &prop, &encode)) return code;
  std::mt19937 rng(13);
  if (bench) {  // as many bands as clusters of 2 can be resident at once (GPCs of an odd SM count leave one idle)
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = TileLaunch(prop.multiProcessorCount & ~1, 2, &attr);
    auto kernel = TileKernel<false, true>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kTileSmemBytes);
    int clusters = 0;
    if (!Ok(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg), "cudaOccupancyMaxActiveClusters")) return 1;
    const int bands = argc > 2 ? std::atoi(argv[2]) : std::min(prop.multiProcessorCount & ~1, 2 * clusters);
    std::printf("paired tile bench: %d SMs, %d resident 2-block clusters, %d bands\n", prop.multiProcessorCount,
                clusters, bands);
    M = bands * kBM, N = 16 * kBN, K = 4096;
  }
  const bool gmm = Case<false>(encode, rng, bench);
  const bool trans_b = Case<true>(encode, rng, bench);
  return gmm && trans_b ? 0 : 1;
}
