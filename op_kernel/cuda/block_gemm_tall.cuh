// The tall GMM tile: 256 x 192 outputs a block (docs/cuda.md, "Fewer L2 bytes a FLOP without a partner block"),
// in the roles of HPMOE_GEMM_WS=2: warpgroup 2 produces (one thread issues every K step's TMA boxes), warpgroups
// 0-1 consume, each owning 128 rows as two 64-row slabs of m64n192k16, 192 fp32 accumulators a thread.
// - Why: a 64-deep K step brings 32 KB of A and 24 KB of B for 49152 outputs, 8.9 KB a MFLOP against the
//   128 x 256 tile's 11.4 (-22% operand bytes through L2). In a training loop at the 700 W cap the clock follows
//   those bytes (session 30), so the same math should run at a higher clock.
// - The price: 56 KB a stage (four stages take 224 of the 227 KB), so there is no staging buffer: the epilogue
//   stages in the tile's last slot, held back from the producer until the rows are out; and the consumers need
//   232 registers (setmaxnreg.inc, the producer at 40), of which 192 accumulators leave about 37 for the rest.
// - A is K-major (row-major activations, the GMM and GMM_TRANS_B tasks); B either order. Same K order and the
//   same k16 wgmma steps per output as the 128 x 256 tile.
// Checked alone by tests/cuda/tall_tile_check.cu; the op's GMM tasks run it under HPMOE_GEMM_TALL=1
// (handlers_gemm.cuh), where its barriers are the pipeline's (kBarrierBase, the same offset as here).
#pragma once

#include "block_gemm_ws.cuh"

namespace hpmoe {
namespace cuda {

constexpr int kTallBM = 256, kTallBN = 192;
constexpr int kTallATileBytes = kTallBM * kBK * 2, kTallBTileBytes = kTallBN * kBK * 2;  // 32 KB + 24 KB
constexpr int kTallStageBytes = kTallATileBytes + kTallBTileBytes;
// Stages, then a full and an empty mbarrier a stage, then the slack that aligns the base to 1 KB.
constexpr uint32_t kTallSmemBytes = kStages * kTallStageBytes + 128 + 1024;
static_assert(kTallSmemBytes <= 227 * 1024, "an H100/H200 block's shared memory");
static_assert(kTallBN % 64 == 0 && kTallBN <= 256, "an MN-major B step is whole 64-column boxes");

template <class T, bool kBColMajor>
struct BlockGemmTall {
  static constexpr int kTransB = kBColMajor ? 0 : 1;  // row-major B (N contiguous) is MN-major
  static constexpr int kAccum = kTallBN / 2;          // accumulators of one m64 slab
  static constexpr int kTileM = kTallBM, kTileN = kTallBN;
  uint32_t smem;                                      // shared-space address, 1 KB aligned
  const int wg;                                       // consumer warpgroup 0 or 1; -1 in the producer
  int stage = 0;                                      // the pipeline position, advanced alike by both roles
  uint32_t phase = 0;
  int held = -1;  // the slot Consume kept for the epilogue's staging (-1: none, an empty K range)
#if HPMOE_TALL_CHECK_SKEW
  // tall_tile_check only: warpgroup 1 waits this long before its last K step, so that warpgroup 0 reaches the
  // epilogue while the other still reads the slot it stages in.
  uint32_t skew_last_ns = 0;
#endif
  float d[2 * kAccum];

  __device__ explicit BlockGemmTall(uint8_t* shared)
      : wg(int(threadIdx.x / 128) == kWsProducerWg ? -1 : int(threadIdx.x / 128)) {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
    smem = (s + 1023) & ~1023u;
#if HPMOE_GEMM_TALL
    if (!Producer()) SetPipe(WsBox().pipe);  // where the previous task left it, as BlockGemmWs (WS=2) does
#endif
  }
  __device__ bool Producer() const { return wg < 0; }
  // The pipeline position as BlockGemmWs keeps it, so that under HPMOE_GEMM_TALL both tiles continue one pipeline
  // over the same barriers (block_gemm_tma.cuh's kBarrierBase) from task to task.
  __device__ uint32_t Pipe() const { return uint32_t(stage) | (phase << 8); }
  __device__ void SetPipe(uint32_t p) {
    stage = int(p & 0xff);
    phase = p >> 8;
  }
  __device__ bool Issuer() const { return threadIdx.x == 128 * kWsProducerWg; }
  __device__ uint32_t Full(int s) const { return smem + kStages * kTallStageBytes + 8 * s; }
  static_assert(!HPMOE_GEMM_TALL || kBarrierBase == kStages * kTallStageBytes, "one set of pipeline barriers");
  __device__ uint32_t Empty(int s) const { return Full(s) + 8 * kStages; }

