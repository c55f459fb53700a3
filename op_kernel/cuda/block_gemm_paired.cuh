// The TMA tile run by the two blocks of a 2-block cluster on the same B (issue 16's multicast; docs/cuda.md,
// "2-CTA clusters"): each block computes its own 128 x 256 output tile (its own m0, the same n0 and K
// range), loads its own A box, and loads half of the B tile with `.multicast::cluster`, so that the copy
// engine writes that half into both blocks' slots: each block reads 32 KB per K step from L2 instead of 48.
// Measured bound (timing-only build HPMOE_EXPERIMENT_HALF_B=2, session 13): fwd+bwd kernels -7% to -15% at
// the shapes whose user step is below PyTorch's.
//
// Protocol per tile (both blocks call AccumulatePaired with the same n0, k0, k1; only m0 and A differ):
// 1. Each block initialises its barriers; a cluster barrier (release/acquire) then says both are initialised
//    and both blocks' previous epilogues are done with the slots the peer's copies will write.
// 2. A slot's full barrier expects the whole stage: A (own) + B half (own) + B half (the peer's).
// 3. A slot's empty barrier counts the warps of both blocks: every warp arrives on its own block's and, by
//    `mapa` + `mbarrier.arrive.shared::cluster`, on the peer's, so that neither leader refills a slot (which
//    writes both blocks' copies) before both blocks have read it. A warp arrives only when a refill follows,
//    so no remote arrival is left in flight when the loop ends: the next tile may re-initialise the barriers.
// The tile's products and K order are the solo tile's: the outputs are bitwise equal (tests/cuda).
#pragma once

#include "block_gemm_tma.cuh"
#include "cluster_dsmem.cuh"
#if HPMOE_GEMM_WS == 2
#include "block_gemm_ws.cuh"
#endif

