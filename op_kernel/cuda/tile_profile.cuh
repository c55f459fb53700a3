// Timing-only builds (-DHPMOE_EXPERIMENT_PROFILE=1): where a GMM tile's time goes, per tile kind (GMM,
// GMM_TRANS_B, weight gradient), summed over one launch by thread 0 of every block from clock64 stamps:
// waiting for the first K step's operands, the rest of the K loop, staging the tile in shared memory, storing
// it. A one-thread kernel after each launch prints the sums (device printf) and clears them. Default builds
// compile none of it (docs/cuda.md, "Per phase and per tile").
#pragma once

#include <stdint.h>

#ifndef HPMOE_EXPERIMENT_PROFILE
#define HPMOE_EXPERIMENT_PROFILE 0
#endif

namespace hpmoe {
namespace cuda {

enum TilePhase { kPhaseFill, kPhaseLoop, kPhaseStage, kPhaseStore, kPhaseTiles, kPhaseSteps, kPhaseCount };

#if HPMOE_EXPERIMENT_PROFILE
__device__ unsigned long long g_tile_profile[3][kPhaseCount];

__device__ __forceinline__ void ProfileAdd(int kind, int phase, uint64_t v) {
  if (threadIdx.x == 0) atomicAdd(&g_tile_profile[kind][phase], (unsigned long long)v);
}
__device__ __forceinline__ uint64_t ProfileClock() { return clock64(); }

// Enqueued after each persistent launch (a separate kernel: a call inside the worker kernel would make ptxas
// serialise its wgmma); prints the sums and clears them.
__global__ void ProfilePrintKernel(uint32_t direction) {
  const char* names[3] = {"GMM", "GMM_TRANS_B", "WEIGHT_GRAD"};
  for (int k = 0; k < 3; ++k) {
    unsigned long long* p = g_tile_profile[k];
    const double tiles = double(p[kPhaseTiles]);
    if (tiles > 0)
      printf("tile profile %s %s: tiles %llu, K steps/tile %.1f, cycles/tile: fill %.0f loop %.0f stage %.0f "
             "store %.0f (loop cycles/K step %.0f)\n",
             direction ? "bwd" : "fwd", names[k], p[kPhaseTiles], double(p[kPhaseSteps]) / tiles,
             double(p[kPhaseFill]) / tiles, double(p[kPhaseLoop]) / tiles, double(p[kPhaseStage]) / tiles,
             double(p[kPhaseStore]) / tiles, double(p[kPhaseLoop]) / double(p[kPhaseSteps] ? p[kPhaseSteps] : 1));
    for (int i = 0; i < kPhaseCount; ++i) p[i] = 0;
  }
}
#else
__device__ __forceinline__ void ProfileAdd(int, int, uint64_t) {}
__device__ __forceinline__ uint64_t ProfileClock() { return 0; }
#endif

}  // namespace cuda
}  // namespace hpmoe
