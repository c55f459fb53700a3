// The weight-gradient unit as one TMA pipeline (HPMOE_WGRAD_CHAIN, gemm_variant.h): every tile of the unit
// (128-row slabs of dW x 256-column tiles, K = the expert's rows of every slot) is a run of steps in one ring of
// kStages slots whose barriers live for the whole unit, so the next tile's first steps load while this tile's
// last ones multiply; and each finished tile leaves while the block goes on with the next one: by the block's own
// stores during the next tile's first K steps (the default), or by TMA stores (HPMOE_WGRAD_CHAIN_TMA_STORE).
//
// Why: an expert's rows make a short K (Mixtral-8x22B at 4096 tokens: 16 steps), and a tile that starts with
// empty slots and ends with the block storing 64 KB itself spent 7.8k of its 27k cycles outside the K loop
// (fill 2.6k, epilogue 5.1k; tile_profile.cuh, docs/cuda.md). The earlier tries that overlapped only one of the
// two, or staged the tile in two of the four slots and so held the next tile's loads behind the copies, were
// slower; here the staging takes the one slot whose step has just retired (6 of the 8 boxes) and a region after
// the barriers (2), and that slot's refill waits for the stores to read it only kChainRefillDelay steps
// later. The K order and the rounding are the tile's: bitwise the per-tile path.
//
// Measured (one H200, docs/cuda.md "The weight-gradient unit as one pipeline"): the fill went, but the K loop took
// 2543 cycles a step instead of 1189 at Mixtral-8x22B. Not because of the TMA stores (session 16: as slow with
// the block's own stores): each step found its place by dividing by the steps per tile, in every thread before
// its wgmma. Advanced step by step (StepPos), the loop takes 1735 cycles a step, and the op is on par with the
// default at the wide experts, 1-2.5 ms slower at DeepSeek-V3 8192. Opt-in for that reason.
#pragma once

#include "block_gemm_tma.cuh"
#include "gemm_variant.h"
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
// Thread stores stage plain padded rows instead (the default tile's layout): the first kChainSlotRows in the
// retired slot, the rest after the barriers.
constexpr int kChainRowBytes = kBN * 2 + 16;
constexpr int kChainSlotRows = kStageBytes / kChainRowBytes;
constexpr uint32_t kChainExtraBytes = HPMOE_WGRAD_CHAIN_TMA_STORE ? (kChainBoxes - kChainSlotBoxes) * kChainBoxBytes
                                                                  : (kBM - kChainSlotRows) * kChainRowBytes;
