// One line from a worker's failure report, the same for every backend's launcher (CPU twin, AscendC, CUDA):
// "rank 1 AIV worker 2: task 17 (DISPATCH_PUT, queue position 4): wait timed out on event 0: counter 3, needs 4
// (threshold 4, invocation 1)" and the like.
#pragma once

#include <cstdint>
#include <string>

#include "../op_kernel/runtime/status.h"

namespace hpmoe {

std::string FormatWorkerReport(const rt::WorkerReport& r, uint32_t num_aic);

}  // namespace hpmoe
