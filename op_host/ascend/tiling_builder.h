// The host half of every hyper_parallel_moe launch, free of CANN: validate the rank's SSC with the shared
// loader (op_host/ssc_loader.h), check it against the device's cores, lay out the symmetric region and fill
// the kernel's tiling. The CANN tiling function (package/op_host/hyper_parallel_moe.cpp) and the CPU stub
// runner (stub_runner/) both call it, so the path CI executes is the path the NPU build takes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../../op_kernel/ascend/ascend_tiling.h"

namespace hpmoe {
namespace ascend {

struct TilingRequest {
  const uint8_t* ssc = nullptr;  // the rank's SSC of one direction (ValueDepend input on CANN)
  size_t ssc_bytes = 0;
  const ssc::SscConfig* expected = nullptr;  // nullptr: accept the file's config
  uint32_t rank = 0;
  uint32_t direction = 0;
  uint32_t invocation = 0;       // n = 1, 2, ... of this SSC on this rank
  uint32_t counters_fwd = 0;     // counters reserved per direction in the symmetric region (group maximum)
  uint32_t counters_bwd = 0;
  uint32_t core_num_aic = 0;     // the device's cores (PlatformAscendC::GetCoreNumAic / GetCoreNumAiv)
  uint32_t core_num_aiv = 0;
  uint64_t timeout_ms = 30000;
  uint64_t lib_workspace_bytes = 0;  // PlatformAscendC::GetLibApiWorkSpaceSize(): the system part
  uint64_t window_bytes = 0;         // the HCCL window per rank (HCCL_BUFFSIZE MiB on CANN)
  uint64_t window_nonce = 0;         // agreed by the whole group, fresh for every window set-up; not 0
  uint32_t token_begin = 0, token_end = ~0u;  // the tokens the reductions write (a pass; end clipped to T)
};

struct TilingResult {
  KernelTiling tiling{};
  uint32_t block_dim = 0;        // SetBlockDim: AI cores = num_aic
  uint32_t schedule_mode = 0;    // SetScheduleMode: 1 = batch (all cores resident; workers spin on each other)
  uint64_t workspace_bytes = 0;  // system part (lib_workspace_bytes) + one WorkerReport line per worker
  uint64_t region_bytes = 0;     // symmetric region per rank the layout needs (HCCL_BUFFSIZE must cover it)
};

// Returns "" or one line naming what is wrong.
std::string BuildTiling(const TilingRequest& request, TilingResult* out);

// The Matmul tiling of one GEMM shape (M x K times K x N, operands of `elem_bytes`, fp32 accumulation) from
// the Matmul tiling guide's rules: base blocks of 16 (baseK one 32-byte block multiple) within L0A/L0B
// (64 KiB, double-buffered) and L0C (128 KiB), L1 queues of two base blocks per operand.
GemmTiling CubeTilingFor(uint32_t m, uint32_t n, uint32_t k, uint32_t elem_bytes, uint32_t cores);

}  // namespace ascend
}  // namespace hpmoe
