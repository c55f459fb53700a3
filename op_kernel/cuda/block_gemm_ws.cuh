// The warp-specialised wgmma tile (HPMOE_GEMM_WS=1 or 2; gemm_variant.h): a 384-thread block with one producer
// and two consumer warpgroups.
// - The producer gives registers back (setmaxnreg.dec) and one of its threads issues every K step's TMA
//   boxes (the same boxes, stage layouts and barriers as block_gemm_tma.cuh) as soon as a slot is empty.
// - The consumers take them (setmaxnreg.inc), so the 128 fp32 accumulators of their 64 x 256 halves and the
//   loop state fit without spills (the 256-thread tile sat at the 255-register cap with 3.3 M spill requests
//   per launch, docs/cuda.md "What limits the tile now"). Each keeps one wgmma group in flight and frees a slot
//   when the group that read it is done.
// - The full/empty barriers persist over all tiles of a task: the producer runs ahead into the next tile
//   while the consumers write this one's epilogue, which is staged in a buffer of its own (not the slots).
// HPMOE_GEMM_WS=1: the roles last one GMM task. Warpgroup 0 produces, 1-2 consume; at the end of the task both
// give the registers back (168 each: the kernel's whole budget, 65536 / 384 rounded to 8) and meet at a
// barrier, and every other handler runs on all 384 threads at 168 registers.
// HPMOE_GEMM_WS=2: the roles last the whole launch. Warpgroups 0-1 run the worker loop and every handler at
// kWsConsumerRegs (worker_threads.cuh: their barrier is named barrier 1); warpgroup 2 sleeps on a named barrier
// until the workers post a GMM task (WsPost), walks its tiles as they do and issues their loads. The barriers
// live for the launch: each role keeps its pipeline position from task to task.
// Both roles walk the same tiles and K steps in the same fixed order, so results are deterministic and
// equal to the 256-thread tile's (same K order, same accumulators).
#pragma once

#include "block_gemm_tma.cuh"

