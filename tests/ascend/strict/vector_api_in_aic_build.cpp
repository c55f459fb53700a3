// Deliberately broken (ctest ascend_strict_rejects_vector_api_in_aic_build): the pre-issue-18 handlers chose
// the core through a function call (`Vec() ? VecSwiglu(...) : error`) instead of ASCEND_IS_AIV, so the AIC
// build emits vector instructions.
#include "kernel_operator.h"

#include "kernel_body.h"

static bool Vec() { return g_coreType == AscendC::AIV; }

extern "C" __global__ __aicore__ int32_t broken(const hpmoe::ascend::KernelContext* ctx,
                                                const hpmoe::ascend::VectorBuffers* b, const __gm__ hpmoe::ssc::SscTask* t) {
  return Vec() ? hpmoe::ascend::VecSwiglu(*ctx, *b, *t) : hpmoe::ascend::kErrCoreType;
}
