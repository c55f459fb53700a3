// Dynamic dispatch for one rank, mirroring op_host/cpu/dynamic_dispatch.cpp: the same tasks, handlers and
// event counters as the static worker loop, but no per-worker queues. A task is pushed to a shared ready queue
// when its last dependency completes (the signal that brings an event to its epoch target releases the
// event's consumers); workers pop ready tasks, run the handler, and signal the task's triggers.
#pragma once

#include <sched.h>

#include <atomic>
#include <memory>
#include <vector>

#include "../../op_kernel/cpu/cpu_sync.h"
#include "../../op_kernel/runtime/worker_loop.h"
#include "ready_queues.h"

namespace hpmoe {
namespace microbench {

template <class Queue>
struct DynamicState {
  const rt::SscProgram* program = nullptr;
  std::vector<std::vector<uint32_t>> consumers;  // per event: the tasks that wait on it
  std::vector<uint32_t> waits;                   // per task: dependencies
  std::unique_ptr<std::atomic<uint32_t>[]> pending;
  std::unique_ptr<Queue> ready;

  explicit DynamicState(const rt::SscProgram& p) : program(&p), consumers(p.num_events), waits(p.num_tasks) {
    for (uint32_t t = 0; t < p.num_tasks; ++t) {
      for (uint32_t e : p.tasks[t].dependent_event) {
        if (e == ssc::kNoEvent) continue;
        consumers[e].push_back(t);
        ++waits[t];
      }
    }
    pending.reset(new std::atomic<uint32_t>[p.num_tasks]);
    ready.reset(new Queue(p.num_tasks));
  }
  // Before each launch (not timed): dependencies re-armed, tasks with none readied in task order.
  void Arm(const rt::SscProgram& p) {
    program = &p;
    ready->Reset();
    for (uint32_t t = 0; t < p.num_tasks; ++t) pending[t].store(waits[t], std::memory_order_relaxed);
    for (uint32_t t = 0; t < p.num_tasks; ++t)
      if (waits[t] == 0) ready->Push(t);
  }
};

// Sync backend of the dynamic modes: waits are satisfied by construction (a popped task is ready); a signal
// adds to the same counter the static loop uses and, at the epoch target, readies the event's consumers.
template <class Queue>
class DynamicSync {
 public:
  DynamicSync(cpu::CpuSync& base, DynamicState<Queue>& st) : base_(base), st_(st) {}
  int32_t Wait(uint32_t, uint32_t, rt::WaitResult*) { return rt::kOk; }
  void Signal(uint32_t, uint32_t event) { Completed(event, 1); }
  uint32_t Claim() { return base_.Claim(); }  // unused: the microbench SSCs have no pool
  void PutMemSignal(const void* src, uint32_t dst_rank, void* dst, uint64_t bytes, uint32_t event, uint32_t value) {
    base_.PutMemSignal(src, dst_rank, dst, bytes, ssc::kNoEvent, 0);
    if (event != ssc::kNoEvent) Completed(event, value);
  }

 private:
  void Completed(uint32_t event, uint32_t value) {
    const uint32_t now = __atomic_add_fetch(base_.Counter(0, event), value, __ATOMIC_ACQ_REL);
    const rt::SscProgram& p = *st_.program;
    if (now != rt::EpochTarget(p.invocation, p.events[event].threshold)) return;
    for (uint32_t task : st_.consumers[event]) {
      if (st_.pending[task].fetch_sub(1, std::memory_order_acq_rel) == 1) st_.ready->Push(task);
    }
  }
  cpu::CpuSync& base_;
  DynamicState<Queue>& st_;
};

// One worker: pop, run, trigger, until every task of the launch was taken. Idle for longer than
// `timeout_ms` with tasks outstanding means a lost dependency: kWaitTimeout (as the twin's dynamic mode).
template <class Queue, class Handlers>
int32_t RunDynamicWorker(DynamicState<Queue>& st, uint32_t worker, DynamicSync<Queue>& sync, Handlers& handlers,
                         uint64_t timeout_ms) {
  cpu::IdleTimer idle;
  for (;;) {
    const uint32_t id = st.ready->Pop();
    if (id == kDone) return rt::kOk;
    if (id == kEmpty) {
      if (idle.Expired(timeout_ms)) return rt::kWaitTimeout;
      sched_yield();
      continue;
    }
    idle.Busy();
    const int32_t status = cpu::RunReadyTask(*st.program, id, worker, sync, handlers);
    if (status != rt::kOk) return status;
  }
}

}  // namespace microbench
}  // namespace hpmoe
