// What a worker reports when it stops early: enough to find the stuck or failing task without a debugger.
#pragma once

#include "device.h"

namespace hpmoe {
namespace rt {

enum RunStatus : int32_t {
  kOk = 0,
  kWaitTimeout = 1,     // a dependent counter did not reach its threshold in time
  kAborted = 2,         // another worker (any rank) failed first; this one stopped at a wait
  kHandlerFailed = 3,   // a handler refused its inputs (e.g. received counts outside the bucket)
  kBadTask = 4,         // task_type unknown to this build (the loader rejects these; kept as a guard)
  kInjectedFault = 5,   // test hook: the worker was told to stop here
};

// Codes a handler returns (0 = done). Positive, so they never collide with RunStatus.
enum HandlerError : int32_t {
  kErrCounts = 101,         // received per-expert counts are negative or exceed the bucket C
  kErrPlan = 102,           // a send_rows / token_rows entry points outside its buffer
  kErrRegion = 103,         // a TD region does not have the shape its task type needs
  kErrLaunchShape = 104,    // the kernel runs without the clusters its build's workers need (CUDA)
  kErrInjectedFault = 199,  // test hook (fault injection)
};

// Filled by the worker that stops; `event`/`counter`/`target` describe the wait it was in (kNoEvent if none).
struct WorkerReport {
  int32_t status;
  uint32_t rank;
  uint32_t queue;         // worker index in the SSC: AIC workers first, then AIV
  uint32_t position;      // entry within the worker's queue
  uint32_t task;          // index into the SSC task section
  uint32_t task_type;
  uint32_t event;
  uint32_t counter;       // value observed last
  uint32_t target;        // value the wait needed: invocation * threshold
  uint32_t threshold;
  uint32_t invocation;
  int32_t detail;         // handler error code, or the rank whose failure aborted this worker
};

}  // namespace rt
}  // namespace hpmoe
