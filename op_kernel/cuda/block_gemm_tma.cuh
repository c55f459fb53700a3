// TMA variant of the wgmma tile (build with -DHPMOE_GEMM_TMA=1): the same 128 x 256 tile, stage layouts and
// wgmma issue as block_gemm_wgmma.cuh, but each 64-deep K step is fetched by one thread with
// cp.async.bulk.tensor (boxes of the host-built tensor maps, op_host/cuda/tensor_maps.cu) into the same
// 128-byte-swizzled layouts, with mbarrier full/empty pairs per stage instead of block-wide barriers: all
// kStages slots are in flight, and step kt's wgmma group stays in flight while step kt - 1's slot is refilled.
// Tensor bounds are zero-filled by the copy engine; a K range that ends inside a tensor (the weight gradient's
// expert row segment) has its last step's out-of-range lines zeroed in shared memory before use.
#pragma once

#include "block_gemm_wgmma.cuh"
#include "tensor_map_kinds.h"

namespace hpmoe {
namespace cuda {

// The pipeline's mbarriers (a full and an empty one a stage) sit after the stages: those of the tall tile where it
// runs (block_gemm_tall.cuh: 256 x 64 A + 192 x 64 B a stage), since both tiles share them under HPMOE_GEMM_TALL.
constexpr uint32_t kBarrierBase = HPMOE_GEMM_TALL ? kStages * (256 + 192) * kBK * 2 : kStages * kStageBytes;
constexpr uint32_t kGemmTmaSmemBytes = kBarrierBase + 128 + 1024;  // + 2 mbarriers a stage, + alignment slack

// Where an operand's boxes come from: tensor map, and the coordinate origin inside it. K-major operands take
// box (c0 + k, r0 + mn, z); MN-major ones boxes (c0 + mn + 64 j, r0 + k, z).
struct TmaOperand {
  const void* map;  // CUtensorMap in global memory (64-byte aligned)
  int32_t c0, r0, z;
  // A B tile in two halves (fused SwiGLU: gate and up columns): the second half's first N, 0 = one piece. A
  // K-major B then comes as two 128-line boxes of `half_map`. A K-major A with at most 64 live rows
  // (Accumulate's m_live) comes as one 64-line box of `half_map`.
  int32_t split = 0;
  const void* half_map = nullptr;
};

__device__ __forceinline__ void MbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void TmaLoad(uint32_t dst, const void* map, uint32_t bar, int32_t c, int32_t r, int32_t z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
          dst),
      "l"(map), "r"(c), "r"(r), "r"(z), "r"(bar)
      : "memory");
}

// The other way: box (c, r, z) of `map` from shared memory at `src` (its layout the map's swizzle), in this
// thread's current bulk group; the caller commits the group and waits for it (cp.async.bulk.wait_group).
__device__ __forceinline__ void TmaStore(const void* map, int32_t c, int32_t r, int32_t z, uint32_t src) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(map), "r"(c),
               "r"(r), "r"(z), "r"(src)
               : "memory");
}

// A weight-gradient tile's K steps: each K segment [seg[2i], seg[2i+1]) (an expert's rows of one source slot)
// in whole 64-row steps, its last one partial.
__device__ __forceinline__ int KSteps(const uint64_t* seg, int nseg) {
  int steps = 0;
  for (int i = 0; i < nseg; ++i) steps += int((seg[2 * i + 1] - seg[2 * i] + kBK - 1) / kBK);
  return steps;
}

