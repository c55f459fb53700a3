// The execution modes the SwiGLU + Add microbenchmark measures side by side (same tasks, events, buffers).
#pragma once

#include <cstdint>
#include <cstring>

#include "swiglu_add_workload.h"

namespace hpmoe {
namespace microbench {

enum Dispatch : uint32_t {
  kStatic = 0,       // the worker loop (RunWorkerQueue) over each worker's queue, CPU sync waits
  kDynamicFifo = 1,  // shared ready queue, FIFO (the CPU twin's dynamic-dispatch design)
  kDynamicLifo = 2,  // shared ready queue, most recently readied first
};

struct ModeSpec {
  const char* name;
  Dispatch dispatch;
  Order order;  // static queue order (dynamic modes ignore the queues)
  bool noop;    // handlers do nothing: the launch is pure dispatch
  const char* what;
};

constexpr ModeSpec kModes[] = {
    {"serial", kStatic, kSerial, false, "static; each worker: all its SwiGLU tiles, then all its Add tiles"},
    {"interleaved", kStatic, kInterleaved, false, "static; each Add tile right after its SwiGLU tile"},
    {"dynamic", kDynamicFifo, kInterleaved, false, "dynamic; shared FIFO ready queue"},
    {"dynamic-lifo", kDynamicLifo, kInterleaved, false, "dynamic; shared LIFO ready queue"},
    {"noop-static", kStatic, kInterleaved, true, "as interleaved, no-op handlers"},
    {"noop-dynamic", kDynamicFifo, kInterleaved, true, "as dynamic, no-op handlers"},
    {"noop-dynamic-lifo", kDynamicLifo, kInterleaved, true, "as dynamic-lifo, no-op handlers"},
};
constexpr uint32_t kNumModes = sizeof(kModes) / sizeof(kModes[0]);

inline const ModeSpec* FindMode(const char* name) {
  for (const ModeSpec& m : kModes)
    if (std::strcmp(m.name, name) == 0) return &m;
  return nullptr;
}

}  // namespace microbench
}  // namespace hpmoe
