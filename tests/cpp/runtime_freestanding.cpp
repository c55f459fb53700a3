// The worker loop and everything it includes must compile as device code: built with -ffreestanding
// -fno-exceptions -fno-rtti -nostdinc++ (tests/cpp/CMakeLists.txt) against a minimal stub backend, and
// instantiated so every template body is checked.
#include "../../op_kernel/runtime/swiglu_block.h"  // shared by the CPU twin's and the CUDA handlers
#include "../../op_kernel/runtime/worker_loop.h"

namespace {

using hpmoe::rt::TaskCall;
using hpmoe::rt::WaitResult;

struct StubSync {
  int32_t Wait(uint32_t, uint32_t, WaitResult*) { return 0; }
  void Signal(uint32_t, uint32_t) {}
  void PutMemSignal(const void*, uint32_t, void*, uint64_t, uint32_t, uint32_t) {}
  uint32_t Claim() { return 0; }
};

struct StubHandlers {
#define HPMOE_STUB(NAME, TYPE) \
  int32_t NAME(const TaskCall&) { return 0; }
  HPMOE_HANDLER_LIST(HPMOE_STUB)
#undef HPMOE_STUB
};

}  // namespace

extern "C" int hpmoe_freestanding_loop(const hpmoe::rt::SscProgram* program, unsigned queue,
                                       hpmoe::rt::WorkerReport* report) {
  StubSync sync;
  StubHandlers handlers;
  return hpmoe::rt::RunWorkerQueue(*program, queue, sync, handlers, report);
}
