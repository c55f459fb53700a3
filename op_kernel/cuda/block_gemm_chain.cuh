// The weight-gradient unit as one TMA pipeline (HPMOE_WGRAD_CHAIN, gemm_variant.h): every tile of the unit
// (128-row slabs of dW x 256-column tiles, K = the expert's rows of every slot) is a run of steps in one ring of
// kStages slots whose barriers live for the whole unit, so the next tile's first steps load while this tile's
// last ones multiply; and each finished tile leaves by TMA stores (cp.async.bulk.tensor, shared -> global, 8 boxes
// of 64 x 64) that the copy engine drains while the block goes on with the next tile.
//
// Why: an expert's rows make a short K (Mixtral-8x22B at 4096 tokens: 16 steps), and a tile that starts with
// empty slots and ends with the block storing 64 KB itself spent 7.8k of its 27k cycles outside the K loop
// (fill 2.6k, epilogue 5.1k; tile_profile.cuh, docs/cuda.md). The earlier tries that overlapped only one of the
// two, or staged the tile in two of the four slots and so held the next tile's loads behind the copies, were
// slower; here the staging takes the one slot whose step has just retired (6 of the 8 boxes) and a region after
// the barriers (2), and that slot's refill waits for the stores to read it only kChainRefillDelay steps
// later. The K order and the rounding are the tile's: bitwise the per-tile path.
//
// Measured slower (one H200, docs/cuda.md "The weight-gradient unit as one pipeline"): the fill went, but the K
// loop took 2543 cycles a step instead of 1189 at Mixtral-8x22B, because the block's stores and loads share one
// TMA unit and the stores leave at the rate the memory system takes one SM's writes. Opt-in for that reason.
#pragma once

#include "block_gemm_tma.cuh"
#include "tile_profile.cuh"

#ifndef HPMOE_WGRAD_CHAIN_DELAY
#define HPMOE_WGRAD_CHAIN_DELAY 2  // steps of the next tile before the staging slot is refilled
#endif

namespace hpmoe {
namespace cuda {

// The staged tile: 8 boxes of 64 rows x 64 columns (8 KB, 128-byte swizzle: a TMA store's box), boxes 0-5 in
// the retired slot, 6-7 after the barriers.
constexpr int kChainBoxBytes = 64 * 128, kChainBoxes = kBM / 64 * (kBN / 64);
constexpr int kChainSlotBoxes = kStageBytes / kChainBoxBytes;
constexpr uint32_t kChainExtraOffset = kStages * kStageBytes + 1024;  // past the GMM and stream barriers, 1 KB aligned
constexpr uint32_t kGemmChainSmemBytes = kChainExtraOffset + (kChainBoxes - kChainSlotBoxes) * kChainBoxBytes + 1024;
static_assert(kChainSlotBoxes == 6 && kGemmChainSmemBytes <= 227 * 1024, "an H100/H200 block's shared memory");
static_assert(kStages * kStageBytes + 16 * kStages + 8 * 4 <= kChainExtraOffset, "clear of every mbarrier");
constexpr int kChainRefillDelay = HPMOE_WGRAD_CHAIN_DELAY;
static_assert(kChainRefillDelay >= 1 && kChainRefillDelay < kStages, "the delayed refill lands before its step");

template <class T>
struct WeightGradChain : BlockGemmTma<T, true, false> {
  using Base = BlockGemm<T, true, false>;
  using Tma = BlockGemmTma<T, true, false>;

  // The unit: K segments [seg[2i], seg[2i+1]) (the expert's rows per slot, empty ones included), output rows
  // [0, rows) x columns [c0, c1) of `out` (row stride ldc).
  const uint64_t* seg;
  int nseg;
  int32_t rows, c0, c1;
  int tiles_n, steps_per_tile, tiles;

  __device__ WeightGradChain(uint8_t* shared, const uint64_t* segments, int nsegments, int32_t rows_, int32_t c0_,
                             int32_t c1_)
      : Tma(shared), seg(segments), nseg(nsegments), rows(rows_), c0(c0_), c1(c1_) {
    tiles_n = (c1 - c0 + kBN - 1) / kBN;
    tiles = (rows + kBM - 1) / kBM * tiles_n;
    steps_per_tile = 0;
    for (int i = 0; i < nseg; ++i) steps_per_tile += int((seg[2 * i + 1] - seg[2 * i] + kBK - 1) / kBK);
  }

