// K worker threads for repeated launches (the calling thread is worker 0), so a launch does not pay thread
// creation: a launch releases every worker at once, runs job(w) on each, and ends when the last one returns.
// Its wall time is measured by worker 0 from the release to the last finish. Optionally each worker counts
// its own last-level-cache misses over the launch (one perf counter per thread, read before and after its
// job: two read() calls per worker inside the timed region, only when counting).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "llc_counter.h"

namespace hpmoe {
namespace microbench {

struct LaunchResult {
  uint64_t ns = 0;
  uint64_t llc_misses = 0;  // summed over workers; 0 when not counting
  int32_t status = 0;       // first non-zero job status, by worker index
  uint32_t failed_worker = 0;
  std::vector<uint64_t> end_ns;  // per worker: when its job returned, from the release
};

class WorkerPool {
 public:
  // Starts workers 1..K-1. With count_llc, each worker opens its counter (llc_error() says why one failed).
  WorkerPool(uint32_t workers, bool count_llc);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  LaunchResult Run(const std::function<int32_t(uint32_t)>& job);
  uint32_t workers() const { return workers_; }
  bool counting() const { return counting_; }
  const std::string& llc_error() const { return llc_error_; }
  const char* llc_event() const { return counters_[0].event_name(); }

 private:
  void WorkerMain(uint32_t w);
  void WaitForRelease(uint64_t seen) const;

  uint32_t workers_;
  bool counting_;
  std::string llc_error_;
  std::vector<std::thread> threads_;
  std::unique_ptr<LlcCounter[]> counters_;
  std::vector<int32_t> status_;
  std::vector<uint64_t> llc_delta_;
  std::vector<uint64_t> end_ns_;
  uint64_t t0_ = 0;
  const std::function<int32_t(uint32_t)>* job_ = nullptr;
  bool stop_ = false;
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<uint32_t> done_{0};
  alignas(64) std::atomic<uint32_t> opened_{0};
};

}  // namespace microbench
}  // namespace hpmoe
