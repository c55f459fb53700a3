#include "worker_report.h"

#include "one_line.h"
#include "ssc_reader.h"

namespace hpmoe {
namespace {

const char* HandlerErrorText(int32_t code) {
  switch (code) {
    case rt::kErrCounts: return "received per-expert counts are negative or exceed the bucket";
    case rt::kErrPlan: return "a send_rows/token_rows entry points outside its buffer";
    case rt::kErrRegion: return "a region does not have the shape this task type needs";
    case rt::kErrLaunchShape: return "the kernel runs without the 2-block clusters its build's workers need";
    case rt::kErrInjectedFault: return "injected fault (test hook)";
    default: return "unknown handler error";
  }
}

}  // namespace

std::string FormatWorkerReport(const rt::WorkerReport& r, uint32_t num_aic) {
  const bool aic = r.queue < num_aic;
  std::string where = Format("rank %u %s worker %u: task %u (%s, queue position %u)", r.rank, aic ? "AIC" : "AIV",
                             aic ? r.queue : r.queue - num_aic, r.task, ssc::TaskTypeName(r.task_type), r.position);
  std::string wait = Format("event %u: counter %u, needs %u (threshold %u, invocation %u)", r.event, r.counter,
                            r.target, r.threshold, r.invocation);
  switch (r.status) {
    case rt::kWaitTimeout: return where + ": wait timed out on " + wait;
    case rt::kAborted: return where + Format(": stopped after rank %d failed, waiting on ", r.detail) + wait;
    case rt::kHandlerFailed: return where + Format(": handler failed (%d: %s)", r.detail, HandlerErrorText(r.detail));
    case rt::kInjectedFault: return where + ": injected fault (test hook)";
    default: return where + Format(": unknown task type (status %d)", r.status);
  }
}

}  // namespace hpmoe
