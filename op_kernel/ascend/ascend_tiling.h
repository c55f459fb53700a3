// Tiling data of the hyper_parallel_moe kernel: written by the host (op_host/ascend: the CANN tiling function,
// or the CPU stub launcher), read by every AIC and AIV of the launch. Plain POD, the same bytes on both sides.
// The SSC itself is not tiling data: it is a GM input the host validated with op_host/ssc_loader.h. Where each
// rank's symmetric region is comes from the EP group's HCCL context in the kernel (GetWindowsInAddr).
#pragma once

#include "../ssc_layout.h"

namespace hpmoe {
namespace ascend {

constexpr uint32_t kMaxEp = 64;             // peers whose symmetric-heap base the tiling carries
constexpr uint32_t kCounterLineInts = 16;   // a counter's 64-byte line as int32 (kCounterStrideBytes / 4)
constexpr uint32_t kTilingMagic = 0x48504D54u;  // "TMPH"
constexpr uint64_t kSystemCyclesPerMs = 50000;  // GetSystemCycle() runs at 50 MHz on A2/A3
constexpr uint32_t kReportBytes = 64;           // workspace: one WorkerReport per worker queue, a line each
// Status the kernel reports when the launch does not match the SSC's worker counts (before any task ran).
constexpr int32_t kLaunchMismatch = 6;
// Status the kernel reports when the first launch's handshake timed out (a peer never zeroed its window).
constexpr int32_t kHandshakeTimeout = 7;
// One hello block per rank in every window (32 bytes: one DMA block; the int32 words below).
constexpr uint32_t kHelloInts = 8;
// Handler error: a task reached a core type that cannot run it (cube task on an AIV or vector task on an AIC).
constexpr int32_t kErrCoreType = 104;

// The caller's tensors, in the order of the kernel's arguments (and of the op's inputs, then outputs).
constexpr uint32_t kNumTensorArgs = 14;
constexpr uint32_t kTensorArgSlots[kNumTensorArgs] = {
    ssc::kSlotX,        ssc::kSlotW1,         ssc::kSlotW2,        ssc::kSlotTopkIds,   ssc::kSlotTopkWeights,
    ssc::kSlotDy,       ssc::kSlotSendRows,   ssc::kSlotSendCounts, ssc::kSlotTokenRows, ssc::kSlotY,
    ssc::kSlotDx,       ssc::kSlotDW1,        ssc::kSlotDW2,       ssc::kSlotDTopkWeights};

// GEMM kinds: one Matmul object per kind on each AIC, Init'ed once with the kind's host-computed tiling.
enum GemmKind : uint32_t {
  kGemmUp = 0,    // GMM          h = x W1[e]          (M <= tile_m, K = hidden, N = 2 inter)
  kGemmDown,      // GMM          y = a W2[e]          (K = inter, N = hidden)
  kGemmDA,        // GMM_TRANS_B  dA = dY W2[e]^T      (K = hidden, N = inter)
  kGemmDX,        // GMM_TRANS_B  dX = dH W1[e]^T      (K = 2 inter, N = hidden)
  kGemmDW1,       // GMM_WEIGHT_GRAD dW1 = X^T dH      (M = wgrad_tile, N = 2 inter, K <= C rows)
  kGemmDW2,       // GMM_WEIGHT_GRAD dW2 = A^T dY      (M = wgrad_tile, N = hidden, K <= C rows)
  kGemmKinds
};

// The leading members of CANN's TCubeTiling, in its order (the kernel copies them into a TCubeTiling).
struct GemmTiling {
  int32_t usedCoreNum, M, N, Ka, Kb, singleCoreM, singleCoreN, singleCoreK, baseM, baseN, baseK;
  int32_t depthA1, depthB1, stepM, stepN, isBias, transLength, iterateOrder;
  int32_t stepKa, stepKb, dbL0A, dbL0B, dbL0C, reserved;
};

// CANN's MC2 tiling blocks (opaque to the op: filled on the host by Mc2CcTilingConfig::GetTiling, read by
// Hccl::Init and SetCcTiling); sizes as CANN declares them. They come first in the tiling data, as in every
// ops-transformer MoeDistribute* tiling.
struct Mc2InitTilingData {
  uint8_t reserved[64];
};
struct Mc2CcTilingData {
  uint8_t reserved[280];
};

struct KernelTiling {
  Mc2InitTilingData mc2_init;
  Mc2CcTilingData mc2_cc;
  uint32_t magic;           // kTilingMagic
  uint32_t rank;
  uint32_t direction;       // ssc::Direction of the SSC this launch runs
  uint32_t invocation;      // n = 1, 2, ... of that SSC on this rank (epoch rule)
  uint32_t num_blocks;      // AI cores launched (= SSC num_aic; each brings 2 AIVs)
  uint32_t token_begin;     // the tokens this launch's reductions write, [token_begin, token_end): a pass of the
                            // speculative bucket (docs/design.md), whose plan routed only them; else [0, T)
  uint64_t timeout_cycles;  // bound on every wait, in GetSystemCycle() ticks
  uint64_t counter_offset;  // this direction's event counters, from the heap segment base
  uint64_t abort_offset;    // the group abort word (int32, own 64-byte line), from the segment base
  // First use of the windows (forward invocation 1): HCCL does not promise zeroed windows, so this rank zeroes
  // its counters (both directions) and abort line, then says hello to every rank; every core waits for all
  // hellos before any task runs (op_kernel/ascend/window_setup.h).
  uint32_t first_use;
  uint32_t token_end;
  uint64_t zero_offset;       // this rank's counters of both directions, from the segment base
  uint64_t zero_bytes;        // a multiple of 64
  uint64_t handshake_offset;  // ep hello blocks (32 bytes each), from the segment base; never zeroed
  ssc::SscConfig config;
  uint64_t slot_offset[ssc::kSlotCount];  // tensors the caller does not pass: offset in the symmetric region
  uint32_t slot_cols[ssc::kSlotCount];
  uint32_t slot_dtype[ssc::kSlotCount];
  GemmTiling gemm[kGemmKinds];
  uint64_t window_bytes;    // the symmetric region the layout needs (checked against the HCCL window)
  alignas(64) int32_t signal_one[kCounterLineInts];  // {1, 0, ..., 0}: the line an AIC adds to a counter
  alignas(64) int32_t abort_line[kCounterLineInts];  // {rank + 1, 0, ..., 0}: raised into every abort word
  // {nonce low, nonce high, rank + 1, 0, ...}: the group's nonce (agreed on the host, fresh for every window
  // set-up) makes a stale or garbage block count as no hello (a 2^-64 chance of a false one).
  alignas(64) int32_t hello[kHelloInts];
};

}  // namespace ascend
}  // namespace hpmoe