  __device__ int32_t M0(int t) const { return t / tiles_n * kBM; }
  __device__ int32_t N0(int t) const { return c0 + t % tiles_n * kBN; }
  // Step q of the unit: its tile, its first K row, and the end of the K segment it lies in.
  __device__ void StepAt(int q, int* t, int32_t* k, int32_t* end) const {
    *t = q / steps_per_tile;
    int i = q % steps_per_tile;
    for (int s = 0; s < nseg; ++s) {
      const int n = int((seg[2 * s + 1] - seg[2 * s] + kBK - 1) / kBK);
      if (i < n) {
        *k = int32_t(seg[2 * s]) + i * kBK;
        *end = int32_t(seg[2 * s + 1]);
        return;
      }
      i -= n;
    }
  }
  // Thread 0 only: step q's boxes into its slot.
  __device__ void Issue(const TmaOperand& a, const TmaOperand& b, int q) {
    int t;
    int32_t k = 0, end = 0;
    StepAt(q, &t, &k, &end);
    this->IssueLoads(q % kStages, a, b, M0(t), N0(t), k);
  }

  __device__ uint32_t Box(uint32_t slot_base, int box) const {
    return box < kChainSlotBoxes ? slot_base + box * kChainBoxBytes
                                 : this->smem + kChainExtraOffset + (box - kChainSlotBoxes) * kChainBoxBytes;
  }
  // 16-byte piece v (columns 8v..8v+7) of staged row `row`: 128-byte swizzle, the layout TMA stores read.
  __device__ uint32_t Piece(uint32_t slot_base, int row, int v) const {
    return Box(slot_base, row / 64 * (kBN / 64) + v / 8) + (row % 64) * 128 + (((v % 8) ^ (row % 8)) * 16);
  }
  // The accumulators, rounded to T, into the boxes (a warp's 4-byte pieces of eight rows fall in distinct
  // banks: the swizzle moves each row's piece to another 16 bytes).
  __device__ void StageBoxes(uint32_t slot_base) {
    this->StageTo([&](int row, int j) { return Piece(slot_base, row, j); });
  }
  // Every TMA store thread 0 issued has read its shared memory (the slot may be refilled, the extra region
  // restaged). Warp 0 waits, whole.
  __device__ static void WaitStoresRead() {
    if (threadIdx.x < 32) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      __syncwarp();
    }
  }

