// The CPU twin's handler set for the worker loop: thin, inlinable wrappers around the compute handlers and
// put plans, with the payload moved by the Sync backend's put_mem_signal. One instance per worker thread.
#pragma once

#include <unistd.h>

#include "../runtime/program.h"
#include "../runtime/status.h"
#include "handlers_compute.h"
#include "handlers_put.h"

namespace hpmoe {
namespace cpu {

template <class Sync>
class CpuHandlers {
 public:
  CpuHandlers(const RankContext& ctx, WorkerScratch& scratch, Sync& sync) : ctx_(ctx), s_(scratch), sync_(sync) {}

  int32_t EntrySignal(const rt::TaskCall& c) {
    PutPlan p;
    int32_t err = FaultPoint();
    if (err == 0) err = PlanEntrySignal(ctx_, s_, *c.task, c.invocation, &p);
    return Put(c, err, p);
  }
  int32_t CountPut(const rt::TaskCall& c) {
    PutPlan p;
    int32_t err = FaultPoint();
    if (err == 0) err = PlanCountPut(ctx_, *c.task, &p);
    return Put(c, err, p);
  }
  int32_t DispatchPut(const rt::TaskCall& c) {
    PutPlan p;
    int32_t err = FaultPoint();
    if (err == 0) err = PlanDispatchPut(ctx_, s_, *c.task, false, &p);
    return Put(c, err, p);
  }
  int32_t BwdDispatchPut(const rt::TaskCall& c) {
    PutPlan p;
    int32_t err = FaultPoint();
    if (err == 0) err = PlanDispatchPut(ctx_, s_, *c.task, true, &p);
    return Put(c, err, p);
  }
  int32_t CombinePut(const rt::TaskCall& c) {
    PutPlan p;
    int32_t err = FaultPoint();
    if (err == 0) err = PlanCombinePut(ctx_, *c.task, &p);
    return Put(c, err, p);
  }
  int32_t Gmm(const rt::TaskCall& c) { return Compute(RunGmm(ctx_, s_, *c.task, false)); }
  int32_t GmmTransB(const rt::TaskCall& c) { return Compute(RunGmm(ctx_, s_, *c.task, true)); }
  int32_t GmmWeightGrad(const rt::TaskCall& c) { return Compute(RunWeightGrad(ctx_, s_, *c.task)); }
  int32_t Swiglu(const rt::TaskCall& c) { return Compute(RunSwiglu(ctx_, s_, *c.task)); }
  int32_t SwigluGrad(const rt::TaskCall& c) { return Compute(RunSwigluGrad(ctx_, s_, *c.task)); }
  int32_t GmmSwiglu(const rt::TaskCall& c) { return Compute(RunGmmSwiglu(ctx_, s_, *c.task)); }
  int32_t GmmSwigluGrad(const rt::TaskCall& c) { return Compute(RunGmmSwigluGrad(ctx_, s_, *c.task)); }
  int32_t CombineReduce(const rt::TaskCall& c) { return Compute(RunCombineReduce(ctx_, s_, *c.task)); }
  int32_t BwdCombineReduce(const rt::TaskCall& c) { return Compute(RunBwdCombineReduce(ctx_, s_, *c.task)); }
  int32_t TopkWeightGrad(const rt::TaskCall& c) { return Compute(RunTopkWeightGrad(ctx_, s_, *c.task)); }
  int32_t Add(const rt::TaskCall& c) { return Compute(RunAdd(ctx_, s_, *c.task)); }

 private:
  // Test hook: counts handler calls on this rank; at the chosen one, dies or fails (rank_context.h).
  int32_t FaultPoint() {
    if (ctx_.fault_mode == kFaultNone) return 0;
    if (__atomic_add_fetch(ctx_.tasks_run, 1u, __ATOMIC_RELAXED) != ctx_.fault_after) return 0;
    if (ctx_.fault_mode == kFaultExitProcess) _exit(kFaultExitCode);
    return rt::kErrInjectedFault;
  }
  int32_t Compute(int32_t err) {
    // The fault point runs after compute here: a compute task is side-effect free towards peers.
    const int32_t fault = FaultPoint();
    return err != 0 ? err : fault;
  }
  int32_t Put(const rt::TaskCall& c, int32_t err, const PutPlan& p) {
    if (err != 0) return err;
    sync_.PutMemSignal(p.src, p.dst_rank, p.dst, p.bytes, c.signal_event, 1u);
    return 0;
  }

  const RankContext& ctx_;
  WorkerScratch& s_;
  Sync& sync_;
};

// Handlers that do no work (dispatch-overhead benchmark): puts still signal, so every wait is satisfied
// exactly as in a real run.
template <class Sync>
class NullHandlers {
 public:
  explicit NullHandlers(Sync& sync) : sync_(sync) {}
  int32_t EntrySignal(const rt::TaskCall& c) { return Signal(c); }
  int32_t CountPut(const rt::TaskCall& c) { return Signal(c); }
  int32_t DispatchPut(const rt::TaskCall& c) { return Signal(c); }
  int32_t BwdDispatchPut(const rt::TaskCall& c) { return Signal(c); }
  int32_t CombinePut(const rt::TaskCall& c) { return Signal(c); }
  int32_t Gmm(const rt::TaskCall&) { return 0; }
  int32_t GmmTransB(const rt::TaskCall&) { return 0; }
  int32_t GmmWeightGrad(const rt::TaskCall&) { return 0; }
  int32_t Swiglu(const rt::TaskCall&) { return 0; }
  int32_t SwigluGrad(const rt::TaskCall&) { return 0; }
  int32_t CombineReduce(const rt::TaskCall&) { return 0; }
  int32_t BwdCombineReduce(const rt::TaskCall&) { return 0; }
  int32_t TopkWeightGrad(const rt::TaskCall&) { return 0; }
  int32_t Add(const rt::TaskCall&) { return 0; }
  int32_t GmmSwiglu(const rt::TaskCall&) { return 0; }
  int32_t GmmSwigluGrad(const rt::TaskCall&) { return 0; }

 private:
  int32_t Signal(const rt::TaskCall& c) {
    sync_.PutMemSignal(nullptr, c.signal_rank, nullptr, 0, c.signal_event, 1u);
    return 0;
  }
  Sync& sync_;
};

}  // namespace cpu
}  // namespace hpmoe