namespace hpmoe {
namespace cuda {

#ifndef HPMOE_WS_PRODUCER_REGS
// WS=1: 40 spilled in the producer's K loop (SASS); 72 and 104 did not, 104 measured faster. WS=2: 40, which
// leaves the workers 232 (their handlers ran at up to 255 in the 256-thread block): against 72 / 216, Qwen3-235B
// +2% instead of +5-7% over the default build, the other shapes on par either way (session 26).
#define HPMOE_WS_PRODUCER_REGS (HPMOE_GEMM_WS == 2 ? 40 : 104)
#endif
constexpr uint32_t kWsBaseRegs = 168;
constexpr uint32_t kWsProducerRegs = HPMOE_WS_PRODUCER_REGS;
constexpr uint32_t kWsConsumerRegs = (384 * kWsBaseRegs - 128 * kWsProducerRegs) / 256 / 8 * 8;
static_assert(128 * kWsProducerRegs + 256 * kWsConsumerRegs <= 384 * kWsBaseRegs, "the register pool balances");
// (A 288-thread block, one producer warp and no setmaxnreg, gets no more than 168 registers either: nine warps
// put three on one SM sub-partition of 16384 registers; session 26.)
static_assert(kThreads == 384 || !HPMOE_GEMM_WS, "one producer and two consumer warpgroups");
// The producer warpgroup, and the first consumer thread: WS=2 keeps the workers at threads 0..255, so every
// handler's thread indices are the 256-thread block's.
constexpr int kWsProducerWg = HPMOE_GEMM_WS == 2 ? 2 : 0;
constexpr int kWsFirstConsumer = HPMOE_GEMM_WS == 2 ? 0 : 128;
constexpr uint32_t kWsConsumerWarps = 8;
// Epilogue staging: each consumer warpgroup stages its 64 rows, one 128-column half at a time, 16-byte
// chunks XOR-swizzled by row (conflict-free 4-byte writes from the accumulator layout, 16-byte reads).
constexpr uint32_t kEpiRowBytes = kBN;  // 128 16-bit columns
constexpr uint32_t kEpiBytes = kBM * kEpiRowBytes;
// Stages, barriers, then staging; under HPMOE_GEMM_TALL the staging fits between the stages and the barriers,
// which sit past the tall tile's larger stages.
constexpr uint32_t kEpiOffset = HPMOE_GEMM_TALL ? kStages * kStageBytes : kBarrierBase + 128;
static_assert(!HPMOE_GEMM_TALL || kEpiOffset + kEpiBytes <= kBarrierBase, "the staging ends before the barriers");
constexpr uint32_t kGemmWsSmemBytes = HPMOE_GEMM_TALL ? kGemmTmaSmemBytes : kGemmTmaSmemBytes + kEpiBytes;
static_assert(kGemmWsSmemBytes <= 227 * 1024, "an H100/H200 block's shared memory");

// Named barriers (0 is __syncthreads): the two consumer warpgroups (kBarWorkers under WS=2), each of them alone,
// the consumers' registers given back (WS=1: the consumers arrive, the producer waits), and WS=2's job
// handshake (a task posted: the workers arrive, the producer waits; the producer done with it: the other way).
constexpr uint32_t kBarConsumers = 1, kBarConsumerWg0 = 2, kBarRegsBack = 4, kBarWsPosted = 5, kBarWsIdle = 6;
static_assert(kBarConsumers == kBarWorkers, "under WS=2 the consumers are the workers");

template <uint32_t N>
__device__ __forceinline__ void SetMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <uint32_t N>
__device__ __forceinline__ void SetMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <uint32_t kId, uint32_t kCount>
__device__ __forceinline__ void NamedBarrier() {
  asm volatile("bar.sync %0, %1;" ::"n"(kId), "n"(kCount) : "memory");
}
template <uint32_t kId, uint32_t kCount>
__device__ __forceinline__ void NamedBarrierArrive() {
  asm volatile("bar.arrive %0, %1;" ::"n"(kId), "n"(kCount) : "memory");
}
// Consumer warpgroup wg (0 or 1) alone, on its own named barrier.
__device__ __forceinline__ void ConsumerWarpgroupSync(int wg) {
  if (wg == 0) NamedBarrier<kBarConsumerWg0, 128>();
  else NamedBarrier<kBarConsumerWg0 + 1, 128>();
}

// WS=2: what the workers tell the producer. Written by the workers between kBarWsIdle (the producer is done
// with the previous job) and kBarWsPosted (this one is posted), read by the producer until its next
// kBarWsIdle arrival; `pipe` (the consumers' pipeline position, BlockGemmWs::Pipe) only by the workers.
enum WsJobKind : uint32_t { kWsJobNone = 0, kWsJobGmm, kWsJobGmmKMajorB, kWsJobWeightGrad, kWsJobExit };
constexpr int kWsMaxSegments = 16;  // the weight gradient's K segments, [begin, end) per source slot
struct WsMailbox {
  uint32_t kind;
  uint32_t pipe;
  const void* task;  // the SSC task record (global memory)
  uint64_t k_rows[kWsMaxSegments];
};
__device__ __forceinline__ WsMailbox& WsBox() {
  __shared__ WsMailbox box;
  return box;
}

template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemmWs : BlockGemmTma<T, kAColMajor, kBColMajor> {
  using Tma = BlockGemmTma<T, kAColMajor, kBColMajor>;
  static constexpr int kTileM = kBM, kTileN = kBN;
  const int wg;            // consumer warpgroup 0 or 1; -1 in the producer
  int stage = 0;           // the pipeline position, advanced identically by both roles
  uint32_t phase = 0;

  __device__ explicit BlockGemmWs(uint8_t* shared)
      : Tma(shared), wg(int(threadIdx.x / 128) == kWsProducerWg ? -1 : (int(threadIdx.x) - kWsFirstConsumer) / 128) {
#if HPMOE_GEMM_WS == 2
    if (!Producer()) SetPipe(WsBox().pipe);  // where the previous task left it (the producer keeps its own)
#endif
  }
  __device__ bool Producer() const { return wg < 0; }
  __device__ bool Issuer() const { return threadIdx.x == 128 * kWsProducerWg; }
  __device__ uint32_t Pipe() const { return uint32_t(stage) | (phase << 8); }
  __device__ void SetPipe(uint32_t p) {
    stage = int(p & 0xff);
    phase = p >> 8;
  }
  __device__ uint32_t Staging() const { return this->smem + kEpiOffset + wg * 64 * kEpiRowBytes; }

  // Block-wide, at the start of a task: fresh barriers (the previous task drained every slot), then the
  // roles' register budgets. Followed by Produce/Consume calls in the two roles, then End().
  __device__ void Begin() {
    __syncthreads();
    if (threadIdx.x == 0) this->InitBarriers(kWsConsumerWarps);
    __syncthreads();
  }
  __device__ void End() { __syncthreads(); }

  __device__ void Advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }

