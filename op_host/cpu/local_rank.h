// One rank of the CPU twin over caller-chosen slots only, in this process: for handler tests and
// microbenchmarks that build their SSC records in memory instead of loading a compiled MoE schedule. It owns
// the slot memory (one mapping, each slot 2 MiB aligned, transparent huge pages requested), a control block
// with the event counters (one cache line each, like the heap's), per-worker scratch, and the CpuSync the
// real worker loop waits and signals through. Slots not named stay empty (ndim 0): handlers refuse them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../op_kernel/cpu/cpu_sync.h"
#include "../../op_kernel/cpu/heap_layout.h"
#include "../../op_kernel/cpu/rank_context.h"

namespace hpmoe {
namespace cpu {

struct LocalSlot {
  uint32_t slot;   // ssc::SlotId
  uint32_t dtype;  // ssc::DType
  uint64_t rows;   // 2-D view
  uint64_t cols;
};

class LocalRank {
 public:
  // `cfg` is what handlers read (e.g. inter for SwiGLU, ep/C/E for the valid-row rules). `scratch_floats` is
  // the size of each of a worker's three fp32 scratch buffers (a, b, out). Returns nullptr and sets *error.
  static std::unique_ptr<LocalRank> Create(const ssc::SscConfig& cfg, const std::vector<LocalSlot>& slots,
                                           uint32_t num_events, uint32_t workers, uint64_t scratch_floats,
                                           uint64_t timeout_ns, std::string* error);
  ~LocalRank();
  LocalRank(const LocalRank&) = delete;
  LocalRank& operator=(const LocalRank&) = delete;

  const RankContext& context() const { return ctx_; }
  WorkerScratch& scratch(uint32_t worker) { return scratch_[worker]; }
  CpuSync& sync() { return *sync_; }
  uint32_t* counter(uint32_t event) const { return sync_->Counter(0, event); }
  template <class T = uint8_t>
  T* Slot(uint32_t slot) const {
    return ctx_.Slot<T>(slot);
  }
  uint64_t SlotBytes(uint32_t slot) const { return layout_.slots[slot].bytes; }

 private:
  LocalRank() = default;
  HeapLayout layout_{};
  RankContext ctx_;
  GroupMemory group_;
  std::unique_ptr<CpuSync> sync_;
  void* data_ = nullptr;
  uint64_t data_bytes_ = 0;
  std::vector<uint64_t> control_words_;  // control block + counters (the group "segment" of CpuSync)
  std::vector<float> scratch_floats_;
  std::vector<WorkerScratch> scratch_;
};

}  // namespace cpu
}  // namespace hpmoe
