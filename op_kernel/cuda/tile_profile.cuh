// Timing-only builds (-DHPMOE_EXPERIMENT_PROFILE=1): where a GMM tile's time goes, per tile kind (GMM,
// GMM_TRANS_B, weight gradient), summed over one launch by thread 0 of every block from clock64 stamps:
// waiting for the first K step's operands, the rest of the K loop, staging the tile in shared memory, storing
// it; and each block's whole run, in cycles and nanoseconds (the tiles' share, the SM clock). A one-thread
// kernel after each launch prints the sums (device printf) and clears them. Default builds compile none of it
// (docs/cuda.md, "Per phase and per tile"). Under HPMOE_GEMM_PAIRS also how pool claims paired up (PairEvent)
// and the paired tiles' K loop (kind 3). And thread 0's time in claims, waits and signals (SyncOp).
#pragma once

#include <stdint.h>

#include "../ssc_layout.h"

#ifndef HPMOE_EXPERIMENT_PROFILE
#define HPMOE_EXPERIMENT_PROFILE 0
#endif

namespace hpmoe {
namespace cuda {

// Kinds 0-3: GMM, GMM_TRANS_B, WEIGHT_GRAD, PAIRED_LOOP. Kind 4 counts again the GMM / GMM_TRANS_B tiles that one
// warpgroup multiplied (BlockGemmTma::Accumulate's m_live <= 64), a subset of kinds 0-1 without their epilogues.
constexpr int kProfileOneWarpgroup = 4;
// kPhaseWhole: a tile's whole iteration in its handler's loop (the four phases, zeroing the accumulators, the
// K segments' walk and whatever else lies between them), where the handler stamps it (RunGmm, RunWeightGrad).
enum TilePhase { kPhaseFill, kPhaseLoop, kPhaseStage, kPhaseStore, kPhaseTiles, kPhaseSteps, kPhaseWhole, kPhaseCount };
constexpr int kProfilePairedKind = 3;  // the paired tile's fill and K loop (its epilogue counts under its base kind)
// Claims under HPMOE_GEMM_PAIRS, counted by the block that makes them.
enum PairEvent {
  kPairAlone,      // a claim by a block that never pairs (again), or block 1 finding the gate not open
  kPairAsked,      // block 1 asked block 0 for a round
  kPairWithdrawn,  // ... and took the request back unanswered
  kPairServed,     // block 0 served a round
  kPairBothUnits,  // a served round with both units in the pool
  kPairTiled,      // a unit run as paired tiles (both blocks count theirs)
  kPairEventCount
};

// The GPU's global nanosecond timer: trace stamps, wait deadlines (cuda_sync.cuh) and the block profile below.
__device__ __forceinline__ uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Thread 0's time in the worker loop's sync calls (CudaSync), barriers included: pool claims, waits (met or
// not), signals. Between two tasks a block runs nothing else, so these account for its gaps (docs/cuda.md, "Time
// between tasks": claims took about 1 us, never over 9.8k cycles).
// Also the whole time from one handler's end to the next one's start on the same block ("between"): the sync
// calls above plus the loop's own work (reading the next task's descriptor), which the difference shows.
// And from a claim's end to the claimed unit's first wait: reading the unit's entry, its task's descriptor and
// the awaited event ("fetches"); from a handler's end to the next claim ("to the claim": its triggers and the
// loop); from the last claim or wait to the handler's start ("to the handler": the dispatch).
enum SyncOp {
  kSyncClaim, kSyncWait, kSyncSignal, kSyncBetween, kSyncFetch, kSyncToClaim, kSyncToHandler, kSyncOpCount
};
// The waits again, by the consumer op of the awaited event (SscEvent::op_id, the graph's operator order) and by
// where the waiting task came from: a cube-role or vector-role block's own queue, or a claimed pool unit. Which
// edges of the schedule hold blocks up, not only how long.
enum WaitSource { kWaitCubeQueue, kWaitVectorQueue, kWaitPool, kWaitSourceCount };
constexpr uint32_t kWaitProfileOps = 16;  // op ids beyond count under the last

// The ping-pong weight-gradient unit (block_gemm_pingpong.cuh), per warpgroup (its thread 0; the store: its
// thread 32): a multiplying warpgroup's steps (waiting for the operands, issue to the step before done, freeing
// the slot; of that, zeroing a K tail), the other's feeding and storing a tile, waiting for its turn; units and
// their cycles (warpgroup 0).
enum PpPhase {
  kPpTurn, kPpFull, kPpMma, kPpFree, kPpTail, kPpFeed, kPpStore, kPpSteps, kPpTiles, kPpUnits, kPpUnitCycles,
  kPpPhaseCount
};

#if HPMOE_EXPERIMENT_PROFILE
__device__ unsigned long long g_pp_profile[2][kPpPhaseCount];
__device__ __forceinline__ void PpProfileAdd(int phase, uint64_t v) {
  if (threadIdx.x % 128 == (phase == kPpStore ? 32 : 0) && (phase < kPpUnits || threadIdx.x == 0))
    atomicAdd(&g_pp_profile[threadIdx.x / 128][phase], (unsigned long long)v);
}
__device__ unsigned long long g_tile_profile[5][kPhaseCount];
__device__ unsigned long long g_sync_profile[kSyncOpCount][3];  // calls, cycles, the longest call's cycles

__device__ __forceinline__ void SyncProfileAdd(int op, uint64_t cycles) {
  atomicAdd(&g_sync_profile[op][0], 1ull);
  atomicAdd(&g_sync_profile[op][1], (unsigned long long)cycles);
  atomicMax(&g_sync_profile[op][2], (unsigned long long)cycles);
}
// [op][source]: waits, of them unmet on the first load, cycles
__device__ unsigned long long g_wait_profile[kWaitProfileOps][kWaitSourceCount][3];

__device__ __forceinline__ void WaitProfileAdd(uint32_t op, int source, uint64_t cycles, bool unmet) {
  unsigned long long* w = g_wait_profile[op < kWaitProfileOps ? op : kWaitProfileOps - 1][source];
  atomicAdd(&w[0], 1ull);
  if (unmet) atomicAdd(&w[1], 1ull);
  atomicAdd(&w[2], (unsigned long long)cycles);
}
__device__ unsigned long long g_pair_profile[kPairEventCount];
// Thread 0's handler time by the task's type (ssc_layout.h TaskType): calls, cycles in the handler's body,
// cycles in the barrier after it (the block's, and a worker of two blocks' cluster barrier: where the block
// that finished its half first waits for the other). Which handlers, not only the GMM tiles, hold the time.
constexpr int kHandlerProfileTypes = ssc::kTaskTypeCount;
__device__ unsigned long long g_handler_profile[kHandlerProfileTypes][3];
__device__ __forceinline__ void HandlerProfileAdd(uint32_t type, uint64_t body, uint64_t barrier) {
  if (threadIdx.x != 0) return;
  unsigned long long* h = g_handler_profile[type < kHandlerProfileTypes ? type : kHandlerProfileTypes - 1];
  atomicAdd(&h[0], 1ull);
  atomicAdd(&h[1], (unsigned long long)body);
  atomicAdd(&h[2], (unsigned long long)barrier);
}

__device__ __forceinline__ void PairProfileAdd(int event) { atomicAdd(&g_pair_profile[event], 1ull); }

__device__ __forceinline__ void ProfileAdd(int kind, int phase, uint64_t v) {
  if (threadIdx.x == 0) atomicAdd(&g_tile_profile[kind][phase], (unsigned long long)v);
}
__device__ __forceinline__ uint64_t ProfileClock() { return clock64(); }

// Each block's whole run (thread 0, from entering the worker loop to leaving it): SM cycles and global-timer
// nanoseconds, so that the tiles' cycles read as a share of the blocks' time and the launch's SM clock shows.
__device__ unsigned long long g_block_profile[3];  // blocks, their cycles, their nanoseconds
struct BlockStamp {
  uint64_t cycles, ns;
};
__device__ __forceinline__ BlockStamp ProfileBlockBegin() { return {uint64_t(clock64()), GlobalTimerNs()}; }
__device__ __forceinline__ void ProfileBlockEnd(const BlockStamp& b) {
  if (threadIdx.x != 0) return;
  atomicAdd(&g_block_profile[0], 1ull);
  atomicAdd(&g_block_profile[1], (unsigned long long)(clock64() - b.cycles));
  atomicAdd(&g_block_profile[2], (unsigned long long)(GlobalTimerNs() - b.ns));
}

// Enqueued after each persistent launch (a separate kernel: a call inside the worker kernel would make ptxas
// serialise its wgmma); prints the sums and clears them.
__global__ void ProfilePrintKernel(uint32_t direction) {
  const char* names[5] = {"GMM", "GMM_TRANS_B", "WEIGHT_GRAD", "PAIRED_LOOP", "ONE_WARPGROUP (of GMM + GMM_TRANS_B)"};
  double tile_cycles = 0;
  for (int k = 0; k < 4; ++k)
    for (int ph : {int(kPhaseFill), int(kPhaseLoop), int(kPhaseStage), int(kPhaseStore)})
      tile_cycles += double(g_tile_profile[k][ph]);
  unsigned long long* bp = g_block_profile;
  const double block_cycles = double(bp[1] ? bp[1] : 1);
  if (bp[0] > 0)
    printf("block profile %s: %llu blocks, %.0f cycles each over %.1f us (SM clock %.0f MHz); GMM tiles %.1f%% of the "
           "blocks' cycles\n",
           direction ? "bwd" : "fwd", bp[0], double(bp[1]) / double(bp[0]), double(bp[2]) / double(bp[0]) / 1e3,
           double(bp[1]) / double(bp[2] ? bp[2] : 1) * 1e3, 100.0 * tile_cycles / double(bp[1] ? bp[1] : 1));
  for (int i = 0; i < 3; ++i) bp[i] = 0;
  for (int k = 0; k < 5; ++k) {
    unsigned long long* p = g_tile_profile[k];
    const double tiles = double(p[kPhaseTiles]);
    if (tiles > 0)
      printf("tile profile %s %s: tiles %llu, K steps/tile %.1f, cycles/tile: fill %.0f loop %.0f stage %.0f "
             "store %.0f (loop cycles/K step %.0f); whole iteration %.0f\n",
             direction ? "bwd" : "fwd", names[k], p[kPhaseTiles], double(p[kPhaseSteps]) / tiles,
             double(p[kPhaseFill]) / tiles, double(p[kPhaseLoop]) / tiles, double(p[kPhaseStage]) / tiles,
             double(p[kPhaseStore]) / tiles, double(p[kPhaseLoop]) / double(p[kPhaseSteps] ? p[kPhaseSteps] : 1),
             double(p[kPhaseWhole]) / tiles);
    for (int i = 0; i < kPhaseCount; ++i) p[i] = 0;
  }
  const char* ops[kSyncOpCount] = {"claims", "waits", "signals", "between tasks", "fetches", "to the claim",
                                   "to the handler"};
  unsigned long long(*sp)[3] = g_sync_profile;
  if (sp[kSyncClaim][0] + sp[kSyncWait][0] + sp[kSyncSignal][0] > 0) {
    printf("sync profile %s:", direction ? "bwd" : "fwd");
    for (int op = 0; op < kSyncOpCount; ++op)
      printf(" %s %llu, %.0f cycles each, longest %llu;", ops[op], sp[op][0],
             double(sp[op][1]) / double(sp[op][0] ? sp[op][0] : 1), sp[op][2]);
    printf("\n");
  }
  for (int op = 0; op < kSyncOpCount; ++op)
    for (int i = 0; i < 3; ++i) sp[op][i] = 0;
  const char* sources[kWaitSourceCount] = {"cube queues", "vector queues", "pool"};
  for (uint32_t op = 0; op < kWaitProfileOps; ++op)
    for (int src = 0; src < kWaitSourceCount; ++src) {
      unsigned long long* w = g_wait_profile[op][src];
      if (w[0] > 0)
        printf("wait profile %s: op %u from %s: waits %llu (unmet %llu), %.0f cycles each, %.2f%% of the blocks' "
               "cycles\n",
               direction ? "bwd" : "fwd", op, sources[src], w[0], w[1], double(w[2]) / double(w[0]),
               100.0 * double(w[2]) / block_cycles);
      for (int i = 0; i < 3; ++i) w[i] = 0;
    }
  for (int w = 0; w < 2; ++w) {
    unsigned long long* p = g_pp_profile[w];
    const double steps = double(p[kPpSteps] ? p[kPpSteps] : 1), tiles = double(p[kPpTiles] ? p[kPpTiles] : 1);
    if (p[kPpTiles] > 0)
      printf("ping-pong profile %s warpgroup %d: tiles %llu, K steps/tile %.1f; cycles/step: operands %.0f, to the "
             "step before %.0f (K tails' zeroing %.0f), free %.0f; cycles/tile: feeding %.0f, store %.0f, turn %.0f\n",
             direction ? "bwd" : "fwd", w, p[kPpTiles], double(p[kPpSteps]) / tiles, p[kPpFull] / steps,
             p[kPpMma] / steps, p[kPpTail] / steps, p[kPpFree] / steps, p[kPpFeed] / tiles, p[kPpStore] / tiles,
             p[kPpTurn] / tiles);
    if (w == 0 && p[kPpUnits] > 0)
      printf("ping-pong profile %s: units %llu, %.0f cycles each, %.1f%% of the blocks' cycles\n",
             direction ? "bwd" : "fwd", p[kPpUnits], double(p[kPpUnitCycles]) / double(p[kPpUnits]),
             100.0 * double(p[kPpUnitCycles]) / block_cycles);
    for (int i = 0; i < kPpPhaseCount; ++i) p[i] = 0;
  }
  // (ssc_reader.cpp's kTaskTypeNames, which host code holds: one name a type, in TaskType order.)
  const char* types[] = {"ENTRY_SIGNAL", "COUNT_PUT", "DISPATCH_PUT", "GMM", "SWIGLU", "COMBINE_PUT",
      "COMBINE_REDUCE", "BWD_DISPATCH_PUT", "GMM_TRANS_B", "GMM_WEIGHT_GRAD", "SWIGLU_GRAD", "BWD_COMBINE_REDUCE",
      "TOPK_WEIGHT_GRAD", "ADD", "GMM_SWIGLU", "GMM_SWIGLU_GRAD"};
  static_assert(sizeof(types) / sizeof(types[0]) == kHandlerProfileTypes, "a task type has no name here");
  for (int t = 0; t < kHandlerProfileTypes; ++t) {
    unsigned long long* h = g_handler_profile[t];
    if (h[0] > 0)
      printf("handler profile %s %s: calls %llu, body %.0f cycles each, barrier after it %.0f each; %.2f%% + %.2f%% "
             "of the blocks' cycles\n",
             direction ? "bwd" : "fwd", types[t], h[0], double(h[1]) / double(h[0]), double(h[2]) / double(h[0]),
             100.0 * double(h[1]) / block_cycles, 100.0 * double(h[2]) / block_cycles);
    for (int i = 0; i < 3; ++i) h[i] = 0;
  }
  unsigned long long* q = g_pair_profile;
  if (q[kPairAlone] + q[kPairAsked] + q[kPairServed] > 0)
    printf("pair profile %s: alone claims %llu, block-1 asks %llu (withdrawn %llu), rounds served %llu (both units "
           "in the pool %llu), units run as paired tiles %llu\n",
           direction ? "bwd" : "fwd", q[kPairAlone], q[kPairAsked], q[kPairWithdrawn], q[kPairServed],
           q[kPairBothUnits], q[kPairTiled]);
  for (int i = 0; i < kPairEventCount; ++i) q[i] = 0;
}

// Thread 0's clock marks between two tasks (CudaSync, CudaHandlers): what the sync profile's "fetches", "to the
// claim", "to the handler" and "between tasks" lines measure, and which waits are a pool unit's. Empty in the
// default build, so that CudaSync, which the handlers hold by reference on the block's stack, carries no profile
// state there (it cost 16 bytes of stack when it did).
class TransitionMarks {
 public:
  __device__ void WaitEnter(uint64_t now) {
    if (claim_end_ == 0) return;
    SyncProfileAdd(kSyncFetch, now - claim_end_);
    claim_end_ = 0;
  }
  __device__ void WaitEnd(uint64_t t_enter, uint32_t op, bool cube_block, bool unmet) {
    last_sync_end_ = ProfileClock();
    const uint64_t cycles = last_sync_end_ - t_enter;
    SyncProfileAdd(kSyncWait, cycles);
    WaitProfileAdd(op, in_pool_ ? kWaitPool : cube_block ? kWaitCubeQueue : kWaitVectorQueue, cycles, unmet);
  }
  __device__ void ClaimEnter(uint64_t now) {
    if (handler_end_ != 0) SyncProfileAdd(kSyncToClaim, now - handler_end_);
    in_pool_ = true;  // every later wait is a pool unit's
  }
  __device__ void ClaimEnd(uint64_t t_enter) {
    claim_end_ = last_sync_end_ = ProfileClock();
    SyncProfileAdd(kSyncClaim, claim_end_ - t_enter);
  }
  // A handler started (a claim's fetch, if still open, had no wait to end it), or ended.
  __device__ void HandlerStart() {
    const uint64_t now = ProfileClock();
    if (handler_end_ != 0) SyncProfileAdd(kSyncBetween, now - handler_end_);
    if (last_sync_end_ != 0) SyncProfileAdd(kSyncToHandler, now - last_sync_end_);
    claim_end_ = last_sync_end_ = 0;
  }
  __device__ void HandlerEnd() { handler_end_ = ProfileClock(); }

 private:
  bool in_pool_ = false;        // a claim was made: the block runs pool units now
  uint64_t claim_end_ = 0;      // the end of the last claim, until a wait
  uint64_t last_sync_end_ = 0;  // the end of the last claim or wait, until a handler starts
  uint64_t handler_end_ = 0;    // the end of the block's last handler
};
#else
__device__ __forceinline__ void SyncProfileAdd(int, uint64_t) {}
__device__ __forceinline__ void WaitProfileAdd(uint32_t, int, uint64_t, bool) {}
__device__ __forceinline__ void HandlerProfileAdd(uint32_t, uint64_t, uint64_t) {}
struct TransitionMarks {
  __device__ void WaitEnter(uint64_t) {}
  __device__ void WaitEnd(uint64_t, uint32_t, bool, bool) {}
  __device__ void ClaimEnter(uint64_t) {}
  __device__ void ClaimEnd(uint64_t) {}
  __device__ void HandlerStart() {}
  __device__ void HandlerEnd() {}
};
__device__ __forceinline__ void ProfileAdd(int, int, uint64_t) {}
__device__ __forceinline__ void PairProfileAdd(int) {}
__device__ __forceinline__ uint64_t ProfileClock() { return 0; }
__device__ __forceinline__ void PpProfileAdd(int, uint64_t) {}
struct BlockStamp {};
__device__ __forceinline__ BlockStamp ProfileBlockBegin() { return {}; }
__device__ __forceinline__ void ProfileBlockEnd(const BlockStamp&) {}
#endif

}  // namespace cuda
}  // namespace hpmoe