  // Producer thread: K steps [k0, k1) of the tile at (m0, n0), each into the next slot once it is empty
  // (a fresh barrier counts as the end of phase -1, hence the flipped parity).
  __device__ void Produce(const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k0, int32_t k1) {
    for (int32_t k = k0; k < k1; k += kBK) {
      MbarWait(this->Empty(stage), phase ^ 1);
      this->IssueLoads(stage, a, b, m0, n0, k);
      Advance();
    }
  }

  // Consumers: the same K steps accumulated into d. With kZeroTail, a last step that ends inside the tensor
  // (the weight gradient's expert segment) has its lines past k1 zeroed first.
  template <bool kZeroTail>
  __device__ void Consume(int32_t k0, int32_t k1) {
    ConsumeWith<kZeroTail>(k0, k1, [](uint32_t empty) { MbarArrive(empty); });
  }
  // The same, with release(empty barrier) run by one lane per warp once the warp's reads of a slot are done.
  template <bool kZeroTail, class Release>
  __device__ void ConsumeWith(int32_t k0, int32_t k1, Release&& release) {
    int prev = -1;
    for (int32_t k = k0; k < k1; k += kBK) {
      MbarWait(this->Full(stage), phase);
      if constexpr (kZeroTail)
        if (k1 - k < kBK) ZeroKTail(stage, k1 - k);
      this->IssueStageRows(stage, wg);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // the previous step's group is done
      if (prev >= 0 && threadIdx.x % 32 == 0) release(this->Empty(prev));
      prev = stage;
      Advance();
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (prev >= 0 && threadIdx.x % 32 == 0) release(this->Empty(prev));
  }

  // Consumers: lines [valid, kBK) of slot s zeroed by the 256 consumer threads, both warpgroups done before
  // either reads the slot.
  __device__ void ZeroKTail(int s, int valid) {
    this->ZeroKTailChunks(s, valid, int(threadIdx.x) - kWsFirstConsumer, 256);
    NamedBarrier<kBarConsumers, 256>();
  }

  // Consumers: 16-bit output of this warpgroup's 64 rows through its staging buffer, as 16-byte row vectors
  // (the 256-thread tile's WriteStaged, per warpgroup and per 128-column half, so it needs no block barrier).
  __device__ void WriteStaged(T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid) {
    const int tid = threadIdx.x % 128, lane = threadIdx.x % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const uint32_t buf = Staging();
    const bool rows_aligned = (reinterpret_cast<uintptr_t>(c) & 15) == 0 && (ldc & 7) == 0;
    const int64_t row0 = m0 + 64 * wg;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t nh = n0 + 128 * half;
      if (nh < n_valid && row0 < m_valid) {  // uniform in the warpgroup
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {
          const int j = 16 * half + jj;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = 16 * warp + g + 8 * h;
            const uint32_t lo = Bits16(FromF<T>(this->d[4 * j + 2 * h])), hi = Bits16(FromF<T>(this->d[4 * j + 2 * h + 1]));
            asm volatile("st.shared.u32 [%0], %1;" ::"r"(buf + row * kEpiRowBytes + ((jj ^ (row % 8)) * 16) + 4 * t),
                         "r"(lo | (hi << 16))
                         : "memory");
          }
        }
        ConsumerWarpgroupSync(wg);
        for (int i = tid; i < 64 * 16; i += 128) {
          const int row = i / 16, v = i % 16;
          const int64_t m = row0 + row, n = nh + 8 * v;
          if (m >= m_valid || n >= n_valid) continue;
          const uint32_t src = buf + row * kEpiRowBytes + ((v ^ (row % 8)) * 16);
          if (rows_aligned && n + 8 <= n_valid) {
            StoreGlobal16(c + m * ldc + n, LoadShared16(src));
          } else {  // a ragged or unaligned edge
            StoreEdge(c + m * ldc + n, src, int(n_valid - n));
          }
        }
        ConsumerWarpgroupSync(wg);  // the buffer is read before the next half overwrites it
      }
    }
  }

