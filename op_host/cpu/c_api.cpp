#include "c_api.h"

#include <cstring>
#include <string>

#include <vector>

#include "../../op_kernel/runtime/routing_plan.h"
#include "dynamic_dispatch.h"
#include "rank_runtime.h"
#include "shm_heap.h"
#include "../one_line.h"
#ifdef HPMOE_STUB_HCCL_WINDOWS
#include "../ascend/stub_runner/stub_windows.h"
#endif

using hpmoe::cpu::HeapLayout;
using hpmoe::cpu::RankRuntime;

namespace {

hpmoe::ssc::SscConfig ToConfig(const uint32_t* c) {
  hpmoe::ssc::SscConfig cfg;
  static_assert(sizeof(cfg) == 16 * sizeof(uint32_t), "SscConfig is 16 words");
  std::memcpy(&cfg, c, sizeof(cfg));
  return cfg;
}

}  // namespace

extern "C" {

int hpmoe_cpu_plan_range(uint32_t tokens, uint32_t topk, uint32_t ep, uint32_t experts_per_rank, uint32_t rows_per_src,
                         uint32_t align, uint32_t token_begin, uint32_t token_end, const int32_t* ids,
                         int32_t* send_counts, int32_t* send_rows, int32_t* token_rows, uint32_t* need, int64_t* bad_id) {
  std::vector<uint32_t> scratch(size_t(ep) * experts_per_rank);
  const hpmoe::rt::PlanShape shape{tokens, topk, ep, experts_per_rank, rows_per_src, align, token_begin, token_end};
  const hpmoe::rt::PlanResult r =
      hpmoe::rt::BuildRoutingPlan(shape, ids, send_counts, send_rows, token_rows, scratch.data());
  *need = r.need;
  *bad_id = r.bad_id;
  return 0;
}

int hpmoe_cpu_plan(uint32_t tokens, uint32_t topk, uint32_t ep, uint32_t experts_per_rank, uint32_t rows_per_src,
                   uint32_t align, const int32_t* ids, int32_t* send_counts, int32_t* send_rows, int32_t* token_rows, uint32_t* need,
                   int64_t* bad_id) {
  return hpmoe_cpu_plan_range(tokens, topk, ep, experts_per_rank, rows_per_src, align, 0, tokens, ids, send_counts,
                              send_rows, token_rows, need, bad_id);
}

int hpmoe_cpu_layout(const uint32_t* config16, uint32_t counters_fwd, uint32_t counters_bwd, uint64_t* slot_offsets,
                     uint64_t* slot_bytes, uint64_t* counter_offsets, uint64_t* segment_bytes, char* err, int errlen) {
  HeapLayout layout;
  const std::string e = hpmoe::cpu::ComputeHeapLayout(ToConfig(config16), counters_fwd, counters_bwd, &layout);
  if (!e.empty()) {
    hpmoe::CopyMessage(err, errlen, e);
    return 1;
  }
  for (uint32_t s = 0; s < hpmoe::ssc::kSlotCount; ++s) {
    slot_offsets[s] = layout.slot_offset[s];
    slot_bytes[s] = layout.slots[s].bytes;
  }
  counter_offsets[0] = layout.counter_offset[0];
  counter_offsets[1] = layout.counter_offset[1];
  *segment_bytes = layout.segment_bytes;
  return 0;
}

void* hpmoe_cpu_shm_create(const char* name, uint64_t bytes, char* err, int errlen) {
  std::string e;
  void* p = hpmoe::cpu::ShmCreate(name, bytes, &e);
  if (p == nullptr) hpmoe::CopyMessage(err, errlen, e);
  return p;
}

void* hpmoe_cpu_shm_attach(const char* name, uint64_t bytes, char* err, int errlen) {
  std::string e;
  void* p = hpmoe::cpu::ShmAttach(name, bytes, &e);
  if (p == nullptr) hpmoe::CopyMessage(err, errlen, e);
  return p;
}

void* hpmoe_cpu_anon_create(uint64_t bytes, char* err, int errlen) {
  std::string e;
  void* p = hpmoe::cpu::AnonymousCreate(bytes, &e);
  if (p == nullptr) hpmoe::CopyMessage(err, errlen, e);
  return p;
}

void hpmoe_cpu_unmap(void* base, uint64_t bytes) { hpmoe::cpu::Unmap(base, bytes); }
int hpmoe_cpu_shm_unlink(const char* name) { return hpmoe::cpu::ShmUnlink(name) ? 0 : 1; }
void hpmoe_cpu_heap_init(void* base, uint32_t ep, uint64_t segment_bytes) {
  hpmoe::cpu::InitGroupHeap(base, ep, segment_bytes);
#ifdef HPMOE_STUB_HCCL_WINDOWS  // the ascendc-cpu library: the heap's segments are the stub's HCCL windows
  hpmoe::ascend::CreateStubWindows(base, ep, segment_bytes);
#endif
}
void hpmoe_cpu_heap_abort(void* base, uint32_t ep, uint64_t segment_bytes, uint32_t rank) {
  hpmoe::cpu::AbortGroup(base, ep, segment_bytes, rank);
}

void* hpmoe_cpu_rank_open(void* base, uint64_t segment_bytes, const uint32_t* config16, uint32_t counters_fwd,
                          uint32_t counters_bwd, uint32_t rank, const uint8_t* fwd, uint64_t fwd_len,
                          const uint8_t* bwd, uint64_t bwd_len, const HpmoeRankOptions* options, char* err,
                          int errlen) {
  const hpmoe::ssc::SscConfig cfg = ToConfig(config16);
  HeapLayout layout;
  std::string e = hpmoe::cpu::ComputeHeapLayout(cfg, counters_fwd, counters_bwd, &layout);
  if (e.empty() && layout.segment_bytes != segment_bytes)
    e = "segment size " + std::to_string(segment_bytes) + " does not match the layout's " +
        std::to_string(layout.segment_bytes);
  if (!e.empty()) {
    hpmoe::CopyMessage(err, errlen, e);
    return nullptr;
  }
  hpmoe::cpu::GroupMemory group;
  group.base = static_cast<uint8_t*>(base);
  group.segment_bytes = segment_bytes;
  group.ep = cfg.ep;
  hpmoe::cpu::RankOptions opts;
  if (options != nullptr) {
    opts.timeout_ms = options->timeout_ms;
    opts.handlers = options->handlers;
    opts.fault_mode = options->fault_mode;
    opts.fault_after = options->fault_after;
    opts.fault_direction = options->fault_direction;
  }
  std::unique_ptr<RankRuntime> r =
      RankRuntime::Open(group, layout, rank, cfg, fwd, fwd_len, bwd, bwd_len, opts, &e);
  if (!r) {
    hpmoe::CopyMessage(err, errlen, e);
    return nullptr;
  }
  return r.release();
}

void hpmoe_cpu_rank_close(void* rank) { delete static_cast<RankRuntime*>(rank); }

void hpmoe_cpu_rank_set_tokens(void* rank, uint32_t token_begin, uint32_t token_end) {
  static_cast<RankRuntime*>(rank)->SetTokens(token_begin, token_end);
}

int hpmoe_cpu_run(void* const* ranks, uint32_t num_ranks, uint32_t direction, uint32_t dispatch, char* err,
                  int errlen) {
  RankRuntime* const* rs = reinterpret_cast<RankRuntime* const*>(ranks);
  const std::string e = dispatch == hpmoe::cpu::kDispatchDynamic
                            ? hpmoe::cpu::RunGroupDynamic(rs, num_ranks, direction)
                            : hpmoe::cpu::RunGroup(rs, num_ranks, direction);
  if (!e.empty()) {
    hpmoe::CopyMessage(err, errlen, e);
    return 1;
  }
  return 0;
}

}  // extern "C"
