// Host-side SSC reader: checks a byte buffer against op_kernel/ssc_layout.h before anything runs and
// exposes typed views of its sections. Every failure is a one-line message; nothing here throws or aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "../op_kernel/ssc_layout.h"

namespace hpmoe {
namespace ssc {

struct SscView {
  const SscHeader* header = nullptr;
  const SscTensor* tensors = nullptr;
  uint32_t num_tensors = 0;
  const SscTask* tasks = nullptr;
  uint32_t num_tasks = 0;
  const SscEvent* events = nullptr;
  uint32_t num_events = 0;
  const SscQueue* queues = nullptr;
  uint32_t num_queues = 0;
  const uint32_t* entries = nullptr;
  uint32_t num_entries = 0;
  const SscTiling* tilings = nullptr;
  uint32_t num_tilings = 0;

  const SscConfig& config() const { return header->config; }
  // Tensor record of a slot, or nullptr when the SSC has none.
  const SscTensor* tensor(uint32_t slot) const;
};

// CRC-32 (IEEE, zlib's) of `size` bytes, reading the 4 bytes at `skip_offset` as zero.
uint32_t Crc32(const uint8_t* data, size_t size, size_t skip_offset);

// Parses `data` (must stay alive and be 16-byte aligned) into `view`. Checks magic, version, sizes,
// checksum, config sanity, section bounds and record sizes, and every index inside the records (task and
// queue types, events, trigger ranks, tiling positions, tensor regions, queue entries). Returns "" when
// the file is usable, else one line naming the problem.
std::string ParseSsc(const uint8_t* data, size_t size, SscView* view);

// Returns "" when `view` was compiled for exactly `expected` (every config field), else a line naming the
// first field that differs.
std::string CheckConfig(const SscView& view, const SscConfig& expected);

// Names used in diagnostics and JSON dumps (match scheduler/hpmoe/ssc_format.py).
const char* TaskTypeName(uint32_t type);
// Whether a queue of `queue_type` may hold a task whose own queue_type is `task_queue_type`: the same type,
// or, with mixed queues (kConfigMixedQueues), a vector task in a cube queue (never the reverse).
// Counters a backend reserves for a parsed file: one per event, plus the claim counter of a pool.
inline uint32_t CountersNeeded(const SscView& v) {
  return v.num_events + ((v.config().flags & kConfigClaimPool) ? 1u : 0u);
}

// Pool queues (kConfigClaimPool) hold what a CTQ worker may run (their claimers: the CTQ workers, and with mixed
// queues and no row pipelines, where every worker runs every handler, all of them).
inline bool QueueMayHold(const SscConfig& c, uint32_t queue_type, uint32_t task_queue_type) {
  return task_queue_type == queue_type ||
         ((c.flags & kConfigMixedQueues) && queue_type == kCTQ && task_queue_type == kVTQ) ||
         ((c.flags & kConfigClaimPool) && queue_type == kPoolQueue && QueueMayHold(c, kCTQ, task_queue_type));
}
const char* QueueTypeName(uint32_t type);
const char* SlotName(uint32_t slot);

// The same JSON document scheduler/hpmoe/inspect_ssc.py:to_json produces.
std::string SscToJson(const SscView& view);

}  // namespace ssc
}  // namespace hpmoe
