// Project-written AscendC stub: the pipe model. On the hardware the scalar unit issues instructions to
// independent queues (MTE2: GM -> local, MTE3: local -> GM, V: vector, M/MTE1/FIX: cube) that run
// asynchronously; an instruction may read or write its local buffer at any time until something orders it:
// PipeBarrier<PIPE_ALL> (all pipes drained) or SetFlag<E>/WaitFlag<E> (operations of E's source pipe issued
// before the SetFlag complete before the WaitFlag's destination pipe goes on). Doc pages (asc-devkit,
// docs/zh/api/SIMD-API/基础API/同步控制/...): SetFlag-WaitFlag(ISASI).md, PipeBarrier(ISASI).md; the
// programming guide's 同步控制 chapter (RAW/WAR hazards between MTE2, V, MTE3 and S on one buffer).
// The stub keeps every local access in flight until it is ordered, and stops with one line when an access
// from another pipe touches the same bytes while either is a write: the read-after-write or write-after-read
// hazard the hardware would turn into wrong data some of the time. Same-pipe accesses are in order.
#pragma once

#include <cstdint>
#include <cstdio>

#include "stub_core.h"

namespace AscendC {
namespace stub {

enum Pipe : uint8_t { kPipeS = 0, kPipeV, kPipeM, kPipeMte1, kPipeMte2, kPipeMte3, kPipeFix, kPipeCount };

inline const char* PipeName(uint8_t p) {
  static const char* const names[kPipeCount] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX"};
  return p < kPipeCount ? names[p] : "?";
}

// Records an access of `bytes` local bytes at `addr` by `pipe`; stops on a hazard with an operation in flight.
inline void PipeAccess(uint8_t pipe, bool write, const void* addr, uint64_t bytes, const char* api) {
  CoreState& c = Core();
  const uint64_t lo = reinterpret_cast<uint64_t>(addr), hi = lo + bytes;
  if (bytes == 0) return;
  for (const PendingOp& op : c.pending) {
    if (op.pipe == pipe || (op.ordered & (1u << pipe)) != 0 || op.hi <= lo || hi <= op.lo) continue;
    if (!op.write && !write) continue;
    char line[256];
    std::snprintf(line, sizeof(line),
                  "pipe hazard: %s (%s %s) touches local bytes a %s %s is still %s; add SetFlag/WaitFlag<%s_%s> "
                  "or PipeBarrier<PIPE_ALL> between them",
                  api, PipeName(pipe), write ? "write" : "read", PipeName(op.pipe), op.write ? "write" : "read",
                  op.write ? "writing" : "reading", PipeName(op.pipe), PipeName(pipe));
    Fail(line);
  }
  for (size_t i = 0; i < c.pending.size(); ++i) {  // the same access again: one record is enough
    PendingOp& op = c.pending[i];
    if (op.pipe == pipe && op.write == write && op.lo == lo && op.hi == hi && op.ordered == 0) {
      c.pending_seq[i] = c.next_seq++;
      return;
    }
  }
  c.pending.push_back({pipe, write, 0, lo, hi});
  c.pending_seq.push_back(c.next_seq++);
}

// PipeBarrier<PIPE_ALL>: every pipe drained.
inline void PipeDrainAll() {
  CoreState& c = Core();
  c.pending.clear();
  c.pending_seq.clear();
  c.flags.clear();
}

inline void PipeSetFlag(uint8_t src, uint8_t dst, int32_t id) {
  CoreState& c = Core();
  for (const PendingFlag& f : c.flags) {
    if (f.src == src && f.dst == dst && f.id == id) Fail("SetFlag twice on one event id without a WaitFlag between");
  }
  c.flags.push_back({src, dst, id, c.next_seq});
}

inline void PipeWaitFlag(uint8_t src, uint8_t dst, int32_t id) {
  CoreState& c = Core();
  for (size_t i = 0; i < c.flags.size(); ++i) {
    const PendingFlag f = c.flags[i];
    if (f.src != src || f.dst != dst || f.id != id) continue;
    for (size_t k = 0; k < c.pending.size(); ++k) {
      if (c.pending[k].pipe == src && c.pending_seq[k] < f.issued) c.pending[k].ordered |= uint16_t(1u << dst);
    }
    c.flags.erase(c.flags.begin() + long(i));
    return;
  }
  Fail("WaitFlag on an event id no SetFlag set (the core would hang)");
}

}  // namespace stub
}  // namespace AscendC
