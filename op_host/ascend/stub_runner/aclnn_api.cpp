// The op's aclnn two-phase C API as CANN generates it for an installed op package (aclnn<Op>GetWorkspaceSize,
// then aclnn<Op>(workspace, size, executor, stream)), implemented over the CPU stubs. Phase one runs the
// package's own tiling function (package/op_host/hyper_parallel_moe.cpp, through the host-API stubs) on the
// call's tensors and attributes; phase two launches the stub-compiled kernel with the caller's tensors as
// kernel arguments and the EP group's HCCL windows. Stand-ins: aclTensor (data, shape, nothing else), the
// stream (ignored: the stub launch is synchronous), the communicator (hpmoe_stub_hccl_group names a group heap
// created by this library: garbage-filled windows). Returns 0, else non-zero with one line in
// hpmoe_aclnn_last_error().
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "register/op_def_registry.h"

#include "../../../op_kernel/ascend/ascend_tiling.h"
#include "../../../op_kernel/ascend/stub/lib/hccl/hccl.h"
#include "../../../op_kernel/ascend/stub/stub_launch.h"
#include "../../../op_kernel/runtime/status.h"
#include "../../one_line.h"
#include "ascend_launch.h"

extern "C" void hyper_parallel_moe(GM_ADDR x, GM_ADDR w1, GM_ADDR w2, GM_ADDR topk_ids, GM_ADDR topk_weights,
                                   GM_ADDR dy, GM_ADDR send_rows, GM_ADDR send_counts, GM_ADDR token_rows,
                                   GM_ADDR ssc, GM_ADDR epoch, GM_ADDR y, GM_ADDR dx, GM_ADDR dw1, GM_ADDR dw2,
                                   GM_ADDR dtopk_weights, GM_ADDR workspace, GM_ADDR tiling);

extern "C" {
struct aclTensor {  // the stub's stand-in: a contiguous tensor
  void* data;
  int64_t dims[4];
  uint32_t ndim;
  uint32_t reserved;
};
struct aclOpExecutor;
}

struct aclOpExecutor {
  hpmoe::ascend::KernelTiling tiling;
  uint32_t block_dim = 0;
  uint64_t workspace_bytes = 0;
  GM_ADDR args[16] = {};  // the kernel's arguments before workspace and tiling
  AscendC::stub::HcclContext group;
};

namespace {

struct Group {
  uint8_t* base;
  uint32_t ep;
  uint64_t segment_bytes;
};
std::mutex g_mu;
std::map<std::string, Group>& Groups() {
  static std::map<std::string, Group> groups;
  return groups;
}
thread_local std::string g_error;

int Refuse(const std::string& why) {
  g_error = why;
  return 1;
}

constexpr size_t kInputs = 11, kOutputs = 5;
const char* const kInputNames[kInputs] = {"x", "w1", "w2", "topk_ids", "topk_weights", "dy", "send_rows",
                                          "send_counts", "token_rows", "ssc", "epoch"};

int64_t Elements(const aclTensor* t) {
  int64_t n = 1;
  for (uint32_t d = 0; d < t->ndim; ++d) n *= t->dims[d];
  return n;
}

}  // namespace

