// Must NOT compile (ctest runs the compiler and expects the static_assert message): a backend without a
// handler for one task type is rejected at build time, not at run time.
#include "../../op_kernel/runtime/worker_loop.h"

struct Sync {
  int32_t Wait(uint32_t, uint32_t, hpmoe::rt::WaitResult*) { return 0; }
  void Signal(uint32_t, uint32_t) {}
  void PutMemSignal(const void*, uint32_t, void*, uint64_t, uint32_t, uint32_t) {}
  uint32_t Claim() { return 0; }
};

struct HandlersWithoutSwiglu {
#define HPMOE_STUB(NAME, TYPE) \
  int32_t NAME(const hpmoe::rt::TaskCall&) { return 0; }
  HPMOE_STUB(EntrySignal, 0) HPMOE_STUB(CountPut, 0) HPMOE_STUB(DispatchPut, 0) HPMOE_STUB(Gmm, 0)
  HPMOE_STUB(CombinePut, 0) HPMOE_STUB(CombineReduce, 0) HPMOE_STUB(BwdDispatchPut, 0) HPMOE_STUB(GmmTransB, 0)
  HPMOE_STUB(GmmWeightGrad, 0) HPMOE_STUB(SwigluGrad, 0) HPMOE_STUB(BwdCombineReduce, 0)
  HPMOE_STUB(TopkWeightGrad, 0) HPMOE_STUB(Add, 0)
#undef HPMOE_STUB
};

int Run(const hpmoe::rt::SscProgram& p) {
  Sync s;
  HandlersWithoutSwiglu h;
  return hpmoe::rt::RunWorkerQueue(p, 0, s, h, nullptr);
}
