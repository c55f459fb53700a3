// Pool units taken in rounds by the two blocks of a 2-block cluster (build flag HPMOE_GEMM_PAIRS; docs/cuda.md,
// "2-CTA clusters"). At a claim, block 1 asks block 0 for a round (a CAS on block 0's gate word) and
// waits HPMOE_PAIRS_PATIENCE_NS for it; block 0, at its own claim, takes a pending request, claims two units
// (two fetch-adds: every unit is still claimed once and every claimer still stops at exactly one claim past
// the end, so the claim counter's per-invocation base is unchanged) and posts block 1's through distributed
// shared memory. Unanswered, block 1 takes its request back and claims alone. When both units of a round are
// one GMM task each on the same weights, expert, columns, rows and K (PairedWithPeer), the two blocks run them
// as paired tiles (block_gemm_paired.cuh), B multicast; otherwise each runs its unit alone.
//
// Why no deadlock: block 0 claims for block 1 only while block 1 waits at a claim, so no unit is handed to a
// block busy elsewhere (a static combine put waiting on pool units, EP > 1, deadlocked the first version).
// Two paired units are of one stage, so neither waits on the other, and every unit before them was claimed
// by a block that runs it. Before the paired tiles start, both blocks say (CommitPair, bounded) that their
// unit's waits are over, so a block whose wait failed never leaves its peer in an unbounded tile barrier.
// Every wait on the peer is bounded and watches the abort word, as CudaSync::Wait does. The kernel starts and
// ends with a cluster barrier, so no block touches its peer's shared memory before the peer initialised it or
// after the peer exited; block 0 closes its gate when it leaves the pool and serves a request still pending.
#pragma once

#include "block_gemm_paired.cuh"
#include "cuda_sync.cuh"
#include "device_rank.cuh"
#include "row_segments.cuh"