namespace hpmoe {
namespace cuda {

__device__ __forceinline__ void TmaLoadMulticast(uint32_t dst, const void* map, uint32_t bar, int32_t c, int32_t r,
                                                 int32_t z, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
      "l"(map), "r"(c), "r"(r), "r"(z), "r"(bar), "h"(mask)
      : "memory");
}
// Whether the mbarrier's phase with this parity has completed (no waiting).
__device__ __forceinline__ bool MbarTest(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}
// One arrival on the mbarrier at the same shared-memory offset in block `rank` of the cluster.
__device__ __forceinline__ void MbarArriveRemote(uint32_t bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  // Release at the CTA scope (the default) is enough: what it orders is this block's reads of the slot, done
  // (wgmma.wait_group) before the arrival; a cluster-scope release cost about 0.5 us per K step.
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// One K step into slot s of both blocks of the cluster, issued by one thread of block `rank`: its own A box and
// its half of B with `.multicast::cluster`; completes on Full(s) of each block (one local arrival with the whole
// stage's bytes; the peer's half of B arrives as bytes only). K-major B comes as the 128-line box of
// `b.half_map` at N offset 128 * rank, MN-major B as the rank's two 64-column boxes. `g`: the block's TMA tile,
// whose B is K-major when kBColMajor.
template <bool kBColMajor, class Tile>
__device__ __forceinline__ void IssuePairedStep(Tile& g, uint32_t rank, int s, const TmaOperand& a,
                                                const TmaOperand& b, int32_t m0, int32_t n0, int32_t k) {
  const uint32_t sa = g.smem + s * kStageBytes, sb = sa + kATileBytes, bar = g.Full(s);
  MbarExpectTx(bar, kStageBytes);
  g.IssueA(sa, a, bar, m0, k, false);  // both blocks' A tiles whole
  constexpr uint16_t kBoth = 0x3;
  if (kBColMajor) {  // lines = N: this rank's 128 lines, 16 KB
    const int32_t half = int32_t(rank) * (kBN / 2);
    TmaLoadMulticast(sb + half * 128, b.half_map, bar, b.c0 + k, b.r0 + n0 + half, b.z, kBoth);
  } else {  // lines = K: 64-column boxes 2 rank and 2 rank + 1, 8 KB each
    for (int j = 2 * int(rank); j < 2 * int(rank) + 2; ++j)
      TmaLoadMulticast(sb + j * kBK * 128, b.map, bar, b.c0 + n0 + 64 * j, b.r0 + k, b.z, kBoth);
  }
}

template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemmPaired : BlockGemmTma<T, kAColMajor, kBColMajor> {
  using Base = BlockGemmTma<T, kAColMajor, kBColMajor>;
  static_assert(!HPMOE_GEMM_ASYNC_EPILOGUE,
                "the paired tile writes its epilogue itself (the peer's copies reuse the slots)");
  const uint32_t rank, peer;  // this block's rank in its cluster, and the other block's
  __device__ explicit BlockGemmPaired(uint8_t* shared) : Base(shared), rank(ClusterRank()), peer(rank ^ 1u) {}

  __device__ void IssuePairedLoads(int s, const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0,
                                   int32_t k) {
    IssuePairedStep<kBColMajor>(*this, rank, s, a, b, m0, n0, k);
  }

  // K steps [k0, k1) of this block's tile at (m0, n0), the peer running the same n0, k0, k1. Block-uniform on
  // both blocks; the K order is the solo tile's.
  __device__ void AccumulatePaired(const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k0,
                                   int32_t k1) {
    static_assert(!(kAColMajor && kBColMajor), "no tile reads both operands K-major from MN-major storage");
    const int nk = (k1 - k0 + kBK - 1) / kBK;
    const bool leader = threadIdx.x == 0;
    const uint64_t t_start = ProfileClock();
    __syncthreads();  // this block's readers are done with every slot
    if (leader) this->InitBarriers(2 * kThreads / 32);  // both blocks' warps release a slot
    ClusterSync();
    // The leader issues step j's loads once slot j % kStages is free in both blocks. It does not wait for the
    // peer's arrivals while its warpgroup has data to multiply: a refill whose empty barrier is not complete is
    // retried after the next step, and waited for only when its own data is next. (Measured with cluster-scope
    // arrivals only, where it was no faster than waiting at once: 450-464 against 477-502 TFLOP/s alone; not
    // measured since the arrivals went to CTA scope.)
    int issued = 0;  // steps [0, issued) are issued
    auto issue_ready = [&](int upto, bool block) {
      for (; issued < nk && issued <= upto; ++issued) {
        if (issued >= kStages) {
          const uint32_t empty = this->Empty(issued % kStages), parity = ((issued - kStages) / kStages) & 1;
          if (block) MbarWait(empty, parity);
          else if (!MbarTest(empty, parity)) return;
        }
        IssuePairedLoads(issued % kStages, a, b, m0, n0, k0 + issued * kBK);
      }
    };
    if (leader) issue_ready(kStages - 1, true);
    uint64_t t_first = 0;
    for (int kt = 0; kt < nk; ++kt) {
      const int s = kt % kStages;
      if (leader) issue_ready(kt, true);
      MbarWait(this->Full(s), (kt / kStages) & 1);
      if (HPMOE_EXPERIMENT_PROFILE && kt == 0) t_first = ProfileClock();
      if constexpr (kAColMajor && !kBColMajor) {
        const int valid = k1 - (k0 + kt * kBK);
        if (valid < kBK) this->ZeroKTail(s, valid);
      }
      this->IssueStage(s);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // step kt - 1's group is done
      if (kt > 0 && kt - 1 + kStages < nk && threadIdx.x % 32 == 0) {  // a refill of this slot follows
        const uint32_t empty = this->Empty((kt - 1) % kStages);
        MbarArrive(empty);
        MbarArriveRemote(empty, peer);
      }
      if (leader) issue_ready(kt + kStages - 1, false);
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    __syncthreads();
    if (HPMOE_EXPERIMENT_PROFILE) {  // the fill includes the cluster barrier
      ProfileAdd(kProfilePairedKind, kPhaseFill, t_first - t_start);
      ProfileAdd(kProfilePairedKind, kPhaseLoop, ProfileClock() - t_first);
      ProfileAdd(kProfilePairedKind, kPhaseSteps, uint64_t(nk));
      ProfileAdd(kProfilePairedKind, kPhaseTiles, 1);
    }
  }
};

#if HPMOE_GEMM_WS == 2
// The paired tile in the roles of the whole launch (block_gemm_ws.cuh): each block's producer thread owns the
// refills, so a block's consumers never wait on the peer's, only on data (session 26, the step before pairing
// units in the op). Both blocks walk the same tiles' K steps (the same n0, K and order; their own m0) through
// pipelines that live across tiles. The empty barriers count both blocks' 8 consumer warps (InitBarriers(16)):
// every consumer warp releases a slot on its own block's barrier and, through `mapa`, on the peer's; a
// producer refills a slot, which writes both blocks' copies, only once both blocks have read it. The launch
// ends with a cluster barrier, so that no remote arrival meets an exited block.
template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemmWsPaired : BlockGemmWs<T, kAColMajor, kBColMajor> {
  const uint32_t rank, peer;
  __device__ explicit BlockGemmWsPaired(uint8_t* shared)
      : BlockGemmWs<T, kAColMajor, kBColMajor>(shared), rank(ClusterRank()), peer(ClusterRank() ^ 1u) {}

  // Producer thread: K steps [k0, k1) of this block's tile at (m0, n0), each into the next slot once both blocks
  // have released it.
  __device__ void ProducePaired(const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k0,
                                int32_t k1) {
    for (int32_t k = k0; k < k1; k += kBK) {
      MbarWait(this->Empty(this->stage), this->phase ^ 1);
      IssuePairedStep<kBColMajor>(*this, rank, this->stage, a, b, m0, n0, k);
      this->Advance();
    }
  }
  // Consumers: the same K steps; each warp releases a slot on both blocks.
  __device__ void ConsumePaired(int32_t k0, int32_t k1) {
    this->template ConsumeWith<false>(k0, k1, [&](uint32_t empty) {
      MbarArrive(empty);
      MbarArriveRemote(empty, peer);
    });
  }
};
#endif

}  // namespace cuda
}  // namespace hpmoe
