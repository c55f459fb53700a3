// CPU twin synchronisation backend: event counters and put_mem_signal over the symmetric heap.
// Ordering: a signal is an atomic add with release semantics after the payload copy; a wait is an acquire
// load, so a consumer that sees the counter reach its target also sees every payload signalled before it.
// The same atomics work between threads and between processes mapping the same POSIX shared memory.
#pragma once

#include <cstdint>
#include <cstring>

#include "../runtime/backend_traits.h"
#include "../runtime/status.h"
#include "heap_layout.h"

namespace hpmoe {
namespace cpu {

struct GroupMemory {
  uint8_t* base = nullptr;     // rank 0's segment in this process's mapping
  uint64_t segment_bytes = 0;  // distance between two ranks' segments
  uint32_t ep = 0;
  uint8_t* Segment(uint32_t rank) const { return base + uint64_t(rank) * segment_bytes; }
  ControlBlock* Control(uint32_t rank) const { return reinterpret_cast<ControlBlock*>(Segment(rank)); }
};

class CpuSync {
 public:
  CpuSync(const GroupMemory& group, uint32_t rank, uint64_t counter_offset, uint64_t timeout_ns)
      : group_(group), rank_(rank), counter_offset_(counter_offset), timeout_ns_(timeout_ns) {}

  // Acquire-waits until counter(event) reaches `target` (epoch rule); gives up after the timeout, or as soon
  // as any worker of the group raised the abort flag.
  int32_t Wait(uint32_t event, uint32_t target, rt::WaitResult* result);

  void Signal(uint32_t rank, uint32_t event) { __atomic_fetch_add(Counter(rank, event), 1u, __ATOMIC_RELEASE); }

  // Pool claims (kConfigClaimPool): a plain atomic fetch-add; the claimed task's own waits order its reads.
  uint32_t Claim() { return __atomic_fetch_add(Counter(rank_, claim_counter_), 1u, __ATOMIC_RELAXED); }
  void SetClaimCounter(uint32_t index) { claim_counter_ = index; }

  // One-sided put: `dst` is a local symmetric address; the bytes land at the same offset on `dst_rank`. The
  // release add orders the copy before the signal (empty puts move nothing and still signal).
  void PutMemSignal(const void* src, uint32_t dst_rank, void* dst, uint64_t bytes, uint32_t event,
                    uint32_t value) {
    if (bytes != 0) std::memcpy(Translate(dst, dst_rank), src, bytes);
    if (event != ssc::kNoEvent) __atomic_fetch_add(Counter(dst_rank, event), value, __ATOMIC_RELEASE);
  }

  template <class T>
  T* Translate(T* local_symmetric, uint32_t rank) const {
    uint8_t* p = reinterpret_cast<uint8_t*>(const_cast<void*>(static_cast<const void*>(local_symmetric)));
    return reinterpret_cast<T*>(p - group_.Segment(rank_) + group_.Segment(rank));
  }

  // Marks the group failed (first failing rank wins) so every other worker stops at its next wait.
  void RaiseAbort() const;

  uint32_t* Counter(uint32_t rank, uint32_t event) const {
    return reinterpret_cast<uint32_t*>(group_.Segment(rank) + counter_offset_ +
                                       uint64_t(event) * ssc::kCounterStrideBytes);
  }
  uint32_t rank() const { return rank_; }

 private:
  GroupMemory group_;
  uint32_t claim_counter_ = 0;  // counter num_events of the program when it has a pool (SetClaimCounter)
  uint32_t rank_;
  uint64_t counter_offset_;
  uint64_t timeout_ns_;
};

}  // namespace cpu
}  // namespace hpmoe
