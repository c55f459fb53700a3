// The worker loop every backend runs unchanged (runtime contract, docs/design.md): for each TD of this
// worker's queue, in order: wait until each dependent counter reaches its epoch threshold, run the handler
// for its task_type, trigger its events. Puts fuse the payload with trigger 0 (put_mem_signal); the loop
// signals the rest. The loop never builds graphs, allocates TDs or reorders queues.
#pragma once

#include "backend_traits.h"
#include "program.h"
#include "status.h"

namespace hpmoe {
namespace rt {

// One switch on task_type: static dispatch, each case a direct (inlinable) call into the backend.
template <class Handlers>
HPMOE_DEVICE int32_t DispatchTask(Handlers& h, const TaskCall& call) {
  switch (call.task->task_type) {
#define HPMOE_DISPATCH_CASE(NAME, TYPE) \
  case ssc::TYPE:                       \
    return h.NAME(call);
    HPMOE_HANDLER_LIST(HPMOE_DISPATCH_CASE)
#undef HPMOE_DISPATCH_CASE
    default:
      return -1;
  }
}

HPMOE_DEVICE void FillReport(WorkerReport* r, int32_t status, const SscProgram& p, uint32_t queue, uint32_t position,
                             uint32_t task_id, uint32_t event, uint32_t counter, int32_t detail) {
  if (r == nullptr) return;
  const HPMOE_GM ssc::SscTask& t = p.tasks[task_id];
  r->status = status;
  r->rank = p.rank;
  r->queue = queue;
  r->position = position;
  r->task = task_id;
  r->task_type = t.task_type;
  r->event = event;
  r->counter = counter;
  r->threshold = event == ssc::kNoEvent ? 0 : p.events[event].threshold;
  r->target = event == ssc::kNoEvent ? 0 : EpochTarget(p.invocation, r->threshold);
  r->invocation = p.invocation;
  r->detail = detail;
}

// Runs one task: waits on each dependent counter, the handler, then the triggers. `pos` is where the report
// says the task stood in the worker's queue (past the queue's end: the pool, in claim order).
template <class Sync, class Handlers>
HPMOE_DEVICE int32_t RunTask(const SscProgram& p, uint32_t queue, uint32_t pos, uint32_t id, Sync& sync,
                             Handlers& handlers, WorkerReport* report) {
  const HPMOE_GM ssc::SscTask& task = p.tasks[id];
  for (uint32_t w = 0; w < ssc::kMaxWaits; ++w) {
    const uint32_t event = task.dependent_event[w];
    if (event == ssc::kNoEvent) continue;
    WaitResult seen{0, 0};
    const int32_t st = sync.Wait(event, EpochTarget(p.invocation, p.events[event].threshold), &seen);
    if (st != kOk) {
      FillReport(report, st, p, queue, pos, id, event, seen.counter, seen.detail);
      return st;
    }
  }
  const bool put = IsPutTask(task.task_type);
  TaskCall call{&task, id, queue, task.trigger_rank[0], put ? task.trigger_event[0] : ssc::kNoEvent, p.invocation};
  const int32_t err = DispatchTask(handlers, call);
  if (err != 0) {
    const int32_t st = err == kErrInjectedFault ? kInjectedFault : err < 0 ? kBadTask : kHandlerFailed;
    FillReport(report, st, p, queue, pos, id, ssc::kNoEvent, 0, err);
    return st;
  }
  for (uint32_t k = put ? 1u : 0u; k < ssc::kMaxTriggers; ++k) {
    if (task.trigger_event[k] != ssc::kNoEvent) sync.Signal(task.trigger_rank[k], task.trigger_event[k]);
  }
  return kOk;
}

// Runs worker `queue` of program `p` to the end, then, for a claiming worker, pool units until the pool of
// this invocation is empty. Returns kOk, or the status also written to `report`.
template <class Sync, class Handlers>
HPMOE_DEVICE int32_t RunWorkerQueue(const SscProgram& p, uint32_t queue, Sync& sync, Handlers& handlers,
                                    WorkerReport* report) {
  static_assert(CheckBackend<Sync, Handlers>(), "backend check");
  const HPMOE_GM ssc::SscQueue& q = p.queues[queue];
  const HPMOE_GM uint32_t* entries = p.entries + q.first_entry;
  for (uint32_t pos = 0; pos < q.count; ++pos) {
    const int32_t st = RunTask(p, queue, pos, entries[pos], sync, handlers, report);
    if (st != kOk) return st;
  }
  if (p.pool == nullptr || queue >= p.claimers) return kOk;
  // Every invocation moves the claim counter by exactly units + claimers: each unit is claimed once and each
  // claimer stops at its first claim past the end (uint32 arithmetic wraps with the counter). A report's
  // position past the worker's queue counts the tasks it ran from the pool.
  const uint32_t base = (p.invocation - 1u) * (p.num_pool + p.claimers);
  uint32_t pos = q.count;
  for (;;) {
    const uint32_t k = sync.Claim() - base;
    if (k >= p.num_pool) return kOk;
    const HPMOE_GM uint32_t* unit = p.entries + p.pool[k].first_entry;
    for (uint32_t i = 0; i < p.pool[k].count; ++i, ++pos) {
      const int32_t st = RunTask(p, queue, pos, unit[i], sync, handlers, report);
      if (st != kOk) return st;
    }
  }
}

}  // namespace rt
}  // namespace hpmoe
