// The weight-gradient unit as a ping-pong (HPMOE_WGRAD_PINGPONG, gemm_variant.h): the unit's output (a slab of
// dW rows x a column block) in 128 x 128 tiles, tile t owned whole by warpgroup t % 2, so that one warpgroup's
// K loop runs while the other stores the tile it has just finished. One ring of kStages 32 KB slots serves
// both in the order of the unit's steps (tile by tile, each tile's steps the expert's rows of every slot in
// order). The warpgroup that is not multiplying feeds the one that is: its warp 0 waits for each step to be
// read and refills the slot with the step kStages later (the next tile's first steps among them, so they are
// in flight before this tile ends). The multiplying warpgroup only waits, multiplies and frees: a thread of its
// own issuing the refills (a few hundred cycles a step) held up every wgmma group of its warpgroup, and a
// 128 x 128 step is only about 500 cycles of tensor work. A finished tile leaves by four TMA stores from its
// warpgroup's staging buffer where the launch bound dW maps and the tile lies whole in the unit; otherwise the
// warpgroup's warps 1-3 store it while the other multiplies. Three warps' 16-byte stores took 5k cycles a 32 KB
// tile, longer than the other warpgroup's K loop, and set the pace (unit alone: 0.075 -> 0.062 ms by TMA).
//
// Why: the default tile (128 x 256, both warpgroups on one tile) spends its fill and its store phase with the
// tensor core idle; at Qwen3-235B-A22B experts a tile was 2.4k cycles of fill, 5.6k of math and 3.9k of
// store, and the store phase is the SM's write path (benchmarks/cuda_store_rate.cu). A build whose weight-
// gradient tile writes nothing ran fwd+bwd 20-26% faster (docs/cuda.md, "Time between tasks").
//
// Each output element sums the same k16 products in the same K order as the default tile: bitwise the same. (In a
// K tail the ping-pong also adds the zero products of the groups past the tail, which the default tile skips;
// that could change only the sign of an exactly-zero sum, IEEE -0 + +0 = +0, and was never seen.)
// Shared memory: the four slots (128 KB) and one staging buffer a warpgroup (32 KB: four 64 x 64 boxes in the
// 128-byte swizzle), inside the default tile's 192 KB; the slots' barriers are the TMA tile's.
#pragma once

#include "block_gemm_tma.cuh"
#include "gemm_variant.h"
#include "tile_profile.cuh"

namespace hpmoe {
namespace cuda {

constexpr int kPpBN = 128;                                    // a ping-pong tile's columns
constexpr uint32_t kPpStageBytes = (kBM + kPpBN) * kBK * 2;   // A 64 K x 128 M, B 64 K x 128 N
constexpr uint32_t kPpRowBytes = kPpBN * 2;                   // a staged row
constexpr uint32_t kPpStagingOffset = kStages * kPpStageBytes;
static_assert(kPpStagingOffset + 2 * kBM * kPpRowBytes <= kStages * kStageBytes,
              "the slots and both staging buffers fit the default tile's slots (its barriers follow them)");

#ifndef HPMOE_PP_MAX_STEPS
// The most K steps a tile that a unit runs as a ping-pong: beyond them the default tile is faster. The ping-pong
// K loop costs more per FLOP (two m64n128 wgmmas read B twice; its A slab is read once per 128 columns instead
// of 256), which only the hidden fill and stores make up for. One unit an SM, 1024 columns (the check's
// --bench, one H200): 64-512 rows an expert 2-13% faster, 1024 rows 5% slower, 2048 rows 45% slower.
#define HPMOE_PP_MAX_STEPS 8
#endif
constexpr int kPpMaxSteps = HPMOE_PP_MAX_STEPS;

// The feeding warp's place in the unit's steps, the tile's coordinates advanced step by step.
struct PpIssuer {
  const void* map_a;
  const void* map_b;
  int32_t ma, n0;   // the next step's tile: X^T column (the unit's first dW row + m0) and dY column
  int32_t k, end;   // its first K row, and the end of its K segment
  int32_t s, pad;   // its K segment
};

// Named barriers (0 is __syncthreads): 1 + wg, the 128 threads of warpgroup wg; 3 + wg, "warpgroup wg has
// waited for the last step of its tile", on which the other warpgroup waits before its next tile (256); 5 + wg,
// warps 1-3 of warpgroup wg (96).
__device__ __forceinline__ void WarpgroupBarrier(int wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
}
__device__ __forceinline__ void StoringWarpsBarrier(int wg) {
  asm volatile("bar.sync %0, 96;" ::"r"(5 + wg) : "memory");
}
__device__ __forceinline__ void PassTurn(int wg) { asm volatile("bar.arrive %0, 256;" ::"r"(3 + wg) : "memory"); }
__device__ __forceinline__ void TakeTurn(int wg) { asm volatile("bar.sync %0, 256;" ::"r"(4 - wg) : "memory"); }

template <class T>
struct WeightGradPingPong : BlockGemmTma<T, true, false> {
  using Tma = BlockGemmTma<T, true, false>;
  static constexpr uint32_t kEmptyArrivals = 4;  // a slot is read by the warps of one warpgroup

