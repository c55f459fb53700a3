// CudaGroup (cuda_group.h): after a launch, the one-line report of what failed (a refused routing plan, the root
// cause among the workers' reports) and the task trace.
#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "../worker_report.h"
#include "cuda_group.h"
#include "cuda_try.h"

namespace hpmoe {
namespace cuda {

std::string CudaGroup::FailureReport(uint32_t rank) {
  RankState& s = ranks_[rank];
  cudaSetDevice(s.device);
  if (s.last_stream != nullptr || s.stream != nullptr)
    HPMOE_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(s.last_stream ? s.last_stream : s.stream)),
                   "running the persistent kernel");
  for (uint32_t dir = 0; dir < 2; ++dir) {  // a refused routing plan first: it names the input at fault
    if (s.dev_rank[dir] == nullptr) continue;
    DeviceRank d;
    HPMOE_CUDA_TRY(cudaMemcpy(&d, s.dev_rank[dir], sizeof(d), cudaMemcpyDeviceToHost), "reading the launch state");
    if (!d.planned) continue;
    const uint32_t experts = cfg_.ep * cfg_.experts_per_rank;
    if (d.plan_bad != kNoBadId) {
      const int32_t* ids = d.bound[ssc::kSlotTopkIds]
                               ? reinterpret_cast<const int32_t*>(d.bound[ssc::kSlotTopkIds])
                               : reinterpret_cast<const int32_t*>(s.segment + layout_.slot_offset[ssc::kSlotTopkIds]);
      int32_t v = 0;
      cudaMemcpy(&v, ids + d.plan_bad, sizeof(v), cudaMemcpyDeviceToHost);
      return Format("rank %u: topk_ids[%llu, %llu] = %d is outside [0, %u); the output was set to NaN", rank,
                    d.plan_bad / cfg_.topk, d.plan_bad % cfg_.topk, v, experts);
    }
    if (d.plan_need > cfg_.recv_rows_per_src)
      return Format("rank %u sends %u rows to one rank; the bucket holds C=%u (no row moved; the output was set to NaN)",
                    rank, d.plan_need, cfg_.recv_rows_per_src);
  }
  std::string first;
  uint32_t failures = 0;
  for (uint32_t dir = 0; dir < 2; ++dir) {
    if (s.reports[dir] == nullptr) continue;
    std::vector<rt::WorkerReport> reports(s.host_rank[dir].program.num_queues);
    HPMOE_CUDA_TRY(cudaMemcpy(reports.data(), s.reports[dir], reports.size() * sizeof(rt::WorkerReport),
                              cudaMemcpyDeviceToHost), "reading worker reports");
    for (const rt::WorkerReport& w : reports) {
      if (w.status == rt::kOk) continue;
      ++failures;
      // The root cause first: a timeout or handler failure rather than a worker that was told to stop.
      if (first.empty() || (w.status != rt::kAborted && first.find("stopped after") != std::string::npos))
        first = FormatWorkerReport(w, cfg_.num_aic);
    }
  }
  if (failures > 1) first += Format(" (+%u more workers stopped)", failures - 1);
  if (first.empty()) {  // no worker ran: a speculative forward whose ranks did not all publish their need
    DeviceRank d;
    HPMOE_CUDA_TRY(cudaMemcpy(&d, s.dev_rank[0], sizeof(d), cudaMemcpyDeviceToHost), "reading the launch state");
    if (d.run_if == kRunSpeculate)
      return Format("rank %u: the ranks did not agree on the routing's rows within the timeout (a rank did not "
                    "launch this forward, or stopped)", rank);
  }
  return first.empty() ? Format("rank %u: a launch failed (no worker report)", rank) : first;
}

std::string CudaGroup::Poll() {
  for (uint32_t r = 0; r < ranks_.size(); ++r) {
    if (!IsLocal(r) || reinterpret_cast<volatile uint32_t*>(host_status_)[r] == 0) continue;
    failed_ = true;
    return FailureReport(r);
  }
  return "";
}

std::string CudaGroup::ReadTrace(uint32_t rank, uint32_t direction, uint64_t* out) {
  if (rank >= ranks_.size() || !IsLocal(rank) || direction > 1 || ranks_[rank].trace[direction] == nullptr)
    return "no trace was recorded for this rank and direction (run with trace on)";
  cudaSetDevice(ranks_[rank].device);
  HPMOE_CUDA_TRY(cudaMemcpy(out, ranks_[rank].trace[direction],
                            kTraceWords * sizeof(uint64_t) * ranks_[rank].ssc[direction].program.num_tasks,
                            cudaMemcpyDeviceToHost), "reading the trace");
  return "";
}

}  // namespace cuda
}  // namespace hpmoe
