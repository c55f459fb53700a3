// Compute handlers of the CPU twin (everything that is not a put). Each runs one TD on this rank's memory,
// accumulates in fp32 and rounds once to the activation dtype; reductions run in a fixed order.
#pragma once

#include <cstdint>

#include "../ssc_layout.h"
#include "rank_context.h"

namespace hpmoe {
namespace cpu {

int32_t RunGmm(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t, bool trans_b);
int32_t RunWeightGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunSwiglu(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunSwigluGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunGmmSwiglu(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunGmmSwigluGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunCombineReduce(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunBwdCombineReduce(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
int32_t RunTopkWeightGrad(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);
// out = in0 + in1 over the exact rows x cols of the regions (any slots; dtypes may differ), fp32 math, one
// rounding to the output dtype. Regions must have equal shapes, lie inside their slots, and be local and
// contiguous (kRefRowsDynamic / kRefGather / kRefRemote are refused with kErrRegion).
int32_t RunAdd(const RankContext& ctx, WorkerScratch& s, const ssc::SscTask& t);

}  // namespace cpu
}  // namespace hpmoe
