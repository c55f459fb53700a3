// The executing fuzz target's world: a small CPU-twin
// group heap for them with every slot fenced by poisoned guard bytes (under ASan an access outside a slot is
// reported at once, not silently landing in the next slot), filled with inputs and a consistent routing plan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "../op_kernel/cpu/cpu_sync.h"
#include "../op_kernel/cpu/heap_layout.h"
#include "split_files.h"

namespace hpmoe {
namespace fuzz {

// Whether a group of `cfg` is small enough to execute here (the harness's limit, not the validator's).
bool SmallEnoughToRun(const ssc::SscConfig& cfg);

class FencedGroupHeap {
 public:
  // Layout of every slot of `cfg` with `guard` poisoned bytes before each slot and after the last one.
  std::string Create(const ssc::SscConfig& cfg, uint32_t counters_fwd, uint32_t counters_bwd);
  ~FencedGroupHeap();
  const cpu::HeapLayout& layout() const { return layout_; }
  const cpu::GroupMemory& group() const { return group_; }
  // Inputs, weights and a routing plan that fits the bucket (recv_counts as the count puts would leave them).
  void FillInputs(uint32_t seed);

 private:
  void Poison(bool on);
  ssc::SscConfig cfg_{};
  cpu::HeapLayout layout_{};
  cpu::GroupMemory group_;
  void* memory_ = nullptr;
  uint64_t guard_ = 0;
};

}  // namespace fuzz
}  // namespace hpmoe
