// What every AIC and AIV of a hyper_parallel_moe launch sees: the tiling, the address of every tensor of the
// op (the caller's tensors as kernel arguments; the rest in this rank's symmetric region at the offsets the
// tiling gives), and symmetric-address translation to peers.
#pragma once

#include "kernel_operator.h"

#include "../runtime/device.h"
#include "../ssc_layout.h"
#include "ascend_tiling.h"

namespace hpmoe {
namespace ascend {

// The tiling as the kernel reads it: copied from GM into the core's private memory once (what GET_TILING_DATA
// does), so sizes are plain scalars; DMA sources inside the tiling are addressed through `tiling_gm`.
HPMOE_DEVICE void CopyTiling(KernelTiling* dst, const __gm__ KernelTiling* src) {
  static_assert(sizeof(KernelTiling) % 4 == 0, "the tiling is copied in 32-bit words");
  const __gm__ uint32_t* from = reinterpret_cast<const __gm__ uint32_t*>(src);
  uint32_t* to = reinterpret_cast<uint32_t*>(dst);
  for (uint32_t i = 0; i < sizeof(KernelTiling) / 4; ++i) to[i] = from[i];
}

struct KernelContext {
  const KernelTiling* tiling;          // private copy (CopyTiling)
  const __gm__ KernelTiling* tiling_gm;
  GM_ADDR heap;                        // this rank's symmetric region (its HCCL window)
  GM_ADDR slot[ssc::kSlotCount];       // every tensor of the op
  uint64_t peer[kMaxEp];               // every rank's symmetric region (GetWindowsInAddr)

  HPMOE_DEVICE const ssc::SscConfig& cfg() const { return tiling->config; }
  template <class T = uint8_t>
  HPMOE_DEVICE __gm__ T* Slot(uint32_t slot) const {
    return reinterpret_cast<__gm__ T*>(this->slot[slot]);
  }
  HPMOE_DEVICE uint32_t Cols(uint32_t slot) const { return tiling->slot_cols[slot]; }
  HPMOE_DEVICE uint32_t DType(uint32_t slot) const { return tiling->slot_dtype[slot]; }
  HPMOE_DEVICE uint32_t ElemBytes(uint32_t slot) const {
    const uint32_t d = DType(slot);
    return d == ssc::kFP16 || d == ssc::kBF16 ? 2u : 4u;
  }
  HPMOE_DEVICE uint64_t RowBytes(uint32_t slot) const { return uint64_t(Cols(slot)) * ElemBytes(slot); }
  HPMOE_DEVICE GM_ADDR Row(uint32_t slot, uint64_t row) const { return Slot(slot) + row * RowBytes(slot); }
  // The same symmetric address on `rank`: its window base + our offset (every rank lays its window out alike).
  HPMOE_DEVICE GM_ADDR Remote(const __gm__ void* local, uint32_t rank) const {
    const uint64_t off = reinterpret_cast<uint64_t>(local) - reinterpret_cast<uint64_t>(heap);
    return reinterpret_cast<GM_ADDR>(peer[rank] + off);
  }
};

}  // namespace ascend
}  // namespace hpmoe