  // Thread 0, before a block barrier: every slot's full barrier (one arrival a phase) and empty barrier (the
  // eight consumer warps).
  __device__ void InitBarriers() {
    for (int s = 0; s < kStages; ++s) {
      MbarInit(Full(s), 1);
      MbarInit(Empty(s), kWsConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __device__ void Advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  __device__ void Zero() {
#pragma unroll
    for (int i = 0; i < 2 * kAccum; ++i) d[i] = 0.0f;
  }

  // Issuer: one K step's boxes into slot s, from the maps the runtime builds (tensor_map_kinds.h). A: two
  // 128-line boxes (rows of 64 K) of a.map. B K-major: a 128-line box of b.map and a 64-line box of b.half_map;
  // MN-major: kTallBN / 64 boxes of 64 columns x 64 K lines of b.map. The 128-byte swizzle repeats every 8
  // lines, so boxes stacked at 128-line offsets land as one taller box would. Out-of-range lines arrive as zeros.
  __device__ void IssueLoads(int s, const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k) {
    static_assert(kTallBM == 256 && kTallBN == 192, "the box composition below");
    const uint32_t sa = smem + s * kTallStageBytes, sb = sa + kTallATileBytes, bar = Full(s);
    MbarExpectTx(bar, kTallStageBytes);
    TmaLoad(sa, a.map, bar, a.c0 + k, a.r0 + m0, a.z);
    TmaLoad(sa + 128 * 128, a.map, bar, a.c0 + k, a.r0 + m0 + 128, a.z);
    if (kBColMajor) {
      TmaLoad(sb, b.map, bar, b.c0 + k, b.r0 + n0, b.z);
      TmaLoad(sb + 128 * 128, b.half_map, bar, b.c0 + k, b.r0 + n0 + 128, b.z);
    } else {
#pragma unroll
      for (int j = 0; j < kTallBN / 64; ++j) TmaLoad(sb + j * kBK * 128, b.map, bar, b.c0 + n0 + 64 * j, b.r0 + k, b.z);
    }
  }
  // Issuer: K steps [k0, k1) of the tile at (m0, n0), each into the next slot once it is empty (a fresh
  // barrier counts as the end of phase -1, hence the flipped parity).
  __device__ void Produce(const TmaOperand& a, const TmaOperand& b, int32_t m0, int32_t n0, int32_t k0, int32_t k1) {
    for (int32_t k = k0; k < k1; k += kBK) {
      MbarWait(Empty(stage), phase ^ 1);
      IssueLoads(stage, a, b, m0, n0, k);
      Advance();
    }
  }
  // Consumers: the same K steps accumulated into d, one wgmma group in flight; a slot is freed once the group
  // that read it is done, but the last one: WriteStaged stages the tile's rows in it, then frees it (so the
  // producer fills three slots of the next tile during the epilogue, not four).
  template <bool kZeroTail = false>
  __device__ void Consume(int32_t k0, int32_t k1) {
    static_assert(!kZeroTail, "K-major A: no K tail to zero (the weight gradient keeps the 128 x 256 tile)");
    int prev = -1;
    for (int32_t k = k0; k < k1; k += kBK) {
      MbarWait(Full(stage), phase);
#if HPMOE_TALL_CHECK_SKEW
      if (wg == 1 && k + kBK >= k1 && skew_last_ns > 0) {
        for (const uint64_t until = GlobalTimerNs() + skew_last_ns; GlobalTimerNs() < until;) {
        }
      }
#endif
      IssueStage(stage);
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // the previous step's group is done
      if (prev >= 0 && threadIdx.x % 32 == 0) MbarArrive(Empty(prev));
      prev = stage;
      Advance();
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    held = prev;
  }
  // The four k16 steps of slot s for both slabs of this warpgroup, as one group; the slabs alternate so that
  // consecutive wgmmas write different accumulators. K-major A: 8-line groups 1 KB apart, K advancing 32 bytes
  // inside the line. B as block_gemm_wgmma.cuh reads it.
  __device__ void IssueStage(int s) {
    const uint32_t sa = smem + s * kTallStageBytes + wg * 128 * 128, sb = smem + s * kTallStageBytes + kTallATileBytes;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      const uint64_t db = kBColMajor ? Desc(sb + kk * 2, 16, 1024) : Desc(sb + kk * 128, kMnLbo, kMnSbo);
      Mma<0>(Desc(sa + kk * 2, 16, 1024), db);
      Mma<kAccum>(Desc(sa + 64 * 128 + kk * 2, 16, 1024), db);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }

  // Consumers: 16-bit outputs through the slot Consume held, then that slot freed. Each warpgroup stages one
  // 64-row slab at a time in its half of the slot (rows kTallRowBytes apart: the padding puts a warp's eight
  // rows of 4-byte writes in distinct banks) and its 128 threads send the slab's rows as 16-byte vectors, whole
  // rows contiguous. The accumulators stored straight as 16-byte vectors (Write) ran the K loops' 702 TFLOP/s
  // down to 645 at the power cap (-8%), where the 128 x 256 tile's staged epilogue costs it 4% (session 37).
  static constexpr uint32_t kTallRowBytes = kTallBN * 2 + 16;
  static_assert(2 * 64 * kTallRowBytes <= kTallStageBytes, "both warpgroups' slabs fit one slot");
  __device__ void WriteStaged(T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid) {
    if (held < 0) return Write(c, ldc, m0, n0, m_valid, n_valid);  // no slot was read: K was empty
    constexpr int kVecs = kTallBN / 8, kChunks = 64 * kVecs / 128;  // 16-byte vectors a row; a thread's share
    const int tid = threadIdx.x % 128, lane = threadIdx.x % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const uint32_t buf = smem + held * kTallStageBytes + wg * 64 * kTallRowBytes;
    const bool vectors = (reinterpret_cast<uintptr_t>(c) & 15) == 0 && (ldc & 7) == 0;  // 16-byte row starts
    // Both warpgroups' last wgmmas have read the slot before either stages over it: warpgroup 0's slab covers
    // warpgroup 1's A rows. (Without this, rows 128..255 came out wrong in the op, where the warpgroups drift
    // apart, and right in the standalone check, where they did not.)
    NamedBarrier<kBarConsumers, 256>();
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) {
      const int64_t row0 = m0 + 128 * wg + 64 * slab;
      if (row0 >= m_valid) break;  // uniform in the warpgroup
#pragma unroll
      for (int j = 0; j < kVecs; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float* v = d + kAccum * slab + 4 * j + 2 * h;
          const uint32_t row = 16 * warp + g + 8 * h;
          asm volatile("st.shared.u32 [%0], %1;" ::"r"(buf + row * kTallRowBytes + 16 * j + 4 * t),
                       "r"(Bits16(FromF<T>(v[0])) | (Bits16(FromF<T>(v[1])) << 16))
                       : "memory");
        }
      ConsumerWarpgroupSync(wg);
      if (vectors && row0 + 64 <= m_valid && n0 + kTallBN <= n_valid) {  // a whole slab: loads, then stores
        uint4 vec[kChunks];
#pragma unroll
        for (int u = 0; u < kChunks; ++u) {
          const int i = tid + 128 * u;
          vec[u] = LoadShared16(buf + (i / kVecs) * kTallRowBytes + 16 * (i % kVecs));
        }
#pragma unroll
        for (int u = 0; u < kChunks; ++u) {
          const int i = tid + 128 * u;
          StoreGlobal16(c + (row0 + i / kVecs) * ldc + n0 + 8 * (i % kVecs), vec[u]);
        }
      } else {
        for (int i = tid; i < 64 * kVecs; i += 128) {
          const int64_t m = row0 + i / kVecs, n = n0 + 8 * (i % kVecs);
          if (m >= m_valid || n >= n_valid) continue;
          const uint32_t src = buf + (i / kVecs) * kTallRowBytes + 16 * (i % kVecs);
          if (vectors && n + 8 <= n_valid) StoreGlobal16(c + m * ldc + n, LoadShared16(src));
          else StoreEdge(c + m * ldc + n, src, int(n_valid - n));
        }
      }
      ConsumerWarpgroupSync(wg);  // the slab is read before the next one overwrites it
    }
    ReleaseHeld();
  }
  // Consumers: the held slot back to the producer (after WriteStaged's staging, or where the tile was written
  // another way), its generic accesses ordered before the producer's next TMA write into it.
  __device__ void ReleaseHeld() {
    if (held < 0) return;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncwarp();
    if (threadIdx.x % 32 == 0) MbarArrive(Empty(held));
    held = -1;
  }

  // Consumers: 16-bit outputs straight from the accumulators, as 16-byte row vectors: WriteStaged's way out
  // where no slot is held (an empty K range); the caller frees a held slot (ReleaseHeld). In the m64nNk16
  // layout warp w holds rows 16w + lane/4 (+8) and lane t = lane % 4 of a quad columns 8j + 2t, +1 of each n8
  // block j; a 4 x 4 transpose of 4-byte pairs inside the quad (three shuffles) gives lane t all eight columns
  // of block 4q + t, so each quad writes 64 contiguous bytes of a row.
  __device__ void Write(T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4, t = lane % 4;
    const bool vectors = (reinterpret_cast<uintptr_t>(c) & 15) == 0 && (ldc & 7) == 0;  // 16-byte row starts
    // Rounded to T first, two to a register: half the accumulators' registers are free for the stores' address
    // arithmetic, which otherwise went through local memory (258 LDL a tile in the SASS).
    uint32_t packed[kAccum];  // [slab][n8 block][row half]
#pragma unroll
    for (int i = 0; i < kAccum; ++i) packed[i] = Bits16(FromF<T>(d[2 * i])) | (Bits16(FromF<T>(d[2 * i + 1])) << 16);
#pragma unroll
    for (int slab = 0; slab < 2; ++slab) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t m = m0 + 128 * wg + 64 * slab + 16 * warp + g + 8 * h;
#pragma unroll
        for (int q = 0; q < kTallBN / 32; ++q) {
          uint32_t pairs[4], row[4];  // this lane's pairs of blocks 4q..4q+3; then block 4q + t's four pairs
#pragma unroll
          for (int i = 0; i < 4; ++i) pairs[i] = packed[kAccum / 2 * slab + 2 * (4 * q + i) + h];
#pragma unroll
          for (int r = 0; r < 4; ++r) {  // from lane (t + r) % 4 of the quad, its pair of block 4q + t
            const uint32_t sent = Pick4(pairs, (t - r) & 3);
            const int from = (t + r) & 3;
            const uint32_t got = __shfl_sync(0xffffffffu, sent, (lane & ~3) | from);
#pragma unroll
            for (int k = 0; k < 4; ++k) row[k] = k == from ? got : row[k];
          }
          const int64_t n = n0 + 8 * (4 * q + t);
          if (m >= m_valid || n >= n_valid) continue;
          T* out = c + m * ldc + n;
          if (vectors && n + 8 <= n_valid) {
            StoreGlobal16(out, make_uint4(row[0], row[1], row[2], row[3]));
          } else {  // a ragged or unaligned edge, element by element
#pragma unroll
            for (int e = 0; e < 8; ++e)  // unrolled: row[] indexed by a constant stays in registers
              if (n + e < n_valid) reinterpret_cast<uint16_t*>(out)[e] = uint16_t(row[e / 2] >> (16 * (e % 2)));
          }
        }
      }
    }
  }
  // v[i] for a runtime i without indexing registers (which would put v in local memory).
  static __device__ __forceinline__ uint32_t Pick4(const uint32_t (&v)[4], int i) {
    return i == 0 ? v[0] : i == 1 ? v[1] : i == 2 ? v[2] : v[3];
  }

  // One m64n192k16 into the slab whose accumulators start at d[kOff].
  template <int kOff>
  __device__ __forceinline__ void Mma(uint64_t desc_a, uint64_t desc_b) {
    if constexpr (__is_same(T, __nv_bfloat16)) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, %96, %97, p, 1, 1, 0, %99;\n}\n"
        : "+f"(d[kOff + 0]), "+f"(d[kOff + 1]), "+f"(d[kOff + 2]), "+f"(d[kOff + 3]), "+f"(d[kOff + 4]), "+f"(d[kOff + 5]), "+f"(d[kOff + 6]), "+f"(d[kOff + 7]), "+f"(d[kOff + 8]), "+f"(d[kOff + 9]), "+f"(d[kOff + 10]), "+f"(d[kOff + 11]), "+f"(d[kOff + 12]), "+f"(d[kOff + 13]), "+f"(d[kOff + 14]), "+f"(d[kOff + 15]), "+f"(d[kOff + 16]), "+f"(d[kOff + 17]), "+f"(d[kOff + 18]), "+f"(d[kOff + 19]), "+f"(d[kOff + 20]), "+f"(d[kOff + 21]), "+f"(d[kOff + 22]), "+f"(d[kOff + 23]), "+f"(d[kOff + 24]), "+f"(d[kOff + 25]), "+f"(d[kOff + 26]), "+f"(d[kOff + 27]), "+f"(d[kOff + 28]), "+f"(d[kOff + 29]), "+f"(d[kOff + 30]), "+f"(d[kOff + 31]), "+f"(d[kOff + 32]), "+f"(d[kOff + 33]), "+f"(d[kOff + 34]), "+f"(d[kOff + 35]), "+f"(d[kOff + 36]), "+f"(d[kOff + 37]), "+f"(d[kOff + 38]), "+f"(d[kOff + 39]), "+f"(d[kOff + 40]), "+f"(d[kOff + 41]), "+f"(d[kOff + 42]), "+f"(d[kOff + 43]), "+f"(d[kOff + 44]), "+f"(d[kOff + 45]), "+f"(d[kOff + 46]), "+f"(d[kOff + 47]), "+f"(d[kOff + 48]), "+f"(d[kOff + 49]), "+f"(d[kOff + 50]), "+f"(d[kOff + 51]), "+f"(d[kOff + 52]), "+f"(d[kOff + 53]), "+f"(d[kOff + 54]), "+f"(d[kOff + 55]), "+f"(d[kOff + 56]), "+f"(d[kOff + 57]), "+f"(d[kOff + 58]), "+f"(d[kOff + 59]), "+f"(d[kOff + 60]), "+f"(d[kOff + 61]), "+f"(d[kOff + 62]), "+f"(d[kOff + 63]), "+f"(d[kOff + 64]), "+f"(d[kOff + 65]), "+f"(d[kOff + 66]), "+f"(d[kOff + 67]), "+f"(d[kOff + 68]), "+f"(d[kOff + 69]), "+f"(d[kOff + 70]), "+f"(d[kOff + 71]), "+f"(d[kOff + 72]), "+f"(d[kOff + 73]), "+f"(d[kOff + 74]), "+f"(d[kOff + 75]), "+f"(d[kOff + 76]), "+f"(d[kOff + 77]), "+f"(d[kOff + 78]), "+f"(d[kOff + 79]), "+f"(d[kOff + 80]), "+f"(d[kOff + 81]), "+f"(d[kOff + 82]), "+f"(d[kOff + 83]), "+f"(d[kOff + 84]), "+f"(d[kOff + 85]), "+f"(d[kOff + 86]), "+f"(d[kOff + 87]), "+f"(d[kOff + 88]), "+f"(d[kOff + 89]), "+f"(d[kOff + 90]), "+f"(d[kOff + 91]), "+f"(d[kOff + 92]), "+f"(d[kOff + 93]), "+f"(d[kOff + 94]), "+f"(d[kOff + 95])
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
    } else {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}, %96, %97, p, 1, 1, 0, %99;\n}\n"
        : "+f"(d[kOff + 0]), "+f"(d[kOff + 1]), "+f"(d[kOff + 2]), "+f"(d[kOff + 3]), "+f"(d[kOff + 4]), "+f"(d[kOff + 5]), "+f"(d[kOff + 6]), "+f"(d[kOff + 7]), "+f"(d[kOff + 8]), "+f"(d[kOff + 9]), "+f"(d[kOff + 10]), "+f"(d[kOff + 11]), "+f"(d[kOff + 12]), "+f"(d[kOff + 13]), "+f"(d[kOff + 14]), "+f"(d[kOff + 15]), "+f"(d[kOff + 16]), "+f"(d[kOff + 17]), "+f"(d[kOff + 18]), "+f"(d[kOff + 19]), "+f"(d[kOff + 20]), "+f"(d[kOff + 21]), "+f"(d[kOff + 22]), "+f"(d[kOff + 23]), "+f"(d[kOff + 24]), "+f"(d[kOff + 25]), "+f"(d[kOff + 26]), "+f"(d[kOff + 27]), "+f"(d[kOff + 28]), "+f"(d[kOff + 29]), "+f"(d[kOff + 30]), "+f"(d[kOff + 31]), "+f"(d[kOff + 32]), "+f"(d[kOff + 33]), "+f"(d[kOff + 34]), "+f"(d[kOff + 35]), "+f"(d[kOff + 36]), "+f"(d[kOff + 37]), "+f"(d[kOff + 38]), "+f"(d[kOff + 39]), "+f"(d[kOff + 40]), "+f"(d[kOff + 41]), "+f"(d[kOff + 42]), "+f"(d[kOff + 43]), "+f"(d[kOff + 44]), "+f"(d[kOff + 45]), "+f"(d[kOff + 46]), "+f"(d[kOff + 47]), "+f"(d[kOff + 48]), "+f"(d[kOff + 49]), "+f"(d[kOff + 50]), "+f"(d[kOff + 51]), "+f"(d[kOff + 52]), "+f"(d[kOff + 53]), "+f"(d[kOff + 54]), "+f"(d[kOff + 55]), "+f"(d[kOff + 56]), "+f"(d[kOff + 57]), "+f"(d[kOff + 58]), "+f"(d[kOff + 59]), "+f"(d[kOff + 60]), "+f"(d[kOff + 61]), "+f"(d[kOff + 62]), "+f"(d[kOff + 63]), "+f"(d[kOff + 64]), "+f"(d[kOff + 65]), "+f"(d[kOff + 66]), "+f"(d[kOff + 67]), "+f"(d[kOff + 68]), "+f"(d[kOff + 69]), "+f"(d[kOff + 70]), "+f"(d[kOff + 71]), "+f"(d[kOff + 72]), "+f"(d[kOff + 73]), "+f"(d[kOff + 74]), "+f"(d[kOff + 75]), "+f"(d[kOff + 76]), "+f"(d[kOff + 77]), "+f"(d[kOff + 78]), "+f"(d[kOff + 79]), "+f"(d[kOff + 80]), "+f"(d[kOff + 81]), "+f"(d[kOff + 82]), "+f"(d[kOff + 83]), "+f"(d[kOff + 84]), "+f"(d[kOff + 85]), "+f"(d[kOff + 86]), "+f"(d[kOff + 87]), "+f"(d[kOff + 88]), "+f"(d[kOff + 89]), "+f"(d[kOff + 90]), "+f"(d[kOff + 91]), "+f"(d[kOff + 92]), "+f"(d[kOff + 93]), "+f"(d[kOff + 94]), "+f"(d[kOff + 95])
        : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransB));
    }
  }
};

}  // namespace cuda
}  // namespace hpmoe
