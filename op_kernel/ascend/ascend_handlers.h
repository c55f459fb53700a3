// The Ascend Handlers of the worker loop (op_kernel/runtime/backend_traits.h): one member per task type.
// Cube tasks (CTQ) run only on an AIC, everything else (VTQ) only on an AIV; a task that reaches the other
// core type fails with kErrCoreType instead of touching memory (the SSC deals CTQs to AIC workers and VTQs
// to AIV workers; the loader checks each queue's type).
#pragma once

#include "kernel_operator.h"

#include "../runtime/program.h"
#include "../runtime/status.h"
#include "ascend_sync.h"
#include "handlers_cube.h"
#include "handlers_put.h"
#include "handlers_vector.h"

namespace hpmoe {
namespace ascend {

// T: the activation type (the AIC's Matmul objects are typed); the vector handlers dispatch on dtype.
// Every handler names its core with ASCEND_IS_AIC / ASCEND_IS_AIV, so the AIC build compiles no vector
// code and the AIV build no Matmul (in the run-time stub both exist and the test runs at run time).
template <class T>
class AscendHandlers {
 public:
  HPMOE_DEVICE void Init(const KernelContext& ctx, AscendSync* sync, AscendC::TPipe& pipe) {
    ctx_ = ctx;
    sync_ = sync;
    if ASCEND_IS_AIC {
      cube_.Init(ctx_, pipe);
    }
    if ASCEND_IS_AIV {
      buffers_.Init(pipe);
    }
  }

#define HPMOE_ON_AIV(call)   \
  if ASCEND_IS_AIV {         \
    return call;             \
  }                          \
  return kErrCoreType;
#define HPMOE_ON_AIC(call)   \
  if ASCEND_IS_AIC {         \
    return call;             \
  }                          \
  return kErrCoreType;
  HPMOE_DEVICE int32_t EntrySignal(const rt::TaskCall& c) { HPMOE_ON_AIV(PutEntrySignal(ctx_, buffers_, *sync_, c)) }
  HPMOE_DEVICE int32_t CountPut(const rt::TaskCall& c) { HPMOE_ON_AIV(PutCounts(ctx_, *sync_, c)) }
  HPMOE_DEVICE int32_t DispatchPut(const rt::TaskCall& c) { HPMOE_ON_AIV(PutDispatch(ctx_, buffers_, *sync_, c, false)) }
  HPMOE_DEVICE int32_t BwdDispatchPut(const rt::TaskCall& c) {
    HPMOE_ON_AIV(PutDispatch(ctx_, buffers_, *sync_, c, true))
  }
  HPMOE_DEVICE int32_t CombinePut(const rt::TaskCall& c) { HPMOE_ON_AIV(PutCombine(ctx_, *sync_, c)) }
  HPMOE_DEVICE int32_t Swiglu(const rt::TaskCall& c) { HPMOE_ON_AIV(VecSwiglu(ctx_, buffers_, *c.task)) }
  HPMOE_DEVICE int32_t SwigluGrad(const rt::TaskCall& c) { HPMOE_ON_AIV(VecSwigluGrad(ctx_, buffers_, *c.task)) }
  HPMOE_DEVICE int32_t CombineReduce(const rt::TaskCall& c) { HPMOE_ON_AIV(VecCombineReduce(ctx_, buffers_, *c.task)) }
  HPMOE_DEVICE int32_t BwdCombineReduce(const rt::TaskCall& c) {
    HPMOE_ON_AIV(VecBwdCombineReduce(ctx_, buffers_, *c.task))
  }
  HPMOE_DEVICE int32_t TopkWeightGrad(const rt::TaskCall& c) {
    HPMOE_ON_AIV(VecTopkWeightGrad(ctx_, buffers_, *c.task))
  }
  HPMOE_DEVICE int32_t Add(const rt::TaskCall& c) { HPMOE_ON_AIV(VecAdd(ctx_, buffers_, *c.task)) }
  HPMOE_DEVICE int32_t Gmm(const rt::TaskCall& c) { HPMOE_ON_AIC(cube_.Gmm(ctx_, *c.task, false)) }
  HPMOE_DEVICE int32_t GmmTransB(const rt::TaskCall& c) { HPMOE_ON_AIC(cube_.Gmm(ctx_, *c.task, true)) }
  HPMOE_DEVICE int32_t GmmWeightGrad(const rt::TaskCall& c) { HPMOE_ON_AIC(cube_.WeightGrad(ctx_, *c.task)) }
  // Fused SwiGLU needs mixed queues, which the host refuses for this kernel (tiling_builder.cpp): never reached.
  HPMOE_DEVICE int32_t GmmSwiglu(const rt::TaskCall&) { return rt::kErrRegion; }
  HPMOE_DEVICE int32_t GmmSwigluGrad(const rt::TaskCall&) { return rt::kErrRegion; }
#undef HPMOE_ON_AIV
#undef HPMOE_ON_AIC

 private:
  KernelContext ctx_{};
  AscendSync* sync_ = nullptr;
  VectorBuffers buffers_;
  CubeUnit<T> cube_;
};

}  // namespace ascend
}  // namespace hpmoe
