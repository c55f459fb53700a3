// What the CPU handlers of one rank see: its config, its segment of the symmetric heap (every slot), and
// per-worker scratch allocated by the launcher before any worker starts (handlers never allocate).
#pragma once

#include <cstdint>

#include "../ssc_layout.h"
#include "heap_layout.h"

namespace hpmoe {
namespace cpu {

enum FaultMode : uint32_t {
  kFaultNone = 0,
  kFaultExitProcess = 1,  // the rank's process dies (_exit) when the fault point is reached
  kFaultFailTask = 2,     // the handler returns an error (in-process abort path)
};
constexpr int kFaultExitCode = 70;

struct RankContext {
  ssc::SscConfig cfg;
  uint32_t rank = 0;
  const HeapLayout* layout = nullptr;
  uint8_t* segment = nullptr;  // this rank's segment
  // The tokens this launch's reductions write (a pass of the speculative bucket, docs/design.md: its plan
  // routed only these); [0, T) otherwise.
  uint32_t token_begin = 0, token_end = ~0u;

  // Fault injection for tests: after `fault_after` handler calls on this rank (counted in *tasks_run).
  uint32_t fault_mode = kFaultNone;
  uint32_t fault_after = 0;
  uint32_t* tasks_run = nullptr;

  template <class T = uint8_t>
  T* Slot(uint32_t slot) const {
    return reinterpret_cast<T*>(segment + layout->slot_offset[slot]);
  }
  uint64_t Cols(uint32_t slot) const { return layout->slots[slot].cols; }
  uint64_t Rows(uint32_t slot) const { return layout->slots[slot].rows; }
  uint32_t DType(uint32_t slot) const { return layout->slots[slot].dtype; }
  uint64_t RowBytes(uint32_t slot) const {
    const uint32_t d = DType(slot);
    return Cols(slot) * (d == ssc::kFP16 || d == ssc::kBF16 ? 2 : 4);
  }
  uint8_t* Row(uint32_t slot, uint64_t row) const { return Slot(slot) + row * RowBytes(slot); }
};

// Per-worker scratch, in fp32 unless named otherwise. Sizes: see ScratchFloats in the launcher.
// Whether ExpertWeightF32 converts the weights into WorkerScratch::weight: all but fp32 weights in the
// standard layout, which are read in place (nn.Linear's layout is transposed there, whatever the dtype). The
// runtime sizes the scratch by the same rule.
inline bool WeightsConverted(uint32_t dtype, uint32_t config_flags) {
  return dtype != ssc::kFP32 || (config_flags & ssc::kConfigWeightsTransposed) != 0;
}

struct WorkerScratch {
  float* a = nullptr;        // left operand rows (converted), C x max(h, 2I)
  float* b = nullptr;        // right operand rows for weight gradients, C x max(h, 2I)
  float* out = nullptr;      // fp32 result rows before rounding, C x max(h, 2I)
  float* weight = nullptr;   // one expert's weight converted to fp32, max(h x 2I)
  uint8_t* staging = nullptr;  // put payloads gathered before put_mem_signal, C rows x h
  // Converted-weight cache: valid while the same weight of the same launch is used again.
  const void* cached_weight = nullptr;
  uint64_t cached_launch = 0;
  uint64_t launch = 0;  // bumped by the launcher every launch (weights may change between launches)
};

}  // namespace cpu
}  // namespace hpmoe
