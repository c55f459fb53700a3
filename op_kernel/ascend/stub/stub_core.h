// Project-written AscendC stub (no CANN here): the mixed-kernel core model and the call log.
// One "AI core" = 1 AIC + 2 AIV (KERNEL_TYPE_MIX_AIC_1_2); the stub launcher (stub_launch.h) runs each of
// them as a host thread and sets the thread-local identity below before calling the kernel entry.
// Doc pages (asc-devkit, docs/zh/api/...): GetBlockIdx.md, GetBlockNum.md, GetSubBlockIdx.md,
// SIMD-BuiltIn关键字.md (g_coreType, ASCEND_IS_AIC/AIV), 设置Kernel类型.md (KERNEL_TASK_TYPE_DEFAULT),
// GetSystemCycle.md.
// Core builds: the real compiler builds the source twice (AIC and AIV) and g_coreType is a compile-time
// constant of each. HPMOE_STUB_CORE_AIC / HPMOE_STUB_CORE_AIV select one such build (ASCEND_IS_AIC is then
// `constexpr (...)`, as in asc-devkit impl/utils/sys_macros.h, and the other core's APIs are declared with
// an error attribute: stub_core_apis.h); without either, the run-time stub compiles both cores into one host
// binary and ASCEND_IS_AIC is a test of the calling thread's core type.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define __aicore__
#define __global__
// Address spaces (SIMD-BuiltIn关键字.md: __gm__ global memory, __ubuf__ UB, __cbuf__ L1, __ca__/__cb__/__cc__
// L0A/L0B/L0C). For the CCE compiler an unqualified pointer is a private (stack) address, so a GM access
// through one is wrong. HPMOE_STUB_ADDRESS_SPACES (a clang build) makes each a distinct address_space:
// binding GM to an unqualified pointer or reference then fails to compile. Otherwise they are empty (g++).
#if defined(HPMOE_STUB_ADDRESS_SPACES)
#define __gm__ __attribute__((address_space(1)))
#define __ubuf__ __attribute__((address_space(2)))
#define __cbuf__ __attribute__((address_space(3)))
#define __ca__ __attribute__((address_space(4)))
#define __cb__ __attribute__((address_space(5)))
#define __cc__ __attribute__((address_space(6)))
#else
#define __gm__
#define __ubuf__
#define __cbuf__
#define __ca__
#define __cb__
#define __cc__
#endif
#ifndef __CCE_KT_TEST__
#define __CCE_KT_TEST__ 1  // the CANN CPU-debug macro: selects `__aicore__ inline` in op_kernel/runtime/device.h
#endif

using GM_ADDR = __gm__ uint8_t*;

// Kernel types (global, as the real headers declare them for KERNEL_TASK_TYPE_DEFAULT).
enum KernelType : int32_t {
  KERNEL_TYPE_AIV_ONLY = 0,
  KERNEL_TYPE_AIC_ONLY = 1,
  KERNEL_TYPE_MIX_AIV_1_0 = 2,
  KERNEL_TYPE_MIX_AIC_1_0 = 3,
  KERNEL_TYPE_MIX_AIC_1_1 = 4,
  KERNEL_TYPE_MIX_AIC_1_2 = 5,
};

// One core's APIs in the other core's build (Matmul使用说明.md: in a MIX kernel cube code runs under
// ASCEND_IS_AIC and vector code under ASCEND_IS_AIV): the error attribute fails the build for every call
// the compiler emits, i.e. outside discarded `if constexpr` branches. The core builds compile at -O0 so no
// call is inlined away before it is diagnosed.
#if defined(HPMOE_STUB_CORE_AIC)
#define HPMOE_STUB_AIV_ONLY(api) \
  __attribute__((error(api " is a vector-core (AIV) API, emitted in the AIC build: guard it with ASCEND_IS_AIV")))
#define HPMOE_STUB_AIC_ONLY(api)
#elif defined(HPMOE_STUB_CORE_AIV)
#define HPMOE_STUB_AIV_ONLY(api)
#define HPMOE_STUB_AIC_ONLY(api) \
  __attribute__((error(api " is a cube-core (AIC) API, emitted in the AIV build: guard it with ASCEND_IS_AIC")))
