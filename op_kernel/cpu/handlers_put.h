// Put handlers of the CPU twin, split in two: a plain function that checks the TD and prepares the payload
// (gathering routed rows into the worker's staging buffer), and a put_mem_signal through the Sync backend
// that moves it and signals the destination's counter (cpu_handlers.h).
#pragma once

#include <cstdint>

#include "../ssc_layout.h"
#include "rank_context.h"

namespace hpmoe {
namespace cpu {

struct PutPlan {
  const void* src = nullptr;
  uint32_t dst_rank = 0;
  void* dst = nullptr;  // local symmetric address; the Sync backend translates it to dst_rank
  uint64_t bytes = 0;   // 0 for an empty chunk: nothing moves, the signal still goes out
};

int32_t PlanEntrySignal(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t, uint32_t invocation,
                        PutPlan* plan);
int32_t PlanCountPut(const RankContext& ctx, const ssc::SscTask& t, PutPlan* plan);
// Forward: x rows; backward: topk_weights[t, j] * dy[t] rows (rounded to the activation dtype).
int32_t PlanDispatchPut(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t, bool backward,
                        PutPlan* plan);
int32_t PlanCombinePut(const RankContext& ctx, const ssc::SscTask& t, PutPlan* plan);

}  // namespace cpu
}  // namespace hpmoe
