// Project-written AscendC stub: data movement, DMA atomics, cache maintenance, barriers, cross-core flags.
// Doc pages (asc-devkit, docs/zh/api/SIMD-API/...): 数据搬运/DataCopy.md (count form: lengths in 32-byte
// blocks), DataCopyPad.md (DataCopyExtParams: blockCount, blockLen in bytes, strides), 原子操作/SetAtomicAdd.md,
// SetAtomicMax.md, SetAtomicNone.md, 缓存处理/DataCacheCleanAndInvalid.md, 同步控制/PipeBarrier.md,
// 核间同步/CrossCoreSetFlag(ISASI).md, CrossCoreWaitFlag(ISASI).md, InitConstValue.md.
// Semantics: copies copy, an atomic-add DataCopy adds element-wise (one core's DMA completes in order), cache
// maintenance and barriers are recorded. Misuse the hardware would reject stops the process with one line.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>

#include "stub_core.h"
#include "stub_tensor.h"

namespace AscendC {

enum pipe_t : int32_t { PIPE_S = 0, PIPE_V = 1, PIPE_M = 2, PIPE_MTE1 = 3, PIPE_MTE2 = 4, PIPE_MTE3 = 5,
                        PIPE_FIX = 6, PIPE_ALL = 7 };
enum class CacheLine : int32_t { SINGLE_CACHE_LINE = 0, ENTIRE_DATA_CACHE = 1 };
enum class DcciDst : int32_t { CACHELINE_ALL = 0, CACHELINE_UB = 1, CACHELINE_OUT = 2, CACHELINE_ATOMIC = 3 };

struct DataCopyExtParams {
  uint16_t blockCount = 1;
  uint32_t blockLen = 0;  // bytes per block
  uint32_t srcStride = 0;
  uint32_t dstStride = 0;
  uint32_t rsv = 0;
};
template <class T>
struct DataCopyPadExtParams {
  bool isPad = false;
  uint8_t leftPadding = 0;
  uint8_t rightPadding = 0;
  T paddingValue{};
};
template <class T>
struct InitConstValueParams {
  uint16_t repeatTimes = 1;
  uint16_t blockNum = 0;  // 32-byte blocks per repeat
  uint16_t dstGap = 0;
  T initValue{};
};

namespace stub {

template <class T>
inline void AddInto(T* dst, const T* src, uint64_t n) {
  // The DMA atomic unit makes each element's add atomic against other cores' atomic DMA to the same words.
  for (uint64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral<T>::value) {
      __atomic_fetch_add(dst + i, src[i], __ATOMIC_RELAXED);
    } else {
      static_assert(sizeof(T) == 4, "atomic add stub: int32 or float");
      uint32_t* word = reinterpret_cast<uint32_t*>(dst + i);
      uint32_t seen = __atomic_load_n(word, __ATOMIC_RELAXED);
      for (;;) {
        T sum;
        std::memcpy(&sum, &seen, 4);
        sum += src[i];
        uint32_t bits;
        std::memcpy(&bits, &sum, 4);
        if (__atomic_compare_exchange_n(word, &seen, bits, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) break;
      }
    }
  }
}

template <class T>
inline void MaxInto(T* dst, const T* src, uint64_t n) {
  static_assert(std::is_integral<T>::value && sizeof(T) == 4, "atomic max stub: int32");
  for (uint64_t i = 0; i < n; ++i) {
    T seen = __atomic_load_n(dst + i, __ATOMIC_RELAXED);
    while (src[i] > seen && !__atomic_compare_exchange_n(dst + i, &seen, src[i], false, __ATOMIC_RELAXED,
                                                         __ATOMIC_RELAXED)) {
    }
  }
}

template <class T>
inline void ToGm(T* gm, const T* local, uint64_t count) {
  // Release: a peer that observes a later atomic counter update also observes these bytes (the hardware's
  // ordering comes from PipeBarrier<PIPE_ALL> before the counter copy; the fence models its effect).
  std::atomic_thread_fence(std::memory_order_release);
  if (Core().atomic_add) {
    AddInto(gm, local, count);
  } else if (Core().atomic_max) {
    if constexpr (std::is_integral<T>::value && sizeof(T) == 4) {
      MaxInto(gm, local, count);
    } else {
      Fail("SetAtomicMax: the stub supports int32");
    }
  } else {
    std::memcpy(gm, local, count * sizeof(T));
  }
  std::atomic_thread_fence(std::memory_order_release);
  Log(Op::kCopyLocalToGm, Core().atomic_add ? 1u : Core().atomic_max ? 2u : 0u, gm, count * sizeof(T));
}

template <class T>
inline void FromGm(T* local, const T* gm, uint64_t count) {
  std::atomic_thread_fence(std::memory_order_acquire);
  std::memcpy(local, gm, count * sizeof(T));
  Log(Op::kCopyGmToLocal, 0, gm, count * sizeof(T));
}

inline void CheckBlocks(uint64_t bytes) {
  if (bytes % 32 != 0) Fail("DataCopy length is not a multiple of 32 bytes (use DataCopyPad)");
}

// DataCopy.md (Atlas A2/A3): GM -> VECIN (UB), GM -> A1/B1/C1 (L1); UB -> GM; L1 -> GM is the 910B path of
// asc-devkit's data_copy_l1togm sample. DataCopyPad.md: GM <-> VECIN/VECOUT only.
inline void CheckCopyIn(TPosition dst, bool pad) {
  if (pad ? !IsUb(dst) : !(IsUb(dst) || IsL1(dst)))
    Fail(pad ? "DataCopyPad into a non-UB position (documented: GM -> VECIN/VECOUT)"
             : "DataCopy from GM into a position it cannot reach (documented: VECIN, A1/B1/C1)");
}
inline void CheckCopyOut(TPosition src, bool pad) {
  if (pad ? !IsUb(src) : !(IsUb(src) || IsL1(src)))
    Fail(pad ? "DataCopyPad to GM from a non-UB position (documented: VECIN/VECOUT -> GM)"
             : "DataCopy to GM from a position it cannot leave from (documented: VECOUT, A1 on A2/A3)");
}

}  // namespace stub

// Count form: `count` elements, a whole number of 32-byte blocks.
template <class T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {
  stub::CheckCopyIn(dst.GetPosition(), false);
  stub::CheckBlocks(uint64_t(count) * sizeof(T));
  stub::PipeAccess(stub::kPipeMte2, true, dst.GetPhyAddr(), uint64_t(count) * sizeof(T), "DataCopy GM->local");
  stub::FromGm(dst.GetPhyAddr(), stub::Host(src.GetPhyAddr()), count);
}
template <class T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {
  stub::CheckCopyOut(src.GetPosition(), false);
  stub::CheckBlocks(uint64_t(count) * sizeof(T));
  stub::PipeAccess(stub::kPipeMte3, false, src.GetPhyAddr(), uint64_t(count) * sizeof(T), "DataCopy local->GM");
  stub::ToGm(stub::Host(dst.GetPhyAddr()), src.GetPhyAddr(), count);
}

// Byte-granular forms (one block of blockLen bytes; the kernel uses blockCount = 1).
template <class T>
inline void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& p,
                        const DataCopyPadExtParams<T>&) {
  stub::CheckCopyIn(dst.GetPosition(), true);
  if (p.blockCount != 1 || p.blockLen % sizeof(T) != 0) stub::Fail("DataCopyPad: stub supports one whole-element block");
  stub::PipeAccess(stub::kPipeMte2, true, dst.GetPhyAddr(), p.blockLen, "DataCopyPad GM->UB");
  stub::FromGm(dst.GetPhyAddr(), stub::Host(src.GetPhyAddr()), p.blockLen / sizeof(T));
}
template <class T>
inline void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& p) {
  stub::CheckCopyOut(src.GetPosition(), true);
  if (p.blockCount != 1 || p.blockLen % sizeof(T) != 0) stub::Fail("DataCopyPad: stub supports one whole-element block");
  stub::PipeAccess(stub::kPipeMte3, false, src.GetPhyAddr(), p.blockLen, "DataCopyPad UB->GM");
  stub::ToGm(stub::Host(dst.GetPhyAddr()), src.GetPhyAddr(), p.blockLen / sizeof(T));
}

