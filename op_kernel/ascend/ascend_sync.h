// The Ascend Sync backend of the worker loop (op_kernel/runtime/backend_traits.h).
//  - Counters are int32 words in GM, one per 64-byte line (ssc::kCounterStrideBytes), in the symmetric heap.
//  - Wait: re-read the counter through the data cache (DataCacheCleanAndInvalid of its line, then GetValue)
//    until the epoch target is reached; bounded by the tiling's timeout in system cycles, and stops as soon
//    as another worker of the group raised the abort word. (A2/A3 have no scalar GM atomics or coherent
//    scalar reads: without the dcci a core could spin forever on a stale line.)
//  - Trigger: a DMA atomic add of one 64-byte line {value, 0, ...} onto the counter: from a UB buffer on an
//    AIV, from an L1 (A1) buffer on the AIC (filled from the tiling's signal_one line), SetAtomicAdd before,
//    SetAtomicNone after.
//  - Ordering: every trigger starts with PipeBarrier<PIPE_ALL>. The task's outputs were written by this
//    core's MTE3 (AIV) or FIXPIPE (AIC, Matmul) queues; the barrier waits until those DMA writes completed
//    before the counter's DMA is issued, so a consumer that sees the counter reach its target and then reads
//    by DMA (or by scalar after dcci) sees the output. put_mem_signal is payload DMA, barrier, counter DMA.
#pragma once

#include "kernel_operator.h"

#include "../runtime/backend_traits.h"
#include "../runtime/status.h"
#include "kernel_context.h"

namespace hpmoe {
namespace ascend {

constexpr uint32_t kCopyChunkBytes = 16384;  // UB bounce buffer of a put's payload
constexpr int32_t kCopyEventId = 0;          // the MTE3 -> MTE2 event of that buffer

class AscendSync {
 public:
  HPMOE_DEVICE void Init(const KernelContext& ctx, AscendC::TPipe& pipe) {
    ctx_ = ctx;
    counters_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(ctx.heap + ctx.tiling->counter_offset));
    abort_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(ctx.heap + ctx.tiling->abort_offset));
    if ASCEND_IS_AIC {
      pipe.InitBuffer(line_l1_, kCounterLineInts * sizeof(int32_t));
      signal_one_.SetGlobalBuffer(const_cast<__gm__ int32_t*>(ctx.tiling_gm->signal_one));
    } else {
      pipe.InitBuffer(line_ub_, kCounterLineInts * sizeof(int32_t));
      pipe.InitBuffer(copy_ub_, kCopyChunkBytes);
    }
  }

  HPMOE_DEVICE int32_t Wait(uint32_t event, uint32_t target, rt::WaitResult* result) {
    AscendC::GlobalTensor<int32_t> counter = counters_[uint64_t(event) * kCounterLineInts];
    const int64_t start = AscendC::GetSystemCycle();
    for (uint32_t spin = 0;; ++spin) {
      AscendC::DataCacheCleanAndInvalid<int32_t, AscendC::CacheLine::SINGLE_CACHE_LINE,
                                        AscendC::DcciDst::CACHELINE_OUT>(counter);
      const uint32_t seen = uint32_t(counter.GetValue(0));
      if (rt::CounterReached(seen, target)) return rt::kOk;
      if ((spin & 63u) != 63u) continue;
      AscendC::DataCacheCleanAndInvalid<int32_t, AscendC::CacheLine::SINGLE_CACHE_LINE,
                                        AscendC::DcciDst::CACHELINE_OUT>(abort_);
      const int32_t aborted = abort_.GetValue(0);
      if (aborted != 0) {
        result->counter = seen;
        result->detail = aborted - 1;
        return rt::kAborted;
      }
      if (uint64_t(AscendC::GetSystemCycle() - start) > ctx_.tiling->timeout_cycles) {
        result->counter = seen;
        result->detail = -1;
        return rt::kWaitTimeout;
      }
    }
  }

  HPMOE_DEVICE void Signal(uint32_t rank, uint32_t event) { AddToCounter(rank, event, 1); }

  // Pool claims (kConfigClaimPool) are not built for Ascend: the tiling builder refuses such an SSC and this
  // kernel's program never has a pool, so the loop never calls this.
  HPMOE_DEVICE uint32_t Claim() { return 0xFFFFFFFFu; }

  // AIV only (puts are VTQ tasks): payload GM -> UB -> peer GM in chunks, barrier, then the counter add.
  // `src` may be null with bytes = 0 when the handler moved the payload itself (gathers).
  HPMOE_DEVICE void PutMemSignal(const __gm__ void* src, uint32_t dst_rank, __gm__ void* dst, uint64_t bytes,
                                 uint32_t event, uint32_t value) {
    if (bytes != 0) {
      __gm__ uint8_t* remote = ctx_.Remote(dst, dst_rank);
      const __gm__ uint8_t* from = static_cast<const __gm__ uint8_t*>(src);
      for (uint64_t off = 0; off < bytes; off += kCopyChunkBytes) {
        const uint32_t n = uint32_t(bytes - off < kCopyChunkBytes ? bytes - off : kCopyChunkBytes);
        CopyChunk(remote + off, from + off, n);
      }
    }
    if (event != ssc::kNoEvent) AddToCounter(dst_rank, event, int32_t(value));
  }