extern "C" {

// Stands for the communicator the framework created for `name`: rank r's window is base + r * segment_bytes.
int hpmoe_stub_hccl_group(const char* name, void* base, uint32_t ep, uint64_t segment_bytes) {
  if (name == nullptr || *name == '\0' || base == nullptr || ep == 0 || ep > hpmoe::ascend::kMaxEp)
    return Refuse("hpmoe_stub_hccl_group: a name, a heap and 1 <= ep <= 64 are needed");
  std::lock_guard<std::mutex> lock(g_mu);
  Groups()[name] = Group{static_cast<uint8_t*>(base), ep, segment_bytes};
  return 0;
}

const char* hpmoe_aclnn_last_error() { return g_error.c_str(); }

int aclnnHyperParallelMoeGetWorkspaceSize(const aclTensor* x, const aclTensor* w1, const aclTensor* w2,
                                          const aclTensor* topk_ids, const aclTensor* topk_weights,
                                          const aclTensor* dy, const aclTensor* send_rows,
                                          const aclTensor* send_counts, const aclTensor* token_rows,
                                          const aclTensor* ssc, const aclTensor* epoch, const char* group,
                                          int64_t rank, int64_t direction, int64_t counters_fwd,
                                          int64_t counters_bwd, int64_t window_nonce, int64_t timeout_ms,
                                          const aclTensor* y, const aclTensor* dx, const aclTensor* dw1,
                                          const aclTensor* dw2, const aclTensor* dtopk_weights,
                                          uint64_t* workspace_size, aclOpExecutor** executor) {
  const aclTensor* in[kInputs] = {x, w1, w2, topk_ids, topk_weights, dy, send_rows, send_counts, token_rows,
                                  ssc, epoch};
  const aclTensor* out[kOutputs] = {y, dx, dw1, dw2, dtopk_weights};
  for (size_t i = 0; i < kInputs; ++i) {
    if (i != 5 && (in[i] == nullptr || in[i]->data == nullptr))
      return Refuse(std::string("aclnnHyperParallelMoeGetWorkspaceSize: input ") + kInputNames[i] + " is missing");
  }
  for (const aclTensor* t : out)
    if (t == nullptr || t->data == nullptr) return Refuse("aclnnHyperParallelMoeGetWorkspaceSize: an output is missing");
  if (workspace_size == nullptr || executor == nullptr || group == nullptr)
    return Refuse("aclnnHyperParallelMoeGetWorkspaceSize: workspace_size, executor and group are required");
  Group g;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Groups().find(group);
    if (it == Groups().end())
      return Refuse(hpmoe::Format("aclnnHyperParallelMoeGetWorkspaceSize: no communicator named '%s'", group));
    g = it->second;
  }
  if (rank < 0 || uint64_t(rank) >= g.ep) return Refuse(hpmoe::Format("rank %lld outside the group", (long long)rank));
  // Phase one: the package's tiling function on the call, as CANN's generated aclnn runs it.
  gert::TilingContext ctx;
  ctx.platform = {hpmoe::ascend::kStubPhysicalCores, 2 * hpmoe::ascend::kStubPhysicalCores};
  ctx.inputs.resize(kInputs);
  ctx.values.resize(kInputs);
  for (size_t i = 0; i < kInputs; ++i) {
    ctx.inputs[i].present = in[i] != nullptr;
    if (in[i] != nullptr) ctx.inputs[i].shape.dims_.assign(in[i]->dims, in[i]->dims + in[i]->ndim);
  }
  ctx.values[9] = {ssc->data, Elements(ssc)};
  ctx.values[10] = {epoch->data, Elements(epoch)};
  ctx.attrs.ints = {0, rank, direction, counters_fwd, counters_bwd, window_nonce, timeout_ms};
  ctx.attrs.strs = {group};
  if (ops::Registry().at("HyperParallelMoe")->aicore.tiling(&ctx) != ge::GRAPH_SUCCESS)
    return Refuse("aclnnHyperParallelMoeGetWorkspaceSize: the op's tiling function refused the call (its line is on "
                  "stderr)");
  aclOpExecutor* e = new aclOpExecutor();
  std::memcpy(&e->tiling, ctx.tiling.bytes.data(), sizeof(e->tiling));
  if (e->tiling.window_bytes > g.segment_bytes) {
    delete e;
    return Refuse("the communicator's windows are smaller than the op's layout");
  }
  e->block_dim = ctx.block_dim;
  e->workspace_bytes = ctx.workspace.empty() ? 0 : ctx.workspace[0];
  for (size_t i = 0; i < kInputs; ++i) e->args[i] = in[i] != nullptr ? static_cast<GM_ADDR>(in[i]->data) : nullptr;
  for (size_t i = 0; i < kOutputs; ++i) e->args[kInputs + i] = static_cast<GM_ADDR>(out[i]->data);
  e->group.rank_id = uint32_t(rank);
  e->group.rank_dim = g.ep;
  for (uint32_t r = 0; r < g.ep; ++r) e->group.windows_in[r] = reinterpret_cast<uint64_t>(g.base + r * g.segment_bytes);
  *workspace_size = e->workspace_bytes;
  *executor = e;
  return 0;
}

// Phase two: runs the launch to completion (the stub's stream is synchronous) and frees the executor.
int aclnnHyperParallelMoe(void* workspace, uint64_t workspace_size, aclOpExecutor* executor, void* stream) {
  (void)stream;
  if (executor == nullptr) return Refuse("aclnnHyperParallelMoe: no executor (call GetWorkspaceSize first)");
  aclOpExecutor* e = executor;
  if (workspace == nullptr || workspace_size < e->workspace_bytes) {
    const uint64_t need = e->workspace_bytes;
    delete e;
    return Refuse(hpmoe::Format("aclnnHyperParallelMoe: the workspace must hold %llu bytes", (unsigned long long)need));
  }
  const uint32_t workers = e->tiling.config.num_aic + e->tiling.config.num_aiv;
  uint8_t* reports = static_cast<uint8_t*>(workspace) + AscendC::stub::kSystemWorkspaceBytes;
  std::memset(reports, 0xFF, uint64_t(workers) * hpmoe::ascend::kReportBytes);
  AscendC::stub::LaunchEnv env;
  env.hccl_context = &e->group;
  env.workspace_bytes = workspace_size;
  GM_ADDR* a = e->args;
  AscendC::stub::LaunchMix(e->block_dim, &hyper_parallel_moe, env, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7],
                           a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], static_cast<GM_ADDR>(workspace),
                           reinterpret_cast<GM_ADDR>(&e->tiling));
  std::string failure;
  for (uint32_t q = 0; q < workers && failure.empty(); ++q) {
    hpmoe::rt::WorkerReport r;
    std::memcpy(&r, reports + q * hpmoe::ascend::kReportBytes, sizeof(r));
    if (r.status != hpmoe::rt::kOk) failure = hpmoe::ascend::DescribeReport(r, e->tiling.config.num_aic);
  }
  delete e;
  return failure.empty() ? 0 : Refuse(failure);
}

}  // extern "C"