constexpr uint32_t kGemmChainSmemBytes = kChainExtraOffset + kChainExtraBytes + 1024;
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
    steps_per_tile = KSteps(seg, nseg);
  }

  __device__ int32_t M0(int t) const { return t / tiles_n * kBM; }
  __device__ int32_t N0(int t) const { return c0 + t % tiles_n * kBN; }
  // A step's place, advanced step by step: finding it from the step's index divided by the steps per tile, in
  // every thread before each wgmma, made the loop take 2499 cycles a step instead of 1735 (docs/cuda.md).
  struct StepPos {
    int t, s;          // tile, K segment
    int32_t k, end;    // first K row, the segment's end
    int32_t m0, n0;    // the tile's output origin
  };
  __device__ bool FirstSegment(StepPos& p, int from) const {  // the first non-empty segment from `from`
    for (int i = from; i < nseg; ++i)
      if (seg[2 * i] < seg[2 * i + 1]) {
        p.s = i, p.k = int32_t(seg[2 * i]), p.end = int32_t(seg[2 * i + 1]);
        return true;
      }
    return false;
  }
  __device__ StepPos Start() const {
    StepPos p{0, 0, 0, 0, 0, c0};
    FirstSegment(p, 0);
    return p;
  }
  __device__ void Advance(StepPos& p) const {
    p.k += kBK;
    if (p.k < p.end || FirstSegment(p, p.s + 1)) return;
    ++p.t;  // the next tile: columns first, as M0/N0 number them
    p.n0 += kBN;
    if (p.n0 >= c1) p.n0 = c0, p.m0 += kBM;
    FirstSegment(p, 0);
  }
  __device__ void IssueAt(const TmaOperand& a, const TmaOperand& b, int q, const StepPos& p) {
    this->IssueLoads(q % kStages, a, b, p.m0, p.n0, p.k);
  }
  __device__ uint32_t Box(uint32_t slot_base, int box) const {
    return box < kChainSlotBoxes ? slot_base + box * kChainBoxBytes
                                 : this->smem + kChainExtraOffset + (box - kChainSlotBoxes) * kChainBoxBytes;
  }
  // 16-byte piece v (columns 8v..8v+7) of staged row `row`: padded rows for the block's stores, or boxes in
  // 128-byte swizzle, the layout TMA stores read.
  __device__ uint32_t Piece(uint32_t slot_base, int row, int v) const {
    if (!HPMOE_WGRAD_CHAIN_TMA_STORE)  // padded rows
      return (row < kChainSlotRows ? slot_base + row * kChainRowBytes
                                   : this->smem + kChainExtraOffset + (row - kChainSlotRows) * kChainRowBytes) +
             16 * v;
    return Box(slot_base, row / 64 * (kBN / 64) + v / 8) + (row % 64) * 128 + (((v % 8) ^ (row % 8)) * 16);
  }
  // The accumulators, rounded to T, into the staging (a warp's 4-byte pieces of eight rows fall in distinct
  // banks: the row padding, or the swizzle, moves each row's piece to another 16 bytes).
  __device__ void StageBoxes(uint32_t slot_base) {
    this->StageTo([&](int row, int j) { return Piece(slot_base, row, j); });
  }
  // Staged pieces [first, last) of the tile at (m0, n0) to out (whole 16-byte pieces; the caller checked the
  // tile is whole and the rows aligned): consecutive threads write consecutive 16 bytes of a row.
  __device__ void StorePieces(uint32_t slot_base, T* out, int64_t ldc, int32_t m0, int32_t n0, int first, int last) {
    for (int i = first + int(threadIdx.x); i < last; i += kThreads) {
      const int r = i / (kBN / 8), v = i % (kBN / 8);
      StoreGlobal16(out + (m0 + r) * ldc + n0 + 8 * v, LoadShared16(Piece(slot_base, r, v)));
    }
  }
  // Every TMA store thread 0 issued has read its shared memory (the slot may be refilled, the extra region
  // restaged). Warp 0 waits, whole.
  __device__ static void WaitStoresRead() {
    if (threadIdx.x < 32) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      __syncwarp();
    }
  }

  // The whole unit into out (16-bit, the model dtype; row stride ldc). A whole tile with a next one leaves during
  // that tile's first K steps: by the block's stores, or with HPMOE_WGRAD_CHAIN_TMA_STORE by TMA stores through
  // `store` (the output's map, box 64 x 64, its origin at the unit's first row) when there is one. The rest (the
  // unit's last tile, a ragged edge, unaligned rows, no map) the block stores at once. Block-wide.
  __device__ void Run(const TmaOperand& a, const TmaOperand& b, T* out, int64_t ldc, const TmaOperand& store) {
    const bool leader = threadIdx.x == 0;
    const int total = tiles * steps_per_tile;  // > 0: the caller takes a unit with no rows elsewhere
    const uint64_t t_start = ProfileClock();
    __syncthreads();  // the previous task's readers are done with every slot
    StepPos load = Start(), pend = load;  // thread 0: the next step to load, and the one held back
    if (leader) {
      this->InitBarriers(kThreads / 32);
      for (int q = 0; q < kStages && q < total; ++q, Advance(load)) IssueAt(a, b, q, load);
    }
    __syncthreads();
    const bool vectors = (reinterpret_cast<uintptr_t>(out) & 15) == 0 && (ldc & 7) == 0;  // 16-byte row starts
    int pending = -1;  // a step whose slot holds staged rows: loaded once the stores have read them
    int32_t deferred_m0 = 0, deferred_n0 = 0;  // thread stores: the staged tile still to go, in deferred_slot
    int deferred_slot = -1;
    constexpr int kPieces = kBM * (kBN / 8);
    StepPos at = Start();  // the step the block multiplies
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
        if (at.end - at.k < kBK) this->ZeroKTail(s, at.end - at.k);  // the segment ends inside this step
        Advance(at);
        this->IssueStage(s);
        if (!HPMOE_WGRAD_CHAIN_TMA_STORE && deferred_slot >= 0 && i < kChainRefillDelay) {
          // This step's share of the last tile's stores, while the tensor cores run step j.
          StorePieces(this->smem + deferred_slot * kStageBytes, out, ldc, deferred_m0, deferred_n0,
                      kPieces * i / kChainRefillDelay, kPieces * (i + 1) / kChainRefillDelay);
          if (i + 1 == kChainRefillDelay) {
            deferred_slot = -1;
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic reads before the refill
            __syncthreads();  // every thread has read its pieces
          }
        }
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // step j - 1's group is done
        if (pending >= 0 && j >= pending - kStages + kChainRefillDelay) {
          WaitStoresRead();
          if (leader) IssueAt(a, b, pending, pend);  // its slot's readers all arrived at the tile's end
          pending = -1;
        }
        if (i == 0) continue;  // step j - 1 was the last tile's: its slot is the staging (pending)
        const int prev = (j - 1) % kStages;
        if (threadIdx.x % 32 == 0) MbarArrive(this->Empty(prev));
        const int next = j - 1 + kStages;
        if (leader && next < total) {
          MbarWait(this->Empty(prev), ((j - 1) / kStages) & 1);
          IssueAt(a, b, next, load);
          Advance(load);
        }
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      const int last = j - 1, slot = last % kStages;
      if (threadIdx.x % 32 == 0) MbarArrive(this->Empty(slot));
      // The epilogue. The extra region's last stores have read it (and a refill still pending goes out now).
      if (!HPMOE_WGRAD_CHAIN_TMA_STORE && deferred_slot >= 0) {  // a tile of fewer steps than the delay
        StorePieces(this->smem + deferred_slot * kStageBytes, out, ldc, deferred_m0, deferred_n0, 0, kPieces);
        deferred_slot = -1;
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
      }
      WaitStoresRead();
      if (pending >= 0 && leader) IssueAt(a, b, pending, pend);
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
      const bool whole = m0 + kBM <= rows && width == kBN;
      if (!HPMOE_WGRAD_CHAIN_TMA_STORE && whole && vectors && last + 1 < total) {
        // A whole tile with a next one: stored during the next tile's first steps (above); the slot waits.
        deferred_m0 = m0, deferred_n0 = n0, deferred_slot = slot;
      } else if (HPMOE_WGRAD_CHAIN_TMA_STORE && store.map != nullptr && whole) {  // 8 boxes, one thread
        if (leader) {
          for (int box = 0; box < kChainBoxes; ++box)
            TmaStore(store.map, store.c0 + n0 + 64 * (box % (kBN / 64)), store.r0 + m0 + 64 * (box / (kBN / 64)),
                     store.z, Box(slot_base, box));
          asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        }
      } else {  // a ragged edge: the block stores it, 16-byte pieces where whole, before the slot is refilled
        for (int i = threadIdx.x; i < kBM * (kBN / 8); i += blockDim.x) {
          const int r = i / (kBN / 8), v = i % (kBN / 8);
          if (m0 + r >= rows || 8 * v >= width) continue;
          const uint32_t src = Piece(slot_base, r, v);
          T* dst = out + (m0 + r) * ldc + n0 + 8 * v;
          if (vectors && 8 * v + 8 <= width)
            StoreGlobal16(dst, LoadShared16(src));
          else
            StoreEdge(dst, src, width - 8 * v);
        }
        __syncthreads();
      }
      if (last + kStages < total) {  // held back: loaded once the staged rows are read
        pending = last + kStages;
        if (leader) {
          pend = load;
          Advance(load);
        }
      }
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
