// The kernel itself refuses a launch that does not match its SSC (the host refuses these first; this is the
// kernel's own guard): every core reports kLaunchMismatch and runs no task.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ascend_tiling.h"
#include "kernel_operator.h"
#include "lib/hccl/hccl.h"
#include "stub/stub_launch.h"

#include "../../op_kernel/runtime/status.h"

extern "C" void hyper_parallel_moe(GM_ADDR x, GM_ADDR w1, GM_ADDR w2, GM_ADDR topk_ids, GM_ADDR topk_weights,
                                   GM_ADDR dy, GM_ADDR send_rows, GM_ADDR send_counts, GM_ADDR token_rows,
                                   GM_ADDR ssc, GM_ADDR epoch, GM_ADDR y, GM_ADDR dx, GM_ADDR dw1, GM_ADDR dw2,
                                   GM_ADDR dtopk_weights, GM_ADDR workspace, GM_ADDR tiling);

namespace {

using hpmoe::ascend::KernelTiling;

struct Launch {
  KernelTiling tiling{};
  AscendC::stub::HcclContext hccl;
  std::vector<uint8_t> workspace;
  std::vector<uint8_t> window = std::vector<uint8_t>(1 << 16, 0);

  Launch() {
    std::memset(&tiling, 0, sizeof(tiling));
    tiling.magic = hpmoe::ascend::kTilingMagic;
    tiling.config.ep = 1;
    tiling.config.num_aic = 2;
    tiling.config.num_aiv = 4;
    tiling.num_blocks = 2;
    tiling.invocation = 1;
    hccl.rank_dim = 1;
    hccl.windows_in[0] = reinterpret_cast<uint64_t>(window.data());
    std::memcpy(tiling.mc2_init.reserved, &AscendC::stub::kMc2TilingMark, 4);  // Mc2CcTilingConfig::GetTiling
    std::memcpy(tiling.mc2_cc.reserved, &AscendC::stub::kMc2TilingMark, 4);
  }
  // Runs `blocks` AI cores; returns the status of each report (AIC workers first, then AIV).
  std::vector<int32_t> Run(uint32_t blocks);
};

std::vector<int32_t> Launch::Run(uint32_t blocks) {
  const uint32_t workers = tiling.config.num_aic + tiling.config.num_aiv;
  const uint64_t system = AscendC::stub::kSystemWorkspaceBytes;
  workspace.assign(system + workers * hpmoe::ascend::kReportBytes, 0xEE);
  AscendC::stub::LaunchEnv env;
  env.hccl_context = &hccl;
  env.workspace_bytes = workspace.size();
  GM_ADDR none = nullptr;
  AscendC::stub::LaunchMix(blocks, &hyper_parallel_moe, env, none, none, none, none, none, none, none, none, none,
                           none, none, none, none, none, none, none, workspace.data(),
                           reinterpret_cast<GM_ADDR>(&tiling));
  std::vector<int32_t> status(workers);
  for (uint32_t q = 0; q < workers; ++q)
    std::memcpy(&status[q], &workspace[system + q * hpmoe::ascend::kReportBytes], 4);
  return status;
}

TEST(AscendKernel, RefusesFewerBlocksThanTheSscWasCompiledFor) {
  Launch l;
  const std::vector<int32_t> s = l.Run(1);  // 1 AIC + 2 AIV for an SSC of 2 + 4 workers
  EXPECT_EQ(s[0], hpmoe::ascend::kLaunchMismatch);
  EXPECT_EQ(s[2], hpmoe::ascend::kLaunchMismatch);
  EXPECT_EQ(s[3], hpmoe::ascend::kLaunchMismatch);
}

TEST(AscendKernel, RefusesAnHcclGroupOfAnotherSize) {
  Launch l;
  l.hccl.rank_dim = 2;
  for (int32_t st : l.Run(2)) EXPECT_EQ(st, hpmoe::ascend::kLaunchMismatch);
}

TEST(AscendKernel, RefusesATilingItDoesNotRecognise) {
  Launch l;
  l.tiling.magic = 0;
  for (int32_t st : l.Run(2)) EXPECT_EQ(st, hpmoe::ascend::kLaunchMismatch);
}

}  // namespace