  // The whole unit into out (16-bit, the model dtype; row stride ldc). Whole tiles leave by TMA stores through
  // `store` (the output's map, box 64 x 64, its origin at the unit's first row), when there is one; the rest
  // (a ragged edge, or no map) the block stores itself. Block-wide.
  __device__ void Run(const TmaOperand& a, const TmaOperand& b, T* out, int64_t ldc, const TmaOperand& store) {
    const bool leader = threadIdx.x == 0;
    const int total = tiles * steps_per_tile;  // > 0: the caller takes a unit with no rows elsewhere
    const uint64_t t_start = ProfileClock();
    __syncthreads();  // the previous task's readers are done with every slot
    if (leader) {
      this->InitBarriers(kThreads / 32);
      for (int q = 0; q < kStages && q < total; ++q) Issue(a, b, q);
    }
    __syncthreads();
    const bool vectors = (reinterpret_cast<uintptr_t>(out) & 15) == 0 && (ldc & 7) == 0;  // 16-byte row starts
    int pending = -1;  // a step whose slot holds staged rows: loaded once the stores have read them
    int j = 0;         // the unit's step
    uint64_t t_loop = t_start;
    for (int t = 0; t < tiles; ++t) {
      this->Zero();
      const uint64_t t_tile = ProfileClock();
      for (int i = 0; i < steps_per_tile; ++i, ++j) {
        const int s = j % kStages;
        MbarWait(this->Full(s), (j / kStages) & 1);
        if (HPMOE_EXPERIMENT_PROFILE && j == 0) {
          t_loop = ProfileClock();
          ProfileAdd(Base::kProfileKind, kPhaseFill, t_loop - t_start);
        }
        int step_tile;
        int32_t k = 0, end = 0;
        StepAt(j, &step_tile, &k, &end);
        if (end - k < kBK) this->ZeroKTail(s, end - k);  // the segment ends inside this step
        this->IssueStage(s);
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // step j - 1's group is done
        if (pending >= 0 && j >= pending - kStages + kChainRefillDelay) {
          WaitStoresRead();
          if (leader) Issue(a, b, pending);  // its slot's readers all arrived at the tile's end
          pending = -1;
        }
        if (i == 0) continue;  // step j - 1 was the last tile's: its slot is the staging (pending)
        const int prev = (j - 1) % kStages;
        if (threadIdx.x % 32 == 0) MbarArrive(this->Empty(prev));
        const int next = j - 1 + kStages;
        if (leader && next < total) {
          MbarWait(this->Empty(prev), ((j - 1) / kStages) & 1);
          Issue(a, b, next);
        }
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      const int last = j - 1, slot = last % kStages;
      if (threadIdx.x % 32 == 0) MbarArrive(this->Empty(slot));
      // The epilogue. The extra region's last stores have read it (and a refill still pending goes out now).
      WaitStoresRead();
      if (pending >= 0 && leader) Issue(a, b, pending);
      pending = -1;
      __syncthreads();  // both warpgroups' wgmmas have read the slot
      const uint64_t t_stage = ProfileClock();
      if (HPMOE_EXPERIMENT_PROFILE) ProfileAdd(Base::kProfileKind, kPhaseLoop, t_stage - (t == 0 ? t_loop : t_tile));
      const uint32_t slot_base = this->smem + slot * kStageBytes;
      StageBoxes(slot_base);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // staged by this thread, read by the stores
      __syncthreads();
      const uint64_t t_store = ProfileClock();
      const int32_t m0 = M0(t), n0 = N0(t);
      const int32_t width = c1 - n0 < kBN ? c1 - n0 : kBN;
      if (store.map != nullptr && m0 + kBM <= rows && width == kBN) {  // a whole tile: 8 boxes, one thread
        if (leader) {
          for (int box = 0; box < kChainBoxes; ++box)
            asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
                             store.map),
                         "r"(store.c0 + n0 + 64 * (box % (kBN / 64))), "r"(store.r0 + m0 + 64 * (box / (kBN / 64))),
                         "r"(store.z), "r"(Box(slot_base, box))
                         : "memory");
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
      } else {  // a ragged edge: the block stores it, 16-byte pieces where whole, before the slot is refilled
        for (int i = threadIdx.x; i < kBM * (kBN / 8); i += blockDim.x) {
          const int r = i / (kBN / 8), v = i % (kBN / 8);
          if (m0 + r >= rows || 8 * v >= width) continue;
          const uint32_t src = Piece(slot_base, r, v);
          T* dst = out + (m0 + r) * ldc + n0 + 8 * v;
          if (vectors && 8 * v + 8 <= width) {
            *reinterpret_cast<uint4*>(dst) = LoadShared16(src);
          } else {
            for (int q = 0; q < 8 && 8 * v + q < width; ++q) {
              uint16_t bits;
              asm volatile("ld.shared.u16 %0, [%1];" : "=h"(bits) : "r"(src + 2 * q));
              reinterpret_cast<uint16_t*>(dst)[q] = bits;
            }
          }
        }
        __syncthreads();
      }
      if (last + kStages < total) pending = last + kStages;
      if (HPMOE_EXPERIMENT_PROFILE) {
        ProfileAdd(Base::kProfileKind, kPhaseStage, t_store - t_stage);
        ProfileAdd(Base::kProfileKind, kPhaseStore, ProfileClock() - t_store);
        ProfileAdd(Base::kProfileKind, kPhaseTiles, 1);
        ProfileAdd(Base::kProfileKind, kPhaseSteps, uint64_t(steps_per_tile));
      }
    }
    // The next task may use the slots: the stores have read them. Their writes complete before the kernel
    // ends (FinishChainStores): nothing in a launch reads a weight gradient.
    WaitStoresRead();
    __syncthreads();
  }
};

// At the end of the persistent kernel: thread 0's weight-gradient stores have written global memory, ordered
// before the kernel's completion for the host and the next launch.
__device__ __forceinline__ void FinishChainStores() {
  if (threadIdx.x < 32) {
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
  }
}

}  // namespace cuda
}  // namespace hpmoe