#else
#define HPMOE_STUB_AIV_ONLY(api)
#define HPMOE_STUB_AIC_ONLY(api)
#endif

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

// The pipe model (stub_pipe.h): a local-memory operation still in flight on one of the core's pipes.
struct PendingOp {
  uint8_t pipe;         // stub_pipe.h Pipe
  bool write;
  uint16_t ordered;     // pipes (bit per Pipe) a WaitFlag has ordered after this operation
  uint64_t lo, hi;      // host byte range [lo, hi)
};
struct PendingFlag {
  uint8_t src, dst;
  int32_t id;
  uint64_t issued;      // operations of `src` issued before the SetFlag: pending_seq below this value
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
  uint64_t workspace_bytes = 0;    // the launch's workspace (system + user), for GetUserWorkspace
  std::vector<PendingOp> pending;  // pipe model: operations not yet ordered by a barrier or flag
  std::vector<uint64_t> pending_seq;
  uint64_t next_seq = 0;
  std::vector<PendingFlag> flags;
};

inline CoreState& Core() {
  thread_local CoreState state;
  return state;
}

inline void Log(Op op, uint32_t arg, const void* addr, uint64_t bytes) {
  CoreLog* log = Core().log;
  if (log != nullptr) log->records.push_back({op, arg, reinterpret_cast<uint64_t>(addr), bytes});
}

// The host address behind a GM pointer (the stub's memory is the host's; an address-space cast in clang).
template <class T>
inline T* Host(__gm__ T* p) {
  return (T*)p;  // NOLINT: a C-style cast is the only cast that changes address space
}

// A misuse the real hardware would fault on (unaligned DMA, UB overflow): stop the process with one line.
[[noreturn]] inline void Fail(const char* what) {
  std::fprintf(stderr, "AscendC stub: %s\n", what);
  std::abort();
}

}  // namespace stub

#if defined(HPMOE_STUB_CORE_AIC) || defined(HPMOE_STUB_CORE_AIV)
#if defined(HPMOE_STUB_CORE_AIC) && defined(HPMOE_STUB_CORE_AIV)
#error "HPMOE_STUB_CORE_AIC and HPMOE_STUB_CORE_AIV select one core build each"
#endif
#if defined(HPMOE_STUB_CORE_AIC)
constexpr int32_t kCoreBuild = AIC;
#else
constexpr int32_t kCoreBuild = AIV;
#endif
#define g_coreType (::AscendC::kCoreBuild)
#define ASCEND_IS_AIC constexpr(g_coreType == ::AscendC::AIC)
#define ASCEND_IS_AIV constexpr(g_coreType == ::AscendC::AIV)
#else
constexpr int32_t kCoreBuild = MIX;  // both cores in one binary (the run-time stub)
struct CoreTypeProxy {
  operator int32_t() const { return stub::Core().core_type; }
};
#define g_coreType (static_cast<int32_t>(::AscendC::CoreTypeProxy{}))
#define ASCEND_IS_AIC (g_coreType == ::AscendC::AIC)
#define ASCEND_IS_AIV (g_coreType == ::AscendC::AIV)
#endif

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
namespace stub {
// GetLibApiWorkSpaceSize() on A2/A3 (platform_ascendc.h): the system workspace the framework puts first.
constexpr uint64_t kSystemWorkspaceBytes = 16u * 1024 * 1024;
}  // namespace stub
// The user part of the launch workspace: past the system workspace (GetUserWorkspace.md). A workspace the
// host sized without GetLibApiWorkSpaceSize() has no user part: every user write would land outside it.
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) {
  if (stub::Core().workspace_bytes <= stub::kSystemWorkspaceBytes)
    stub::Fail("GetUserWorkspace: the workspace is not larger than the 16 MiB system workspace (size it as "
               "GetLibApiWorkSpaceSize() + the user bytes)");
  return workspace + stub::kSystemWorkspaceBytes;
}
}  // namespace AscendC