  // The unit: K segments [seg[2i], seg[2i+1]) (the expert's rows per slot, in shared memory), output rows
  // [0, rows) x columns [c0, c1).
  const uint64_t* seg;
  int nseg;
  int32_t rows, c0, c1;
  int tiles_n, tiles, steps_per_tile;

  __device__ WeightGradPingPong(uint8_t* shared, const uint64_t* segments, int nsegments, int32_t rows_, int32_t c0_,
                                int32_t c1_)
      : Tma(shared), seg(segments), nseg(nsegments), rows(rows_), c0(c0_), c1(c1_) {
    tiles_n = (c1 - c0 + kPpBN - 1) / kPpBN;
    tiles = (rows + kBM - 1) / kBM * tiles_n;
    steps_per_tile = KSteps(seg, nseg);
  }

  __device__ int FirstSegment(int from) const {
    for (int i = from; i < nseg; ++i)
      if (seg[2 * i] < seg[2 * i + 1]) return i;
    return nseg;
  }
  __device__ void FirstStep(PpIssuer& p) const {
    p.s = FirstSegment(0);
    p.k = int32_t(seg[2 * p.s]);
    p.end = int32_t(seg[2 * p.s + 1]);
  }
  // p at tile t's first step (a_c0: X^T's first column, the unit's first dW row).
  __device__ void StartAt(PpIssuer& p, int t, int32_t a_c0) const {
    p.ma = a_c0 + t / tiles_n * kBM;
    p.n0 = c0 + t % tiles_n * kPpBN;
    FirstStep(p);
  }
  __device__ void Advance(PpIssuer& p) const {
    p.k += kBK;
    if (p.k < p.end) return;
    p.s = FirstSegment(p.s + 1);
    if (p.s < nseg) {
      p.k = int32_t(seg[2 * p.s]);
      p.end = int32_t(seg[2 * p.s + 1]);
      return;
    }
    p.n0 += kPpBN;  // the next tile, columns first (past the last tile: never issued)
    if (p.n0 >= c1) p.n0 = c0, p.ma += kBM;
    FirstStep(p);
  }
  __device__ uint32_t Slot(int q) const { return this->smem + q * kPpStageBytes; }
  // The step at p into slot q: X^T 64 K-rows x 128 dW rows, dY 64 K-rows x 128 columns.
  __device__ void Issue(int q, const PpIssuer& p) const {
    const uint32_t sa = Slot(q), sb = sa + kBM * kBK * 2, bar = this->Full(q);
    MbarExpectTx(bar, kPpStageBytes);
    for (int j = 0; j < kBM / 64; ++j) TmaLoad(sa + j * kBK * 128, p.map_a, bar, p.ma + 64 * j, p.k, 0);
    for (int j = 0; j < kPpBN / 64; ++j) TmaLoad(sb + j * kBK * 128, p.map_b, bar, p.n0 + 64 * j, p.k, 0);
  }
  // Lines [valid, kBK) of slot q zeroed by warpgroup wg (the segment's K end is inside both tensors).
  __device__ void ZeroKTail(int q, int valid, int wg) {
    ZeroKLines<(kBM + kPpBN) / 64>(Slot(q), valid, kBK, int(threadIdx.x % 128), 128);
    WarpgroupBarrier(wg);
  }

