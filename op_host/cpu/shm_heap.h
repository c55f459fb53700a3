// Group heap memory: POSIX shared memory (ranks as processes: each maps the whole group, so every rank's
// segment is reachable at the same offset everywhere) or anonymous memory (ranks as thread groups).
#pragma once

#include <cstdint>
#include <string>

namespace hpmoe {
namespace cpu {

// Creates /dev/shm/<name> of `bytes` (zero-filled) and maps it; fails if it exists.
void* ShmCreate(const std::string& name, uint64_t bytes, std::string* error);
// Maps an existing one; its size must be `bytes`.
void* ShmAttach(const std::string& name, uint64_t bytes, std::string* error);
void* AnonymousCreate(uint64_t bytes, std::string* error);
void Unmap(void* base, uint64_t bytes);
bool ShmUnlink(const std::string& name);

// Writes each rank's control block (the memory must be zero-filled and hold ep segments).
void InitGroupHeap(void* base, uint32_t ep, uint64_t segment_bytes);

// Marks the group failed on behalf of `rank` (first failure wins), as a failing worker does: every worker of
// every rank stops at its next wait. The launcher calls it when a rank process dies or is stopped, so its
// peers stop at once instead of each waiting out the timeout.
void AbortGroup(void* base, uint32_t ep, uint64_t segment_bytes, uint32_t rank);

}  // namespace cpu
}  // namespace hpmoe