// An MN-major stage (kBlocks 64-wide blocks of kBK lines, 8 KB each, contiguous from base, A's then B's) keeps
// K in lines: zero lines [valid, end) with generic stores, then a proxy fence so that wgmma and the next TMA
// write see them. The caller's barrier follows. Thread tid of `threads` (a multiple of 8) takes 16-byte chunk
// tid % 8 of every (threads / 8)-th line: a warp writes four whole lines, and no index is divided by the
// runtime line count. The first version divided twice per chunk; its dependent integer divisions cost a
// ping-pong tile about 1.4k cycles in the op, where almost every tile ends in a tail (session 23).
// end < kBK: a tail step that multiplies only its first k16 groups never reads the lines past them.
template <int kBlocks>
__device__ __forceinline__ void ZeroKLines(uint32_t base, int valid, int end, int tid, int threads) {
  const uint32_t chunk = base + uint32_t(tid % 8) * 16;
  const int first = valid + tid / 8, step = threads / 8;
#pragma unroll
  for (int blk = 0; blk < kBlocks; ++blk)
    for (int line = first; line < end; line += step)
      asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(chunk + blk * kBK * 128 + line * 128), "r"(0)
                   : "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// The end of the lines a K tail of `valid` lines must zero when its step multiplies only the k16 groups that
// hold them (BlockGemm::IssueStageTail): the last group's lines past `valid`. None when valid is a multiple of 16.
__device__ __forceinline__ int KTailZeroEnd(int valid) { return (valid + 15) / 16 * 16; }

template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemmTma : BlockGemm<T, kAColMajor, kBColMajor> {
  using Base = BlockGemm<T, kAColMajor, kBColMajor>;
  __device__ explicit BlockGemmTma(uint8_t* shared) : Base(shared) {}

  __device__ uint32_t Full(int s) const { return this->smem + kBarrierBase + 8 * s; }
  __device__ uint32_t Empty(int s) const { return Full(s) + 8 * kStages; }

#if HPMOE_EXPERIMENT_HALF_B
  // Timing experiment only, results wrong by design (docs/cuda.md, "2-CTA clusters"): each block loads
  // half of an MN-major B tile, the share a 2-CTA multicast would leave it; with HPMOE_EXPERIMENT_HALF_B=2 a
  // K-major B too (one 128-line box of b.half_map instead of the 256-line box).
  static constexpr int kBBoxesMnMajor = kBN / 128;
#else
  static constexpr int kBBoxesMnMajor = kBN / 64;
#endif
  static constexpr bool kHalfKMajorB = HPMOE_EXPERIMENT_HALF_B == 2 && kBColMajor;
  static constexpr uint32_t kStepBytes = kBColMajor ? kStageBytes : kATileBytes + kBBoxesMnMajor * kBK * 128;

  // Thread 0 only: every slot's full barrier (one arrival per phase) and empty barrier (`empty_arrivals` warps).
  __device__ void InitBarriers(uint32_t empty_arrivals) {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(Full(s), 1);
      MbarInit(Empty(s), empty_arrivals);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  // Thread 0 only: one K step's A boxes to `sa`, completing on `bar`; `half_a`: warpgroup 0's 64 rows only.
  __device__ void IssueA(uint32_t sa, const TmaOperand& a, uint32_t bar, int32_t m0, int32_t k, bool half_a) {
    if (kAColMajor) {
      for (int j = 0; j < kBM / 64; ++j) TmaLoad(sa + j * kBK * 128, a.map, bar, a.c0 + m0 + 64 * j, a.r0 + k, a.z);
    } else {
      // The 128-byte swizzle repeats every 8 lines, so a 64-line box lands as the 128-line box's first half.
      TmaLoad(sa, half_a ? a.half_map : a.map, bar, a.c0 + k, a.r0 + m0, a.z);
    }
  }
  // Thread 0 only: the boxes of one K step into slot s, completing on Full(s) (one arrival per phase).
  __device__ void IssueLoads(int s, const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k,
                             bool half_a = false) {
    const uint32_t sa = this->smem + s * kStageBytes, sb = sa + kATileBytes, bar = Full(s);
    const bool half_k_major = kHalfKMajorB && b.half_map && !b.split;  // (timing experiment only)
    MbarExpectTx(bar, kStepBytes - (half_k_major ? kBN / 2 * 128 : 0) - (half_a ? kATileBytes / 2 : 0));
    IssueA(sa, a, bar, m0, k, half_a);
    if (kBColMajor && b.split) {  // lines = N: each half 128 lines, 16 KB
      TmaLoad(sb, b.half_map, bar, b.c0 + k, b.r0 + n0, b.z);
      TmaLoad(sb + (kBN / 2) * 128, b.half_map, bar, b.c0 + k, b.r0 + b.split, b.z);
    } else if (half_k_major) {
      TmaLoad(sb, b.half_map, bar, b.c0 + k, b.r0 + n0, b.z);
    } else if (kBColMajor) {
      TmaLoad(sb, b.map, bar, b.c0 + k, b.r0 + n0, b.z);
    } else {
      constexpr int kHalf = kBBoxesMnMajor / 2;
      for (int j = 0; j < kBBoxesMnMajor; ++j) {
        const int32_t n = b.split && j >= kHalf ? b.split + 64 * (j - kHalf) : n0 + 64 * j;
        TmaLoad(sb + j * kBK * 128, b.map, bar, b.c0 + n, b.r0 + k, b.z);
      }
    }
  }

  // MN-major tiles keep K in lines: zero lines [valid, end) of both operands of slot s (ZeroKLines), this
  // thread tid of `threads` (a multiple of 8). The caller's barrier follows.
  __device__ void ZeroKTailChunks(int s, int valid, int tid, int threads, int end = kBK) {
    static_assert(kAColMajor && !kBColMajor, "only MN-major A and B keep K in lines");
    ZeroKLines<(kBM + kBN) / 64>(this->smem + s * kStageBytes, valid, end, tid, threads);
  }
  // Block-uniform; only the weight gradient needs it.
  __device__ void ZeroKTail(int s, int valid, int end = kBK) {
    ZeroKTailChunks(s, valid, threadIdx.x, WorkerThreads(), end);
    WorkerSync();
  }

  // K steps [k0, k1) of the tile at (m0, n0). Barriers are initialised per call (all slots drained at the
  // end), so calls compose in any order; the K order is fixed, hence deterministic.
  // m_live: the tile's rows that reach stored outputs. A K-major A with at most 64 (an expert segment's last
  // piece) loads warpgroup 0's rows only (a.half_map) and warpgroup 1 multiplies nothing: its accumulators keep
  // the caller's zeros and its rows are never stored. Warpgroup 0's sums are the same either way.
  __device__ void Accumulate(const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k0,
                             int32_t k1, int32_t m_live = kBM) {
    const int nk = (k1 - k0 + kBK - 1) / kBK;
    const bool leader = threadIdx.x == 0;
    const bool half_a = !kAColMajor && m_live <= 64 && a.half_map != nullptr;
    const bool rows_idle = half_a && threadIdx.x >= 128;  // warpgroup 1 (uniform per warpgroup)
    const uint64_t t_start = ProfileClock();
    uint64_t t_first = t_start;
    WorkerSync();  // the previous call's readers are done with every slot
    if (leader) InitBarriers(kWorkerThreads / 32);
    WorkerSync();
    // With the asynchronous epilogue, slots kStagingSlot.. hold the previous tile's staged rows until its bulk
    // stores have read them: the other slots are filled first.
    constexpr int kFirst = HPMOE_GEMM_ASYNC_EPILOGUE ? kStagingSlot : kStages;
    if (leader)
      for (int s = 0; s < kFirst && s < nk; ++s) IssueLoads(s, a, b, m0, n0, k0 + s * kBK, half_a);
    if (HPMOE_GEMM_ASYNC_EPILOGUE && threadIdx.x < 32) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      __syncwarp();
    }
    if (leader)
      for (int s = kFirst; s < kStages && s < nk; ++s) IssueLoads(s, a, b, m0, n0, k0 + s * kBK, half_a);
    // Timing experiments on the weight-gradient tile only (wrong results by design, docs/cuda.md): 2 loads
    // the first kStages steps and never refills (no operand feed), 3 issues no wgmma.
    constexpr bool kNoFeed = HPMOE_EXPERIMENT_DW == 2 && kAColMajor, kNoMma = HPMOE_EXPERIMENT_DW == 3 && kAColMajor;
    for (int kt = 0; kt < nk; ++kt) {
      const int s = kt % kStages;
      if (!kNoFeed || kt < kStages) MbarWait(Full(s), (kt / kStages) & 1);
      if (HPMOE_EXPERIMENT_PROFILE && kt == 0) t_first = ProfileClock();
      bool tail = false;
      if constexpr (kAColMajor && !kBColMajor) {  // the weight gradient's K tail: its k16 groups only
        const int valid = k1 - (k0 + kt * kBK);
        tail = valid < kBK;
        if (tail && valid < KTailZeroEnd(valid)) ZeroKTail(s, valid, KTailZeroEnd(valid));
        if (tail && !kNoMma) this->IssueStageTail(s, valid);
      }
      if (!tail && !kNoMma && !rows_idle) this->IssueStage(s);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // step kt - 1's group is done
      if (kt == 0) continue;
      const int prev = (kt - 1) % kStages;
      if (threadIdx.x % 32 == 0) MbarArrive(Empty(prev));
      const int next = kt - 1 + kStages;
      if (leader && next < nk && !kNoFeed) {
        MbarWait(Empty(prev), ((kt - 1) / kStages) & 1);
        IssueLoads(prev, a, b, m0, n0, k0 + next * kBK, half_a);
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    WorkerSync();
    if (HPMOE_EXPERIMENT_PROFILE) {
      const uint64_t fill = t_first - t_start, loop = ProfileClock() - t_first;  // one clock read for both kinds
      ProfileAdd(Base::kProfileKind, kPhaseFill, fill);
      ProfileAdd(Base::kProfileKind, kPhaseLoop, loop);
      ProfileAdd(Base::kProfileKind, kPhaseSteps, uint64_t(nk));
      if (half_a) {  // the same tile once more, as a one-warpgroup tile (its epilogue counts under the base kind)
        ProfileAdd(kProfileOneWarpgroup, kPhaseFill, fill);
        ProfileAdd(kProfileOneWarpgroup, kPhaseLoop, loop);
        ProfileAdd(kProfileOneWarpgroup, kPhaseSteps, uint64_t(nk));
        ProfileAdd(kProfileOneWarpgroup, kPhaseTiles, 1);
      }
    }
  }

  // The asynchronous epilogue of 16-bit outputs: the tile is staged in slots kStagingSlot.. (Stage), then
  // warp 0's lanes send each row with one bulk copy (cp.async.bulk, shared to global) and the block goes on
  // to the next tile while the copy engine writes this one: the next Accumulate refills the staging slots
  // only once the copies have read them. Rows the copies cannot take (a ragged width, unaligned rows) go
  // out through StoreStaged. Block-wide; the task ends with FinishStores.
  static constexpr int kStagingSlot = 2;
  static_assert(kStagingSlot * kStageBytes + kBM * Base::kRowBytes <= kStages * kStageBytes, "staging fits");
  // evict_first: outputs that nothing in the kernel reads again (weight gradients) go to L2 as the first to
  // leave it, so that their stream does not push out the operands other tiles still read.
  __device__ void WriteStagedAsync(T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid,
                                   bool evict_first = false) {
    const uint32_t base = this->smem + kStagingSlot * kStageBytes;
    this->Stage(base);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // staged by this thread, read by the copies
    WorkerSync();
    if (!SendStagedRows(base, c, ldc, m0, n0, m_valid, n_valid, evict_first)) {
      this->StoreStaged(base, c, ldc, m0, n0, m_valid, n_valid);
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // before the copy engine refills the slots
      WorkerSync();
    }
  }
  // StoreStaged by the copy engine (inside WriteStagedBy, which staged the tile at `base`): no thread holds the
  // rows in registers on their way out. It returns once the copies have read the staged rows, so the slots
  // may be refilled, and does not wait for the writes: the task ends with FinishStores, which does. (Waiting
  // for each tile's writes took as long as the cluster worker's spilled store loop, 9.8k cycles a tile at
  // Qwen3-235B-A22B, and made the default 17% slower there: session 32.) Rows the copies cannot take go out
  // through StoreStaged.
  __device__ void StoreStagedByCopies(uint32_t base, T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid,
                                      int64_t n_valid, bool evict_first) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // staged by this thread, read by the copies
    WorkerSync();
    if (!SendStagedRows(base, c, ldc, m0, n0, m_valid, n_valid, evict_first)) {
      this->StoreStaged(base, c, ldc, m0, n0, m_valid, n_valid);
      return;
    }
    if (threadIdx.x < 32) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
  // Rows [m0, m0 + kBM) of the tile staged at `base` (rows Base::kRowBytes apart) to c, one bulk copy a row
  // (cp.async.bulk, shared to global) issued by warp 0's lanes and committed as one bulk group. False, and
  // nothing sent, where the rows cannot go that way: a ragged width or rows that do not start on 16 bytes.
  __device__ bool SendStagedRows(uint32_t base, T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid,
                                 int64_t n_valid, bool evict_first) {
    const int64_t width = n_valid - n0 < kBN ? n_valid - n0 : kBN;
    const bool bulk = (reinterpret_cast<uintptr_t>(c) & 15) == 0 && (ldc & 7) == 0 && (n0 & 7) == 0 &&
                      (width & 7) == 0 && width > 0;  // 16-byte aligned rows of whole 16-byte chunks
    if (!bulk) return false;
    if (threadIdx.x < 32) {
      uint64_t policy;
      if (evict_first)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
      else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
      for (int r = threadIdx.x; r < kBM && m0 + r < m_valid; r += 32)
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(
                         c + (m0 + r) * ldc + n0),
                     "r"(base + r * Base::kRowBytes), "r"(uint32_t(width * 2)), "l"(policy)
                     : "memory");
      asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    return true;
  }
  // End of a task that used WriteStagedAsync or StoreStagedByCopies: its rows are written (and ordered before
  // the generic accesses that follow, the task's completion event among them), and no copy still reads shared
  // memory.
  __device__ void FinishStores() {
    if (!HPMOE_GEMM_ASYNC_EPILOGUE && !HPMOE_WGRAD_STORE_BY_COPIES) return;  // nothing was sent asynchronously
    if (threadIdx.x < 32) {
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    WorkerSync();
  }
};

}  // namespace cuda
}  // namespace hpmoe