// InitConstValue.md: fills L1 (A1/B1) or L0A/L0B (A2/B2) with one value, 16- or 32-bit types only.
template <class T>
inline void InitConstValue(const LocalTensor<T>& dst, const InitConstValueParams<T>& p) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 4,
                "InitConstValue: documented for half/bfloat16_t/int16_t/uint16_t/float/int32_t/uint32_t only");
  const TPosition pos = dst.GetPosition();
  if (!(stub::IsL1(pos) || pos == TPosition::A2 || pos == TPosition::B2))
    stub::Fail("InitConstValue outside L1/L0A/L0B (documented: A1/B1/A2/B2)");
  const uint64_t n = uint64_t(p.repeatTimes) * p.blockNum * 32 / sizeof(T);
  stub::PipeAccess(stub::kPipeMte2, true, dst.GetPhyAddr(), n * sizeof(T), "InitConstValue");
  for (uint64_t i = 0; i < n; ++i) dst.GetPhyAddr()[i] = p.initValue;
}

template <class T>
inline void SetAtomicAdd() {
  stub::Core().atomic_add = true;
  stub::Log(stub::Op::kSetAtomicAdd, sizeof(T), nullptr, 0);
}
template <class T>
inline void SetAtomicMax() {
  stub::Core().atomic_max = true;
  stub::Log(stub::Op::kSetAtomicMax, sizeof(T), nullptr, 0);
}
inline void SetAtomicNone() {
  stub::Core().atomic_add = false;
  stub::Core().atomic_max = false;
  stub::Log(stub::Op::kSetAtomicNone, 0, nullptr, 0);
}

