// Prints every record size, field offset and enum value of op_kernel/ssc_layout.h as JSON, so that
// tests/test_layout_header.py can compare the header with scheduler/hpmoe/ssc_format.py.
#include <cstddef>
#include <cstdio>

#include "../op_kernel/ssc_layout.h"
#include "../op_kernel/runtime/task_access.h"

using namespace hpmoe::ssc;

namespace {
bool first = true;
void Item(const char* key, unsigned long long value) {
  std::printf("%s\"%s\":%llu", first ? "" : ",", key, value);
  first = false;
}
}  // namespace

#define SIZE(T) Item("sizeof." #T, sizeof(T));
#define OFF(T, f) Item("offset." #T "." #f, offsetof(T, f));
#define VAL(v) Item("value." #v, static_cast<unsigned long long>(v));

int main() {
  std::printf("{");
  SIZE(SscConfig) SIZE(SscSection) SIZE(SscHeader) SIZE(SscTensor) SIZE(SscTensorRef) SIZE(SscTask)
  SIZE(SscEvent) SIZE(SscQueue) SIZE(SscTiling)
  OFF(SscHeader, magic) OFF(SscHeader, version_major) OFF(SscHeader, version_minor) OFF(SscHeader, header_bytes)
  OFF(SscHeader, file_bytes) OFF(SscHeader, checksum) OFF(SscHeader, direction) OFF(SscHeader, rank)
  OFF(SscHeader, num_workers) OFF(SscHeader, config) OFF(SscHeader, sections)
  OFF(SscConfig, ep) OFF(SscConfig, tokens) OFF(SscConfig, hidden) OFF(SscConfig, inter)
  OFF(SscConfig, experts_per_rank) OFF(SscConfig, topk) OFF(SscConfig, dtype) OFF(SscConfig, tile_m)
  OFF(SscConfig, recv_rows_per_src) OFF(SscConfig, wgrad_tile) OFF(SscConfig, token_tile) OFF(SscConfig, num_aic)
  OFF(SscConfig, num_aiv) OFF(SscConfig, flags)
  OFF(SscTensor, slot) OFF(SscTensor, role) OFF(SscTensor, dtype) OFF(SscTensor, flags) OFF(SscTensor, ndim)
  OFF(SscTensor, dims) OFF(SscTensor, bytes) OFF(SscTensor, name)
  OFF(SscTensorRef, slot) OFF(SscTensorRef, flags) OFF(SscTensorRef, rank) OFF(SscTensorRef, row_offset)
  OFF(SscTensorRef, rows) OFF(SscTensorRef, col_offset) OFF(SscTensorRef, cols)
  OFF(SscTask, task_type) OFF(SscTask, queue_type) OFF(SscTask, dependent_event) OFF(SscTask, trigger_event)
  OFF(SscTask, trigger_rank) OFF(SscTask, task_index) OFF(SscTask, task_split_num) OFF(SscTask, task_split_value)
  OFF(SscTask, tiling_data_position) OFF(SscTask, op_id) OFF(SscTask, peer) OFF(SscTask, expert)
  OFF(SscTask, inputs) OFF(SscTask, outputs)
  OFF(SscEvent, threshold) OFF(SscEvent, flags) OFF(SscEvent, op_id)
  OFF(SscQueue, queue_type) OFF(SscQueue, worker) OFF(SscQueue, first_entry) OFF(SscQueue, count)
  OFF(SscTiling, op_id) OFF(SscTiling, task_type) OFF(SscTiling, m) OFF(SscTiling, n) OFF(SscTiling, k)
  OFF(SscTiling, experts)
  VAL(kMagic) VAL(kVersionMajor) VAL(kVersionMinor) VAL(kMaxInputs) VAL(kMaxOutputs) VAL(kMaxWaits)
  VAL(kMaxTriggers) VAL(kMaxTensorDims) VAL(kTensorNameBytes) VAL(kNoEvent) VAL(kNoSlot) VAL(kCounterStrideBytes)
  VAL(kTaskTypeCount) VAL(kSlotCount) VAL(kSectionCount) VAL(kTensorSymmetric) VAL(kRefRemote) VAL(kRefRowsDynamic)
  VAL(kRefGather) VAL(kEventRemoteTriggered) VAL(kConfigRatr) VAL(kConfigInterleave) VAL(kConfigMixedQueues) VAL(kConfigRowPipelines)
  VAL(kConfigClaimPool) VAL(kConfigWeightsTransposed) VAL(kConfigFusedSwiglu) VAL(kConfigExpertAligned) VAL(kFusedSwigluGroup) VAL(kPoolQueue)
  // The handlers' access table (runtime/task_access.h), row by row: access.<row>.<field>.
  using namespace hpmoe::rt;
  char key[64];
  Item("access.rows", kTaskAccessCount);
  for (uint32_t i = 0; i < kTaskAccessCount; ++i) {
    const TaskAccess& a = kTaskAccess[i];
    std::snprintf(key, sizeof key, "access.%u.task_type", i), Item(key, a.task_type);
    std::snprintf(key, sizeof key, "access.%u.flags", i), Item(key, a.flags);
    for (uint32_t k = 0; k < kMaxInputs; ++k) std::snprintf(key, sizeof key, "access.%u.inputs.%u", i, k), Item(key, a.inputs[k]);
    for (uint32_t k = 0; k < kMaxOutputs; ++k) std::snprintf(key, sizeof key, "access.%u.outputs.%u", i, k), Item(key, a.outputs[k]);
  }
  std::printf("}\n");
  return 0;
}
