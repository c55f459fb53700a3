#include "ascend_launch.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <thread>

#include "../../../op_kernel/ascend/kernel_body.h"
#include "../../../op_kernel/ascend/stub/lib/hccl/hccl.h"
#include "../../../op_kernel/ascend/stub/stub_launch.h"
#include "../../ssc_loader.h"
#include "../tiling_builder.h"
#include "../../one_line.h"
#include "../../worker_report.h"

extern "C" void hyper_parallel_moe(GM_ADDR x, GM_ADDR w1, GM_ADDR w2, GM_ADDR topk_ids, GM_ADDR topk_weights,
                                   GM_ADDR dy, GM_ADDR send_rows, GM_ADDR send_counts, GM_ADDR token_rows,
                                   GM_ADDR ssc, GM_ADDR epoch, GM_ADDR y, GM_ADDR dx, GM_ADDR dw1, GM_ADDR dw2,
                                   GM_ADDR dtopk_weights, GM_ADDR workspace, GM_ADDR tiling);

namespace hpmoe {
namespace ascend {
std::string DescribeReport(const rt::WorkerReport& r, uint32_t num_aic) {
  const bool aic = r.queue < num_aic;
  const std::string who = Format("rank %u %s worker %u", r.rank, aic ? "AIC" : "AIV", aic ? r.queue : r.queue - num_aic);
  if (r.status == kLaunchMismatch)
    return who + (r.detail == -2 ? ": its SSC queue is of the other core type"
                                 : Format(": launched with %d blocks, not what the SSC was compiled for", r.detail));
  if (r.status == kHandshakeTimeout)
    return who + Format(": the first launch's window handshake timed out: rank %d never said hello (it did not "
                        "launch, or has not zeroed its window's counters)", r.detail);
  if (r.status == rt::kHandlerFailed && r.detail == kErrCoreType)
    return who + Format(": task %u (%s, queue position %u) reached the wrong core type", r.task,
                        ssc::TaskTypeName(r.task_type), r.position);
  return FormatWorkerReport(r, num_aic);
}

void FillMc2Tiling(KernelTiling* tiling) {
  // On CANN: Mc2CcTilingConfig(group, opType, algConfig).GetTiling(mc2_init / mc2_cc). The stub marks both.
  std::memcpy(tiling->mc2_init.reserved, &AscendC::stub::kMc2TilingMark, 4);
  std::memcpy(tiling->mc2_cc.reserved, &AscendC::stub::kMc2TilingMark, 4);
}

std::string MakeTiling(const cpu::RankRuntime& rank, uint32_t direction, uint32_t invocation, KernelTiling* tiling) {
  const cpu::RankContext& ctx = rank.context();
  const cpu::HeapLayout& layout = *ctx.layout;
  const ssc::LoadedSsc& file = rank.loaded(direction);
  TilingRequest req;
  req.ssc = file.bytes.data;
  req.ssc_bytes = file.bytes.size;
  req.expected = &ctx.cfg;
  req.rank = ctx.rank;
  req.direction = direction;
  req.invocation = invocation;
  req.counters_fwd = layout.counter_capacity[0];
  req.counters_bwd = layout.counter_capacity[1];
  req.core_num_aic = kStubPhysicalCores;
  req.core_num_aiv = 2 * kStubPhysicalCores;
  req.timeout_ms = rank.options().timeout_ms;
  req.lib_workspace_bytes = AscendC::stub::kSystemWorkspaceBytes;
  req.window_bytes = layout.segment_bytes;  // the stub's HCCL window of a rank is its heap segment
  req.window_nonce = reinterpret_cast<const cpu::ControlBlock*>(ctx.segment)->window_nonce;
  req.token_begin = ctx.token_begin;  // hpmoe_cpu_rank_set_tokens: a pass of the speculative bucket
  req.token_end = ctx.token_end;
  TilingResult result;
  const std::string err = BuildTiling(req, &result);
  if (!err.empty()) return err;
  if (result.region_bytes != layout.segment_bytes) return "the op's region layout differs from the CPU heap's";
  *tiling = result.tiling;
  FillMc2Tiling(tiling);
  return "";
}

std::string ValidateWholeGroup(cpu::RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction) {
  std::vector<const ssc::LoadedSsc*> files(num_ranks, nullptr);
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const uint32_t r = ranks[i]->rank();
    if (r >= num_ranks || files[r] != nullptr) return Format("rank %u given twice", r);
    files[r] = &ranks[i]->loaded(direction);
  }
  return ssc::ValidateGroup(files.data(), num_ranks);
}

std::string RunGroupAscend(cpu::RankRuntime* const* ranks, uint32_t num_ranks, uint32_t direction,
                           std::vector<LaunchLogs>* logs) {
  // Tilings first (the tiling function refuses what the kernel cannot run), for the invocation Prepare is
  // about to start, so a refused launch leaves every rank's epoch untouched.
  std::vector<KernelTiling> tilings(num_ranks);
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const cpu::ControlBlock* cb = reinterpret_cast<const cpu::ControlBlock*>(ranks[i]->context().segment);
    const uint32_t next = __atomic_load_n(&cb->invocations[direction & 1], __ATOMIC_ACQUIRE) + 1;
    const std::string err = MakeTiling(*ranks[i], direction, next, &tilings[i]);
    if (!err.empty()) return err;
  }
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const std::string err = ranks[i]->Prepare(direction);
    if (!err.empty()) return err;
    if (ranks[i]->program(direction).invocation != tilings[i].invocation)
      return Format("rank %u: invocation changed while preparing the launch", ranks[i]->rank());
  }
  if (logs != nullptr) logs->assign(num_ranks, LaunchLogs{});
  const uint32_t workers = ranks[0]->context().cfg.num_aic + ranks[0]->context().cfg.num_aiv;
  // System workspace (GetLibApiWorkSpaceSize) + the reports, as the tiling function sizes it.
  const uint64_t ws_bytes = AscendC::stub::kSystemWorkspaceBytes + uint64_t(workers) * kReportBytes;
  std::vector<std::vector<uint8_t>> workspaces(num_ranks, std::vector<uint8_t>(ws_bytes, 0xFF));
  std::vector<int64_t> epochs(num_ranks);
  // The HCCL context of each rank: its windows are the twin's heap segments (same layout on every rank).
  std::vector<AscendC::stub::HcclContext> groups(num_ranks);
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const cpu::RankContext& ctx = ranks[i]->context();
    groups[i].rank_id = ctx.rank;
    groups[i].rank_dim = ctx.cfg.ep;
    for (uint32_t r = 0; r < ctx.cfg.ep && r < kMaxEp; ++r)
      groups[i].windows_in[r] =
          reinterpret_cast<uint64_t>(ctx.segment) + (int64_t(r) - int64_t(ctx.rank)) * ctx.layout->segment_bytes;
  }
  std::vector<std::thread> launches;
  for (uint32_t i = 0; i < num_ranks; ++i) epochs[i] = tilings[i].invocation;
  for (uint32_t i = 0; i < num_ranks; ++i) {
    const uint32_t blocks = ranks[i]->context().cfg.num_aic;
    GM_ADDR ssc = const_cast<GM_ADDR>(ranks[i]->loaded(direction).bytes.data);
    // On the CPU every tensor of the op lives in the twin's heap segment; the caller's tensors are passed
    // as kernel arguments all the same, as the op package passes the framework's tensors.
    GM_ADDR t[kNumTensorArgs];
    for (uint32_t a = 0; a < kNumTensorArgs; ++a) t[a] = ranks[i]->context().Slot(kTensorArgSlots[a]);
    GM_ADDR ws = workspaces[i].data();
    GM_ADDR epoch = reinterpret_cast<GM_ADDR>(&epochs[i]);
    GM_ADDR tiling = reinterpret_cast<GM_ADDR>(&tilings[i]);
    AscendC::stub::LaunchEnv env;
    env.logs = logs != nullptr ? &(*logs)[i].cores : nullptr;
    env.hccl_context = &groups[i];
    env.workspace_bytes = ws_bytes;
    launches.emplace_back([=] {
      AscendC::stub::LaunchMix(blocks, &hyper_parallel_moe, env, t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7],
                               t[8], ssc, epoch, t[9], t[10], t[11], t[12], t[13], ws, tiling);
    });
  }
  for (std::thread& t : launches) t.join();
  // The primary report is the failure that raised the abort, not one that merely stopped because of it.
  const rt::WorkerReport* primary = nullptr;
  int failures = 0;
  for (uint32_t i = 0; i < num_ranks; ++i) {
    for (uint32_t q = 0; q < workers; ++q) {
      const rt::WorkerReport* r = reinterpret_cast<const rt::WorkerReport*>(
          workspaces[i].data() + AscendC::stub::kSystemWorkspaceBytes + q * kReportBytes);
      if (r->status == rt::kOk) continue;
      if (r->status == -1 && r->rank == 0xFFFFFFFFu)  // the 0xFF fill: the core never wrote its report
        return Format("rank %u worker %u left no report", ranks[i]->rank(), q);
      ++failures;
      if (primary == nullptr || (primary->status == rt::kAborted && r->status != rt::kAborted)) primary = r;
    }
  }
  if (primary == nullptr) return "";
  if (primary->status != rt::kAborted) {
    for (uint32_t i = 0; i < num_ranks; ++i) {
      cpu::ControlBlock* cb = reinterpret_cast<cpu::ControlBlock*>(ranks[i]->context().segment);
      __atomic_store_n(&cb->abort_rank_plus1, primary->rank + 1, __ATOMIC_RELEASE);  // refuse further launches
    }
  }
  std::string line = DescribeReport(*primary, ranks[0]->context().cfg.num_aic);
  if (failures > 1) line += Format(" (+%d more workers stopped)", failures - 1);
  return line;
}

}  // namespace ascend
}  // namespace hpmoe
