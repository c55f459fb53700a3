// The wgmma GMM tile fed by cp.async (build with -DHPMOE_GEMM_TMA=0; block_gemm_tma.cuh reuses its stage
// layouts, wgmma issue and epilogue): 128 x 256, K in 64-deep steps, zero-filled edges, fixed order, multiplied with wgmma.mma_async
// m64n256k16 (each of the two warpgroups owns 64 rows) reading both operands from shared memory through
// matrix descriptors. Tiles are staged by cp.async into the 128-byte-swizzled canonical layouts: K-major
// (rows of 64 K-elements) for row-major A and column-major B, MN-major (rows of 64 M/N-elements, one K
// per row) for column-major A and row-major B, so no operand is transposed in software.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "dtype.cuh"
#include "tile_profile.cuh"
#include "worker_threads.cuh"

namespace hpmoe {
namespace cuda {

#ifndef HPMOE_WGMMA_OVERLAP
#define HPMOE_WGMMA_OVERLAP 0  // 1: keep step kt's wgmma group in flight (more registers; measured no faster)
#endif

constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
static_assert(kStages >= 3, "the pipeline keeps one wgmma group and kStages - 2 loads in flight");
constexpr int kATileBytes = kBM * kBK * 2, kBTileBytes = kBN * kBK * 2;  // 16 KB + 32 KB
constexpr int kStageBytes = kATileBytes + kBTileBytes;
#if HPMOE_WGMMA_MN_SWAP  // diagnostic build: the other reading of the MN-major offsets
constexpr uint32_t kMnLbo = 1024, kMnSbo = kBK * 128;
#else
constexpr uint32_t kMnLbo = kBK * 128, kMnSbo = 1024;
#endif
constexpr uint32_t kGemmSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack (atoms are 1 KB aligned)

__device__ __forceinline__ uint32_t Bits16(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
__device__ __forceinline__ uint32_t Bits16(__half v) { return __half_as_ushort(v); }
__device__ __forceinline__ float Bits16ToF(uint16_t b, __nv_bfloat16) {
  return __bfloat162float(__ushort_as_bfloat16(b));
}
__device__ __forceinline__ float Bits16ToF(uint16_t b, __half) { return __half2float(__ushort_as_half(b)); }

// Up to 8 16-bit elements (fewer at a ragged edge) from shared memory to c, one at a time.
template <class T>
__device__ __forceinline__ void StoreEdge(T* c, uint32_t src, int count) {
  for (int q = 0; q < 8 && q < count; ++q) {
    uint16_t bits;
    asm volatile("ld.shared.u16 %0, [%1];" : "=h"(bits) : "r"(src + 2 * q));
    reinterpret_cast<uint16_t*>(c)[q] = bits;
  }
}

// kBM staged rows of kCols 16-bit columns to c at (m0, n0) as 16-byte row vectors: `chunk(row, v)` is the
// shared address of columns 8v..8v+7 of a staged row, and this thread takes every stride-th vector from tid.
// A whole tile goes as kBatch loads, then their stores, a thread (a loop with edge checks kept one load in
// flight; one H200: the weight-gradient unit alone 2-4% faster, Qwen3-235B-A22B fwd+bwd kernels 13.08/12.93 ->
// 12.81/12.63 ms, Mixtrals and DeepSeek-V3 within the spread, docs/cuda.md); a ragged or unaligned edge element
// by element (a local copy of the vector there cost every store).
template <int kCols, int kBatch = 8, class T, class Chunk>
__device__ __forceinline__ void StoreStagedRows(Chunk&& chunk, T* c, int64_t ldc, int64_t m0, int64_t n0,
                                                int64_t m_valid, int64_t n_valid, int tid, int stride) {
  constexpr int kVecs = kCols / 8, kAll = kBM * kVecs;
  const bool rows_aligned = (reinterpret_cast<uintptr_t>(c) & 15) == 0 && (ldc & 7) == 0;  // 16-byte row starts
  if (rows_aligned && m0 + kBM <= m_valid && n0 + kCols <= n_valid) {
    for (int i0 = tid; i0 < kAll; i0 += stride * kBatch) {
      uint4 v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + stride * u;
        if (i < kAll) v[u] = LoadShared16(chunk(i / kVecs, i % kVecs));
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + stride * u;
        if (i < kAll) StoreGlobal16(c + (m0 + i / kVecs) * ldc + n0 + 8 * (i % kVecs), v[u]);
      }
    }
    return;
  }
  for (int i = tid; i < kAll; i += stride) {
    const int row = i / kVecs, v = i % kVecs;
    const int64_t m = m0 + row, n = n0 + 8 * v;
    if (m >= m_valid || n >= n_valid) continue;
    if (rows_aligned && n + 8 <= n_valid) StoreGlobal16(c + m * ldc + n, LoadShared16(chunk(row, v)));
    else StoreEdge(c + m * ldc + n, chunk(row, v), int(n_valid - n));
  }
}

template <class T>
struct Stored {
  const T* base;
  int64_t ld;
  int64_t rows_valid;
  int64_t cols_valid;
};

__device__ __forceinline__ void CpAsync16(uint32_t smem, const void* gmem, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// Stored rows [r0, r0 + ROWS) x cols [c0, c0 + COLS) into a 128B-swizzled tile: 64-element (128-byte)
// lines, line L of 64-column block b at b * ROWS * 128 + L * 128, its 16-byte chunk c at (c ^ (L % 8)) * 16.
// K-major operands use it with rows = M or N and COLS = 64 (one block); MN-major with rows = K.
template <int ROWS, int COLS, class T>
__device__ __forceinline__ void LoadSwizzled(uint32_t smem, const Stored<T>& g, int64_t r0, int64_t c0) {
  constexpr int kVecPerRow = COLS / 8, kRowStep = 256 / kVecPerRow, kIters = ROWS / kRowStep;
  static_assert(256 % kVecPerRow == 0 && ROWS % kRowStep == 0 && COLS % 64 == 0, "tile shape");
  const int v = threadIdx.x % kVecPerRow, r = threadIdx.x / kVecPerRow;
  const int block = v / 8, chunk = v % 8;
  const bool col_ok = c0 + v * 8 < g.cols_valid;
  const int64_t rows_left = g.rows_valid - r0 - r;
  const T* src = g.base + (r0 + r) * g.ld + c0 + v * 8;
#pragma unroll
  for (int j = 0; j < kIters; ++j) {
    const int line = r + j * kRowStep;
    const bool valid = col_ok && j * kRowStep < rows_left;
    const uint32_t dst = smem + block * ROWS * 128 + line * 128 + ((chunk ^ (line % 8)) * 16);
    CpAsync16(dst, valid ? src + j * kRowStep * g.ld : g.base, valid);
  }
}

// Shared-memory matrix descriptor: start, leading and stride byte offsets (16-byte units), 128B swizzle.
__device__ __forceinline__ uint64_t Desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr >> 4) & 0x3FFF) | (uint64_t((lbo >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

template <class T, bool kAColMajor, bool kBColMajor>
struct BlockGemm {
  // Which tile kind a profile build counts this as (tile_profile.cuh): GMM, GMM_TRANS_B, weight gradient.
  static constexpr int kProfileKind = kAColMajor ? 2 : (kBColMajor ? 1 : 0);
  static constexpr int kTransA = kAColMajor ? 1 : 0;  // MN-major A
  static constexpr int kTransB = kBColMajor ? 0 : 1;  // row-major B (N contiguous) is MN-major
  uint32_t smem;  // shared-space address, 1 KB aligned
  float d[128];

  __device__ explicit BlockGemm(uint8_t* shared) {
    const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(shared));
    smem = (s + 1023) & ~1023u;
  }

  __device__ void Zero() {
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0.0f;
  }

  __device__ void LoadStage(int s, const Stored<T>& a, const Stored<T>& b, int64_t m0, int64_t n0, int64_t k) {
    const uint32_t sa = smem + s * kStageBytes, sb = sa + kATileBytes;
    if (kAColMajor) LoadSwizzled<kBK, kBM>(sa, a, k, m0);   // lines = K rows, 2 blocks of 64 M
    else LoadSwizzled<kBM, kBK>(sa, a, m0, k);              // lines = M rows of 64 K
    if (kBColMajor) LoadSwizzled<kBN, kBK>(sb, b, n0, k);   // lines = N rows of 64 K
    else LoadSwizzled<kBK, kBN>(sb, b, k, n0);              // lines = K rows, 4 blocks of 64 N
  }

  __device__ __forceinline__ void Mma(uint64_t desc_a, uint64_t desc_b) {
    if constexpr (sizeof(T) == 2 && __is_same(T, __nv_bfloat16)) {
    asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
            "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, %131, %132;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
            : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
    } else {
    asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 "
            "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, 1, 1, %131, %132;\n}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
            : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB));
    }
  }

  // Issues the four k16 wgmmas of stage s as one group for the rows of warpgroup wg (64 each); the caller
  // decides when to wait for it.
  __device__ void IssueStage(int s) { IssueStageRows(s, threadIdx.x / 128); }
  __device__ void IssueStageRows(int s, int wg) { IssueStageRowsK<kBK / 16>(s, wg); }
  // A K tail of `valid` lines (MN-major operands): only the k16 groups that hold them. The lines past them are
  // never read, so only the last group's own lines past `valid` need zeros (KTailZeroEnd). Each count is its
  // own unrolled group: wgmma behind a runtime bound inside one group would not stay one straight sequence.
  __device__ void IssueStageTail(int s, int valid) {
    const int wg = threadIdx.x / 128;
    switch ((valid + 15) / 16) {
      case 1: IssueStageRowsK<1>(s, wg); break;
      case 2: IssueStageRowsK<2>(s, wg); break;
      case 3: IssueStageRowsK<3>(s, wg); break;
      default: IssueStageRowsK<kBK / 16>(s, wg);
    }
  }
  template <int kGroups>
  __device__ void IssueStageRowsK(int s, int wg) {
    const uint32_t sa = smem + s * kStageBytes, sb = sa + kATileBytes;
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < kGroups * 16; kk += 16) {
      // K-major: 8-line groups 1 KB apart (SBO), K advances 32 bytes inside the line.
      // MN-major: 64-wide M/N blocks ROWS*128 bytes apart (LBO), 8-K-line groups 1 KB apart (SBO), K advances
      // 16 lines.
      const uint64_t da = kAColMajor ? Desc(sa + wg * kBK * 128 + kk * 128, kMnLbo, kMnSbo)
                                     : Desc(sa + wg * 64 * 128 + kk * 2, 16, 1024);
      const uint64_t db = kBColMajor ? Desc(sb + kk * 2, 16, 1024) : Desc(sb + kk * 128, kMnLbo, kMnSbo);
      Mma(da, db);
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  }

  // Pipeline: loads run kStages - 2 steps ahead; the wgmma group of step kt stays in flight while step
  // kt + 1 is waited for and loaded. A slot is refilled only after the barrier that follows every warpgroup's
  // wait for the wgmmas that read it (both warpgroups read the whole B tile).
  __device__ void Accumulate(const Stored<T>& a, const Stored<T>& b, int64_t m0, int64_t n0, int64_t k0,
                             int64_t k1) {
    const int nk = int((k1 - k0 + kBK - 1) / kBK);
    WorkerSync();
    for (int s = 0; s < kStages - 2; ++s) {
      if (s < nk) LoadStage(s, a, b, m0, n0, k0 + int64_t(s) * kBK);
      CpAsyncCommit();
    }
    for (int kt = 0; kt < nk; ++kt) {
      CpAsyncWait<kStages - 3>();
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // cp.async data -> wgmma's async proxy
      WorkerSync();
      const int next = kt + kStages - 2;
      if (next < nk) LoadStage(next % kStages, a, b, m0, n0, k0 + int64_t(next) * kBK);
      CpAsyncCommit();
      IssueStage(kt % kStages);
      asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(HPMOE_WGMMA_OVERLAP ? 1 : 0) : "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    CpAsyncWait<0>();
  }

  // Accumulator layout of m64nNk16: warp w of a warpgroup holds rows 16w + lane/4 (+8); n8 block j holds
  // columns 8j + 2*(lane%4), +1 in d[4j..4j+3].
  template <class OutT, class Store>
  __device__ void Write(OutT* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid,
                        Store&& store) {
    WriteRows(c, ldc, m0, n0, m_valid, n_valid, store, threadIdx.x / 128);
  }
  template <class OutT, class Store>
  __device__ void WriteRows(OutT* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid,
                            Store&& store, int wg) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int64_t n = n0 + 8 * j + 2 * t;
      if (n >= n_valid) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t m = m0 + 64 * wg + 16 * warp + g + 8 * h;
        if (m < m_valid) store(c + m * ldc + n, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      }
    }
  }

