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

class AscendHandlers {
 public:
  HPMOE_DEVICE void Init(const KernelContext& ctx, AscendSync* sync, AscendC::TPipe& pipe) {
    ctx_ = ctx;
    sync_ = sync;
    pipe_ = &pipe;
    if ASCEND_IS_AIC {
      pipe.InitBuffer(zeros_, kZeroLineBytes);
    } else {
      buffers_.Init(pipe);
    }
  }

  HPMOE_DEVICE int32_t EntrySignal(const rt::TaskCall& c) { return Vec() ? PutEntrySignal(ctx_, buffers_, *sync_, c) : kErrCoreType; }
  HPMOE_DEVICE int32_t CountPut(const rt::TaskCall& c) { return Vec() ? PutCounts(ctx_, *sync_, c) : kErrCoreType; }
  HPMOE_DEVICE int32_t DispatchPut(const rt::TaskCall& c) {
    return Vec() ? PutDispatch(ctx_, buffers_, *sync_, c, false) : kErrCoreType;
  }
  HPMOE_DEVICE int32_t BwdDispatchPut(const rt::TaskCall& c) {
    return Vec() ? PutDispatch(ctx_, buffers_, *sync_, c, true) : kErrCoreType;
  }
  HPMOE_DEVICE int32_t CombinePut(const rt::TaskCall& c) { return Vec() ? PutCombine(ctx_, *sync_, c) : kErrCoreType; }
  HPMOE_DEVICE int32_t Swiglu(const rt::TaskCall& c) { return Vec() ? VecSwiglu(ctx_, buffers_, *c.task) : kErrCoreType; }
  HPMOE_DEVICE int32_t SwigluGrad(const rt::TaskCall& c) {
    return Vec() ? VecSwigluGrad(ctx_, buffers_, *c.task) : kErrCoreType;
  }
  HPMOE_DEVICE int32_t CombineReduce(const rt::TaskCall& c) {
    return Vec() ? VecCombineReduce(ctx_, buffers_, *c.task) : kErrCoreType;
  }
  HPMOE_DEVICE int32_t BwdCombineReduce(const rt::TaskCall& c) {
    return Vec() ? VecBwdCombineReduce(ctx_, buffers_, *c.task) : kErrCoreType;
  }
  HPMOE_DEVICE int32_t TopkWeightGrad(const rt::TaskCall& c) {
    return Vec() ? VecTopkWeightGrad(ctx_, buffers_, *c.task) : kErrCoreType;
  }
  HPMOE_DEVICE int32_t Add(const rt::TaskCall& c) { return Vec() ? VecAdd(ctx_, buffers_, *c.task) : kErrCoreType; }
  HPMOE_DEVICE int32_t Gmm(const rt::TaskCall& c) { return Cube() ? CubeGmm(ctx_, *c.task, false) : kErrCoreType; }
  HPMOE_DEVICE int32_t GmmTransB(const rt::TaskCall& c) { return Cube() ? CubeGmm(ctx_, *c.task, true) : kErrCoreType; }
  HPMOE_DEVICE int32_t GmmWeightGrad(const rt::TaskCall& c) {
    return Cube() ? CubeWeightGrad(ctx_, *pipe_, zeros_, *c.task) : kErrCoreType;
  }

 private:
  HPMOE_DEVICE static bool Vec() { return g_coreType == AscendC::AIV; }
  HPMOE_DEVICE static bool Cube() { return g_coreType == AscendC::AIC; }

  KernelContext ctx_{};
  AscendSync* sync_ = nullptr;
  AscendC::TPipe* pipe_ = nullptr;
  VectorBuffers buffers_;
  AscendC::TBuf<AscendC::TPosition::A1> zeros_;
};

}  // namespace ascend
}  // namespace hpmoe
