// Per-layer contexts of the MindSpore kernels and the ownership of a shared heap.
//
// All MoE layers of one shape share one rank runtime and heap (the heap is workspace). What forward saves for
// backward (docs/design.md: recv_x, h, a, ret_y, recv_counts, plus the routing plan) lives in the heap only
// while no other layer's forward ran there: a layer's forward on a heap whose saved state belongs to another
// layer with a backward still pending first copies that state to the other layer's stash; a backward whose
// state is not in the heap restores it from its stash. One layer alone never copies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../op_kernel/ssc_layout.h"

namespace hpmoe {
namespace ms {

typedef int (*RunFn)(void* const*, uint32_t, uint32_t, uint32_t, char*, int);

struct Context {
  bool bound = false;
  void* rank = nullptr;         // RankRuntime* from hpmoe_cpu_rank_open
  RunFn run = nullptr;          // hpmoe_cpu_run of the library instance the host side loaded
  uint8_t* segment = nullptr;   // this rank's segment of the heap its last forward used
  uint64_t offset[ssc::kSlotCount] = {};
  uint64_t bytes[ssc::kSlotCount] = {};
  const void* plan[4] = {};     // host-owned routing plan of the last call: topk_ids, send_rows, send_counts, token_rows
  uint32_t dtype = 0;           // activation / weight dtype (ssc::DType)
  int64_t tokens = 0, hidden = 0, inter = 0, experts = 0, topk = 0;
  uint64_t forwards = 0, backwards = 0;
  std::vector<uint8_t> stash;   // saved state while another layer owns the heap
  bool pending() const { return forwards > backwards; }
};

constexpr int kMaxContexts = 4096;

// Returns the context or nullptr with *error set.
Context* Lookup(int32_t id, std::string* error);
Context* At(int32_t id);
// Makes `id`'s saved state the heap's (stashing the current owner's if it still needs it). `restore`:
// copy id's stash back (backward) instead of leaving the heap as it is (forward, which overwrites it).
void TakeHeap(int32_t id, bool restore);
// Contexts bound to `segment` with a backward still to run.
int PendingOn(const void* segment);
// A heap was (re)created at `segment`: forget who owned what was there before.
void ResetHeap(const void* segment);
// Writes the context's routing plan into its heap.
void WritePlan(Context& c);

}  // namespace ms
}  // namespace hpmoe
