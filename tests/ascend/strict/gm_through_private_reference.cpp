// Deliberately broken (ctest ascend_strict_rejects_gm_through_private_reference): the pre-issue-18 kernel
// bound the tiling's config, which lives in GM, to an unqualified reference. The clang address-space build
// must refuse it.
#include "kernel_operator.h"

#include "kernel_body.h"

extern "C" __global__ __aicore__ void broken(GM_ADDR tiling) {
  const hpmoe::ssc::SscConfig& cfg = reinterpret_cast<const __gm__ hpmoe::ascend::KernelTiling*>(tiling)->config;
  (void)cfg;
}
