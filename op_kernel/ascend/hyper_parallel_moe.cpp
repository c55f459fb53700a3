// The hyper_parallel_moe kernel: one MIX_AIC_1_2 launch runs one SSC (forward or backward) of one EP rank.
//   ssc        the rank's SSC image, validated on the host by op_host/ssc_loader.h before upload
//   heap       this rank's segment of the symmetric heap (ACLSHMEM): every tensor of the op, the event
//              counters and the abort word, at the offsets the tiling gives
//   workspace  one WorkerReport per worker queue
//   tiling     KernelTiling (op_kernel/ascend/ascend_tiling.h)
// Launch in batch schedule mode (SetScheduleMode(1)): workers spin on other cores' counters, so every core
// of the launch must be resident at once.
#define ASCENDC_CUBE_ONLY  // the AIC calls the Matmul API itself; no AIV client, no message flags
#include "kernel_operator.h"

#include "kernel_body.h"

extern "C" __global__ __aicore__ void hyper_parallel_moe(GM_ADDR ssc, GM_ADDR heap, GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  hpmoe::ascend::RunKernel(ssc, heap, workspace, tiling);
}