  // m64n128k16 into c[0..63] (accumulate): MN-major A and B.
  __device__ __forceinline__ static void Mma128(float* c, uint64_t desc_a, uint64_t desc_b) {
    if constexpr (__is_same(T, __nv_bfloat16)) {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
          "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 1, 1;\n}\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63])
          : "l"(desc_a), "l"(desc_b), "r"(1));
    } else {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
          "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 1, 1;\n}\n"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]), "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7]), "+f"(c[8]), "+f"(c[9]), "+f"(c[10]), "+f"(c[11]), "+f"(c[12]), "+f"(c[13]), "+f"(c[14]), "+f"(c[15]), "+f"(c[16]), "+f"(c[17]), "+f"(c[18]), "+f"(c[19]), "+f"(c[20]), "+f"(c[21]), "+f"(c[22]), "+f"(c[23]), "+f"(c[24]), "+f"(c[25]), "+f"(c[26]), "+f"(c[27]), "+f"(c[28]), "+f"(c[29]), "+f"(c[30]), "+f"(c[31]), "+f"(c[32]), "+f"(c[33]), "+f"(c[34]), "+f"(c[35]), "+f"(c[36]), "+f"(c[37]), "+f"(c[38]), "+f"(c[39]), "+f"(c[40]), "+f"(c[41]), "+f"(c[42]), "+f"(c[43]), "+f"(c[44]), "+f"(c[45]), "+f"(c[46]), "+f"(c[47]), "+f"(c[48]), "+f"(c[49]), "+f"(c[50]), "+f"(c[51]), "+f"(c[52]), "+f"(c[53]), "+f"(c[54]), "+f"(c[55]), "+f"(c[56]), "+f"(c[57]), "+f"(c[58]), "+f"(c[59]), "+f"(c[60]), "+f"(c[61]), "+f"(c[62]), "+f"(c[63])
          : "l"(desc_a), "l"(desc_b), "r"(1));
    }
  }
  // Slot q's four k16 steps for the warpgroup's 128 rows (two m64 halves on the same B), one group.
  __device__ void IssueStep(int q) {
    const uint32_t sa = Slot(q), sb = sa + kBM * kBK * 2;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      const uint64_t db = Desc(sb + kk * 128, kMnLbo, kMnSbo);
      Mma128(this->d, Desc(sa + kk * 128, kMnLbo, kMnSbo), db);
      Mma128(this->d + 64, Desc(sa + kBK * 128 + kk * 128, kMnLbo, kMnSbo), db);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }

  // Step g has been read by this warpgroup: its warps free the slot.
  __device__ void Free(int g) const {
    if (threadIdx.x % 32 == 0) MbarArrive(this->Empty(g % kStages));
  }
  // Warp 0 of the warpgroup that is not multiplying, while the other multiplies tile t: as each of its steps is
  // read, the slot gets the step kStages later (if the unit has one). One lane issues; the warp stays whole.
  __device__ void Feed(int t, const TmaOperand& a, const TmaOperand& b) const {
    if (threadIdx.x % 32 == 0) {
      PpIssuer p{a.map, b.map};
      StartAt(p, t, a.c0);
      for (int i = 0; i < kStages; ++i) Advance(p);
      const int total = tiles * steps_per_tile;
      for (int g = t * steps_per_tile; g < (t + 1) * steps_per_tile; ++g) {
        const int q = g % kStages;
        MbarWait(this->Empty(q), (g / kStages) & 1);
        if (g + kStages >= total) continue;
        Issue(q, p);
        Advance(p);
      }
    }
    __syncwarp();
  }

  __device__ uint32_t Staging(int wg) const { return this->smem + kPpStagingOffset + wg * kBM * kPpRowBytes; }
  // The staged tile is four 64 x 64 boxes (8 KB each: rows 0-63 then 64-127, each as columns 0-63 then
  // 64-127) in the 128-byte swizzle of the weight-gradient maps, so that a whole tile leaves as four TMA stores.
  // The 16-byte chunk v of staged row `row`: a warp's 4-byte pieces of eight rows land in eight distinct chunks.
  __device__ static uint32_t Box(uint32_t base, int box) { return base + box * (64 * 128); }
  __device__ static uint32_t Chunk(uint32_t base, int row, int v) {
    return Box(base, (row / 64) * 2 + v / 8) + (row % 64) * 128 + (((v % 8) ^ (row % 8)) * 16);
  }
  // Tile t goes out by TMA stores (a dW map bound, the tile whole inside the unit); otherwise warps 1-3 store it.
  __device__ bool ByTma(int t, const TmaOperand& store) const {
    return store.map != nullptr && t / tiles_n * kBM + kBM <= rows && c0 + t % tiles_n * kPpBN + kPpBN <= c1;
  }
  // The warpgroup's thread that issues its TMA stores and waits for them (bulk groups are per thread).
  __device__ static bool StoreIssuer() { return threadIdx.x % 128 == 32; }
  // Tile t's four boxes from this warpgroup's staging buffer, by StoreIssuer; the buffer is read before the
  // warpgroup stages its next tile (Stage waits for it).
  __device__ void StoreByTma(int t, int wg, const TmaOperand& store) const {
    const int32_t m0 = t / tiles_n * kBM, n0 = c0 + t % tiles_n * kPpBN;
    for (int box = 0; box < 4; ++box)
      TmaStore(store.map, store.c0 + n0 + 64 * (box % 2), store.r0 + m0 + 64 * (box / 2), store.z,
               Box(Staging(wg), box));
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
  // The tile's accumulators, rounded to T, into this warpgroup's staging buffer. Warpgroup-wide.
  __device__ void Stage(int wg) {
    const uint32_t base = Staging(wg);
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, g = lane / 4, q = lane % 4;
    if (StoreIssuer()) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    WarpgroupBarrier(wg);  // the last tile's stores (threads' or TMA's) have read the buffer
    // m64nNk16 layout: warp w holds rows 16w + lane/4 (+8) of each half, n8 block j columns 8j + 2(lane%4).
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < kPpBN / 8; ++j)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = 64 * h + 16 * warp + g + 8 * hh;
          const float* v = this->d + 64 * h + 4 * j + 2 * hh;
          const uint32_t lo = Bits16(FromF<T>(v[0])), hi = Bits16(FromF<T>(v[1]));
          asm volatile("st.shared.u32 [%0], %1;" ::"r"(Chunk(base, row, j) + 4 * q), "r"(lo | (hi << 16)) : "memory");
        }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // written by threads, read by the TMA stores
    WarpgroupBarrier(wg);
  }
  // Tile t from this warpgroup's staging buffer to out as 16-byte row vectors (StoreStagedRows), by warps 1-3.
  __device__ void Store(T* out, int64_t ldc, int t, int wg) const {
    const uint32_t base = Staging(wg);
    StoreStagedRows<kPpBN>([&](int row, int v) { return Chunk(base, row, v); }, out, ldc, t / tiles_n * kBM,
                           c0 + t % tiles_n * kPpBN, rows, c1, int(threadIdx.x % 128) - 32, 96);
  }

  // Tile t's K loop, by its warpgroup: wait, multiply, free; the turn passes at the last step's wait.
  __device__ void Multiply(int t, int wg) {
    this->Zero();
    const int first = t * steps_per_tile, last = first + steps_per_tile - 1;
    int g = first;
    for (int s = 0; s < nseg; ++s) {
      const int32_t end = int32_t(seg[2 * s + 1]);
      for (int32_t k = int32_t(seg[2 * s]); k < end; k += kBK, ++g) {
        const int q = g % kStages;
        const uint64_t t0 = ProfileClock();
        MbarWait(this->Full(q), (g / kStages) & 1);
        const uint64_t t1 = ProfileClock();
        if (g == last && t + 1 < tiles) PassTurn(wg);
        // A K tail: all four k16 groups on zeroed lines. Multiplying only the tail's own groups (as the default
        // tile does) took a switch over four wgmma sequences, which raised the kernel's spill stores from 252 to
        // 1296 bytes: fwd+bwd 2-7% slower than the default build (session 23). Experiment 6: tails not zeroed.
        if (end - k < kBK && HPMOE_EXPERIMENT_DW != 6) {
          const uint64_t z0 = ProfileClock();
          ZeroKTail(q, end - k, wg);
          PpProfileAdd(kPpTail, ProfileClock() - z0);
        }
        IssueStep(q);
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // step g - 1's group is done
        const uint64_t t2 = ProfileClock();
        if (g > first) Free(g - 1);
        PpProfileAdd(kPpFull, t1 - t0);
        PpProfileAdd(kPpMma, t2 - t1);
        PpProfileAdd(kPpFree, ProfileClock() - t2);
        PpProfileAdd(kPpSteps, 1);
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    Free(last);
  }

  // The whole unit into out (the model dtype, row stride ldc): X^T (a, from column a.c0) times dY (b). Block-
  // wide; needs steps_per_tile > 0.
  // store: the dW map (null: no TMA stores) and the unit's origin in it (column 0, its first row, its expert).
  __device__ void Run(const TmaOperand& a, const TmaOperand& b, T* out, int64_t ldc, const TmaOperand& store) {
    const int wg = int(threadIdx.x / 128), warp = int(threadIdx.x / 32) % 4;
    const uint64_t unit_start = ProfileClock();
    __syncthreads();  // the previous task is done with shared memory
    if (threadIdx.x == 0) this->InitBarriers(kEmptyArrivals);
    __syncthreads();
    if (threadIdx.x == 0) {  // the first kStages steps; each later one is issued as the step before it in its slot is read
      PpIssuer p{a.map, b.map};
      StartAt(p, 0, a.c0);
      for (int g = 0; g < kStages && g < tiles * steps_per_tile; ++g, Advance(p)) Issue(g, p);
    }
    // The turns: a warpgroup waits for a step's slot only once the other has waited for every earlier step,
    // so that the phase it waits for is the slot's next (a parity wait cannot tell phases two apart).
    for (int t = wg;; t += 2) {
      if (t >= 1) {  // the other warpgroup multiplies tile t - 1 (if any): feed it, store tile t - 2 (if any)
        uint64_t t0 = ProfileClock();
        if (warp == 0) {
          if (t - 1 < tiles) Feed(t - 1, a, b);
          PpProfileAdd(kPpFeed, ProfileClock() - t0);
        } else if (t >= 2 && !ByTma(t - 2, store)) {
          if (HPMOE_EXPERIMENT_DW != 1) Store(out, ldc, t - 2, wg);  // timing experiment 1: no stores
          PpProfileAdd(kPpStore, ProfileClock() - t0);
        }
      }
      if (t >= tiles) break;
      const uint64_t t0 = ProfileClock();
      if (t > 0) TakeTurn(wg);
      PpProfileAdd(kPpTurn, ProfileClock() - t0);
      Multiply(t, wg);
      Stage(wg);
      if (HPMOE_EXPERIMENT_DW != 1 && StoreIssuer() && ByTma(t, store)) StoreByTma(t, wg, store);
      PpProfileAdd(kPpTiles, 1);
    }
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // staged by threads, refilled by the copy engine
    if (StoreIssuer()) {  // the TMA stores are written (and ordered before the task's completion event)
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    __syncthreads();
    PpProfileAdd(kPpUnitCycles, ProfileClock() - unit_start);
    PpProfileAdd(kPpUnits, 1);
  }
};

}  // namespace cuda
}  // namespace hpmoe
