// Project-written AscendC stub (no CANN here): the mixed-kernel core model and the call log.
// One "AI core" = 1 AIC + 2 AIV (KERNEL_TYPE_MIX_AIC_1_2); the stub launcher (stub_launch.h) runs each of
// them as a host thread and sets the thread-local identity below before calling the kernel entry.
// Doc pages (asc-devkit, docs/zh/api/...): GetBlockIdx.md, GetBlockNum.md, GetSubBlockIdx.md,
// SIMD-BuiltIn关键字.md (g_coreType, ASCEND_IS_AIC/AIV), 设置Kernel类型.md (KERNEL_TASK_TYPE_DEFAULT),
// GetSystemCycle.md.
// Deviation from the real toolchain: the real compiler builds the source twice and g_coreType is a
// compile-time constant of each build; here it is a thread-local value, so both branches are compiled into
// one host binary and ASCEND_IS_AIC is a run-time test.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define __aicore__
#define __global__
#define __gm__
#ifndef __CCE_KT_TEST__
#define __CCE_KT_TEST__ 1  // the CANN CPU-debug macro: selects `__aicore__ inline` in op_kernel/runtime/device.h
#endif

using GM_ADDR = uint8_t*;

// Kernel types (global, as the real headers declare them for KERNEL_TASK_TYPE_DEFAULT).
enum KernelType : int32_t {
  KERNEL_TYPE_AIV_ONLY = 0,
  KERNEL_TYPE_AIC_ONLY = 1,
  KERNEL_TYPE_MIX_AIV_1_0 = 2,
  KERNEL_TYPE_MIX_AIC_1_0 = 3,
  KERNEL_TYPE_MIX_AIC_1_1 = 4,
  KERNEL_TYPE_MIX_AIC_1_2 = 5,
};

namespace AscendC {

enum CoreType : int32_t { AIC = 1, AIV = 2, MIX = 3 };

namespace stub {

// What the stub records. Every intrinsic the kernel uses appends one record to the calling core's log.
enum class Op : uint8_t {
  kCopyGmToLocal,     // DataCopy / DataCopyPad GM -> UB or L1 (addr = GM source)
  kCopyLocalToGm,     // DataCopy / DataCopyPad UB or L1 -> GM (addr = GM destination), atomic mode in `arg`
  kGmRead,            // GlobalTensor::GetValue (addr), scalar through the data cache
  kGmWrite,           // GlobalTensor::SetValue (addr)
  kDcci,              // DataCacheCleanAndInvalid (addr; 0 = whole cache)
  kPipeBarrier,       // PipeBarrier<PIPE_ALL> (arg = pipe)
  kSetAtomicAdd,      // SetAtomicAdd<T>
  kSetAtomicNone,     // SetAtomicNone
  kCrossCoreSetFlag,  // CrossCoreSetFlag (arg = flag id)
  kCrossCoreWaitFlag, // CrossCoreWaitFlag (arg = flag id)
  kMatmulIterateAll,  // Matmul::IterateAll (addr = GM destination)
  kKernelType,        // KERNEL_TASK_TYPE_DEFAULT (arg = KernelType)
  kSetAtomicMax,      // SetAtomicMax<T>
};

struct LogRecord {
  Op op;
  uint32_t arg;
  uint64_t addr;
  uint64_t bytes;
};

struct CoreLog {
  int32_t core_type = 0;
  uint32_t block_idx = 0;
  std::vector<LogRecord> records;
};

// The identity of the calling thread as a core, and where its log goes (nullptr: not logging).
struct CoreState {
  int32_t core_type = AIV;
  uint32_t block_idx = 0;
  uint32_t block_num = 1;
  uint32_t sub_block_idx = 0;
  bool atomic_add = false;
  bool atomic_max = false;
  CoreLog* log = nullptr;
  void* hccl_context = nullptr;    // GetHcclContext<0>() of this launch (lib/hccl/hccl.h)
  uint8_t* local_arena = nullptr;  // this core's UB (AIV) or L1 (AIC)
  uint64_t local_bytes = 0;
  uint64_t local_used = 0;
};

inline CoreState& Core() {
  thread_local CoreState state;
  return state;
}

inline void Log(Op op, uint32_t arg, const void* addr, uint64_t bytes) {
  CoreLog* log = Core().log;
  if (log != nullptr) log->records.push_back({op, arg, reinterpret_cast<uint64_t>(addr), bytes});
}

// A misuse the real hardware would fault on (unaligned DMA, UB overflow): stop the process with one line.
[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "AscendC stub: %s\n", what);
  std::abort();
}

}  // namespace stub

struct CoreTypeProxy {
  operator int32_t() const { return stub::Core().core_type; }
};
#define g_coreType (static_cast<int32_t>(::AscendC::CoreTypeProxy{}))
#define ASCEND_IS_AIC (g_coreType == ::AscendC::AIC)
#define ASCEND_IS_AIV (g_coreType == ::AscendC::AIV)

// AIC: 0..numBlocks-1; AIV: 0..2*numBlocks-1 (two vector cores per AI core).
inline int64_t GetBlockIdx() { return stub::Core().block_idx; }
inline int64_t GetBlockNum() { return stub::Core().block_num; }
inline int64_t GetSubBlockIdx() { return stub::Core().sub_block_idx; }
// Vector cores per cube core of the launch: 2 on an AIV of a MIX_AIC_1_2 kernel, 1 on the AIC.
inline int64_t GetTaskRation() { return stub::Core().core_type == AIV ? 2 : 1; }

// The system counter runs at 50 MHz on A2/A3 (as the reference implementation's timeout arithmetic assumes).
inline int64_t GetSystemCycle() {
  using namespace std::chrono;
  return duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count() / 20;
}

}  // namespace AscendC

#define KERNEL_TASK_TYPE_DEFAULT(type) ::AscendC::stub::Log(::AscendC::stub::Op::kKernelType, uint32_t(type), nullptr, 0)

namespace AscendC {
// The user part of the launch workspace (after the system workspace, which the stub does not have).
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }
}  // namespace AscendC