  // One chunk GM -> UB -> GM (n <= kCopyChunkBytes); used by put handlers that gather rows themselves. The
  // next chunk's MTE2 write to copy_ub_ must wait for this chunk's MTE3 read of it (write-after-read).
  HPMOE_DEVICE void CopyChunk(__gm__ uint8_t* to, const __gm__ uint8_t* from, uint32_t n) {
    AscendC::LocalTensor<uint8_t> ub = copy_ub_.Get<uint8_t>();
    AscendC::GlobalTensor<uint8_t> g_from, g_to;
    g_from.SetGlobalBuffer(const_cast<__gm__ uint8_t*>(from), n);
    g_to.SetGlobalBuffer(to, n);
    AscendC::DataCopyExtParams p{1, n, 0, 0, 0};
    AscendC::DataCopyPad(ub, g_from, p, AscendC::DataCopyPadExtParams<uint8_t>{});
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();  // MTE2 -> MTE3 on the same UB bytes
    AscendC::DataCopyPad(g_to, ub, p);
    AscendC::SetFlag<AscendC::HardEvent::MTE3_MTE2>(kCopyEventId);
    AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(kCopyEventId);
  }

  // Marks the group failed on every rank: a DMA atomic max of {rank + 1, 0, ...} onto each rank's abort
  // line (the same DMA path as a trigger; no scalar stores into peers' memory). Any non-zero value stops the
  // waiters; with several failures the word names the highest failed rank.
  HPMOE_DEVICE void RaiseAbort() {
    AscendC::GlobalTensor<int32_t> line_gm;
    line_gm.SetGlobalBuffer(const_cast<__gm__ int32_t*>(ctx_.tiling_gm->abort_line));
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();
    // The line is loaded once: the per-rank copies only read it (MTE3), so no reload races their reads.
    if ASCEND_IS_AIC {
      RaiseAbortFrom(line_l1_.Get<int32_t>(), line_gm);
    } else {
      RaiseAbortFrom(line_ub_.Get<int32_t>(), line_gm);
    }
  }

  HPMOE_DEVICE __gm__ int32_t* CounterAddress(uint32_t rank, uint32_t event) const {
    return reinterpret_cast<__gm__ int32_t*>(
        ctx_.Remote(counters_.GetPhyAddr(uint64_t(event) * kCounterLineInts), rank));
  }

 private:
  HPMOE_DEVICE void RaiseAbortFrom(const AscendC::LocalTensor<int32_t>& line,
                                   const AscendC::GlobalTensor<int32_t>& line_gm) {
    AscendC::DataCopy(line, line_gm, kCounterLineInts);
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();
    AscendC::SetAtomicMax<int32_t>();
    for (uint32_t r = 0; r < ctx_.cfg().ep; ++r) {
      AscendC::GlobalTensor<int32_t> word;
      word.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(ctx_.Remote(abort_.GetPhyAddr(), r)), kCounterLineInts);
      AscendC::DataCopy(word, line, kCounterLineInts);
    }
    AscendC::SetAtomicNone();
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();
  }

  HPMOE_DEVICE void AddToCounter(uint32_t rank, uint32_t event, int32_t value) {
    AscendC::GlobalTensor<int32_t> counter;
    counter.SetGlobalBuffer(CounterAddress(rank, event), kCounterLineInts);
    AscendC::PipeBarrier<AscendC::PIPE_ALL>();  // the task's output DMA (or the put's payload) is complete
    if ASCEND_IS_AIC {
      // The cube core has no scalar access to L1: its +1 line comes from GM. Only +1 is ever signalled here.
      AscendC::LocalTensor<int32_t> line = line_l1_.Get<int32_t>();
      AscendC::DataCopy(line, signal_one_, kCounterLineInts);
      AscendC::PipeBarrier<AscendC::PIPE_ALL>();
      AscendC::SetAtomicAdd<int32_t>();
      AscendC::DataCopy(counter, line, kCounterLineInts);
      AscendC::SetAtomicNone();
    } else {
      AscendC::LocalTensor<int32_t> line = line_ub_.Get<int32_t>();
      line.SetValue(0, value);
      for (uint32_t i = 1; i < kCounterLineInts; ++i) line.SetValue(i, 0);
      AscendC::PipeBarrier<AscendC::PIPE_ALL>();  // scalar writes to UB before MTE3 reads them
      AscendC::SetAtomicAdd<int32_t>();
      AscendC::DataCopy(counter, line, kCounterLineInts);
      AscendC::SetAtomicNone();
    }
  }

  KernelContext ctx_{};
  AscendC::GlobalTensor<int32_t> counters_;
  AscendC::GlobalTensor<int32_t> abort_;
  AscendC::GlobalTensor<int32_t> signal_one_;
  AscendC::TBuf<AscendC::TPosition::A1> line_l1_;
  AscendC::TBuf<AscendC::TPosition::VECOUT> line_ub_;
  AscendC::TBuf<AscendC::TPosition::VECCALC> copy_ub_;
};

}  // namespace ascend
}  // namespace hpmoe
