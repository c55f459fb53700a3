// Deliberately broken (ctest ascend_strict_rejects_matmul_in_aiv_build): a Matmul used outside
// ASCEND_IS_AIC is emitted in the AIV build, which has no cube.
#include "kernel_operator.h"

#include "kernel_body.h"

extern "C" __global__ __aicore__ int32_t broken(const hpmoe::ascend::KernelContext* ctx, AscendC::TPipe* pipe) {
  hpmoe::ascend::CubeUnit<float> cube;
  cube.Init(*ctx, *pipe);
  return 0;
}
