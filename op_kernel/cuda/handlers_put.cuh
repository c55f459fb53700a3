// The put handlers: each moves its payload into the rank that owns the output (through that rank's segment
// pointer) and fuses trigger 0 with it (CudaSync::PutMemSignal: block copy, barrier, one release add).
// Dispatch puts gather routed rows straight into the peer's receive slot (no staging copy: with peer
// pointers a gather-put is a strided store), then signal. Checks mirror op_kernel/cpu/handlers_put.cpp.
#pragma once

#include "../runtime/routing_plan.h"
#include "cuda_sync.cuh"
#include "handlers_gemm.cuh"

namespace hpmoe {
namespace cuda {

__device__ int32_t RunEntrySignal(const DeviceRank& d, CudaSync& sync, const rt::TaskCall& c) {
  const ssc::SscTensorRef& out = c.task->outputs[0];
  if (out.slot != ssc::kSlotPeerReady || out.rows != 1 || out.cols != 1 || out.rank >= d.cfg.ep)
    return rt::kErrRegion;
  int32_t* dst = d.Slot<int32_t>(out.slot) + out.row_offset * d.slots[out.slot].cols + out.col_offset;
  if (threadIdx.x == 0) *d.Peer(out.rank, dst) = int32_t(c.invocation);  // informational; the counter is the protocol
  sync.PutMemSignal(nullptr, out.rank, dst, 0, c.signal_event, 1u);
  return 0;
}

__device__ int32_t RunCountPut(const DeviceRank& d, CudaSync& sync, const rt::TaskCall& c) {
  const ssc::SscTensorRef& in = c.task->inputs[0];
  const ssc::SscTensorRef& out = c.task->outputs[0];
  if (in.slot != ssc::kSlotSendCounts || out.slot != ssc::kSlotRecvCounts || in.rows != 1 || out.rows != 1 ||
      in.cols != out.cols || out.row_offset != d.rank || out.rank >= d.cfg.ep)
    return rt::kErrRegion;
  const int32_t* src = d.Slot<int32_t>(in.slot) + in.row_offset * d.slots[in.slot].cols + in.col_offset;
  int32_t* dst = d.Slot<int32_t>(out.slot) + out.row_offset * d.slots[out.slot].cols + out.col_offset;
  sync.PutMemSignal(src, out.rank, dst, uint64_t(in.cols) * sizeof(int32_t), c.signal_event, 1u);
  return 0;
}

template <class T, bool kBackward>
__device__ __noinline__ int32_t RunDispatchPut(const DeviceRank& d, CudaSync& sync, const rt::TaskCall& c) {
  const ssc::SscTask& t = *c.task;
  const ssc::SscTensorRef& rows_ref = t.inputs[kBackward ? 2 : 1];
  const ssc::SscTensorRef& out = t.outputs[0];
  const uint32_t src_slot = kBackward ? ssc::kSlotDy : ssc::kSlotX;
  const uint32_t dst_slot = kBackward ? ssc::kSlotRecvDy : ssc::kSlotRecvX;
  const uint64_t C = d.cfg.recv_rows_per_src, h = d.cfg.hidden, k = d.cfg.topk;
  if (t.inputs[0].slot != src_slot || rows_ref.slot != ssc::kSlotSendRows || rows_ref.rows != 1 ||
      out.slot != dst_slot || out.rank != rows_ref.row_offset || out.rank >= d.cfg.ep || out.rows != rows_ref.cols ||
      out.col_offset != 0 || out.cols != h || out.row_offset != d.rank * C + rows_ref.col_offset)
    return rt::kErrRegion;
  const int32_t* plan = d.Slot<int32_t>(ssc::kSlotSendRows) + rows_ref.row_offset * C + rows_ref.col_offset;
  // Rows up to the chunk's last valid one (a uniform scan); pads (between experts, kConfigExpertAligned) are
  // skipped: no row reads them.
  const bool aligned = (d.cfg.flags & ssc::kConfigExpertAligned) != 0;
  const int64_t rows = rt::PlanChunkRows([plan](uint64_t i) { return plan[i]; }, rows_ref.cols,
                                         uint64_t(d.cfg.tokens) * k, aligned);
  if (rows < 0) return rt::kErrPlan;
  const uint64_t n = uint64_t(rows);
  const T* src = d.Slot<T>(src_slot);
  T* dst = d.Peer(out.rank, d.Slot<T>(dst_slot) + uint64_t(out.row_offset) * h);
  const float* weights = d.Slot<float>(ssc::kSlotTopkWeights);
  // One warp per row, 16-byte vectors; a worker of two blocks deals the rows to the warps of both.
  const uint32_t lane = threadIdx.x % 32, warps = kBlocksPerWorker * WorkerThreads() / 32;
  const uint32_t warp = WorkerRank() * (WorkerThreads() / 32) + threadIdx.x / 32;
  for (uint64_t i = warp; i < n; i += warps) {
    if (plan[i] == -1) continue;  // a pad between experts
    const uint64_t tk = uint64_t(plan[i]);
    const T* s = src + (tk / k) * h;
    T* o = dst + i * h;
    if (!kBackward) {
      CopyVectors(reinterpret_cast<uint4*>(o), reinterpret_cast<const uint4*>(s), h / 8, lane, 32);
    } else {  // dY[t, j] = topk_weights[t, j] * dy[t], rounded once; kInFlight vectors in flight per lane
      // (CopyVectors' loop with the scaling written out: a CopyVectors taking it as a transform raised the
      // kernel's ptxas spill stores, so the two loops stay apart.) As in CopyVectors, whole groups of kInFlight
      // vectors load without predicates, then the rest one at a time: with each load of a group predicated,
      // ptxas carried the group through local memory, 24 LDL and 24 STL a group (SASS, session 36).
      constexpr uint32_t kInFlight = HPMOE_COPY_IN_FLIGHT;
      const float w = weights[tk];
      const uint64_t nv = h / 8;
      const auto scaled = [w](T* to, uint4 raw) {
        float x[8];
        Unpack8<T>(raw, x);
        for (int q = 0; q < 8; ++q) x[q] *= w;
        Store8(to, x);
      };
      uint64_t v = lane;
      for (; v + 32 * (kInFlight - 1) < nv; v += 32 * kInFlight) {
        uint4 raw[kInFlight];
#pragma unroll
        for (uint32_t u = 0; u < kInFlight; ++u) raw[u] = __ldcg(reinterpret_cast<const uint4*>(s + (v + 32 * u) * 8));
#pragma unroll
        for (uint32_t u = 0; u < kInFlight; ++u) scaled(o + (v + 32 * u) * 8, raw[u]);
      }
      for (; v < nv; v += 32) scaled(o + v * 8, __ldcg(reinterpret_cast<const uint4*>(s + v * 8)));
    }
  }
  sync.PutMemSignal(nullptr, out.rank, d.Slot<T>(dst_slot) + uint64_t(out.row_offset) * h, 0, c.signal_event, 1u);
  return 0;
}

__device__ __noinline__ int32_t RunCombinePut(const DeviceRank& d, CudaSync& sync, const rt::TaskCall& c) {
  const ssc::SscTensorRef& in = c.task->inputs[0];
  const ssc::SscTensorRef& out = c.task->outputs[0];
  const uint64_t C = d.cfg.recv_rows_per_src;
  const uint64_t s = in.row_offset / C;
  if (in.slot >= ssc::kSlotCount || out.slot >= ssc::kSlotCount || in.rows == 0 ||
      (in.row_offset + in.rows - 1) / C != s || out.rank != s || out.rank >= d.cfg.ep || out.rows != in.rows ||
      out.row_offset != d.rank * C + in.row_offset % C || in.col_offset != 0 || out.col_offset != 0 ||
      in.cols != d.slots[in.slot].cols || out.cols != in.cols ||
      d.slots[in.slot].cols * d.ElemBytes(in.slot) != d.slots[out.slot].cols * d.ElemBytes(out.slot))
    return rt::kErrRegion;
  // Rows up to the region's last valid one (a prefix of a row tile: under kConfigExpertAligned the pads of a
  // larger region ride along, never read by the combine).
  uint64_t valid_end = in.row_offset;
  const int32_t err = ForEachValidRange(d, in.row_offset, in.rows, [&](uint64_t, uint64_t r1) { valid_end = r1; });
  if (err != 0) return err;
  const uint64_t n = valid_end - in.row_offset;
  const uint64_t row_bytes = d.slots[in.slot].cols * d.ElemBytes(in.slot);
  sync.PutMemSignal(d.Row(in.slot, in.row_offset), out.rank, d.Row(out.slot, out.row_offset), n * row_bytes,
                    c.signal_event, 1u);
  return 0;
}

}  // namespace cuda
}  // namespace hpmoe