// Writes back and drops the data-cache line holding `gm` (or the whole cache), so the next scalar read
// fetches what other cores' DMA wrote. The stub's scalar reads already see memory; the call is recorded.
template <class T, CacheLine L, DcciDst D>
inline void DataCacheCleanAndInvalid(const GlobalTensor<T>& gm) {
  std::atomic_thread_fence(std::memory_order_acquire);
  // Host-scheduling concession: spinning cores outnumber host CPUs, so a re-read lets the producer run.
  if (L == CacheLine::SINGLE_CACHE_LINE) std::this_thread::yield();
  stub::Log(stub::Op::kDcci, uint32_t(L), L == CacheLine::ENTIRE_DATA_CACHE ? nullptr : stub::Host(gm.GetPhyAddr()),
            L == CacheLine::ENTIRE_DATA_CACHE ? 0 : 64);
}

template <pipe_t P>
inline void PipeBarrier() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (P == PIPE_ALL) stub::PipeDrainAll();  // another pipe's barrier orders only that pipe's own queue
  stub::Log(stub::Op::kPipeBarrier, uint32_t(P), nullptr, 0);
}

// Hardware flags: 16 ids per core, SyncAll owns 11-14, the Matmul API 0..2N-1. The kernel uses none; the
// stub records any use so a test can prove it.
template <uint8_t Mode, pipe_t P>
inline void CrossCoreSetFlag(uint16_t flag_id) {
  stub::Log(stub::Op::kCrossCoreSetFlag, flag_id, nullptr, Mode);
}
inline void CrossCoreWaitFlag(uint16_t flag_id) { stub::Log(stub::Op::kCrossCoreWaitFlag, flag_id, nullptr, 0); }

}  // namespace AscendC
