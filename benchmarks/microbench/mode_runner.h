// One launch of one mode over a SwiGLU + Add workload: the static modes run the runtime's RunWorkerQueue on
// every worker with the CPU sync and the CPU twin's handlers (or the no-op handlers); the dynamic modes run
// the same tasks through a shared ready queue. Every launch is the next invocation (epoch) of the same
// program: counters are never reset, each wait targets invocation x threshold (the runtime's epoch rule).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>
#include <string>

#include "dynamic_runner.h"
#include "modes.h"
#include "swiglu_add_workload.h"
#include "worker_pool.h"

namespace hpmoe {
namespace microbench {

class ModeRunner {
 public:
  ModeRunner(SwigluAddWorkload& workload, WorkerPool& pool, uint64_t timeout_ms);
  // Runs one launch; on failure *error names the mode, worker and status (counters are then out of step).
  LaunchResult Launch(const ModeSpec& mode, std::string* error);
  // Handler wall time of the last launch for one task type, summed over workers (compute modes only).
  uint64_t handler_ns(uint32_t task_type) const;
  // All handler time of one worker in the last launch (compute modes only).
  uint64_t worker_busy_ns(uint32_t worker) const;

 private:
  template <class Queue>
  LaunchResult LaunchDynamic(DynamicState<Queue>& st, const ModeSpec& mode);
  LaunchResult LaunchStatic(const ModeSpec& mode, rt::WorkerReport* reports);

  SwigluAddWorkload& w_;
  WorkerPool& pool_;
  uint64_t timeout_ms_;
  uint32_t invocation_ = 0;
  DynamicState<ReadyFifo> fifo_;
  DynamicState<ReadyLifo> lifo_;
  std::vector<uint64_t> type_ns_;  // [worker][task type], one cache line apart per worker
};

}  // namespace microbench
}  // namespace hpmoe