  // The same epilogue for 16-bit outputs, staged through shared memory so that global stores are whole
  // 16-byte vectors along each row (the register layout gives each thread 4-byte pieces of eight rows).
  // Block-wide; the stage slots must be idle (after Accumulate). Rows are padded by 16 bytes so that the
  // staging writes of a warp (eight rows, four pieces each) fall in distinct banks.
  static constexpr uint32_t kRowBytes = kBN * 2 + 16;
  static_assert(kBM * kRowBytes <= kStages * kStageBytes, "the staged tile fits the stage slots");
  __device__ void WriteStaged(T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid) {
    WriteStagedBy([&] { StoreStaged(smem, c, ldc, m0, n0, m_valid, n_valid); });
  }
  // The staged epilogue with `out()` taking the staged tile from shared memory (StoreStaged, or AddStagedRows
  // for a gradient buffer): one staging and one pair of barriers, whichever way the tile leaves.
  template <class Out>
  __device__ void WriteStagedBy(Out&& out) {
    const uint64_t t0 = ProfileClock();
    Stage(smem);
    WorkerSync();
    const uint64_t t1 = ProfileClock();
    out();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // before the copy engine refills the slots
    WorkerSync();
    if (HPMOE_EXPERIMENT_PROFILE) {
      ProfileAdd(kProfileKind, kPhaseStage, t1 - t0);
      ProfileAdd(kProfileKind, kPhaseStore, ProfileClock() - t1);
      ProfileAdd(kProfileKind, kPhaseTiles, 1);
    }
  }
  // StoreStaged's accumulating twin, for a framework's gradient buffer (kDwAccumulate; inside WriteStagedBy):
  // c += the staged tile (rounded to T), summed in fp32 and stored as OutT (T: rounded once more). Bitwise what
  // `c += dw` gives with dw in T, PyTorch's accumulation (AccumulateGrad, Megatron's main_grad.add_).
  // The old values come into shared memory beside the staged tile by cp.async, all of a pass in flight at once
  // and no registers held: a read-add-write straight from the accumulators waited for each load (the loads may
  // alias the stores), Qwen3-235B experts at 4096 tokens, fwd+bwd kernels 14.0 -> 21.7 ms; batching the loads
  // in registers spilled (default kernel 160 -> 1288 bytes of spill stores at 4 vectors in flight).
  template <class OutT>
  __device__ void AddStagedRows(OutT* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid, int64_t n_valid) {
    constexpr int kVecs = kBN / 8;                        // 8-element vectors per staged row
    constexpr int kPieces = int(sizeof(OutT)) / 2;        // 16-byte pieces of 8 OutT: 1 (16-bit) or 2 (fp32)
    constexpr int kRows = 64;                             // rows per pass
    static_assert(kBM % kRows == 0 && kBM * kRowBytes + kRows * kVecs * kPieces * 16 <= kStages * kStageBytes,
                  "a pass's old values fit beside the staged tile");
    const uint32_t held = smem + kBM * kRowBytes;
    const bool rows_aligned = (reinterpret_cast<uintptr_t>(c) & 15) == 0 && (ldc & 7) == 0;
    for (int r0 = 0; r0 < kBM; r0 += kRows) {
      for (int i = threadIdx.x; i < kRows * kVecs; i += WorkerThreads()) {
        const int64_t m = m0 + r0 + i / kVecs, n = n0 + 8 * (i % kVecs);
        if (m < m_valid && rows_aligned && n + 8 <= n_valid)
          for (int p = 0; p < kPieces; ++p)
            CpAsync16(held + (i * kPieces + p) * 16, c + m * ldc + n + 8 / kPieces * p, true);
      }
      CpAsyncCommit();
      CpAsyncWait<0>();  // each thread reads back only the pieces it copied: no block barrier
      for (int i = threadIdx.x; i < kRows * kVecs; i += WorkerThreads()) {
        const int row = r0 + i / kVecs, v = i % kVecs;
        const int64_t m = m0 + row, n = n0 + 8 * v;
        if (m >= m_valid || n >= n_valid) continue;
        const uint32_t src = smem + row * kRowBytes + v * 16;
        if (rows_aligned && n + 8 <= n_valid) {
          float dw[8], sum[8];
          Unpack8<T>(LoadShared16(src), dw);
          LoadShared8Out<OutT>(held + i * kPieces * 16, sum);
          for (int q = 0; q < 8; ++q) sum[q] += dw[q];
          Store8Out(c + m * ldc + n, sum);
        } else {  // a ragged or unaligned edge, element by element
          for (int q = 0; q < 8 && q < n_valid - n; ++q) {
            uint16_t bits;
            asm volatile("ld.shared.u16 %0, [%1];" : "=h"(bits) : "r"(src + 2 * q));
            OutT* p = c + m * ldc + n + q;
            *p = FromOut<OutT>(ToOut(*p) + Bits16ToF(bits, T{}));
          }
        }
      }
    }
  }
  // The accumulators, rounded to T, into kBM rows of kRowBytes at `base` (this thread's pieces only).
  __device__ void Stage(uint32_t base) {
    StageTo([&](int row, int j) { return base + row * kRowBytes + 16 * j; });
  }
  // The same into any layout: piece(row, j) is the shared address of columns 8j..8j+7 of the row (16 bytes;
  // this thread writes its 4-byte pair of them).
  template <class Piece>
  __device__ void StageTo(Piece&& piece) {
    const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, wg = threadIdx.x / 128;
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = 64 * wg + 16 * warp + g + 8 * h;
        const uint32_t lo = Bits16(FromF<T>(d[4 * j + 2 * h])), hi = Bits16(FromF<T>(d[4 * j + 2 * h + 1]));
        asm volatile("st.shared.u32 [%0], %1;" ::"r"(piece(row, j) + 4 * t), "r"(lo | (hi << 16)) : "memory");
      }
    }
  }
  // The staged rows at `base` to c as 16-byte vectors (StoreStagedRows, the whole block); kCols staged columns
  // per row, rows kCols * 2 + 16 bytes apart; kBatch vectors a thread in flight. Static: it reads no member.
  template <int kCols = kBN, int kBatch = 8>
  static __device__ void StoreStaged(uint32_t base, T* c, int64_t ldc, int64_t m0, int64_t n0, int64_t m_valid,
                                     int64_t n_valid) {
    StoreStagedRows<kCols, kBatch>([&](int row, int v) { return base + row * (kCols * 2 + 16) + v * 16; }, c, ldc, m0, n0,
                           m_valid, n_valid, int(threadIdx.x), int(WorkerThreads()));
  }
};

}  // namespace cuda
}  // namespace hpmoe
