// What one rank's persistent kernel sees, in device memory: its program (pointers into the validated SSC
// image uploaded by op_host/cuda), every rank's heap segment (peer pointers: CUDA IPC or P2P mappings of the
// same layout, so a symmetric address translates as `addr - segment(me) + segment(peer)`), the slot table,
// the counters of this direction, and the launch's options (timeout, fault hook, trace buffer).
// Per launch, on the device (launch_binding.cuh, no host copy, so a launch can be captured in a CUDA graph):
// the invocation number from this rank's device epoch counter, and the slots bound to a framework's tensors
// (used in place; only slots no peer writes can be bound), with tensor maps for bound weights.
#pragma once

#include <stdint.h>

#include "../runtime/program.h"
#include "../runtime/status.h"
#include "../ssc_layout.h"
#include "gemm_variant.h"
#include "tensor_map_kinds.h"

namespace hpmoe {
namespace cuda {

constexpr uint32_t kMaxRanks = 8;
constexpr uint64_t kAbortWordOffset = 64;  // in each segment's control block: 0, or 1 + the first failed rank
// The speculative bucket (docs/cuda.md, "Routing beyond the bucket"), also in the control block: the verdict
// of this heap's last speculative forward (1: its routing overflowed the bucket and it ran nothing), and one
// 64-bit entry per source rank, (invocation << 32) | the rows that rank's routing needs, written by the source.
constexpr uint64_t kOverflowWordOffset = 256;
constexpr uint64_t kNeedTableOffset = 512;
constexpr unsigned long long kNoBadId = ~0ull;

// When a launch runs (LaunchSpec::run_if): always; kRunSpeculate, a planned forward whose ranks first agree on
// the rows their routing needs and, if the bucket is too small, all stop before any row moves (the launch then
// takes no invocation); kRunIfNoOverflow / kRunIfOverflow, only if this heap's last speculative forward fitted /
// overflowed (otherwise the launch's kernels return at once and it takes no invocation either).
enum RunIf : uint32_t { kRunAlways = 0, kRunSpeculate = 1, kRunIfNoOverflow = 2, kRunIfOverflow = 3 };

// Slots a launch may bind to memory outside the heap: only this rank reads or writes them (no peer puts
// into them, so no symmetric address is ever derived from them).
__host__ __device__ constexpr bool BindableSlot(uint32_t slot) {
  return slot == ssc::kSlotX || slot == ssc::kSlotTopkIds || slot == ssc::kSlotTopkWeights ||
         slot == ssc::kSlotW1 || slot == ssc::kSlotW2 || slot == ssc::kSlotY || slot == ssc::kSlotDy ||
         slot == ssc::kSlotDx || slot == ssc::kSlotDW1 || slot == ssc::kSlotDW2 || slot == ssc::kSlotDTopkWeights;
}

// Workspace slots a group may place in memory shared with other groups (the PyTorch op's heap generations,
// whose launches run one after another on one stream): neither saved from forward for backward nor, at
// ep > 1, written by peers (at ep 1 a put to this rank writes the slot's own address).
__host__ __device__ constexpr bool PlaceableSlot(uint32_t slot, uint32_t ep) {
  return slot == ssc::kSlotYExpert || slot == ssc::kSlotDA || slot == ssc::kSlotDH || slot == ssc::kSlotDxExpert ||
         (ep == 1 && (slot == ssc::kSlotRecvDy || slot == ssc::kSlotRetDx));
}

enum CudaFault : uint32_t {
  kCudaFaultNone = 0,
  kCudaFaultDropPut = 1,  // the `fault_after`-th put on this rank sends nothing and signals nothing
};

struct SlotInfo {
  uint64_t offset;  // bytes from the segment base
  uint64_t rows;    // 2-D view: all dims but the last
  uint64_t cols;
  uint32_t dtype;
  uint32_t dim1;  // weights: rows per expert (dims[1]); else 0
};

// How a launch's weight gradient reaches the bound DW1/DW2 (LaunchSpec::dw_mode; the C API's dw_mode).
// Neither bit: written in fp32. kDwModelDtype: written rounded to the model dtype (a framework's .grad).
// kDwAccumulate: dW rounded to the model dtype is added, in fp32, to what the tensor holds (fp32, or with
// kDwModelDtype the model dtype: the sum rounded), bitwise the framework's own `grad += dw`, so a gradient
// buffer accumulates over micro-steps without a separate add kernel.
constexpr uint32_t kDwModelDtype = 1u, kDwAccumulate = 2u;

// A traced task's record: global-timer start and end (ns), and the worker (block) that ran it, so that a
// claimed pool unit goes on the lane of the block that claimed it instead of one inferred from the stamps.
constexpr uint32_t kTraceWords = 3;

struct DeviceRank {
  rt::SscProgram program;  // tasks/events/queues/entries point into device memory
  ssc::SscConfig cfg;
  uint32_t rank;
  uint32_t direction;
  uint8_t* segments[kMaxRanks];
  SlotInfo slots[ssc::kSlotCount];
  uint64_t counter_offset;   // this direction's counters, same offset in every segment
  uint64_t timeout_ns;       // bound on every wait
  uint32_t fault_mode;       // CudaFault
  uint32_t fault_after;
  uint32_t* fault_counter;   // puts issued on this rank in this launch
  uint64_t* trace;           // nullptr, or [num_tasks][kTraceWords] (below)
  rt::WorkerReport* reports; // one per queue; status stays kOk unless the worker stopped early
  const uint8_t* tensor_maps; // TMA builds: [kSlotCount][kBoxKinds] CUtensorMaps of this rank's slots
  uint32_t* epoch;           // launches of this (rank, direction) so far; the bind kernel advances it
  uint32_t* host_status;     // mapped host memory: set to 1 by the first failing worker (read without a sync)
  // ---- set per launch by the bind kernel -----------------------------------------------------------
  uint8_t* bound[ssc::kSlotCount];  // non-null: the slot lives at this address (e.g. a torch tensor)
  uint32_t dw_mode;          // kDwModelDtype | kDwAccumulate bits: how the weight gradient reaches DW1/DW2
  uint32_t planned;          // this launch built the routing plan on the device (routing_plan.cuh)
  unsigned long long plan_bad;  // first out-of-range t*k + j, or ~0
  uint32_t plan_need;        // most rows this rank sends one destination
  uint32_t run_if;           // RunIf
  uint32_t skip;             // the bind kernel's verdict: run_if says this launch does nothing
  uint32_t token_begin, token_end;  // the tokens this launch routes and reduces (a pass; else [0, T))
  uint32_t* need_out;        // kRunSpeculate: mapped host word for the agreed need, or nullptr
  alignas(64) uint8_t weight_maps[2][kBoxKinds][kTensorMapBytes];  // bound W1 / W2
  // Bound DW1 / DW2 written in the model dtype (kDwModelDtype), box 64 x 64: TMA stores of whole weight-gradient
  // tiles (block_gemm_chain.cuh); has_dw_maps 0 when the launch bound none.
  alignas(64) uint8_t dw_maps[2][kTensorMapBytes];
  uint32_t has_dw_maps;

