// The body every core of a hyper_parallel_moe launch runs: pick this core's SSC queue (AIC block b: CTQ b;
// AIV block v: VTQ v, so both AIVs of each AI core run a queue), check the launch against the SSC, run the
// shared worker loop (op_kernel/runtime/worker_loop.h, unchanged) with the Ascend Sync and Handlers, and
// leave a WorkerReport in the workspace (kOk, or where and why it stopped).
#pragma once

#include "kernel_operator.h"
#include "lib/hccl/hccl.h"

#include "../runtime/worker_loop.h"
#include "ascend_handlers.h"
#include "ascend_sync.h"
#include "kernel_context.h"
#include "window_setup.h"

namespace hpmoe {
namespace ascend {

static_assert(sizeof(rt::WorkerReport) <= kReportBytes, "WorkerReport outgrew its line");

// Pointers into the SSC image in GM. The host accepted this image with ssc::LoadSsc (and ValidateGroup where
// it held the group) before upload, so the kernel reads offsets without re-checking them.
HPMOE_DEVICE rt::SscProgram MakeProgram(GM_ADDR image, uint32_t rank, uint32_t invocation) {
  const __gm__ ssc::SscHeader* h = reinterpret_cast<const __gm__ ssc::SscHeader*>(image);
  rt::SscProgram p{};
  p.tasks = reinterpret_cast<const __gm__ ssc::SscTask*>(image + h->sections[ssc::kSecTasks].offset);
  p.num_tasks = h->sections[ssc::kSecTasks].count;
  p.events = reinterpret_cast<const __gm__ ssc::SscEvent*>(image + h->sections[ssc::kSecEvents].offset);
  p.num_events = h->sections[ssc::kSecEvents].count;
  p.queues = reinterpret_cast<const __gm__ ssc::SscQueue*>(image + h->sections[ssc::kSecQueues].offset);
  p.num_queues = h->sections[ssc::kSecQueues].count;
  p.entries = reinterpret_cast<const __gm__ uint32_t*>(image + h->sections[ssc::kSecQueueEntries].offset);
  p.rank = rank;
  p.invocation = invocation;
  return p;
}

HPMOE_DEVICE void WriteReport(GM_ADDR workspace, uint32_t queue, const rt::WorkerReport& r) {
  AscendC::GlobalTensor<int32_t> g;
  g.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(AscendC::GetUserWorkspace(workspace) + queue * kReportBytes),
                    kReportBytes / 4);
  const int32_t* words = reinterpret_cast<const int32_t*>(&r);
  for (uint32_t i = 0; i < sizeof(rt::WorkerReport) / 4; ++i) g.SetValue(i, words[i]);
  AscendC::DataCacheCleanAndInvalid<int32_t, AscendC::CacheLine::SINGLE_CACHE_LINE,
                                    AscendC::DcciDst::CACHELINE_OUT>(g);
}

// The worker of one core for activation type T: pipe, sync, handlers, the loop, the report.
template <class T>
HPMOE_DEVICE int32_t RunWorker(const KernelContext& ctx, const rt::SscProgram& program, uint32_t queue,
                               rt::WorkerReport* report, AscendC::TPipe& pipe) {
  AscendSync sync;
  sync.Init(ctx, pipe);
  AscendHandlers<T> handlers;
  handlers.Init(ctx, &sync, pipe);
  const int32_t status = rt::RunWorkerQueue(program, queue, sync, handlers, report);
  if (status != rt::kOk && status != rt::kAborted) sync.RaiseAbort();
  return status;
}

// tensors: the caller's tensors in kTensorArgSlots order.
HPMOE_DEVICE void RunKernel(GM_ADDR ssc_image, const GM_ADDR* tensors, GM_ADDR workspace, GM_ADDR tiling_gm) {
  KernelTiling tiling;
  CopyTiling(&tiling, reinterpret_cast<const __gm__ KernelTiling*>(tiling_gm));
  const ssc::SscConfig& cfg = tiling.config;
  const bool aic = g_coreType == AscendC::AIC;
  const uint32_t block = uint32_t(AscendC::GetBlockIdx());
  const uint32_t queue = aic ? block : cfg.num_aic + block;
  rt::WorkerReport report{};
  report.rank = tiling.rank;
  report.queue = queue;
  report.event = ssc::kNoEvent;
  report.invocation = tiling.invocation;
  // The compiled worker counts must be what this launch got: numBlocks AICs and 2 * numBlocks AIVs.
  // The EP group's windows are the symmetric regions (MC2: the op's `group` attribute names the group):
  // Init with the host's Mc2InitTiling, then the communication tiling (as every MoeDistribute* kernel).
  AscendC::Hccl hccl;
  const __gm__ KernelTiling* tiling_in_gm = reinterpret_cast<const __gm__ KernelTiling*>(tiling_gm);
  hccl.Init(AscendC::GetHcclContext<AscendC::HCCL_GROUP_ID_0>(),
            reinterpret_cast<__gm__ void*>(const_cast<__gm__ Mc2InitTilingData*>(&tiling_in_gm->mc2_init)));
  hccl.SetCcTiling(reinterpret_cast<__gm__ void*>(const_cast<__gm__ Mc2CcTilingData*>(&tiling_in_gm->mc2_cc)));
  const bool launch_ok = tiling.magic == kTilingMagic && uint32_t(AscendC::GetBlockNum()) == cfg.num_aic &&
                         cfg.num_aiv == 2 * cfg.num_aic && tiling.num_blocks == cfg.num_aic &&
                         hccl.GetRankDim() == cfg.ep && hccl.GetRankId() == tiling.rank && cfg.ep <= kMaxEp;
  if (!launch_ok) {
    report.status = kLaunchMismatch;
    report.detail = int32_t(AscendC::GetBlockNum());
    if (queue < cfg.num_aic + cfg.num_aiv) WriteReport(workspace, queue, report);
    return;
  }
  AscendC::DataCacheCleanAndInvalid<int32_t, AscendC::CacheLine::ENTIRE_DATA_CACHE, AscendC::DcciDst::CACHELINE_OUT>(
      AscendC::GlobalTensor<int32_t>{});  // nothing cached from before this launch (plans, inputs) is trusted
  const rt::SscProgram program = MakeProgram(ssc_image, tiling.rank, tiling.invocation);
  // This core's queue record, read through the scalar path: it must be of this core's queue type.
  AscendC::GlobalTensor<uint32_t> queue_record;
  queue_record.SetGlobalBuffer(const_cast<__gm__ uint32_t*>(&program.queues[queue].queue_type));
  if (queue_record.GetValue(0) != (aic ? uint32_t(ssc::kCTQ) : uint32_t(ssc::kVTQ))) {
    report.status = kLaunchMismatch;
    report.detail = -2;
    WriteReport(workspace, queue, report);
    return;
  }
  KernelContext ctx;
  ctx.tiling = &tiling;
  ctx.tiling_gm = tiling_in_gm;
  for (uint32_t r = 0; r < cfg.ep; ++r) ctx.peer[r] = reinterpret_cast<uint64_t>(hccl.GetWindowsInAddr(r));
  ctx.heap = reinterpret_cast<GM_ADDR>(ctx.peer[tiling.rank]);
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) ctx.slot[s] = ctx.heap + tiling.slot_offset[s];
  for (uint32_t i = 0; i < kNumTensorArgs; ++i) ctx.slot[kTensorArgSlots[i]] = tensors[i];
  AscendC::TPipe pipe;  // one per core: the window set-up's buffers first, then (after Reset) the worker's
  if (tiling.first_use != 0) {
    if ASCEND_IS_AIV {
      if (block == 0) ZeroWindowAndSayHello(ctx, pipe);
    }
    pipe.Reset();
    uint32_t silent = 0;
    if (WaitForEveryHello(ctx, &silent) != rt::kOk) {
      report.status = kHandshakeTimeout;
      report.detail = int32_t(silent);
      WriteReport(workspace, queue, report);
      return;
    }
  }
  int32_t status = rt::kErrRegion;
  switch (cfg.dtype) {
    case ssc::kFP32: status = RunWorker<float>(ctx, program, queue, &report, pipe); break;
    case ssc::kFP16: status = RunWorker<AscendC::half>(ctx, program, queue, &report, pipe); break;
    case ssc::kBF16: status = RunWorker<AscendC::bfloat16_t>(ctx, program, queue, &report, pipe); break;
    default: report.status = rt::kHandlerFailed; break;
  }
  report.status = status;
  WriteReport(workspace, queue, report);
}

}  // namespace ascend
}  // namespace hpmoe
