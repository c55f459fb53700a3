#include "tiling_builder.h"

#include <cstddef>
#include <cstdio>
#include <cstring>

#include "../../op_kernel/runtime/slot_shapes.h"
#include "../../op_kernel/runtime/status.h"
#include "../../op_kernel/cpu/heap_layout.h"
#include "../ssc_loader.h"
#include "../one_line.h"

namespace hpmoe {
namespace ascend {
namespace {
uint32_t RoundUp(uint32_t v, uint32_t q) { return (v + q - 1) / q * q; }
uint32_t Min(uint32_t a, uint32_t b) { return a < b ? a : b; }
}  // namespace

GemmTiling CubeTilingFor(uint32_t m, uint32_t n, uint32_t k, uint32_t elem_bytes, uint32_t cores) {
  GemmTiling t{};
  const uint32_t block = 32 / elem_bytes;  // elements per 32-byte block
  t.usedCoreNum = int32_t(cores);
  t.M = t.singleCoreM = int32_t(m);
  t.N = t.singleCoreN = int32_t(n);
  t.Ka = t.Kb = t.singleCoreK = int32_t(k);
  // 128 x 256 fp32 fills L0C (128 KiB); baseK = 64 bytes' worth x 16 keeps A (128 x baseK) and B (baseK x
  // 256) at 16 / 32 KiB per buffer, double-buffered inside L0A / L0B.
  t.baseM = int32_t(Min(128, RoundUp(m, 16)));
  t.baseN = int32_t(Min(256, RoundUp(n, 16)));
  t.baseK = int32_t(Min(128 / elem_bytes, RoundUp(k, block)));
  t.stepM = t.stepN = t.stepKa = t.stepKb = 1;
  t.depthA1 = t.depthB1 = 2;
  t.dbL0A = t.dbL0B = 2;
  t.dbL0C = 1;
  return t;
}

std::string BuildTiling(const TilingRequest& req, TilingResult* out) {
  ssc::LoadExpect expect;
  expect.config = req.expected;
  expect.rank = req.rank;
  expect.direction = req.direction;
  expect.counter_capacity = req.direction == ssc::kForward ? req.counters_fwd : req.counters_bwd;
  ssc::LoadedSsc loaded;
  std::string err = ssc::LoadSsc(req.ssc, req.ssc_bytes, expect, &loaded);
  if (!err.empty()) return err;
  const ssc::SscConfig& cfg = loaded.view.config();
  if (cfg.num_aic == 0 || cfg.num_aic > req.core_num_aic)
    return Format("the SSC needs %u AI cores (num_aic); this device has %u", cfg.num_aic, req.core_num_aic);
  if (cfg.num_aiv != 2 * cfg.num_aic)
    return Format("a MIX_AIC_1_2 launch of %u blocks runs %u AIV workers, but the SSC was compiled for %u: "
                  "compile with --workers-aiv %u", cfg.num_aic, 2 * cfg.num_aic, cfg.num_aiv, 2 * cfg.num_aic);
  if (cfg.flags & ssc::kConfigMixedQueues)
    return "the SSC deals vector tasks to cube workers (mixed queues), which an AI core's AIC cannot run: "
           "compile with --no-mixed-queues";
  if (cfg.flags & ssc::kConfigClaimPool)
    return "the SSC has a claim pool (weight-gradient tiles claimed at run time), which this kernel does not "
           "build: compile without --claim-pool";
  if (cfg.flags & ssc::kConfigWeightsTransposed)
    return "the SSC reads weights in nn.Linear's layout (W1 [E, 2I, h]), which this kernel does not: compile "
           "without --weights-transposed";
  for (uint32_t i = 0; i < loaded.view.num_tasks; ++i) {  // the handlers write whole expert widths
    const ssc::SscTask& task = loaded.view.tasks[i];
    const ssc::SscTensorRef& o = task.outputs[0];
    const bool split = o.col_offset != 0 || o.slot >= ssc::kSlotCount ||
                       o.cols != rt::ExpectedSlotSpec(cfg, o.slot).dims[1];
    if ((task.task_type == ssc::kTaskGmm || task.task_type == ssc::kTaskGmmTransB) && split)
      return "the SSC splits GMM outputs into column blocks, which this kernel does not build: compile with "
             "--gmm-n-block at least max(2*inter, hidden)";
    if ((task.task_type == ssc::kTaskSwiglu || task.task_type == ssc::kTaskSwigluGrad) && split)
      return "the SSC splits SwiGLU into column blocks, which this kernel does not build: compile with "
             "--act-n-block at least inter";
  }
  if (2 * cfg.num_aic > req.core_num_aiv)
    return Format("the SSC needs %u AIV cores; this device has %u", 2 * cfg.num_aic, req.core_num_aiv);
  if (cfg.ep > kMaxEp) return Format("ep=%u exceeds the %u peers the kernel's tiling carries", cfg.ep, kMaxEp);
  static_assert(sizeof(rt::WorkerReport) <= kReportBytes, "WorkerReport outgrew its line");
  if (req.invocation == 0) return "invocation must start at 1 (epoch rule)";
  if (req.window_nonce == 0)
    return "window_nonce must be a non-zero value the whole EP group agreed on, fresh for every set-up of its "
           "windows (the first launch's handshake tells a peer's hello from garbage by it)";
  cpu::HeapLayout layout;
  err = cpu::ComputeHeapLayout(cfg, req.counters_fwd, req.counters_bwd, &layout);
  if (!err.empty()) return err;

  KernelTiling& t = out->tiling;
  std::memset(&t, 0, sizeof(t));
  t.magic = kTilingMagic;
  t.rank = req.rank;
  t.direction = req.direction;
  t.invocation = req.invocation;
  t.num_blocks = cfg.num_aic;
  t.token_end = req.token_end < cfg.tokens ? req.token_end : cfg.tokens;
  t.token_begin = req.token_begin < t.token_end ? req.token_begin : t.token_end;
  t.timeout_cycles = req.timeout_ms * kSystemCyclesPerMs;
  t.counter_offset = layout.counter_offset[req.direction];
  t.abort_offset = offsetof(cpu::ControlBlock, abort_rank_plus1);
  static_assert(kMaxEp * kHelloInts * sizeof(int32_t) <= cpu::kControlBytes - cpu::kHandshakeOffset &&
                    kHelloInts * sizeof(int32_t) == cpu::kHandshakeBlockBytes,
                "the hello blocks fill the control page's second half");
  // A backward runs only on what a forward saved, so forward invocation 1 is the windows' first use.
  t.first_use = req.direction == ssc::kForward && req.invocation == 1;
  t.zero_offset = layout.counter_offset[0];
  t.zero_bytes = (uint64_t(req.counters_fwd) + req.counters_bwd) * ssc::kCounterStrideBytes;
  t.handshake_offset = cpu::kHandshakeOffset;
  t.config = cfg;
  for (uint32_t s = 0; s < ssc::kSlotCount; ++s) {
    t.slot_offset[s] = layout.slot_offset[s];
    t.slot_cols[s] = uint32_t(layout.slots[s].cols);
    t.slot_dtype[s] = layout.slots[s].dtype;
  }
  const uint32_t es = cfg.dtype == ssc::kFP32 ? 4 : 2, C = cfg.recv_rows_per_src, h = cfg.hidden, I = cfg.inter;
  t.gemm[kGemmUp] = CubeTilingFor(cfg.tile_m, 2 * I, h, es, cfg.num_aic);
  t.gemm[kGemmDown] = CubeTilingFor(cfg.tile_m, h, I, es, cfg.num_aic);
  t.gemm[kGemmDA] = CubeTilingFor(cfg.tile_m, I, h, es, cfg.num_aic);
  t.gemm[kGemmDX] = CubeTilingFor(cfg.tile_m, h, 2 * I, es, cfg.num_aic);
  t.gemm[kGemmDW1] = CubeTilingFor(cfg.wgrad_tile, 2 * I, C, es, cfg.num_aic);
  t.gemm[kGemmDW2] = CubeTilingFor(cfg.wgrad_tile, h, C, es, cfg.num_aic);
  // An expert without rows gets its weight-gradient block zeroed by DataCopy in whole 32-byte blocks.
  if ((uint64_t(cfg.wgrad_tile) * h * 4) % 32 != 0 || (uint64_t(cfg.wgrad_tile) * 2 * I * 4) % 32 != 0)
    return Format("wgrad_tile x hidden and wgrad_tile x 2 inter must be multiples of 8 elements (got %u, %u, %u)",
                  cfg.wgrad_tile, h, I);
  t.window_bytes = layout.segment_bytes;
  if (req.window_bytes < layout.segment_bytes)
    return Format("the op needs a %llu MiB HCCL window per rank but has %llu MiB: set HCCL_BUFFSIZE=%llu (MiB) "
                  "or larger", (unsigned long long)((layout.segment_bytes + (1 << 20) - 1) >> 20),
                  (unsigned long long)(req.window_bytes >> 20),
                  (unsigned long long)((layout.segment_bytes + (1 << 20) - 1) >> 20));
  t.signal_one[0] = 1;
  t.abort_line[0] = int32_t(req.rank) + 1;
  t.hello[0] = int32_t(uint32_t(req.window_nonce));
  t.hello[1] = int32_t(uint32_t(req.window_nonce >> 32));
  t.hello[2] = int32_t(req.rank) + 1;
  out->block_dim = cfg.num_aic;
  out->schedule_mode = 1;
  out->workspace_bytes = req.lib_workspace_bytes + uint64_t(cfg.num_aic + cfg.num_aiv) * kReportBytes;
  out->region_bytes = layout.segment_bytes;
  return "";
}

}  // namespace ascend
}  // namespace hpmoe
