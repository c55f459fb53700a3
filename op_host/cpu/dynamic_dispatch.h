// Dynamic-dispatch mode of the CPU twin, for comparison with the static worker loop (benchmarks only): the
// same taskflow, the same handlers and counters, but a task is pushed to a per-rank ready queue (one per
// queue type) when its last dependency completes, and idle workers pop from it (as in the Event Tensor
// paper's dynamic scheduling). Ranks must all live in this process.
#pragma once

#include <string>

#include "rank_runtime.h"

namespace hpmoe {
namespace cpu {

std::string RunGroupDynamic(RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction);

}  // namespace cpu
}  // namespace hpmoe
