// Project-written stand-in for the launch that CANN does (aclrtLaunchKernel / `<<<numBlocks, ...>>>`, or its
// CPU-debug ICPU_RUN_KF): runs a MIX_AIC_1_2 kernel as numBlocks AIC threads and 2 * numBlocks AIV threads,
// each with its core identity, its own local memory (L1 512 KiB on the AIC, UB 192 KiB on each AIV, the
// A2/A3 sizes) and, when asked, its own call log. Host code only; kernels never include it.
#pragma once

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "stub_core.h"

namespace AscendC {
namespace stub {

constexpr uint64_t kL1Bytes = 512 * 1024;
constexpr uint64_t kUbBytes = 192 * 1024;

struct LaunchEnv {
  std::vector<CoreLog>* logs = nullptr;  // resized to 3 * num_blocks: AIC blocks (0..n-1), then AIV (0..2n-1)
  void* hccl_context = nullptr;          // what GetHcclContext<0>() returns on every core of the launch
  uint64_t workspace_bytes = 0;          // the workspace argument's size (system + user part)
};

template <class... Args>
void LaunchMix(uint32_t num_blocks, void (*kernel)(Args...), LaunchEnv env, Args... args) {
  std::vector<CoreLog>* logs = env.logs;
  const uint32_t cores = 3 * num_blocks;
  if (logs != nullptr) logs->assign(cores, CoreLog{});
  std::vector<std::thread> threads;
  threads.reserve(cores);
  for (uint32_t i = 0; i < cores; ++i) {
    threads.emplace_back([=] {
      CoreState& c = Core();
      const bool aic = i < num_blocks;
      c = CoreState{};
      c.core_type = aic ? AIC : AIV;
      c.block_idx = aic ? i : i - num_blocks;
      c.block_num = num_blocks;
      c.sub_block_idx = aic ? 0 : (i - num_blocks) % 2;
      c.local_bytes = aic ? kL1Bytes : kUbBytes;
      std::unique_ptr<uint8_t[]> local(new uint8_t[c.local_bytes]);
      c.local_arena = local.get();
      c.hccl_context = env.hccl_context;
      c.workspace_bytes = env.workspace_bytes;
      if (logs != nullptr) {
        c.log = &(*logs)[i];
        c.log->core_type = c.core_type;
        c.log->block_idx = c.block_idx;
      }
      kernel(args...);
      c = CoreState{};
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace stub
}  // namespace AscendC