  __device__ const void* TensorMap(uint32_t slot, uint32_t box) const {
    if ((slot == ssc::kSlotW1 || slot == ssc::kSlotW2) && bound[slot] != nullptr)
      return weight_maps[slot == ssc::kSlotW2][box];
    return tensor_maps + (uint64_t(slot) * kBoxKinds + box) * kTensorMapBytes;
  }
  __device__ uint8_t* Segment() const { return segments[rank]; }
  template <class T = uint8_t>
  __device__ T* Slot(uint32_t slot) const {
    uint8_t* b = bound[slot];
    return reinterpret_cast<T*>(b != nullptr ? b : segments[rank] + slots[slot].offset);
  }
  __device__ uint64_t ElemBytes(uint32_t slot) const {
    const uint32_t d = slots[slot].dtype;
    return d == ssc::kFP16 || d == ssc::kBF16 ? 2 : 4;
  }
  __device__ uint8_t* Row(uint32_t slot, uint64_t row) const {
    return Slot(slot) + row * slots[slot].cols * ElemBytes(slot);
  }
  // The same symmetric address on `peer`.
  template <class T>
  __device__ T* Peer(uint32_t peer, T* local) const {
    return reinterpret_cast<T*>(reinterpret_cast<uint8_t*>(local) - segments[rank] + segments[peer]);
  }
  __device__ uint32_t* Counter(uint32_t peer, uint32_t event) const {
    return reinterpret_cast<uint32_t*>(segments[peer] + counter_offset + uint64_t(event) * ssc::kCounterStrideBytes);
  }
  __device__ uint32_t* AbortWord(uint32_t peer) const {
    return reinterpret_cast<uint32_t*>(segments[peer] + kAbortWordOffset);
  }
  __device__ uint32_t* OverflowWord() const { return reinterpret_cast<uint32_t*>(segments[rank] + kOverflowWordOffset); }
  // Source `src`'s entry in `peer`'s need table.
  __device__ unsigned long long* NeedEntry(uint32_t peer, uint32_t src) const {
    return reinterpret_cast<unsigned long long*>(segments[peer] + kNeedTableOffset) + src;
  }
};

}  // namespace cuda
}  // namespace hpmoe