namespace hpmoe {
namespace cuda {

constexpr uint32_t kNoUnit = 0xffffffffu;
#ifndef HPMOE_PAIRS_PATIENCE_NS
#define HPMOE_PAIRS_PATIENCE_NS 2000  // how long block 1 waits for block 0 at a claim before claiming alone
#endif
#ifndef HPMOE_PAIRS_LEADER_PATIENCE_NS
#define HPMOE_PAIRS_LEADER_PATIENCE_NS 0  // how long block 0 waits at a claim for block 1 to ask (experiment)
#endif
#ifndef HPMOE_PAIRS_NO_TILE
#define HPMOE_PAIRS_NO_TILE 0  // diagnostic: the rounds without paired tiles
#endif

// Block 0's `gate` word: whether block 1 may ask it for a round. kGateNotYet until block 0 enters the pool,
// then kGateOpen; block 1 asks by CAS kGateOpen -> round number (it then waits for the post); block 0 takes the
// request by exchanging it for kGateOpen at its next claim, or for kGateClosed when it leaves the pool (and then
// still serves a pending request). So block 0 claims for block 1 only while block 1 waits in the pool: a block
// still in its static queue (a combine put waiting on pool units, EP > 1) is never handed a unit.
constexpr uint32_t kGateNotYet = 0xfffffffeu, kGateOpen = 0, kGateClosed = 0xfffffffdu;

struct PairState {
  uint32_t gate;                        // block 0's (above)
  uint32_t post_seq, post_k0, post_k1;  // block 1's mailbox: round number (last), block 0's two claims
  uint32_t commit_seq;                  // the peer's "my unit's waits are over" for this round
  uint32_t round;                       // rounds taken so far (both blocks count alike)
  uint32_t mine_unit, peer_unit;        // this round's units (pool indices), peer_unit kNoUnit when alone
  uint32_t alone;                       // 1: this block never pairs (again)
};
__shared__ PairState g_pair;  // one per block, at the same offset in both blocks of a cluster

__device__ __forceinline__ uint32_t CasRemote(uint32_t* local, uint32_t rank, uint32_t expect, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.cluster.shared::cluster.cas.b32 %0, [%1], %2, %3;"
               : "=r"(old)
               : "r"(Remote(local, rank)), "r"(expect), "r"(v)
               : "memory");
  return old;
}
__device__ __forceinline__ uint32_t ExchangeLocal(uint32_t* local, uint32_t v) {
  uint32_t old;
  asm volatile("atom.acq_rel.cluster.shared::cta.exch.b32 %0, [%1], %2;" : "=r"(old) : "r"(SharedAddr(local)), "r"(v)
               : "memory");
  return old;
}

// Thread 0: until *word == value, bounded like CudaSync::Wait (abort word every 64 polls, the group's
// timeout). rt::kOk, kAborted or kWaitTimeout (which raises the abort).
__device__ inline int32_t WaitPeer(const DeviceRank& d, const uint32_t* word, uint32_t value) {
  const uint64_t deadline = GlobalTimerNs() + d.timeout_ns;
  for (uint32_t spin = 1;; ++spin) {
    if (LoadAcquireCluster(word) == value) return rt::kOk;
    if ((spin & 63) == 0) {
      if (LoadAcquire(d.AbortWord(d.rank)) != 0) return rt::kAborted;
      if (GlobalTimerNs() > deadline) {
        RaiseAbort(d);
        return rt::kWaitTimeout;
      }
    }
  }
}

// Every thread, before anything else in the kernel; the cluster barrier that follows publishes it.
__device__ inline void InitPairs(const DeviceRank& d) {
  if (threadIdx.x == 0) {
    const rt::SscProgram& p = d.program;
    g_pair = PairState{};
    g_pair.gate = kGateNotYet;
    g_pair.peer_unit = g_pair.mine_unit = kNoUnit;
    const bool mixed = (d.cfg.flags & ssc::kConfigMixedQueues) && !(d.cfg.flags & ssc::kConfigRowPipelines);
    g_pair.alone = !(p.pool != nullptr && mixed && (blockIdx.x | 1u) < p.claimers && (blockIdx.x | 1u) < gridDim.x);
  }
}

// Block 0: claims for block 1's pending round `request` and posts it, claiming for itself first when `self`
// (a block leaving the pool serves a last request without a claim of its own: each claimer stops at exactly
// one claim past the end, which keeps the claim counter's per-invocation base).
__device__ inline uint32_t ServeRound(uint32_t* claim_counter, uint32_t request, uint32_t base, uint32_t units,
                                      bool self = true) {
  const uint32_t k0 = self ? atomicAdd(claim_counter, 1u) : base + units, k1 = atomicAdd(claim_counter, 1u);
  StoreRemote(&g_pair.post_k0, 1, k0);
  StoreRemote(&g_pair.post_k1, 1, k1);
  StoreRemoteRelease(&g_pair.post_seq, 1, request);
  g_pair.round = request;
  PairProfileAdd(kPairServed);
  if (k0 - base < units && k1 - base < units) {
    g_pair.peer_unit = k1 - base, g_pair.mine_unit = k0 - base;
    PairProfileAdd(kPairBothUnits);
  }
  return k0;
}

// Sync::Claim under HPMOE_GEMM_PAIRS (thread 0; the caller broadcasts): the claim counter value of this
// block's unit, and g_pair's units set for the pairing check. A failed wait for block 0's post stops the
// block (returns a value past the pool; the abort was raised or seen, so the launch reports the failure).
__device__ inline uint32_t ClaimInRounds(const DeviceRank& d, uint32_t* claim_counter) {
  const rt::SscProgram& p = d.program;
  const uint32_t base = (p.invocation - 1u) * (p.num_pool + p.claimers), units = p.num_pool;
  g_pair.peer_unit = g_pair.mine_unit = kNoUnit;
  if (g_pair.alone) {
    PairProfileAdd(kPairAlone);
    return atomicAdd(claim_counter, 1u);
  }
  if (ClusterRank() == 0) {
    uint32_t request = ExchangeLocal(&g_pair.gate, kGateOpen);  // block 1's pending round, if any
    if (HPMOE_PAIRS_LEADER_PATIENCE_NS > 0 && (request == kGateOpen || request == kGateNotYet)) {
      const uint64_t give_up = GlobalTimerNs() + HPMOE_PAIRS_LEADER_PATIENCE_NS;
      while (LoadAcquireCluster(&g_pair.gate) == kGateOpen && GlobalTimerNs() < give_up) {
      }
      request = ExchangeLocal(&g_pair.gate, kGateOpen);
    }
    const uint32_t k = request != kGateOpen && request != kGateNotYet ? ServeRound(claim_counter, request, base, units)
                                                                       : atomicAdd(claim_counter, 1u);
    if (k - base >= units) {  // leaving the pool: close the gate, and serve a request that came in meanwhile
      const uint32_t late = ExchangeLocal(&g_pair.gate, kGateClosed);
      if (late != kGateOpen) ServeRound(claim_counter, late, base, units, false);
    }
    return k;
  }
  // Block 1: ask for a round; claim alone while block 0 is not in the pool (or has left it).
  const uint32_t seq = g_pair.round + 1;
  const uint32_t gate = CasRemote(&g_pair.gate, 0, kGateOpen, seq);
  if (gate != kGateOpen) {
    if (gate == kGateClosed) g_pair.alone = 1;
    PairProfileAdd(kPairAlone);
    return atomicAdd(claim_counter, 1u);
  }
  // Wait a moment for block 0 to reach its claim; if it does not, take the request back (a CAS that fails
  // once block 0 has taken it) and claim alone: waiting for block 0's whole unit idled block 1 (rounds
  // without paired tiles: Mixtral-8x7B fwd+bwd kernels 17.4 -> 20.3 ms).
  PairProfileAdd(kPairAsked);
  const uint64_t give_up = GlobalTimerNs() + HPMOE_PAIRS_PATIENCE_NS;
  while (LoadAcquireCluster(&g_pair.post_seq) != seq && GlobalTimerNs() < give_up) {
  }
  if (LoadAcquireCluster(&g_pair.post_seq) != seq && CasRemote(&g_pair.gate, 0, seq, kGateOpen) == seq) {
    PairProfileAdd(kPairWithdrawn);
    return atomicAdd(claim_counter, 1u);  // withdrawn before block 0 took it
  }
  if (WaitPeer(d, &g_pair.post_seq, seq) != rt::kOk) return base + units;  // taken: the post is coming
  g_pair.round = seq;
  const uint32_t k0 = g_pair.post_k0, k1 = g_pair.post_k1;
  if (k0 - base < units && k1 - base < units) g_pair.peer_unit = k0 - base, g_pair.mine_unit = k1 - base;
  return k1;
}

// Whether the peer runs its unit beside task `mine` as paired tiles: both units are one task, of the same type
// on the same weights, columns, K and row count, each row range inside one expert segment of the same expert
// (what makes B the same tile sequence). Both blocks decide alike (the routing counts are final before any GMM
// task runs). Every thread calls it (the segment walk is warp-parallel).
__device__ inline bool PairedWithPeer(const DeviceRank& d, const ssc::SscTask& mine) {
  const uint32_t pu = g_pair.peer_unit, mu = g_pair.mine_unit;
  if (HPMOE_PAIRS_NO_TILE || pu == kNoUnit) return false;
  const rt::SscProgram& p = d.program;
  if (p.pool[pu].count != 1 || p.pool[mu].count != 1 || &p.tasks[p.entries[p.pool[mu].first_entry]] != &mine)
    return false;
  const ssc::SscTask& peer = p.tasks[p.entries[p.pool[pu].first_entry]];
  const ssc::SscTensorRef &a = mine.inputs[0], &b = peer.inputs[0];
  if (peer.task_type != mine.task_type || peer.inputs[1].slot != mine.inputs[1].slot || b.slot != a.slot ||
      b.cols != a.cols || b.rows != a.rows || peer.outputs[0].slot != mine.outputs[0].slot ||
      peer.outputs[0].col_offset != mine.outputs[0].col_offset || peer.outputs[0].cols != mine.outputs[0].cols)
    return false;
  uint32_t e_mine = kNoUnit, e_peer = kNoUnit;
  int n_mine = 0, n_peer = 0;
  ForEachExpertSegment(d, a.row_offset, a.rows, [&](uint32_t e, uint64_t, uint64_t) { e_mine = e, ++n_mine; });
  ForEachExpertSegment(d, b.row_offset, b.rows, [&](uint32_t e, uint64_t, uint64_t) { e_peer = e, ++n_peer; });
  return n_mine == 1 && n_peer == 1 && e_mine == e_peer;
}

// Both blocks, before their paired tiles: this block's unit has passed its waits; wait (bounded) until the
// peer's has. Every thread calls it; returns rt::kOk or the failed wait's status.
__device__ inline int32_t CommitPair(const DeviceRank& d) {
  __shared__ int32_t status;
  if (threadIdx.x == 0) {
    StoreRemoteRelease(&g_pair.commit_seq, ClusterRank() ^ 1u, g_pair.round);
    status = WaitPeer(d, &g_pair.commit_seq, g_pair.round);
  }
  __syncthreads();
  const int32_t st = status;
  __syncthreads();
  return st;
}

}  // namespace cuda
}  // namespace hpmoe
