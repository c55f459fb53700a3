#include "stub_windows.h"

#include <cstddef>
#include <cstring>
#include <random>

#include "../../../op_kernel/cpu/heap_layout.h"

namespace hpmoe {
namespace ascend {

uint64_t WindowGarbageWord(uint32_t rank, uint64_t offset) {
  uint64_t z = (uint64_t(rank + 1) << 48) ^ (offset / 8) ^ 0x9E3779B97F4A7C15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void FillWindowGarbage(void* base, uint32_t ep, uint64_t segment_bytes, uint64_t from, uint64_t to) {
  for (uint32_t r = 0; r < ep; ++r) {
    uint8_t* segment = static_cast<uint8_t*>(base) + uint64_t(r) * segment_bytes;
    for (uint64_t off = from; off + 8 <= to && off + 8 <= segment_bytes; off += 8) {
      const uint64_t w = WindowGarbageWord(r, off);
      std::memcpy(segment + off, &w, 8);
    }
  }
}

void CreateStubWindows(void* base, uint32_t ep, uint64_t segment_bytes) {
  const uint64_t abort_line = offsetof(cpu::ControlBlock, abort_rank_plus1);
  FillWindowGarbage(base, ep, segment_bytes, abort_line, abort_line + ssc::kCounterStrideBytes);
  FillWindowGarbage(base, ep, segment_bytes, cpu::kHandshakeOffset, segment_bytes);
  std::random_device rd;
  uint64_t nonce = 0;
  while (nonce == 0) nonce = (uint64_t(rd()) << 32) ^ rd();
  for (uint32_t r = 0; r < ep; ++r) {
    cpu::ControlBlock* cb = reinterpret_cast<cpu::ControlBlock*>(static_cast<uint8_t*>(base) + uint64_t(r) * segment_bytes);
    cb->window_nonce = nonce;
  }
}

}  // namespace ascend
}  // namespace hpmoe
