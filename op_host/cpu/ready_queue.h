// Pieces shared by every dynamic-dispatch mode (the twin's op_host/cpu/dynamic_dispatch.cpp and the section-6
// microbenchmark): the FIFO ready queue, the idle timer that bounds a worker with nothing ready, and running one
// popped task (handler, then its triggers) exactly as the static worker loop would.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "../../op_kernel/runtime/worker_loop.h"

namespace hpmoe {
namespace cpu {

constexpr uint32_t kReadyEmpty = 0xFFFFFFFFu;  // nothing ready now
constexpr uint32_t kReadyDone = 0xFFFFFFFEu;   // every task of the launch was taken

// Lock-free one-shot MPMC queue: every task is pushed exactly once per launch, so a ring of `capacity` slots
// with monotonic head/tail never wraps. Tasks pop in the order they became ready.
class ReadyFifo {
 public:
  explicit ReadyFifo(uint32_t capacity) : slots_(capacity), total_(capacity) { Reset(); }
  // Before a launch, with no worker running.
  void Reset() {
    for (auto& s : slots_) s.store(kReadyEmpty, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }
  void Push(uint32_t task) {
    const uint32_t i = tail_.fetch_add(1, std::memory_order_relaxed);
    slots_[i].store(task, std::memory_order_release);
  }
  // A task id, kReadyEmpty or kReadyDone.
  uint32_t Pop() {
    uint32_t h = head_.load(std::memory_order_relaxed);
    while (h < total_) {
      const uint32_t task = slots_[h].load(std::memory_order_acquire);
      if (task == kReadyEmpty) return kReadyEmpty;
      if (head_.compare_exchange_weak(h, h + 1, std::memory_order_acq_rel)) return task;
    }
    return kReadyDone;
  }
  uint32_t Popped() const { return head_.load(std::memory_order_relaxed); }
  uint32_t Total() const { return total_; }

 private:
  std::vector<std::atomic<uint32_t>> slots_;
  uint32_t total_;
  alignas(64) std::atomic<uint32_t> head_{0};
  alignas(64) std::atomic<uint32_t> tail_{0};
};

// Bounds a dynamic worker like the static loop's waits: nothing ready for the whole timeout means a lost
// dependency.
class IdleTimer {
 public:
  void Busy() { idle_ = false; }
  // Call when nothing is ready; true once the worker has been idle longer than `timeout_ms`.
  bool Expired(uint64_t timeout_ms) {
    const auto now = std::chrono::steady_clock::now();
    if (!idle_) {
      idle_ = true;
      since_ = now;
      return false;
    }
    return now - since_ > std::chrono::milliseconds(timeout_ms);
  }

 private:
  bool idle_ = false;
  std::chrono::steady_clock::time_point since_{};
};

// Runs popped task `id` the way RunWorkerQueue does after its waits: the handler (puts fuse trigger 0 with
// their payload), then the remaining triggers. Returns rt::kOk or rt::kHandlerFailed.
template <class Sync, class Handlers>
int32_t RunReadyTask(const rt::SscProgram& p, uint32_t id, uint32_t worker, Sync& sync, Handlers& handlers) {
  const ssc::SscTask& task = p.tasks[id];
  const bool put = rt::IsPutTask(task.task_type);
  rt::TaskCall call{&task, id, worker, task.trigger_rank[0], put ? task.trigger_event[0] : ssc::kNoEvent,
                    p.invocation};
  if (rt::DispatchTask(handlers, call) != 0) return rt::kHandlerFailed;
  for (uint32_t k = put ? 1u : 0u; k < ssc::kMaxTriggers; ++k) {
    if (task.trigger_event[k] != ssc::kNoEvent) sync.Signal(task.trigger_rank[k], task.trigger_event[k]);
  }
  return rt::kOk;
}

}  // namespace cpu
}  // namespace hpmoe
