// What one rank's persistent kernel sees, in device memory: its program (pointers into the validated SSC
// image uploaded by op_host/cuda), every rank's heap segment (peer pointers: CUDA IPC or P2P mappings of the
// same layout, so a symmetric address translates as `addr - segment(me) + segment(peer)`), the slot table,
// the counters of this direction, and the launch's options (timeout, fault hook, trace buffer).
#pragma once

#include <stdint.h>

#include "../runtime/program.h"
#include "../runtime/status.h"
#include "../ssc_layout.h"
#include "tensor_map_kinds.h"

namespace hpmoe {
namespace cuda {

constexpr uint32_t kMaxRanks = 8;
constexpr uint32_t kThreads = 256;         // threads per worker block (both roles)
constexpr uint64_t kAbortWordOffset = 64;  // in each segment's control block: 0, or 1 + the first failed rank

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
  uint64_t* trace;           // nullptr, or [num_tasks][2] global-timer start/end (ns)
  rt::WorkerReport* reports; // one per queue; status stays kOk unless the worker stopped early
  const uint8_t* tensor_maps; // TMA builds: [kSlotCount][kBoxKinds] CUtensorMaps of this rank's slots

  __device__ const void* TensorMap(uint32_t slot, uint32_t box) const {
    return tensor_maps + (uint64_t(slot) * kBoxKinds + box) * kTensorMapBytes;
  }
  __device__ uint8_t* Segment() const { return segments[rank]; }
  template <class T = uint8_t>
  __device__ T* Slot(uint32_t slot) const {
    return reinterpret_cast<T*>(segments[rank] + slots[slot].offset);
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
};

}  // namespace cuda
}  // namespace hpmoe
