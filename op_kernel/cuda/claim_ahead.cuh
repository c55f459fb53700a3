// Claim-ahead: while a block runs pool unit k, its thread 0 claims the next unit and copies what the worker loop
// reads to start it (the unit's record, its first task id, that TD and its waits' thresholds) into shared
// memory, one link of that chain per call of ClaimAheadStep, which the GMM tile calls while it waits anyway: in
// its fill and after each K step's refill (BlockGemmTma::Accumulate). Each link is a load whose address comes
// from the one before, about 1k cycles apiece from L2 under the GEMMs' load: read after the unit, the chain
// (claim, record, entry, TD, thresholds) was most of a 11-14k-cycle transition between two units at the wide
// experts (docs/cuda.md, "Time between tasks"). A unit whose handlers never call the step (vector work) finishes
// the chain in CudaSync::Claim, as before.
//
// The links are cp.async copies into shared memory, so no register holds a value across a K step. Thread 0 is
// the only thread that issues cp.async in the TMA build's GEMM loop; each step waits for its last link
// (cp.async.wait_all) a K step after issuing it.
//
// Deadlock-free as the pool is: a held unit comes after its holder's running unit in claim order, and the
// holder starts it next, so the lowest unfinished unit is always running or about to (validate.py proves the
// pool run as one queue completes). Near the pool's end the block does not claim ahead (a held unit would wait
// for its holder while other blocks idle).
#pragma once

#include "../runtime/backend_traits.h"
#include "device_rank.cuh"

