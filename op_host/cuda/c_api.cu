#include "c_api.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <new>

#include "../one_line.h"
#include "cuda_group.h"

using hpmoe::cuda::CudaGroup;

namespace {

int Fail(const std::string& msg, char* err, int errlen) {
  hpmoe::CopyMessage(err, errlen, msg);
  return msg.empty() ? 0 : 1;
}

// A new group set up by `create` (a CudaGroup& -> error text call), or nullptr with the reason in `err`.
template <class Create>
void* NewGroup(const uint32_t* config16, Create&& create, char* err, int errlen) {
  hpmoe::ssc::SscConfig cfg;
  std::memcpy(&cfg, config16, sizeof(cfg));
  CudaGroup* g = new (std::nothrow) CudaGroup();
  if (g == nullptr) {
    Fail("out of host memory", err, errlen);
    return nullptr;
  }
  const std::string e = create(*g, cfg);
  if (!e.empty()) {
    Fail(e, err, errlen);
    delete g;
    return nullptr;
  }
  return g;
}

// What lives outside the heaps: bound per launch (external_mask) or at fixed addresses (placed).
std::string SetSlotHomes(CudaGroup& g, uint32_t external_mask, const uint64_t* placed) {
  const std::string e = g.SetExternalSlots(external_mask);
  return e.empty() ? g.SetPlacedSlots(placed) : e;
}

}  // namespace

extern "C" {

int hpmoe_cuda_device_count(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

uint32_t hpmoe_cuda_blocks_per_worker(void) { return hpmoe::cuda::kBlocksPerWorker; }

void* hpmoe_cuda_group_create(const uint32_t* config16, uint32_t counters_fwd, uint32_t counters_bwd,
                              const int32_t* devices, uint32_t external_mask, const uint64_t* placed, char* err,
                              int errlen) {
  return NewGroup(config16, [&](CudaGroup& g, const hpmoe::ssc::SscConfig& cfg) {
    const std::vector<int> devs(devices, devices + (cfg.ep <= hpmoe::cuda::kMaxRanks ? cfg.ep : 0));
    const std::string e = SetSlotHomes(g, external_mask, placed);
    return e.empty() ? g.Create(cfg, counters_fwd, counters_bwd, devs) : e;
  }, err, errlen);
}

void* hpmoe_cuda_rank_create(const uint32_t* config16, uint32_t counters_fwd, uint32_t counters_bwd, uint32_t rank,
                             int32_t device, uint32_t external_mask, const uint64_t* placed, char* err, int errlen) {
  return NewGroup(config16, [&](CudaGroup& g, const hpmoe::ssc::SscConfig& cfg) {
    const std::string e = SetSlotHomes(g, external_mask, placed);
    return e.empty() ? g.CreateLocal(cfg, counters_fwd, counters_bwd, rank, device) : e;
  }, err, errlen);
}

int hpmoe_cuda_ipc_export(void* group, uint8_t* handle, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->ExportHandle(handle, 64), err, errlen);
}

int hpmoe_cuda_ipc_open(void* group, uint32_t peer, const uint8_t* handle, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->OpenPeer(peer, handle, 64), err, errlen);
}

void hpmoe_cuda_group_destroy(void* group) { delete static_cast<CudaGroup*>(group); }

int hpmoe_cuda_load(void* group, uint32_t rank, uint32_t direction, const uint8_t* data, uint64_t size, char* err,
                    int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->Load(rank, direction, data, size_t(size)), err, errlen);
}

int hpmoe_cuda_write(void* group, uint32_t rank, uint32_t slot, const void* src, uint64_t bytes, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->Write(rank, slot, src, bytes), err, errlen);
}

int hpmoe_cuda_read(void* group, uint32_t rank, uint32_t slot, void* dst, uint64_t bytes, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->Read(rank, slot, dst, bytes), err, errlen);
}

namespace {
hpmoe::cuda::LaunchOptions ToOptions(const HpmoeCudaOptions* o) {
  hpmoe::cuda::LaunchOptions opts;
  opts.timeout_ms = o->timeout_ms;
  opts.fault_rank = o->fault_rank;
  opts.fault_mode = o->fault_mode;
  opts.fault_after = o->fault_after;
  opts.trace = o->trace != 0;
  opts.plan = o->plan != 0;
  return opts;
}
}  // namespace

int hpmoe_cuda_launch_pass(void* group, uint32_t rank, uint32_t direction, void* stream, const uint64_t* bound,
                           uint32_t dw_mode, uint32_t plan, uint32_t timed, const HpmoeCudaPass* pass,
                           const HpmoeCudaOptions* options, char* err, int errlen) {
  hpmoe::cuda::LaunchSpec spec;
  for (uint32_t s = 0; s < hpmoe::ssc::kSlotCount; ++s) spec.bound[s] = bound != nullptr ? bound[s] : 0;
  spec.dw_mode = dw_mode;
  spec.plan = plan != 0;
  if (pass != nullptr) {
    spec.run_if = pass->run_if;
    spec.token_begin = pass->token_begin;
    spec.token_end = pass->token_end;
    spec.need_out = reinterpret_cast<void*>(pass->need_out);
  }
  return Fail(static_cast<CudaGroup*>(group)->Launch(rank, direction, stream, spec, ToOptions(options), timed),
              err, errlen);
}

int hpmoe_cuda_launch_timed(void* group, uint32_t rank, uint32_t direction, void* stream, const uint64_t* bound,
                            uint32_t dw_mode, uint32_t plan, uint32_t timed, const HpmoeCudaOptions* options, char* err,
                            int errlen) {
  return hpmoe_cuda_launch_pass(group, rank, direction, stream, bound, dw_mode, plan, timed, nullptr, options, err,
                                errlen);
}

int hpmoe_cuda_launch(void* group, uint32_t rank, uint32_t direction, void* stream, const uint64_t* bound,
                      uint32_t dw_mode, uint32_t plan, const HpmoeCudaOptions* options, char* err, int errlen) {
  return hpmoe_cuda_launch_timed(group, rank, direction, stream, bound, dw_mode, plan, 0, options, err, errlen);
}

int hpmoe_cuda_kernel_ms(void* group, uint32_t rank, uint32_t direction, float* ms, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->KernelMs(rank, direction, ms), err, errlen);
}

int hpmoe_cuda_poll(void* group, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->Poll(), err, errlen);
}

int hpmoe_cuda_run(void* group, uint32_t direction, const HpmoeCudaOptions* o, float* ms_per_rank, char* err,
                   int errlen) {
  CudaGroup* g = static_cast<CudaGroup*>(group);
  const std::string e = g->Run(direction, ToOptions(o));
  if (ms_per_rank != nullptr && e.empty()) {
    for (uint32_t r = 0; r < g->NumRanks(); ++r) ms_per_rank[r] = g->LastMs(r);
  }
  return Fail(e, err, errlen);
}

uint64_t hpmoe_cuda_segment_bytes(void* group) { return static_cast<CudaGroup*>(group)->layout().segment_bytes; }

uint32_t hpmoe_cuda_num_tasks(void* group, uint32_t rank, uint32_t direction) {
  return static_cast<CudaGroup*>(group)->NumTasks(rank, direction);
}

int hpmoe_cuda_trace(void* group, uint32_t rank, uint32_t direction, uint64_t* out, char* err, int errlen) {
  return Fail(static_cast<CudaGroup*>(group)->ReadTrace(rank, direction, out), err, errlen);
}
}
