// The hyper_parallel_moe kernel: one MIX_AIC_1_2 launch runs one SSC (forward or backward) of one EP rank.
//   x .. token_rows   the op's inputs (docs/ascend.md); the routing plan comes from the host
//   ssc               the rank's SSC image for this direction, validated on the host by op_host/ssc_loader.h
//                     before upload (the kernel never reads an unvalidated file)
//   epoch             the invocation number (read by the host's tiling function; the kernel takes it from
//                     the tiling)
//   y .. dtopk_weights the op's outputs (a forward launch writes y, a backward launch the gradients)
//   workspace         one WorkerReport per worker queue
//   tiling            KernelTiling (op_kernel/ascend/ascend_tiling.h): sizes, and where each tensor the caller
//                     does not pass sits in the symmetric region (dispatch/return buffers, saved activations,
//                     event counters, abort word); the regions are the EP group's HCCL windows
// Launch in batch schedule mode (SetScheduleMode(1)): workers spin on other cores' counters, so every core
// of the launch must be resident at once.
#define ASCENDC_CUBE_ONLY  // the AIC calls the Matmul API itself; no AIV client, no message flags
#include "kernel_operator.h"

#include "kernel_body.h"

extern "C" __global__ __aicore__ void hyper_parallel_moe(GM_ADDR x, GM_ADDR w1, GM_ADDR w2, GM_ADDR topk_ids,
                                                         GM_ADDR topk_weights, GM_ADDR dy, GM_ADDR send_rows,
                                                         GM_ADDR send_counts, GM_ADDR token_rows, GM_ADDR ssc,
                                                         GM_ADDR epoch, GM_ADDR y, GM_ADDR dx, GM_ADDR dw1, GM_ADDR dw2,
                                                         GM_ADDR dtopk_weights, GM_ADDR workspace, GM_ADDR tiling) {
  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_MIX_AIC_1_2);
  (void)epoch;
  const GM_ADDR tensors[hpmoe::ascend::kNumTensorArgs] = {x,        w1,          w2,         topk_ids, topk_weights,
                                                          dy,       send_rows,   send_counts, token_rows, y,
                                                          dx,       dw1,         dw2,        dtopk_weights};
  hpmoe::ascend::RunKernel(ssc, tensors, workspace, tiling);
}
