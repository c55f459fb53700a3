// First use of the EP group's HCCL windows. HCCL does not promise a zeroed window, and counters only count
// from zero (epochs: invocation n waits for n * threshold), so before any task of the first launch (forward
// invocation 1; a backward only runs on what a forward saved):
//  1. AIV block 0 of each rank zeroes its own window's counters (both directions) and abort line by DMA from
//     a zeroed UB buffer, drains its pipes, then writes its hello block {nonce, rank + 1} into every rank's
//     window (its own included). A hello therefore promises that rank's counters are zero.
//  2. Every core of every rank waits until all ep hello blocks of its own window carry the group's nonce.
//     Only then does it run tasks, so no core signals a counter of a rank that has not zeroed it (peers signal
//     after they saw that rank's hello; the rank's own cores after its own hello).
// The hello blocks are never zeroed (a late zero would erase an early peer's hello); a nonce agreed by the
// group on the host, fresh for every window set-up, makes garbage or a stale block count as no hello.
// A handshake that times out reports kHandshakeTimeout naming the silent rank and raises no abort: the abort
// words of ranks that never zeroed theirs are garbage, and writing into them would be lost anyway.
// The same rule in the reference implementation is a host-side zero + barrier (hyper-parallel
// multicore/modules/mega_moe/workspace.py, prepare_event_counters); an aclnn op has no host barrier of its
// own, hence the in-kernel handshake.
#pragma once

#include "kernel_operator.h"

#include "../runtime/status.h"
#include "kernel_context.h"

namespace hpmoe {
namespace ascend {

constexpr uint32_t kZeroChunkBytes = 4096;  // UB source of the zeroing DMAs

HPMOE_DEVICE __gm__ int32_t* HelloBlock(const KernelContext& ctx, uint32_t window_rank, uint32_t from_rank) {
  return reinterpret_cast<__gm__ int32_t*>(ctx.peer[window_rank] + ctx.tiling->handshake_offset +
                                           uint64_t(from_rank) * kHelloInts * sizeof(int32_t));
}

// AIV block 0 only (step 1). `pipe` has no buffers yet; the caller resets it afterwards.
HPMOE_DEVICE void ZeroWindowAndSayHello(const KernelContext& ctx, AscendC::TPipe& pipe) {
  const KernelTiling& t = *ctx.tiling;
  AscendC::TBuf<AscendC::TPosition::VECOUT> zero_buf, hello_buf;
  pipe.InitBuffer(zero_buf, kZeroChunkBytes);
  pipe.InitBuffer(hello_buf, kHelloInts * sizeof(int32_t));
  AscendC::LocalTensor<int32_t> zero = zero_buf.Get<int32_t>();
  AscendC::Duplicate<int32_t>(zero, 0, int32_t(kZeroChunkBytes / sizeof(int32_t)));
  AscendC::PipeBarrier<AscendC::PIPE_ALL>();  // V writes the zeros before MTE3 reads them
  AscendC::GlobalTensor<int32_t> dst;
  for (uint64_t off = 0; off < t.zero_bytes; off += kZeroChunkBytes) {
    const uint64_t n = t.zero_bytes - off < kZeroChunkBytes ? t.zero_bytes - off : kZeroChunkBytes;
    dst.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(ctx.heap + t.zero_offset + off), n / sizeof(int32_t));
    AscendC::DataCopy(dst, zero, uint32_t(n / sizeof(int32_t)));
  }
  dst.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(ctx.heap + t.abort_offset), kCounterLineInts);
  AscendC::DataCopy(dst, zero, kCounterLineInts);
  AscendC::GlobalTensor<int32_t> hello_gm;
  hello_gm.SetGlobalBuffer(const_cast<__gm__ int32_t*>(ctx.tiling_gm->hello), kHelloInts);
  AscendC::LocalTensor<int32_t> hello = hello_buf.Get<int32_t>();
  AscendC::DataCopy(hello, hello_gm, kHelloInts);
  AscendC::PipeBarrier<AscendC::PIPE_ALL>();  // the zeros are in GM (and the hello in UB) before any hello leaves
  for (uint32_t r = 0; r < ctx.cfg().ep; ++r) {
    dst.SetGlobalBuffer(HelloBlock(ctx, r, t.rank), kHelloInts);
    AscendC::DataCopy(dst, hello, kHelloInts);
  }
  AscendC::PipeBarrier<AscendC::PIPE_ALL>();
}

// Every core (step 2): rt::kOk once every rank's hello is in this rank's window, else kHandshakeTimeout with
// *silent = the first rank whose hello never came. Scalar reads after a dcci of the block's line, as Wait does.
HPMOE_DEVICE int32_t WaitForEveryHello(const KernelContext& ctx, uint32_t* silent) {
  const KernelTiling& t = *ctx.tiling;
  const int64_t start = AscendC::GetSystemCycle();
  AscendC::GlobalTensor<int32_t> block;
  for (uint32_t r = 0; r < ctx.cfg().ep; ++r) {
    block.SetGlobalBuffer(HelloBlock(ctx, t.rank, r), kHelloInts);
    for (uint32_t spin = 0;; ++spin) {
      AscendC::DataCacheCleanAndInvalid<int32_t, AscendC::CacheLine::SINGLE_CACHE_LINE,
                                        AscendC::DcciDst::CACHELINE_OUT>(block);
      if (block.GetValue(0) == t.hello[0] && block.GetValue(1) == t.hello[1] && block.GetValue(2) == int32_t(r) + 1)
        break;
      if ((spin & 63u) == 63u && uint64_t(AscendC::GetSystemCycle() - start) > t.timeout_cycles) {
        *silent = r;
        return kHandshakeTimeout;
      }
    }
  }
  return rt::kOk;
}

}  // namespace ascend
}  // namespace hpmoe
