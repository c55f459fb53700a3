// The bind kernel: one small launch before each persistent kernel, on the same stream. It writes what
// changes per launch into the rank's DeviceRank in device memory: the invocation number (from the device
// epoch counter, so a replayed CUDA graph advances epochs as an eager launch does), the bound slot
// addresses and the bound weights' tensor maps. Nothing is copied from the host at launch time.
#pragma once

#include "device_rank.cuh"

namespace hpmoe {
namespace cuda {

struct LaunchBinding {
  uint8_t* bound[ssc::kSlotCount];
  uint32_t dw_mode;
  uint32_t planned;
  uint32_t run_if;  // RunIf
  uint32_t token_begin, token_end;
  uint32_t* need_out;
  alignas(64) uint8_t weight_maps[2][kBoxKinds][kTensorMapBytes];
  alignas(64) uint8_t dw_maps[2][kTensorMapBytes];  // valid when has_dw_maps
  uint32_t has_dw_maps;
};

__global__ void BindLaunch(DeviceRank* d, const __grid_constant__ LaunchBinding b) {
  const uint32_t words = sizeof(b.weight_maps) / 4;
  const uint32_t* src = reinterpret_cast<const uint32_t*>(&b.weight_maps[0][0][0]);
  uint32_t* dst = reinterpret_cast<uint32_t*>(&d->weight_maps[0][0][0]);
  for (uint32_t i = threadIdx.x; i < words; i += blockDim.x) dst[i] = src[i];
  const uint32_t dw_words = sizeof(b.dw_maps) / 4;
  const uint32_t* dw_src = reinterpret_cast<const uint32_t*>(&b.dw_maps[0][0]);
  uint32_t* dw_dst = reinterpret_cast<uint32_t*>(&d->dw_maps[0][0]);
  for (uint32_t i = threadIdx.x; i < dw_words && b.has_dw_maps; i += blockDim.x) dw_dst[i] = dw_src[i];
  for (uint32_t s = threadIdx.x; s < ssc::kSlotCount; s += blockDim.x) d->bound[s] = b.bound[s];
  if (threadIdx.x == 0) {
    // A conditional launch reads the verdict of this heap's last speculative forward (stream order: that
    // forward's kernels are done); a launch that does nothing takes no invocation, so the counters' epochs
    // stay the same on every rank (every rank reads the same verdict).
    const uint32_t overflowed = *reinterpret_cast<volatile uint32_t*>(d->OverflowWord());
    const uint32_t skip = (b.run_if == kRunIfNoOverflow && overflowed) || (b.run_if == kRunIfOverflow && !overflowed);
    d->skip = skip;
    d->run_if = b.run_if;
    d->token_begin = b.token_begin;
    d->token_end = b.token_end;
    d->need_out = b.need_out;
    const uint32_t n = *d->epoch + (skip ? 0 : 1);
    *d->epoch = n;
    d->program.invocation = n;
    d->dw_mode = b.dw_mode;
    d->has_dw_maps = b.has_dw_maps;
    d->planned = b.planned;
    d->plan_bad = kNoBadId;
    d->plan_need = 0;
  }
  // The maps are read next by the copy engine (tensormap proxy) in the persistent kernel.
  asm volatile("fence.proxy.tensormap::generic.release.gpu;" ::: "memory");
}

// Each block of the persistent kernel, before its first TMA load: the bound weights' maps (and the weight-gradient
// store maps) as just written.
__device__ __forceinline__ void AcquireBoundMaps(const DeviceRank& d) {
  if (threadIdx.x < 2 * kBoxKinds) {
    const uint32_t w = threadIdx.x / kBoxKinds, box = threadIdx.x % kBoxKinds;
    if (d.bound[w ? ssc::kSlotW2 : ssc::kSlotW1] != nullptr)
      asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(&d.weight_maps[w][box][0])
                   : "memory");
  } else if (threadIdx.x < 2 * kBoxKinds + 2 && d.has_dw_maps) {
    const uint32_t w = threadIdx.x - 2 * kBoxKinds;
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(&d.dw_maps[w][0]) : "memory");
  }
  __syncthreads();
}

}  // namespace cuda
}  // namespace hpmoe