  // Consumers: any output straight from the accumulators (fp32 weight gradients).
  template <class OutT, class Store>
  __device__ void Write(OutT* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid,
                        Store&& store) {
    this->WriteRows(c, ldc, m0, n0, m_valid, n_valid, store, wg);
  }
};

#if HPMOE_GEMM_WS == 2
// Thread 0, before the block's last __syncthreads of the launch: the barriers (`empty_arrivals` warps free a
// slot: this block's consumer warps, or both blocks' for tiles paired across a cluster) and the pipeline at its
// start. They live for the launch.
template <class T>
__device__ __forceinline__ void WsInitPipeline(uint8_t* shared, uint32_t empty_arrivals = kWsConsumerWarps) {
  BlockGemmTma<T, false, false>(shared).InitBarriers(empty_arrivals);
  WsBox().pipe = 0;
}

// Workers, all 256: post a job once the producer is done with the previous one. k_rows: `segments` pairs (the
// weight gradient's), copied into the mailbox, since the task's own array is rewritten by the next task.
__device__ __forceinline__ void WsPost(uint32_t kind, const void* task, const uint64_t* k_rows = nullptr,
                                       int segments = 0) {
  NamedBarrier<kBarWsIdle, kThreads>();
  WsMailbox& box = WsBox();
  if (threadIdx.x == 0) {
    box.kind = kind;
    box.task = task;
  }
  if (int(threadIdx.x) < 2 * segments) box.k_rows[threadIdx.x] = k_rows[threadIdx.x];
  NamedBarrierArrive<kBarWsPosted, kThreads>();
}

// The producer warpgroup, for the whole launch: run(kind, task, pipe) walks each posted job's tiles, issuing
// their loads, and returns the pipeline position after them. Ends at kWsJobExit.
template <class Run>
__device__ void WsProducerLoop(Run&& run) {
  uint32_t pipe = 0;
  NamedBarrierArrive<kBarWsIdle, kThreads>();
  for (;;) {
    NamedBarrier<kBarWsPosted, kThreads>();
    const WsMailbox& box = WsBox();
    const uint32_t kind = box.kind;
    if (kind == kWsJobExit) return;
    if (kind != kWsJobNone) pipe = run(kind, box.task, pipe);
    NamedBarrierArrive<kBarWsIdle, kThreads>();
  }
}
#endif

// Runs a GMM task in the two roles, each walking the task's tiles in the same fixed order and returning the
// walk's status (the same in both). WS=1: producer() in warpgroup 0, consumer() in the others; the two paths
// stay apart from setmaxnreg to setmaxnreg, since ptxas allocates each within its own register budget. WS=2:
// only the workers come here; they post the job (the producer runs its walk in WsProducerLoop), run consumer()
// and leave the pipeline position for the next task.
template <class Gemm, class Producer, class Consumer>
__device__ int32_t RunWarpSpecialised(Gemm& g, uint32_t kind, const void* task, Producer&& producer,
                                      Consumer&& consumer, const uint64_t* k_rows = nullptr, int segments = 0) {
#if HPMOE_GEMM_WS == 2
  (void)producer;
  WsPost(kind, task, k_rows, segments);
  const int32_t err = consumer();
  if (threadIdx.x == 0) WsBox().pipe = g.Pipe();  // every worker read it when it built g, before the post
  return err;
#else
  (void)kind, (void)task, (void)k_rows, (void)segments;
  g.Begin();
  int32_t err;
  if (g.Producer()) {
    SetMaxRegsDec<kWsProducerRegs>();
    err = producer();
    // Sleep until the consumers have given their registers back: setmaxnreg.inc retries in a loop that took
    // issue slots from the consumers (17% of all stall samples, ncu source counters, DeepSeek-V3 4096 fwd).
    NamedBarrier<kBarRegsBack, kThreads>();
    SetMaxRegsInc<kWsBaseRegs>();
  } else {
    SetMaxRegsInc<kWsConsumerRegs>();
    err = consumer();
    SetMaxRegsDec<kWsBaseRegs>();
    NamedBarrierArrive<kBarRegsBack, kThreads>();
  }
  g.End();
  return err;
#endif
}

}  // namespace cuda
}  // namespace hpmoe
