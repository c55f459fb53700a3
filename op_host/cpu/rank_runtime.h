// One EP rank of the CPU twin: its loaded fwd/bwd programs, its view of the group heap, and per-worker
// scratch. A launch runs every worker queue of one direction on its own thread (AIC workers first, then AIV)
// through the shared worker loop. Several ranks of one process launch together (RunGroup: ranks as thread
// groups); a rank process launches alone (Run: ranks as processes over POSIX shared memory).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../op_kernel/cpu/cpu_sync.h"
#include "../../op_kernel/cpu/heap_layout.h"
#include "../../op_kernel/cpu/rank_context.h"
#include "../../op_kernel/runtime/status.h"
#include "program_loader.h"

namespace hpmoe {
namespace cpu {

enum HandlerMode : uint32_t { kHandlersCompute = 0, kHandlersNull = 1 };
enum DispatchMode : uint32_t { kDispatchStatic = 0, kDispatchDynamic = 1 };

constexpr uint64_t kMaxTimeoutMs = 86400000;  // one day: the launcher's own limit (hpmoe run --timeout)

struct RankOptions {
  uint64_t timeout_ms = 30000;
  uint32_t handlers = kHandlersCompute;
  uint32_t fault_mode = kFaultNone;
  uint32_t fault_after = 0;      // handler calls on this rank before the fault
  uint32_t fault_direction = 0;  // the direction whose launch carries the fault
};

class RankRuntime {
 public:
  // `fwd`/`bwd` may be null (that direction is not loadable). Returns nullptr and sets *error on failure.
  static std::unique_ptr<RankRuntime> Open(const GroupMemory& group, const HeapLayout& layout, uint32_t rank,
                                           const ssc::SscConfig& config, const uint8_t* fwd, size_t fwd_size,
                                           const uint8_t* bwd, size_t bwd_size, const RankOptions& options,
                                           std::string* error);

  // Starts invocation n+1 of `direction` (checks, then bumps the epoch). Returns "" or a one-line error.
  std::string Prepare(uint32_t direction);
  // Runs worker `queue` of the prepared launch on the calling thread; fills the report on failure.
  int32_t RunWorker(uint32_t queue, rt::WorkerReport* report);
  // One thread per worker queue; pool queues are units the CTQ workers claim, not workers.
  uint32_t num_workers(uint32_t direction) const {
    const rt::SscProgram& p = programs_[direction].program;
    return p.num_queues - p.num_pool;
  }
  const rt::SscProgram& program(uint32_t direction) const { return programs_[direction].program; }
  // The validated SSC image and view (other backends launch from it; ssc::ValidateGroup reads it).
  const LoadedProgram& loaded(uint32_t direction) const { return programs_[direction]; }
  const RankContext& context() const { return ctx_; }
  // The tokens the next launches reduce (a pass of the speculative bucket; its plan routed only these).
  void SetTokens(uint32_t begin, uint32_t end) { ctx_.token_begin = begin, ctx_.token_end = end; }
  WorkerScratch& scratch(uint32_t queue) { return scratch_[queue]; }
  CpuSync& sync(uint32_t direction) { return *sync_[direction]; }
  uint32_t rank() const { return ctx_.rank; }
  uint32_t prepared_direction() const { return direction_; }
  const RankOptions& options() const { return options_; }

 private:
  RankRuntime() = default;
  GroupMemory group_;
  HeapLayout layout_{};
  RankContext ctx_;
  RankOptions options_;
  LoadedProgram programs_[2];
  std::unique_ptr<CpuSync> sync_[2];
  std::vector<float> scratch_floats_;
  std::vector<uint8_t> staging_bytes_;
  std::vector<WorkerScratch> scratch_;
  uint32_t tasks_run_ = 0;
  uint32_t direction_ = 0;
  uint64_t launches_ = 0;
};

// Runs one launch of `direction` on every rank in `ranks` concurrently (all workers of all ranks as threads
// of this process) and joins them. Returns "" or one line: the first failing worker's report.
std::string RunGroup(RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction);

}  // namespace cpu
}  // namespace hpmoe