namespace hpmoe {
namespace cuda {

enum AheadStage : uint32_t {
  kAheadOff = 0,   // nothing claimed ahead (before the pool, near its end, or off)
  kAheadArmed,     // the next step claims
  kAheadUnit,      // the unit's record is on its way
  kAheadEntry,     // its first task id is on its way
  kAheadTask,      // its first TD is on its way
  kAheadEvents,    // the TD's waited events are on their way
  kAheadReady,     // all here (or the claim was past the pool's end)
};

struct ClaimAheadState {
  ssc::SscTask task[2];                    // the held unit's first TD, and the next one's (double-buffered)
  ssc::SscEvent events[ssc::kMaxWaits];    // the next TD's waited events
  ssc::SscQueue unit;                      // the next unit's record
  rt::HeldUnit held[2];
  uint32_t next_id;                        // the next unit's first task
  uint32_t stage;                          // AheadStage
  uint32_t raw;                            // the claim counter's value for the next unit
  uint32_t next;                           // the buffer the chain fills
  uint32_t held_unit;                      // the unit held[cur] describes, ~0u if none
  uint32_t cur;
  // The program, copied once so that a step reads only shared memory.
  const ssc::SscQueue* pool;
  const uint32_t* entries;
  const ssc::SscTask* tasks;
  const ssc::SscEvent* program_events;
  uint32_t* claim_counter;
  uint32_t base, num_pool, claimers;
};
static_assert(sizeof(ssc::SscTask) % 16 == 0 && sizeof(ssc::SscEvent) == 16 && sizeof(ssc::SscQueue) == 16,
              "the chain copies whole 16-byte pieces");

__shared__ __align__(16) ClaimAheadState g_ahead;

__device__ __forceinline__ void AheadCopy(const void* dst_shared, const void* src, uint32_t bytes16) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(dst_shared));
  for (uint32_t o = 0; o < bytes16; o += 16)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst + o), "l"(static_cast<const uint8_t*>(src) + o)
                 : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
}
__device__ __forceinline__ void AheadCopy4(const void* dst_shared, const void* src) {
  const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(dst_shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Thread 0, block-uniform state: one link of the chain (the claim itself, or one copy after the last one has
// landed). Cheap when there is nothing to do: one shared load and a branch.
__device__ __forceinline__ void ClaimAheadStep() {
  if (!HPMOE_CLAIM_AHEAD) return;
  ClaimAheadState& s = g_ahead;
  const uint32_t stage = s.stage;
  if (stage == kAheadOff || stage == kAheadReady) return;
  if (stage == kAheadArmed) {
    s.raw = atomicAdd(s.claim_counter, 1u);
    const uint32_t k = s.raw - s.base;
    if (k >= s.num_pool) {
      s.stage = kAheadReady;  // this claimer's one claim past the end
      return;
    }
    AheadCopy(&s.unit, s.pool + k, 16);
    s.stage = kAheadUnit;
    return;
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  if (stage == kAheadUnit) {
    AheadCopy4(&s.next_id, s.entries + s.unit.first_entry);
    s.stage = kAheadEntry;
  } else if (stage == kAheadEntry) {
    AheadCopy(&s.task[s.next], s.tasks + s.next_id, sizeof(ssc::SscTask));
    s.stage = kAheadTask;
  } else if (stage == kAheadTask) {
    const ssc::SscTask& t = s.task[s.next];
    bool any = false;
    for (uint32_t w = 0; w < ssc::kMaxWaits; ++w)
      if (t.dependent_event[w] != ssc::kNoEvent) {
        const uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(&s.events[w]));
        asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(s.program_events + t.dependent_event[w])
                     : "memory");
        any = true;
      }
    asm volatile("cp.async.commit_group;" ::: "memory");
    s.stage = any ? kAheadEvents : kAheadReady;
  } else {  // kAheadEvents: landed
    s.stage = kAheadReady;
  }
}

// The GMM tile's idle hook (BlockGemmTma::Accumulate) in the worker's handlers.
struct ClaimAheadIdle {
  __device__ void operator()() const { ClaimAheadStep(); }
};

// The block's claim-ahead state at the start of the launch: off, with the program's addresses. Block-wide.
__device__ __forceinline__ void ClaimAheadInit(const DeviceRank& d) {
  if (threadIdx.x == 0) {
    ClaimAheadState& s = g_ahead;
    const rt::SscProgram& p = d.program;
    s.stage = kAheadOff;
    s.held_unit = ~0u;
    s.next = 0;
    s.cur = 0;
    s.pool = p.pool;
    s.entries = p.entries;
    s.tasks = p.tasks;
    s.program_events = p.events;
    s.claim_counter = d.Counter(d.rank, p.num_events);
    s.base = (p.invocation - 1u) * (p.num_pool + p.claimers);
    s.num_pool = p.num_pool;
    s.claimers = p.claimers;
    // cp.async moves 16-byte pieces from 16-byte-aligned addresses: anything else claims after each unit.
    const uintptr_t misaligned = (reinterpret_cast<uintptr_t>(p.pool) | reinterpret_cast<uintptr_t>(p.tasks) |
                                  reinterpret_cast<uintptr_t>(p.events)) & 15;
    if (misaligned != 0 || p.pool == nullptr) s.num_pool = 0;  // (never arms; the loop reads the program)
  }
}

// Thread 0, in CudaSync::Claim: the next unit's claim counter value, from the chain if one was started (finished
// here if the unit's handlers did not), else claimed now; then the chain is armed for the unit after it unless
// the pool is near its end. Returns the raw counter value, as a claim does.
__device__ __forceinline__ uint32_t ClaimAheadTake(uint32_t* claim_counter) {
  ClaimAheadState& s = g_ahead;
  uint32_t raw;
  s.held_unit = ~0u;
  if (HPMOE_CLAIM_AHEAD && s.stage != kAheadOff) {
    while (s.stage != kAheadReady) ClaimAheadStep();
    raw = s.raw;
    const uint32_t k = raw - s.base;
    if (k < s.num_pool) {
      const uint32_t b = s.next;
      rt::HeldUnit& h = s.held[b];
      h.first_entry = s.unit.first_entry;
      h.count = s.unit.count;
      h.task_id = s.next_id;
      for (uint32_t w = 0; w < ssc::kMaxWaits; ++w)
        h.threshold[w] = s.task[b].dependent_event[w] != ssc::kNoEvent ? s.events[w].threshold : 0u;
      h.task = &s.task[b];
      s.cur = b;
      s.next = b ^ 1u;
      s.held_unit = k;
    }
  } else {
    raw = atomicAdd(claim_counter, 1u);
  }
  const uint32_t k = raw - s.base;
  s.stage = HPMOE_CLAIM_AHEAD && k < s.num_pool && k + s.claimers < s.num_pool ? kAheadArmed : kAheadOff;
  return raw;
}

// Block-uniform after the claim's barrier: the held copy of unit k, or nullptr.
__device__ __forceinline__ const rt::HeldUnit* ClaimAheadHeld(uint32_t k) {
  const ClaimAheadState& s = g_ahead;
  return HPMOE_CLAIM_AHEAD && s.held_unit == k ? &s.held[s.cur] : nullptr;
}

}  // namespace cuda
}  // namespace hpmoe
