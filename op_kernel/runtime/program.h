// The part of a loaded SSC one rank's workers execute, as plain pointers into the (already validated) file.
#pragma once

#include "../ssc_layout.h"
#include "device.h"

namespace hpmoe {
namespace rt {

struct SscProgram {
  const HPMOE_GM ssc::SscTask* tasks;
  const HPMOE_GM ssc::SscEvent* events;
  const HPMOE_GM ssc::SscQueue* queues;  // AIC workers first, then AIV
  const HPMOE_GM uint32_t* entries;
  uint32_t num_tasks;
  uint32_t num_events;
  uint32_t num_queues;
  uint32_t rank;
  uint32_t invocation;  // n = 1, 2, ... of this SSC on this rank (epoch rule, docs/design.md)
  // kConfigClaimPool: the pool queues (units, claimed in index order, each run whole by its claimer) and how
  // many workers (queues 0..claimers-1) claim after their own queue; nullptr / 0 / 0 without a pool. The claim
  // counter is counter num_events of this rank.
  const HPMOE_GM ssc::SscQueue* pool;
  uint32_t num_pool;
  uint32_t claimers;
};

// What a handler gets: the TD, where it came from, and, for puts, the trigger to fuse with the payload.
struct TaskCall {
  const HPMOE_GM ssc::SscTask* task;
  uint32_t task_id;      // index into the SSC task section
  uint32_t queue;        // executing worker
  uint32_t signal_rank;  // put tasks: trigger 0, signalled by put_mem_signal together with the payload
  uint32_t signal_event; // kNoEvent when the task is not a put or has no trigger
  uint32_t invocation;
};

// Puts move a payload to the rank owning their output and signal its counter in the same operation.
HPMOE_DEVICE bool IsPutTask(uint32_t type) {
  return type == ssc::kTaskEntrySignal || type == ssc::kTaskCountPut || type == ssc::kTaskDispatchPut ||
         type == ssc::kTaskCombinePut || type == ssc::kTaskBwdDispatchPut;
}

// The counter value invocation n waits for: counter - (n-1)*threshold >= threshold  <=>  counter >= n*threshold,
// compared as a signed wrap-around difference so it stays right after the uint32 counter wraps.
HPMOE_DEVICE uint32_t EpochTarget(uint32_t invocation, uint32_t threshold) { return invocation * threshold; }
HPMOE_DEVICE bool CounterReached(uint32_t counter, uint32_t target) {
  return static_cast<int32_t>(counter - target) >= 0;
}

}  // namespace rt
}  // namespace hpmoe
