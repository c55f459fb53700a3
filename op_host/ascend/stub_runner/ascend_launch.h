// `--backend ascendc-cpu`: the AscendC kernel (op_kernel/ascend/hyper_parallel_moe.cpp) compiled with host
// g++ against the project's AscendC stubs and launched on CPU threads, one MIX_AIC_1_2 launch per rank (AIC
// and AIV cores as threads). Everything around the kernel is the CPU twin's: the symmetric heap in POSIX
// shared memory, ranks as processes or thread groups, and RankRuntime, which loads each SSC through the
// shared validating loader (op_host/ssc_loader.h) before the kernel ever sees it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../../op_kernel/ascend/ascend_tiling.h"
#include "../../../op_kernel/ascend/stub/stub_core.h"
#include "../../cpu/rank_runtime.h"

namespace hpmoe {
namespace ascend {

// Cores of the stub's device: an A3 die (25 AI cores = 25 AIC + 50 AIV). A launch never asks for more.
constexpr uint32_t kStubPhysicalCores = 25;

// The tiling of invocation `invocation` of `direction` on `rank`, built by the op's own tiling code
// (op_host/ascend/tiling_builder.h). Returns "" or one line.
std::string MakeTiling(const cpu::RankRuntime& rank, uint32_t direction, uint32_t invocation, KernelTiling* tiling);

// One line for a worker's report (rank, core, queue, what stopped it).
std::string DescribeReport(const rt::WorkerReport& r, uint32_t num_aic);

// Marks the tiling's MC2 blocks as filled (what Mc2CcTilingConfig::GetTiling does on CANN).
void FillMc2Tiling(KernelTiling* tiling);

struct LaunchLogs {
  std::vector<AscendC::stub::CoreLog> cores;  // AIC blocks, then AIV blocks
};

// One launch of `direction` on every rank in `ranks` together (each rank a MIX launch on its own threads).
// `logs`: nullptr, or one LaunchLogs per rank. Returns "" or one line: the first failing worker's report.
std::string RunGroupAscend(cpu::RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction,
                           std::vector<LaunchLogs>* logs);

// When every rank of the group is here: ssc::ValidateGroup over their SSCs of `direction`.
std::string ValidateWholeGroup(cpu::RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction);

}  // namespace ascend
}  // namespace hpmoe
