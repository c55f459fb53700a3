#include "mode_runner.h"

#include <algorithm>
#include <vector>

#include "../../op_kernel/cpu/cpu_handlers.h"
#include "../../op_kernel/runtime/worker_loop.h"
#include "timed_handlers.h"

namespace hpmoe {
namespace microbench {
namespace {
constexpr uint32_t kTypeStride = (ssc::kTaskTypeCount + 7) / 8 * 8 + 8;  // > 64 bytes between workers
}  // namespace

ModeRunner::ModeRunner(SwigluAddWorkload& workload, WorkerPool& pool, uint64_t timeout_ms)
    : w_(workload), pool_(pool), timeout_ms_(timeout_ms), fifo_(workload.program(kInterleaved)),
      lifo_(workload.program(kInterleaved)), type_ns_(size_t(pool.workers()) * kTypeStride, 0) {}

uint64_t ModeRunner::handler_ns(uint32_t task_type) const {
  uint64_t sum = 0;
  for (uint32_t w = 0; w < pool_.workers(); ++w) sum += type_ns_[w * kTypeStride + task_type];
  return sum;
}

uint64_t ModeRunner::worker_busy_ns(uint32_t worker) const {
  uint64_t sum = 0;
  for (uint32_t t = 0; t < ssc::kTaskTypeCount; ++t) sum += type_ns_[worker * kTypeStride + t];
  return sum;
}

LaunchResult ModeRunner::LaunchStatic(const ModeSpec& mode, rt::WorkerReport* reports) {
  const rt::SscProgram& p = w_.program(mode.order);
  cpu::LocalRank& rank = w_.rank();
  const std::function<int32_t(uint32_t)> job = [&](uint32_t q) -> int32_t {
    if (mode.noop) {
      cpu::NullHandlers<cpu::CpuSync> h(rank.sync());
      return rt::RunWorkerQueue(p, q, rank.sync(), h, &reports[q]);
    }
    cpu::CpuHandlers<cpu::CpuSync> inner(rank.context(), rank.scratch(q), rank.sync());
    TimedHandlers<cpu::CpuHandlers<cpu::CpuSync>> h(inner, &type_ns_[q * kTypeStride]);
    return rt::RunWorkerQueue(p, q, rank.sync(), h, &reports[q]);
  };
  return pool_.Run(job);
}

template <class Queue>
LaunchResult ModeRunner::LaunchDynamic(DynamicState<Queue>& st, const ModeSpec& mode) {
  st.Arm(w_.program(mode.order));
  cpu::LocalRank& rank = w_.rank();
  const std::function<int32_t(uint32_t)> job = [&](uint32_t q) -> int32_t {
    DynamicSync<Queue> sync(rank.sync(), st);
    if (mode.noop) {
      cpu::NullHandlers<DynamicSync<Queue>> h(sync);
      return RunDynamicWorker(st, q, sync, h, timeout_ms_);
    }
    cpu::CpuHandlers<DynamicSync<Queue>> inner(rank.context(), rank.scratch(q), sync);
    TimedHandlers<cpu::CpuHandlers<DynamicSync<Queue>>> h(inner, &type_ns_[q * kTypeStride]);
    return RunDynamicWorker(st, q, sync, h, timeout_ms_);
  };
  return pool_.Run(job);
}

LaunchResult ModeRunner::Launch(const ModeSpec& mode, std::string* error) {
  ++invocation_;
  for (Order o : {kSerial, kInterleaved}) w_.program(o).invocation = invocation_;
  std::vector<rt::WorkerReport> reports(pool_.workers(), rt::WorkerReport{});
  std::fill(type_ns_.begin(), type_ns_.end(), 0);
  LaunchResult r;
  switch (mode.dispatch) {
    case kStatic:
      r = LaunchStatic(mode, reports.data());
      break;
    case kDynamicFifo:
      r = LaunchDynamic(fifo_, mode);
      break;
    case kDynamicLifo:
      r = LaunchDynamic(lifo_, mode);
      break;
  }
  if (r.status != 0) {
    const rt::WorkerReport& rep = reports[r.failed_worker];
    *error = std::string(mode.name) + ": worker " + std::to_string(r.failed_worker) + " stopped with status " +
             std::to_string(r.status);
    if (mode.dispatch == kStatic)
      *error += " at task " + std::to_string(rep.task) + " (event " + std::to_string(rep.event) + ", counter " +
                std::to_string(rep.counter) + ", target " + std::to_string(rep.target) + ", detail " +
                std::to_string(rep.detail) + ")";
  }
  return r;
}

}  // namespace microbench
}  // namespace hpmoe
