// Row pieces streamed into shared memory with bulk copies (cp.async.bulk: one thread issues, an mbarrier
// counts the bytes in), kStreamStages stages in flight, for the vector handlers that read whole rows
// (SwiGLU and its gradient). With loads from registers a block keeps a few 16-byte vectors per thread in
// flight and moved 8-13 GB/s beside the GMM tiles (Mixtral-8x7B experts, one H200 trace: 0.9 ms per SwiGLU
// row tile at I 14336); a stage here is up to 16 KB per source.
#pragma once

#include "../runtime/fast_divmod.h"
#include "block_gemm_tma.cuh"

namespace hpmoe {
namespace cuda {

constexpr int kStreamStages = 4;
constexpr uint32_t kStreamStageBytes = 16384;  // per source
// The stream's barriers sit after the GMM tile's (kStages full + empty), inside kGemmTmaSmemBytes: no data
// ever lands on an mbarrier of either.
constexpr uint32_t kStreamBarrierOffset = kBarrierBase + 16 * kStages;
static_assert(kStreamBarrierOffset + 8 * kStreamStages + 1023 <= kGemmTmaSmemBytes, "stream barriers fit");

__device__ __forceinline__ void BulkLoad(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// The pieces of rows [0, rows) x columns [0, cols) of a 16-bit matrix, as stages of the stream: a stage is
// `rows_per` whole rows when a row fits kStreamStageBytes, else one piece of `width` columns of one row.
struct RowPieces {
  uint32_t rows, cols, width, rows_per;
  rt::FastDivmod pieces;  // per row: 1 when rows_per > 1; divides the stage index in Of, which every thread
                          // runs once a stage
  __device__ RowPieces(uint32_t rows_, uint32_t cols_) : rows(rows_), cols(cols_) {
    constexpr uint32_t kMax = kStreamStageBytes / 2;
    width = cols < kMax ? cols : kMax;
    rows_per = cols <= kMax ? kMax / cols : 1;
    pieces = rt::FastDivmod((cols + width - 1) / width);
  }
  __device__ uint32_t Stages() const { return (rows + rows_per - 1) / rows_per * pieces.d; }
  // Stage c: first row, rows, first column, columns.
  __device__ void Of(uint32_t c, uint32_t* r, uint32_t* n, uint32_t* c0, uint32_t* w) const {
    uint32_t row, piece;
    pieces.DivMod(c, &row, &piece);
    *r = row * rows_per;
    *n = rows - *r < rows_per ? rows - *r : rows_per;
    *c0 = piece * width;
    *w = cols - *c0 < width ? cols - *c0 : width;
  }
};

// For each stage of `p` (block-uniform), body(r, n, c0, w, slot) once kSrcs sources' rows [r, r + n) x
// columns [c0, c0 + w) are in shared memory: source i's row j of the stage at slot(i) + j * w * 2 bytes.
// src(i, row) is source i's row in global memory (16-byte aligned, as are cols and the columns of a piece).
// Block-wide; the shared memory must be idle. Bytes come through L2 (the async proxy), after a proxy fence
// that orders them behind the generic writes this task waited for.
template <int kSrcs, class Src, class Body>
__device__ void StreamRows(uint8_t* shared, const RowPieces& p, Src&& src, Body&& body) {
  static_assert(kSrcs * kStreamStageBytes * kStreamStages <= kStages * kStageBytes, "stages fit the GMM's slots");
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(shared)) + 1023) & ~1023u;
  auto slot = [&](int s, int i) { return base + (s * kSrcs + i) * kStreamStageBytes; };
  auto bar = [&](int s) { return base + kStreamBarrierOffset + 8 * s; };
  const uint32_t n = p.Stages();
  const bool leader = threadIdx.x == 0;
  auto issue = [&](uint32_t c) {
    uint32_t r, rows, c0, w;
    p.Of(c, &r, &rows, &c0, &w);
    const int s = c % kStreamStages;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the slot's generic reads are done
    MbarExpectTx(bar(s), kSrcs * rows * w * 2);
    for (int i = 0; i < kSrcs; ++i)
      for (uint32_t j = 0; j < rows; ++j) BulkLoad(slot(s, i) + j * w * 2, src(i, r + j) + c0, w * 2, bar(s));
  };
  WorkerSync();  // the previous task's readers of shared memory are done
  if (leader) {
    for (int s = 0; s < kStreamStages; ++s) MbarInit(bar(s), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");
    for (uint32_t c = 0; c < n && c < kStreamStages; ++c) issue(c);
  }
  WorkerSync();
  for (uint32_t c = 0; c < n; ++c) {
    const int s = c % kStreamStages;
    MbarWait(bar(s), (c / kStreamStages) & 1);
    uint32_t r, rows, c0, w;
    p.Of(c, &r, &rows, &c0, &w);
    body(r, rows, c0, w, [&](int i) { return slot(s, i); });
    WorkerSync();  // every thread is done with slot s
    if (leader && c + kStreamStages < n) issue(c + kStreamStages);
  }
}

}  // namespace cuda
}  // namespace hpmoe
